"""``rescue-train train recipe=NAME key=value ...`` and ``python train.py ...`` (also under accelerate launch):
a LoRA recipe fine-tunes a chat model (rescue_train.sft), a classifier recipe trains one classifier
(rescue_train.classifiers). The recipe's ``kind`` says which."""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..settings import ConfigError, names_in, read_recipe, recipe_kind, recipe_names
from .base import Command


def usage() -> str:
    return f"""usage: rescue-train train recipe=NAME|PATH.yaml [key=value ...] [--cfg]

Fine-tune a chat model with LoRA on RESCUE-Bench tasks (kind: lora), or train one class-balanced classifier
(kind: classifier). Shipped recipes: {', '.join(recipe_names())}; or the path to your own YAML file (it gets
every default below; kind: lora unless it says otherwise).
Examples:
  accelerate launch train.py recipe=ssp_lora model=tiny train.max_steps=20
  accelerate launch --config_file configs/accelerate/single_gpu.yaml train.py recipe=ssp_lora model=qwen2.5-7b-instruct
  accelerate launch train.py recipe=ssp_lora model=any model.path=ORG/CHAT-MODEL   # any chat model, no preset
  rescue-train train recipe=rpp_cls strategy=logit_adjusted learner=torch data.test_fold=0
Model presets (model=NAME, configs/model): {', '.join(names_in('configs/model'))}; data blocks (data=NAME,
or data=PATH for data.source=PATH): {', '.join(names_in('configs/data'))}. More in docs/training.md and
docs/classifiers.md. The keys below are the given recipe's kind (LoRA when none is given).

A LoRA run writes output_dir (default runs/<name>/<model>/fold<test_fold>): adapter/, config.yaml,
provenance.json, README.md (its model card), logs/ (tensorboard --logdir runs), loss.png; evaluate it with
rescue-train eval run=OUTPUT_DIR protocol=rank. A classifier run writes its model, test-fold predictions and metrics.json."""


def recipe_of(words: list[str]) -> str | None:
    """The ``recipe=NAME`` (or ``--recipe NAME``) among the arguments, if any."""
    for i, word in enumerate(words):
        if word.lstrip("+").startswith("recipe="):
            return word.split("=", 1)[1]
        if word == "--recipe" and i + 1 < len(words):
            return words[i + 1]
        if word.startswith("--recipe="):
            return word.split("=", 1)[1]
    return None


def kind_of(recipe: str | None) -> str:
    return recipe_kind(read_recipe(recipe)[1]) if recipe else "lora"


def schema_for(argv: list[str]) -> type:
    if kind_of(recipe_of(argv)) == "classifier":
        from ..classifiers.classify_run import ClassifyConfig

        return ClassifyConfig
    from ..sft.config import LoraRunConfig

    return LoraRunConfig


def load(inputs: list[str], overrides: list[str]):
    recipe = recipe_of(overrides)
    if recipe is None:
        raise ConfigError(f"give recipe=NAME (one of {', '.join(recipe_names())}) or recipe=PATH.yaml")
    rest = [a for a in overrides if not a.startswith("recipe=")]
    if kind_of(recipe) == "classifier":
        from ..classifiers.classify_run import load_config

        return load_config(recipe, rest)
    from ..sft.config import load_config
    from ..sft.launch import launch_problem

    cfg = load_config(recipe, rest)
    problem = launch_problem(cfg, overrides)  # before any data is converted or model loaded
    if problem:
        raise ConfigError(problem)
    return cfg


def say_fold_notes(run_dir: Path) -> None:
    """What the run's fold held, where a scenario had no training or no test data (``data.splits.fold_notes``)."""
    provenance = json.loads((Path(run_dir) / "provenance.json").read_text())
    for note in provenance.get("fold_notes") or provenance.get("data", {}).get("fold_notes", []):
        print(f"note: {note}")


def run(cfg) -> None:
    from ..sft.config import LoraRunConfig

    if not isinstance(cfg, LoraRunConfig):
        from ..classifiers.classify_run import summary_lines, train

        run_dir, metrics = train(cfg)
        predictions = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
        print("\n".join(summary_lines(cfg.task, metrics, predictions)))
        say_fold_notes(run_dir)
        print(f"run folder: {run_dir} (model, config.yaml, provenance.json, predictions.jsonl, metrics.json, "
              f"README.md); beside the baselines: rescue-train baselines {cfg.data.source} "
              f"--test-fold {cfg.data.test_fold} --predictions {cfg.strategy}={run_dir}")
        return
    from ..sft.runner import already_finished
    from ..sft.runner import run as train_lora

    main_process = os.environ.get("RANK", "0") == "0"  # one line per run, not per accelerate process
    if already_finished(cfg):
        if main_process:
            print(f"already finished: {Path(cfg.output_dir).resolve()}")
        return
    run_dir = train_lora(cfg)
    if main_process:
        say_fold_notes(run_dir)
        print(finished_line(run_dir))
        print(f"adapter: {run_dir / 'adapter'}; run folder {run_dir} (config.yaml, provenance.json, README.md, logs/, "
              "loss.png)")
        print(f"evaluate it on its test fold: {next_step(cfg, run_dir)}")


def finished_line(run_dir: Path) -> str:
    """The end of a run in one line: its steps and time, its training loss (over the whole run, resumed or not) and
    last validation loss."""
    from ..io import read_json

    prov = read_json(run_dir / "provenance.json", {"global_step": int}, "a training run's provenance")
    metrics = {**(prov.get("metrics") or {}), **({"train_loss": prov["train_loss"]} if prov.get("train_loss") else {})}
    losses = "".join(f", {name} {metrics[key]:.4g}" for key, name in (("train_loss", "train loss"),
                                                                     ("eval_loss", "validation loss"))
                     if isinstance(metrics.get(key), (int, float)))
    return f"finished: {prov['global_step']} steps in {prov.get('train_seconds', 0):.0f} s{losses}"


def next_step(cfg, run_dir: Path) -> str:
    """The evaluation a run is scored by: closed-set tasks ranked (every candidate scored, no parse failures),
    as the comparisons and cv score them; a run of generation tasks only is asked with its training prompts."""
    from ..tasks import TASKS

    ranked = any(TASKS[task].closed_set for task in cfg.tasks)
    return f"rescue-train eval run={run_dir}" + (" protocol=rank" if ranked else "")


COMMAND = Command("train", usage, load, run, schema_for=schema_for, extra_keys=("recipe", "model", "data"))
