"""``rescue-train train recipe=NAME key=value ...`` and ``python train.py ...`` (also under accelerate launch)."""

from __future__ import annotations

import os
import sys
from typing import Sequence

USAGE = """usage: rescue-train train recipe=NAME [key=value ...]

Fine-tune a chat model with LoRA on RESCUE-Bench tasks, or, with a *_cls recipe, train one class-balanced
classifier. Recipes: {recipes}
Examples:
  accelerate launch train.py recipe=ssp_lora model=tiny train.max_steps=20
  accelerate launch --config_file configs/accelerate/single_gpu.yaml train.py recipe=ssp_lora model=qwen2.5-7b-instruct
  rescue-train train recipe=rpp_cls strategy=logit_adjusted [backend=torch] [data.test_fold=0]
Options are documented in docs/training.md and docs/classifiers.md; print the resolved config with --cfg.
"""


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
    if sharded and (cfg.model.get("quantization") or "none") != "none":
        return (f"model.quantization={cfg.model.quantization} (QLoRA) cannot be combined with {sharded}: the 4-bit "
                "weights are not sharded. Train QLoRA with one process per GPU "
                "(configs/accelerate/single_gpu.yaml or multi_gpu.yaml), or shard a bf16 base with "
                "model.quantization=none")
    import torch

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 or not torch.cuda.is_available():
        return None
    gpus = torch.cuda.device_count()
    if gpus < 2:
        return None
    # One process that sees several GPUs gets nn.DataParallel from transformers, which trl refuses only after
    # the data is converted and the model loaded.
    args = " ".join(argv)
    return (f"{gpus} GPUs are visible to this one process, and trl cannot train with nn.DataParallel. Train on all "
            f"of them with\n  accelerate launch --config_file configs/accelerate/multi_gpu.yaml --num_processes {gpus} "
            f"train.py {args}\nor on one with\n  CUDA_VISIBLE_DEVICES=0 rescue-train train {args}")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from .config import compose, recipe_names, split_recipe

    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE.format(recipes=", ".join(recipe_names())))
        return 0
    show = "--cfg" in argv
    try:
        from hydra.errors import HydraException
        from omegaconf.errors import OmegaConfBaseException

        recipe, overrides = split_recipe([a for a in argv if a != "--cfg"])
        if recipe.endswith("_cls"):  # a classifier recipe: no LoRA config; the classifier trainer takes over
            from .classify_run import main as train_classifier

            return train_classifier(argv)
        cfg = compose(recipe, overrides)
    except (ValueError, FileNotFoundError, HydraException, OmegaConfBaseException) as exc:
        print(f"rescue-train train: error: {exc}", file=sys.stderr)
        return 2
    if show:
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(cfg))
        return 0
    problem = launch_problem(cfg, argv)
    if problem:
        print(f"rescue-train train: error: {problem}", file=sys.stderr)
        return 2
    from ..data.schema import DataError
    from .sft import run

    try:
        run_dir = run(cfg)
    except (ValueError, FileNotFoundError, DataError) as exc:
        print(f"rescue-train train: error: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":  # one line per run, not per accelerate process
        print(f"adapter: {run_dir / 'adapter'}")
    return 0
