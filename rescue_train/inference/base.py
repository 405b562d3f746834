"""What every inference backend offers, and the prompt encoding they all share.

A backend answers two kinds of request:

* ``generate``: greedy text for chat prompts, optionally constrained to a closed set of answers
  (``{"choice": [...]}``) or a JSON schema (``{"json": schema}``) where the backend supports it; a plain
  string, or a :class:`Completion` that also says how the answer ended (API backends). ``on_answers`` hears of
  answers as they arrive (an API's one by one, a local batch at a time), so that callers write them at once:
  see :class:`Arrivals`;
* ``loglikelihood``: the summed log-probability of each continuation (a candidate's answer text) after a
  chat prompt, used by the rank protocol.

Local backends (hf, vllm) encode prompts with :class:`ChatEncoder`, so both see exactly the same tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..chat import answer_end, fit_prompt, folds_system, render, special_tokens

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Completion:
    """A generated answer and how it ended. ``finish_reason`` is the server's (``stop``, ``length``,
    ``content_filter``; None where a backend does not say), ``usage`` its token counts when it reports them,
    ``refusal`` why an answer is empty when a content policy refused it, ``empty`` that a server answered
    nothing however often it was asked. Backends may return plain strings."""

    text: str
    finish_reason: str | None = None
    usage: dict[str, int] | None = None
    refusal: str | None = None
    empty: bool = False


def as_completion(item: str | Completion) -> Completion:
    return item if isinstance(item, Completion) else Completion(item)


class BackendError(RuntimeError):
    """A request failed in a way that stops the run (the CLI exits 2 with the message). ``index`` is the
    failing prompt's position in the ``generate`` call, ``partial`` the answers that finished before the stop
    (None for the rest), so that callers keep them and name the instance (``where``)."""

    def __init__(self, message: str, index: int | None = None):
        super().__init__(message)
        self.message, self.index = message, index
        self.partial: list[Completion | None] = []
        self.where: str | None = None

    def __str__(self) -> str:
        suffix = " Finished instances are kept: rerun the same command to resume."
        return (f"{self.where}: " if self.where else "") + self.message + suffix


Arrived = list[tuple[int, "str | Completion"]]  # (position in the generate call, answer) pairs


class Arrivals:
    """Hands every answer of one ``generate`` call to ``keep`` once, as soon as it is there: passed as
    ``on_answers``, it hears of answers as the backend gets them; ``rest`` then hands over whatever the
    backend did not report (a backend that reports nothing, the answers that finished before a stop), so a kill
    loses no answer that had come back."""

    def __init__(self, keep: Callable[[Arrived], None]):
        self.keep = keep
        self.kept: set[int] = set()

    def __call__(self, arrived: Arrived) -> None:
        new = [(i, answer) for i, answer in arrived if answer is not None and i not in self.kept]
        self.kept.update(i for i, _ in new)
        if new:
            self.keep(new)

    def rest(self, answers: Sequence["str | Completion | None"]) -> None:
        self(list(enumerate(answers)))


@dataclass(frozen=True)
class Scored:
    """The log-likelihood of one continuation and how many tokens it spans."""

    logprob: float
    tokens: int


RANK_SCORES = ("sum", "mean")  # a candidate's score: its summed log-probability, or the mean per token


class Backend:
    """An inference engine. Its class says what it can do, so that callers ask the backend, never its name; a new
    backend is one module with one subclass, plus its entry in ``inference.factory.BACKENDS``."""

    name = ""
    can_rank = True  # scores given text (log-likelihoods: protocol=rank); False on most API endpoints
    remote = False  # a served model, reached by name: no folder, weights or tokenizer here to check or read
    adapters_by_name = False  # adapters are models the server serves under a name (vllm serve --lora-modules)
    data_parallel = False  # several engine processes may share one run (data_parallel=N), each on its GPUs
    constrains = False  # structured outputs for constrained=true
    chatty = False  # writes its own logs to the console (an engine's INFO lines): sent to the run's eval.log
    default_chunk: int | None = None  # instances per resumable step; None: the batch size
    reasons = False  # reasoning budgets by default (reasoning=null): an API model's budget bounds only its use
    judge_retries = 0  # asks again per unreadable verdict: 0 where the same prompt gets the same (greedy) answer

    @classmethod
    def start(cls, spec: Any) -> Backend:
        """The backend serving ``spec`` (:class:`~rescue_train.inference.factory.BackendSpec`)."""
        raise NotImplementedError

    @classmethod
    def problems(cls, api: Any = None, prefix: str = "", *, separate_process: bool = False) -> list[str]:
        """What would stop it from starting, found before any work (each one line)."""
        return []

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: Sequence[int],
                 constraints: Sequence[dict[str, Any] | None] | None = None, adapter: str | None = None,
                 on_answers: Callable[[Arrived], None] | None = None) -> list[str | Completion]:
        """The answers, in order; ``on_answers`` (optional) is called with those that arrived, as they arrive."""
        raise NotImplementedError

    def loglikelihood(self, requests: Sequence[tuple[Messages, Sequence[str]]], *,
                      adapter: str | None = None) -> list[list[Scored]]:
        """For each (prompt, answers) pair, the score of every answer as the assistant's reply."""
        raise NotImplementedError(f"the {self.name} backend cannot score candidates; use protocol=sft or paper")

    def describe(self) -> dict[str, Any]:
        """What to store in the results for provenance."""
        return {"backend": self.name}

    def close(self) -> None:
        pass


