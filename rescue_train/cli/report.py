"""``rescue-train report RESULTS... [--output-dir DIR]``: paper-style tables with error bars, paired comparisons and
plots from results.json files (rescue_train.evaluation.report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from ..settings import ConfigError, compose, meaning
from .base import Command

USAGE = """usage: rescue-train report RESULTS... [--output-dir DIR] [--against NAME] [--power] [--no-paper] [--no-plots]

RESULTS are results.json files or the run folders holding them. Prints the Table 5 and Table 11 layouts with
the paper's ten LLM rows beside ours (our cells with their 95% intervals), and every result compared with the
first (or --against) on the instances both scored; with --output-dir, writes DIR/report.md, comparisons.json
and the plots instead."""


@dataclass
class ReportConfig:
    results: List[str] = field(default_factory=list, metadata=meaning("results.json files or run folders"))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "folder for report.md, comparisons.json and the plots (default: print the tables)"))
    against: Optional[str] = field(default=None, metadata=meaning(
        "the result the others are compared with (its path, label or table name; default: the first)"))
    power: bool = field(default=False, metadata=meaning("add the smallest detectable difference per metric"))
    paper: bool = field(default=True, metadata=meaning("show the paper's ten LLM rows beside ours"))
    plots: bool = field(default=True, metadata=meaning("write the plots (with --output-dir)"))


def load(inputs: list[str], overrides: list[str]) -> ReportConfig:
    config: ReportConfig = compose(ReportConfig, overrides, "report", base={"results": inputs} if inputs else {})
    if not config.results:
        raise ConfigError("name one or more results.json files or run folders")
    return config


def run(config: ReportConfig) -> None:
    from ..evaluation.report import build, load_results, reference_index, write

    results = [load_results(p) for p in config.results]
    reference = reference_index(results, config.results, config.against)
    report = build(results, reference, config.paper, config.power)
    if not config.output_dir:
        print(report.text)
        return
    out = Path(config.output_dir)
    plots = write(report, results, out, config.plots)
    print(f"wrote {out / 'report.md'} and {len(plots)} plots")


COMMAND = Command("report", USAGE, load, run, schema=ReportConfig, inputs=True, labelled_inputs=True)
