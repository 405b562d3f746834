"""``rescue-train train recipe=NAME key=value ...`` and ``python train.py ...`` (also under accelerate launch)."""

from __future__ import annotations

import os
import sys
from typing import Sequence

USAGE = """usage: rescue-train train recipe=NAME|PATH.yaml [key=value ...] [--cfg]

Fine-tune a chat model with LoRA on RESCUE-Bench tasks, or, with a classifier recipe (*_cls), train one
class-balanced classifier. Shipped recipes: {recipes}; or the path to your own YAML file.
Examples:
  accelerate launch train.py recipe=ssp_lora model=tiny train.max_steps=20
  accelerate launch --config_file configs/accelerate/single_gpu.yaml train.py recipe=ssp_lora model=qwen2.5-7b-instruct
  accelerate launch train.py recipe=ssp_lora model=any model.path=ORG/CHAT-MODEL   # any chat model, no preset
  rescue-train train recipe=rpp_cls strategy=logit_adjusted [backend=torch] [data.test_fold=0]
--cfg prints the resolved config and exits. Model presets (model=NAME): {models}; data blocks (data=NAME, or
data=PATH for data.source=PATH): {data}. More in docs/training.md and docs/classifiers.md.

LoRA recipe keys (key  type = default  meaning); classifier keys: rescue-train train recipe=rpp_cls --help
{keys}
"""


def is_classifier_recipe(recipe: str) -> bool:
    """A classifier recipe names one ``task``; a LoRA recipe a ``tasks`` mixture on top of lora_defaults."""
    from omegaconf import OmegaConf

    from ..settings import recipe_path

    path = recipe_path(recipe)
    return path.stem.endswith("_cls") or "task" in OmegaConf.load(path)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from ..settings import ConfigError, describe, plain_warnings, recipe_names
    from ..sft.config import LoraRunConfig, compose, group_options, split_recipe

    plain_warnings()
    wants_help = any(a in ("-h", "--help") for a in argv)
    recipe_given = any(a.startswith("recipe=") for a in argv)
    if not argv or (wants_help and not recipe_given):
        print(USAGE.format(recipes=", ".join(recipe_names()), models=", ".join(group_options("model")),
                           data=", ".join(group_options("data")), keys="\n".join(describe(LoraRunConfig))))
        return 0
    show = "--cfg" in argv
    try:
        from omegaconf.errors import OmegaConfBaseException

        recipe, overrides = split_recipe([a for a in argv if a not in ("--cfg", "-h", "--help")])
        if is_classifier_recipe(recipe):  # no LoRA config; the classifier trainer takes over
            return train_classifier(argv)
        if wants_help:
            print(USAGE.format(recipes=", ".join(recipe_names()), models=", ".join(group_options("model")),
                               data=", ".join(group_options("data")), keys="\n".join(describe(LoraRunConfig))))
            return 0
        cfg = compose(recipe, overrides)
    except (ConfigError, ValueError, FileNotFoundError, OmegaConfBaseException) as exc:
        print(f"rescue-train train: error: {exc}", file=sys.stderr)
        return 2
    if show:
        from omegaconf import OmegaConf

        print(OmegaConf.to_yaml(cfg))
        return 0
    from ..sft.launch import launch_problem

    problem = launch_problem(cfg, argv)
    if problem:
        print(f"rescue-train train: error: {problem}", file=sys.stderr)
        return 2
    from ..data.schema import DataError
    from ..sft.runner import run

    try:
        run_dir = run(cfg)
    except (ValueError, FileNotFoundError, DataError) as exc:
        print(f"rescue-train train: error: {exc}", file=sys.stderr)
        return 2
    if os.environ.get("RANK", "0") == "0":  # one line per run, not per accelerate process
        print(f"adapter: {run_dir / 'adapter'}")
    return 0


def train_classifier(argv: Sequence[str]) -> int:
    """``train`` with a classifier recipe: one class-balanced classifier (rescue_train.classifiers)."""
    from omegaconf import OmegaConf

    from ..classifiers.classify_run import ClassifyConfig, load_config, summary_lines, train
    from ..data.schema import DataError
    from ..data.splits import LeakageError
    from ..settings import describe

    if any(a in ("-h", "--help") for a in argv):
        print("usage: rescue-train train recipe=itp_cls|rpp_cls|stp_cls|ssp_cls|PATH.yaml strategy=NAME "
              "[key=value ...] [--cfg]\n\nclassifier keys (key  type = default  meaning):\n" + "\n".join(describe(ClassifyConfig)))
        return 0
    try:
        config = load_config([a for a in argv if a != "--cfg"])
        if "--cfg" in argv:
            print(OmegaConf.to_yaml(OmegaConf.structured(config)))
            return 0
        run_dir, metrics = train(config)
    except (ValueError, FileNotFoundError, DataError, LeakageError) as exc:
        print(f"rescue-train train: error: {exc}", file=sys.stderr)
        return 2
    print("\n".join(summary_lines(config.task, metrics)))
    print(f"run folder: {run_dir} (model, config.yaml, provenance.json, predictions.jsonl, metrics.json, README.md)")
    return 0
