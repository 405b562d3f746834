"""Accelerator facts shared by training and evaluation: native bf16, the GPUs one process would spread over,
and giving device memory back."""

from __future__ import annotations


def native_bf16() -> bool:
    """True on a CUDA GPU that computes in bf16 natively (Ampere and later). torch's plain
    ``is_bf16_supported()`` also says yes on GPUs that only emulate bf16 (V100, T4), where it is slow and
    fp16/fp32 are the right choices."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def gpus_without_launcher() -> int:
    """How many GPUs transformers' Trainer would spread this process over with ``nn.DataParallel``: all that
    are visible when no launcher started it (``WORLD_SIZE`` unset or 1), else 0. With more than one, each
    batch is split over them and multiplied by their number, which trl refuses and which makes a run of
    fixed steps see that many times the samples of a one-GPU run."""
    import os

    import torch

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 or not torch.cuda.is_available():
        return 0
    return torch.cuda.device_count()


def release_memory() -> None:
    """Collect unreachable objects and return the CUDA caching allocator's free blocks to the driver, so that
    another engine (vLLM measures free memory when it starts) or model can use them."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
