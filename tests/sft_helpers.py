"""Shared pieces of the LoRA SFT tests: the tiny model, converted bundled data, a trainer in-process."""

from __future__ import annotations

import os
from pathlib import Path

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[1]


def tiny_tokenizer():
    """The tiny model's tokenizer with its ChatML template (what a run's tokenizer holds)."""
    from omegaconf import OmegaConf

    from rescue_train.sft.models import load_tokenizer
    from rescue_train.tiny import tiny_model_path

    return load_tokenizer(OmegaConf.create({"chat_template": None, "pad_token": None}), str(tiny_model_path()))


def tiny_model():
    from transformers import AutoModelForCausalLM

    from rescue_train.tiny import tiny_model_path

    return AutoModelForCausalLM.from_pretrained(tiny_model_path())


def sft_args(out: Path, **overrides):
    from trl import SFTConfig

    args = dict(output_dir=str(out), use_cpu=True, report_to="none", save_strategy="no", max_steps=1,
                per_device_train_batch_size=2, completion_only_loss=True, max_length=4096, seed=0,
                dataloader_num_workers=0, disable_tqdm=True)
    args.update(overrides)
    return SFTConfig(**args)


def make_trainer(dataset, out: Path, tokenizer=None, model=None, batching="length_grouped", **overrides):
    from peft import LoraConfig, TaskType

    from rescue_train.sft.trainer import RescueSFTTrainer

    return RescueSFTTrainer(
        model=model or tiny_model(), args=sft_args(out, **overrides), train_dataset=dataset,
        processing_class=tokenizer or tiny_tokenizer(),
        peft_config=LoraConfig(task_type=TaskType.CAUSAL_LM, r=4, lora_alpha=8, target_modules="all-linear"),
        batching=batching)


def chat(answer: str, question: str = "Question?") -> dict[str, list[dict[str, str]]]:
    """One conversational prompt/completion row, as the converter writes them."""
    return {"prompt": [{"role": "system", "content": "You answer."}, {"role": "user", "content": question}],
            "completion": [{"role": "assistant", "content": answer}]}


def chat_rows(pairs, **columns):
    """A dataset of :func:`chat` rows for (answer, question) pairs, plus extra ``columns``."""
    import datasets

    rows = [chat(*pair) for pair in pairs]
    return datasets.Dataset.from_dict({"prompt": [r["prompt"] for r in rows],
                                       "completion": [r["completion"] for r in rows], **columns})
