"""Model presets -> a loaded base model, its tokenizer with its own chat template, a LoRA config.

A preset (``configs/model/*.yaml``) names where the weights come from (``path``; what each path loads:
:mod:`rescue_train.inference.presets`).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from ..devices import native_bf16
from .config import LoraSettings, ModelSettings


def compute_dtype(precision: str):
    """``auto``: bf16 on a GPU that has it natively, else fp32 (CPU training in bf16 is slow and gains nothing;
    GPUs that only emulate bf16, such as V100 and T4, would be slow too)."""
    import torch

    if precision == "auto":
        return torch.bfloat16 if native_bf16() else torch.float32
    dtypes = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
    if precision not in dtypes:
        raise ValueError(f"train.precision must be auto, bf16, fp16 or fp32, got {precision!r}")
    return dtypes[precision]


def load_tokenizer(model_cfg: ModelSettings, base_path: str):
    """The model's tokenizer with its own chat template (or ``model.chat_template``, a Jinja file, when set)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_path)
    if model_cfg.chat_template:
        template = Path(model_cfg.chat_template)
        if not template.is_file():
            raise ValueError(f"model.chat_template={model_cfg.chat_template}: no such file (a Jinja chat template)")
        tokenizer.chat_template = template.read_text(encoding="utf-8")
    if not tokenizer.chat_template:
        raise ValueError(f"the tokenizer of {base_path} has no chat template: fine-tune an instruction-tuned (chat) "
                         "model, or give one with model.chat_template=FILE.jinja")
    if model_cfg.pad_token:
        tokenizer.pad_token = model_cfg.pad_token
    return tokenizer


def quantization_config(model_cfg: ModelSettings, dtype):
    """QLoRA's 4-bit NF4 base weights (bitsandbytes, CUDA only); None when the preset is not quantized."""
    mode = model_cfg.quantization
    if mode == "none":
        return None
    if mode != "4bit":
        raise ValueError(f"model.quantization must be none or 4bit, got {mode!r}")
    import torch

    if not torch.cuda.is_available():
        raise ValueError("model.quantization=4bit (QLoRA) needs a CUDA GPU: bitsandbytes 4-bit kernels do not run on "
                         "this machine; use model.quantization=none")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ValueError("model.quantization=4bit needs bitsandbytes: pip install -e '.[gpu]'")
    from transformers import BitsAndBytesConfig

    return BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                              bnb_4bit_compute_dtype=dtype)


def load_model(model_cfg: ModelSettings, base_path: str, dtype):
    from transformers import AutoModelForCausalLM

    kwargs: dict[str, Any] = {"dtype": dtype}
    if model_cfg.attn_implementation:
        kwargs["attn_implementation"] = model_cfg.attn_implementation
    quant = quantization_config(model_cfg, dtype)
    if quant is not None:
        import torch
        from accelerate import PartialState

        kwargs["quantization_config"] = quant
        kwargs["device_map"] = {"": PartialState().local_process_index if torch.cuda.is_available() else "cpu"}
    return AutoModelForCausalLM.from_pretrained(base_path, **kwargs)


def lora_config(lora_cfg: LoraSettings):
    from peft import LoraConfig, TaskType

    targets = lora_cfg.target_modules
    targets = targets if isinstance(targets, str) else list(targets)
    return LoraConfig(task_type=TaskType.CAUSAL_LM, r=lora_cfg.r, lora_alpha=lora_cfg.alpha,
                      lora_dropout=lora_cfg.dropout, target_modules=targets)


def training_flops_per_token(model) -> int:
    """The model FLOPs one token costs in a training step, for model FLOPs utilisation (MFU).

    Each weight of a matrix product costs 2 FLOPs in the forward pass and 2 for the gradient of its input in
    the backward pass, plus 2 for its own gradient when it trains: 6 per trained weight, 4 per frozen one
    (the whole base under LoRA, so LoRA's figure is about 4 x parameters, not the dense 6). The input
    embedding is a lookup and costs nothing, unless it is tied to the output layer; every other parameter
    is counted as a matrix weight (norm scales: a negligible share). Attention's own FLOPs (scores and
    weighted sums, growing with the sequence length) are left out, so long sequences are undercounted.
    """
    embedding = model.get_input_embeddings().weight
    output = model.get_output_embeddings()
    counted_embedding = output is not None and output.weight is embedding
    return sum(p.numel() * (6 if p.requires_grad else 4) for p in model.parameters()
               if p is not embedding or counted_embedding)