_PLACEHOLDER = "\u2063RESCUE_ANSWER\u2063"  # a string no answer or template contains


class ChatEncoder:
    """Chat template and tokenization shared by the local backends.

    Prompts are rendered as training renders them (:mod:`rescue_train.chat`). A candidate answer is scored as
    what the chat template adds after the generation prompt when the answer is the assistant's reply, up to
    its end-of-turn token: the answer text plus the end-of-turn marker, as the training loss covers it.
    Including the marker makes the score the probability of answering exactly that label and stopping, so a
    label is not favoured for being the prefix of another.
    """

    def __init__(self, tokenizer):
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(f"the tokenizer of {tokenizer.name_or_path!r} has no chat template; "
                             "evaluate an instruction-tuned model or one saved with its chat template")
        self.tokenizer = tokenizer
        self._fold = folds_system(tokenizer)
        self._specials = list(special_tokens(tokenizer))

    def prompt_text(self, messages: Messages) -> str:
        """The prompt as training rendered it (see :mod:`rescue_train.chat`)."""
        return render(self.tokenizer, fit_prompt(self.tokenizer, messages, self._fold), generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_ids(self, messages: Messages) -> list[int]:
        return self.encode(self.prompt_text(messages))

    def continuation_texts(self, messages: Messages, answers: Sequence[str]) -> tuple[str, list[str]]:
        """The prompt text and what the template appends after it for each answer (the answer and its
        end-of-turn markup). The template is rendered once with a placeholder answer and once with the first
        answer to check the shortcut; a template that does not insert answers verbatim gets one rendering
        per answer."""
        prompt = self.prompt_text(messages)
        slow = [self._continuation(prompt, messages, answers[0])] if answers else []
        tail = self._after_prompt(prompt, messages, _PLACEHOLDER)
        if tail is not None and tail.count(_PLACEHOLDER) == 1:
            head, _, after = tail.partition(_PLACEHOLDER)
            fast = [head + a + answer_end(after, self._specials) for a in answers]
            if fast[:1] == slow:
                return prompt, fast
        return prompt, slow + [self._continuation(prompt, messages, a) for a in answers[1:]]

    def _after_prompt(self, prompt: str, messages: Messages, answer: str) -> str | None:
        conversation = fit_prompt(self.tokenizer, messages, self._fold) + [{"role": "assistant", "content": answer}]
        full = render(self.tokenizer, conversation, generation_prompt=False)
        return full[len(prompt):] if full.startswith(prompt) else None

    def _continuation(self, prompt: str, messages: Messages, answer: str) -> str:
        tail = self._after_prompt(prompt, messages, answer)
        if tail is not None and answer in tail:
            end = tail.index(answer) + len(answer)
            return tail[:end] + answer_end(tail[end:], self._specials)
        # Templates that rewrite past assistant turns (e.g. dropping reasoning): answer plus end of sequence.
        return answer + (self.tokenizer.eos_token or "")

    def scoring_ids(self, messages: Messages, answers: Sequence[str]) -> tuple[list[int], list[list[int]]]:
        """Prompt tokens and each answer's continuation tokens, each text encoded on its own (in one
        tokenizer call: a call costs more than encoding a short label)."""
        prompt, continuations = self.continuation_texts(messages, answers)
        first, *rest = self.tokenizer([prompt, *continuations], add_special_tokens=False)["input_ids"]
        return list(first), [list(ids) for ids in rest]

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)
