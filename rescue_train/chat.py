"""Chat prompts rendered with a model's own chat template, the same way in training and in evaluation.

Three rules, with no per-family table:

* Every template is rendered with :data:`TEMPLATE_KWARGS`. Our answers carry no reasoning, so templates
  with a reasoning switch (Qwen3's ``enable_thinking``) render their empty ``<think></think>`` block in the
  prompt, both when the prompt stands alone and when the answer follows it; other templates ignore it.
* A template that renders the system message only while a user turn is last (Mistral's ``[INST]`` format
  folds it into the last user message, and drops it once an answer follows) gets the system message folded
  into the user message by us, which is what the template itself shows a model at inference.
* An answer ends at the first special token the template writes after it: the end-of-turn token
  (``<|im_end|>``, ``<|eot_id|>``, ``<end_of_turn>``, ``</s>``, ``<|end|>``). The training loss and the
  rank protocol's scores cover the answer and that token, not the newline or end-of-text some templates add.
"""

from __future__ import annotations

from typing import Any, Sequence

Messages = list[dict[str, str]]
TEMPLATE_KWARGS: dict[str, Any] = {"enable_thinking": False}
_PROBE = [{"role": "system", "content": "\u2063S\u2063"}, {"role": "user", "content": "\u2063U\u2063"}]
_PROBE_ANSWER = [{"role": "assistant", "content": "\u2063A\u2063"}]


def render(tokenizer, messages: Messages, *, generation_prompt: bool) -> str:
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                         **TEMPLATE_KWARGS)


def _prompt_comes_first(tokenizer, prompt: Messages) -> bool:
    """Whether the template renders ``prompt`` (with the generation prompt) as the start of prompt + answer."""
    full = render(tokenizer, prompt + _PROBE_ANSWER, generation_prompt=False)
    return full.startswith(render(tokenizer, prompt, generation_prompt=True))


def fold_system(messages: Messages) -> Messages:
    """The system message moved to the front of the first user message, as Mistral's template joins them."""
    if len(messages) < 2 or messages[0]["role"] != "system" or messages[1]["role"] != "user":
        return messages
    user = {**messages[1], "content": messages[0]["content"] + "\n\n" + messages[1]["content"]}
    return [user, *messages[2:]]


def folds_system(tokenizer) -> bool:
    """True for templates that need :func:`fold_system` so that the prompt is rendered the same with and
    without the answer after it."""
    return not _prompt_comes_first(tokenizer, _PROBE) and _prompt_comes_first(tokenizer, fold_system(_PROBE))


def check_training_template(tokenizer) -> bool:
    """Whether the prompts must be folded (:func:`folds_system`); a clear error when the template renders a
    prompt differently once an answer follows it, which would train on other prompts than the evaluated ones."""
    if _prompt_comes_first(tokenizer, _PROBE):
        return False
    if _prompt_comes_first(tokenizer, fold_system(_PROBE)):
        return True
    full = render(tokenizer, _PROBE + _PROBE_ANSWER, generation_prompt=False)
    raise ValueError(f"the chat template of {tokenizer.name_or_path!r} renders a prompt differently once an answer "
                     f"follows it, so training would see other prompts than evaluation: alone "
                     f"{render(tokenizer, _PROBE, generation_prompt=True)!r}, with an answer {full!r}. Give a "
                     "template that renders the prompt the same in both cases with model.chat_template=FILE.jinja")


def fit_prompt(tokenizer, messages: Messages, fold: bool | None = None) -> Messages:
    """``messages`` as they are rendered for this tokenizer's template (``fold``: :func:`folds_system`)."""
    return fold_system(messages) if (folds_system(tokenizer) if fold is None else fold) else messages


def special_tokens(tokenizer) -> dict[str, int]:
    """The tokenizer's special tokens (text -> id): named ones and added tokens marked special."""
    found = {text: tokenizer.convert_tokens_to_ids(text) for text in tokenizer.all_special_tokens}
    found.update({t.content: i for i, t in tokenizer.added_tokens_decoder.items() if t.special})
    return found


def answer_end(after_answer: str, specials: Sequence[str]) -> str:
    """What closes an answer, out of the text the template writes after it: up to and including the first
    special token (the end-of-turn token); with none, that text less trailing whitespace."""
    starts = [(after_answer.find(s), -len(s), s) for s in specials if s and s in after_answer]
    if not starts:
        return after_answer.rstrip()
    start, _, token = min(starts)
    return after_answer[:start + len(token)]


def end_loss_at_turn_end(labels: list[int], lengths: Sequence[int], stop_ids: set[int]) -> list[int]:
    """``labels`` with the loss cut after the first special token that follows each sequence's answer
    (``lengths``: the sequences packed in the row, one when unpacked)."""
    labels = list(labels)
    start = 0
    for length in lengths:
        end = start + length
        stop = next((i for i in range(start, end) if labels[i] != -100 and labels[i] in stop_ids), None)
        if stop is not None:
            labels[stop + 1:end] = [-100] * (end - stop - 1)
        start = end
    return labels
