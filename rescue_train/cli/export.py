"""``rescue-train export lm-eval --output-dir DIR [key=value ...]``: the closed-set tasks as lm-evaluation-harness
tasks (rescue_train.export.lm_eval)."""

from __future__ import annotations

from pathlib import Path

from ..evaluation.config import EvalConfig, load_config
from ..settings import ConfigError
from .base import Command

USAGE = """usage: rescue-train export lm-eval --output-dir DIR [key=value ...]

Writes lm-evaluation-harness task YAMLs and their data for the closed-set tasks (ITP, RPP, STP, SSP) as
multiple choice with per-instance candidates, grouped as `rescue`. The keys are eval's: data.* (source, split,
test_fold, manifest, folds, split_seed, context, mode, answer_format, the build options), run=RUN_DIR (a
training run's data configuration and held-out fold), tasks=, limit=, and model= / tokenizer= for the chat
template the prompts are rendered with.

Then:  lm_eval --model hf --model_args pretrained=MODEL --include_path DIR --tasks rescue"""

FORMATS = ("lm-eval",)


def load(inputs: list[str], overrides: list[str]) -> EvalConfig:
    if inputs != ["lm-eval"]:
        given = f"unknown format {' '.join(inputs)!r}; " if inputs else ""
        raise ConfigError(f"{given}name the format to export: rescue-train export {' | '.join(FORMATS)} --output-dir DIR")
    cfg = load_config(overrides)
    if not cfg.output_dir:
        raise ConfigError("export needs --output-dir DIR (or output_dir=DIR)")
    if not cfg.model and not cfg.adapter and not cfg.run:
        cfg.model = "tiny"
    return cfg


def run(cfg: EvalConfig) -> None:
    from ..export.lm_eval import GROUP, export

    meta = export(cfg, Path(cfg.output_dir))
    for task, n in meta["tasks"].items():
        print(f"{GROUP}_{task}: {n} instances")
    print(f"-> {cfg.output_dir}  (lm_eval --model hf --model_args pretrained=MODEL --include_path {cfg.output_dir} "
          f"--tasks {GROUP})")


COMMAND = Command("export", USAGE, load, run, schema=EvalConfig, inputs=True, extra_keys=("recipe", "data"))
