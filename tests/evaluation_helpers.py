"""Shared pieces of the evaluator's tests: offline settings, a tiny LoRA adapter, counting backends."""

from __future__ import annotations

import os

for _name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE"):
    os.environ[_name] = "1"

from pathlib import Path  # noqa: E402


def make_adapter(model_dir: str | Path, out_dir: str | Path, seed: int = 0) -> Path:
    """A LoRA adapter with random (not zero) B matrices, so it really changes the model's outputs."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    config = LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                        init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    with torch.no_grad():  # large enough to move the ranking of the random tiny model
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.mul_(20.0)
    model.save_pretrained(out_dir)
    return Path(out_dir)


class Counting:
    """Wraps a backend and counts the instances it is asked about; optionally fails after some calls,
    like a run killed mid-way."""

    def __init__(self, inner, fail_after_calls: int | None = None):
        self.inner, self.fail_after_calls = inner, fail_after_calls
        self.calls = 0
        self.generated = 0
        self.scored = 0
        self.name, self.can_rank = inner.name, inner.can_rank

    def _tick(self):
        if self.fail_after_calls is not None and self.calls >= self.fail_after_calls:
            raise KeyboardInterrupt("simulated kill")
        self.calls += 1

    def generate(self, prompts, **kwargs):
        self._tick()
        self.generated += len(prompts)
        return self.inner.generate(prompts, **kwargs)

    def loglikelihood(self, requests, **kwargs):
        self._tick()
        self.scored += len(requests)
        return self.inner.loglikelihood(requests, **kwargs)

    def describe(self):
        return self.inner.describe()

    def close(self):
        pass
