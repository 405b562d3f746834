"""``rescue-train convert SOURCE --output-dir DIR``: instances and datasets for training and evaluation."""

from __future__ import annotations

from ..convert import ConvertConfig, convert
from ..settings import ConfigError, compose
from .base import Command

USAGE = """usage: rescue-train convert SOURCE --output-dir DIR [--tasks TASK ...] [data keys ...]

Writes DIR/split_manifest.json, DIR/convert_meta.json and, per task, DIR/<task>/instances.jsonl plus the sft/,
cls/ and gen/ datasets. Every dataset row carries its fold and split; the DatasetDict keys are the splits of
--test-fold. The split groups samples into units (couples / families sharing people) so that no unit is in two
splits. The data keys are every command's (data.split_seed=1 or --split-seed 1, --answer-format json, ...)."""


def source_layer(inputs: list[str], command: str) -> dict:
    """The benchmark a data command reads: its one input (``data.source=`` says the same)."""
    if len(inputs) > 1:
        raise ConfigError(f"{command} reads one SOURCE, got {len(inputs)}: {' '.join(inputs)}")
    return {"data": {"source": inputs[0]}} if inputs else {}


def load(inputs: list[str], overrides: list[str]) -> ConvertConfig:
    config: ConvertConfig = compose(ConvertConfig, overrides, "convert", base=source_layer(inputs, "convert"))
    if not config.output_dir:
        raise ConfigError("convert needs --output-dir DIR (or output_dir=DIR)")
    return config


def run(config: ConvertConfig) -> None:
    meta = convert(config)
    for task, info in meta["tasks"].items():
        print(f"{task}: {info['instances']} instances, splits {info['splits']} -> {config.output_dir}/{task}/")
    for note in meta["manifest_notes"] + meta["load_notes"]:
        print("note:", note)


COMMAND = Command("convert", USAGE, load, run, schema=ConvertConfig,
                  inputs=True)
