"""``rescue-train stats SOURCE``: counts per task and scenario beside the paper's Table 6."""

from __future__ import annotations

from ..settings import compose
from ..stats import StatsConfig, stats_report
from .base import Command
from .convert import source_layer

USAGE = """usage: rescue-train stats SOURCE [--json] [data keys ...]

Instances and covered samples per task and scenario beside the paper's Table 6, prompt sizes, the label
distribution, every exclusion counted by reason, and the RPP counts under each gold definition. SOURCE is
benchmark_191.jsonl, a per-sample folder, a saved dataset, a hub id, or 'bundled'. The data keys are every
command's (data.context=3 or --context 3, --rpp-definition A, ...)."""


def load(inputs: list[str], overrides: list[str]) -> StatsConfig:
    return compose(StatsConfig, overrides, "stats", base=source_layer(inputs, "stats"))


def run(config: StatsConfig) -> None:
    print(stats_report(config))


COMMAND = Command("stats", USAGE, load, run, schema=StatsConfig, inputs=True)
