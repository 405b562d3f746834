"""``rescue-train report RESULTS... [--output-dir DIR]``: paper-style tables and plots from results.json files
(rescue_train.evaluation.report)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from ..settings import ConfigError, compose, meaning
from .base import Command

USAGE = """usage: rescue-train report RESULTS... [--output-dir DIR] [--no-paper] [--no-plots]

RESULTS are results.json files or the run folders holding them. Prints the Table 5 and Table 11 layouts with
the paper's ten LLM rows beside ours; with --output-dir, writes DIR/report.md and the plots instead."""


@dataclass
class ReportConfig:
    results: List[str] = field(default_factory=list, metadata=meaning("results.json files or run folders"))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "folder for report.md and the plots (default: print the tables)"))
    paper: bool = field(default=True, metadata=meaning("show the paper's ten LLM rows beside ours"))
    plots: bool = field(default=True, metadata=meaning("write the plots (with --output-dir)"))


def load(inputs: list[str], overrides: list[str]) -> ReportConfig:
    config: ReportConfig = compose(ReportConfig, overrides, "report", base={"results": inputs} if inputs else {})
    if not config.results:
        raise ConfigError("name one or more results.json files or run folders")
    return config


def run(config: ReportConfig) -> None:
    from ..evaluation.report import load_results, plot, render

    results = [load_results(p) for p in config.results]
    text = render(results, config.paper)
    if not config.output_dir:
        print(text)
        return
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    plots = [p for r in results for p in plot(r, out)] if config.plots else []
    print(f"wrote {out / 'report.md'} and {len(plots)} plots")


COMMAND = Command("report", USAGE, load, run, schema=ReportConfig, inputs=True, labelled_inputs=True)
