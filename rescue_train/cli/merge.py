"""``rescue-train merge RUN_DIR [--output-dir DIR]``: base model + LoRA adapter -> one plain model folder
(rescue_train.sft.merge)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..settings import ConfigError, compose, meaning
from .base import Command

USAGE = """usage: rescue-train merge RUN_DIR [--output-dir DIR]

Merges a finished LoRA run's adapter into its base model: one plain model folder (with the run's tokenizer and
chat template, and merge.json naming the run), which suits engines that serve one model fast."""


@dataclass
class MergeConfig:
    run: str = field(default="", metadata=meaning("a run folder written by `rescue-train train`"))
    output_dir: Optional[str] = field(default=None, metadata=meaning("output folder (default: RUN_DIR/merged)"))


def load(inputs: list[str], overrides: list[str]) -> MergeConfig:
    if len(inputs) > 1:
        raise ConfigError(f"merge takes one RUN_DIR, got {len(inputs)}")
    config: MergeConfig = compose(MergeConfig, overrides, "merge", base={"run": inputs[0]} if inputs else {})
    if not config.run:
        raise ConfigError("name the run folder: rescue-train merge RUN_DIR")
    return config


def run(config: MergeConfig) -> None:
    from ..sft.merge import merge

    run_dir = Path(config.run).resolve()
    out = merge(run_dir, Path(config.output_dir or run_dir / "merged").resolve())
    print(f"merged model: {out}")


COMMAND = Command("merge", USAGE, load, run, schema=MergeConfig, inputs=True)
