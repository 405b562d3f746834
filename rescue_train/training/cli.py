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
    from .launch import launch_problem

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
