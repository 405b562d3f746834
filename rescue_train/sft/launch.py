"""Checks of how a training process was started, made before any data is converted or model loaded."""

from __future__ import annotations

import os
from typing import Sequence


def _sharded_launch() -> str | None:
    """The parameter-sharding scheme ``accelerate launch`` set up for this process (FSDP, ZeRO-3), if any."""
    if os.environ.get("ACCELERATE_USE_FSDP", "").lower() == "true":
        return "FSDP"
    if os.environ.get("ACCELERATE_USE_DEEPSPEED", "").lower() == "true":
        stage = os.environ.get("ACCELERATE_DEEPSPEED_ZERO_STAGE")
        config_file = os.environ.get("ACCELERATE_DEEPSPEED_CONFIG_FILE")
        if stage is None and config_file and os.path.exists(config_file):
            import json

            with open(config_file, encoding="utf-8") as handle:
                stage = json.load(handle).get("zero_optimization", {}).get("stage")
        if str(stage) == "3":
            return "DeepSpeed ZeRO-3"
    return None


def launch_problem(cfg, argv: Sequence[str]) -> str | None:
    """What is wrong with how this training process was started, checked before any data or model is loaded."""
    sharded = _sharded_launch()
    if sharded and cfg.model.quantization != "none":
        return (f"model.quantization={cfg.model.quantization} (QLoRA) cannot be combined with {sharded}: the 4-bit "
                "weights are not sharded. Train QLoRA with one process per GPU "
                "(configs/accelerate/single_gpu.yaml or multi_gpu.yaml), or shard a bf16 base with "
                "model.quantization=none")
    from ..devices import gpus_without_launcher

    gpus = gpus_without_launcher()
    if gpus < 2:
        return None
    # trl refuses nn.DataParallel only after the data is converted and the model loaded.
    args = " ".join(argv)
    return (f"{gpus} GPUs are visible to this one process, and trl cannot train with nn.DataParallel. Train on all "
            f"of them with\n  accelerate launch --config_file configs/accelerate/multi_gpu.yaml --num_processes {gpus} "
            f"train.py {args}\nor on one with\n  CUDA_VISIBLE_DEVICES=0 rescue-train train {args}")
