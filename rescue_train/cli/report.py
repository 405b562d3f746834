"""``rescue-train report RESULTS... [--output-dir DIR]``: paper-style tables with error bars, paired comparisons and
plots from results.json files (rescue_train.evaluation.report)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

from ..settings import ConfigError, as_list, compose, meaning
from .base import Command

USAGE = """usage: rescue-train report RESULTS... [--output-dir DIR] [--against NAME] [--power] [--no-paper] [--no-plots]
                           [--calibration METHODS]

RESULTS are results.json files or folders holding them at any depth (`rescue-train report runs/eval`);
NAME=PATH names the rows of PATH. Folders of unfinished evaluations are skipped with a note. Prints the Table 5
and Table 11 layouts with the paper's ten LLM rows beside ours (our cells with their 95% intervals, each row's
n and split), and every result compared with the first (or --against) on the instances both scored. With
--output-dir DIR it writes DIR/report.md, comparisons.json and the plots (DIR/plots/models.png compares every model
per column) instead, and prints where; read DIR/report.md. --calibration none,contextual,pmi re-ranks each rank-protocol result under each method, one
row each, without running the model."""


@dataclass
class ReportConfig:
    results: List[str] = field(default_factory=list, metadata=meaning(
        "results.json files or folders holding them at any depth; NAME=PATH names the rows"))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "folder for report.md, comparisons.json and the plots (default: print the tables)"))
    against: Optional[str] = field(default=None, metadata=meaning(
        "the result the others are compared with (its path, label or table name; default: the first)"))
    power: bool = field(default=False, metadata=meaning("add the smallest detectable difference per metric"))
    paper: bool = field(default=True, metadata=meaning("show the paper's ten LLM rows beside ours"))
    plots: bool = field(default=True, metadata=meaning("write the plots (with --output-dir)"))
    calibration: List[str] = field(default_factory=list, metadata=meaning(
        "re-rank each result's ranked records under these calibrations, one row each, without the model "
        "(none | contextual | pmi | prior; contextual and pmi need a calibrated evaluation's scores)"))


def load(inputs: list[str], overrides: list[str]) -> ReportConfig:
    config: ReportConfig = compose(ReportConfig, overrides, "report", base={"results": inputs} if inputs else {})
    if not config.results:
        raise ConfigError("name one or more results.json files or run folders")
    from ..scoring.calibration import CALIBRATIONS

    config.calibration = [m for given in config.calibration for m in as_list(given)]
    for method in config.calibration:
        if method not in CALIBRATIONS:
            raise ConfigError(f"calibration: {method!r} is not one of {', '.join(CALIBRATIONS)}")
    return config


def run(config: ReportConfig) -> None:
    from ..evaluation.paired import reference_index
    from ..evaluation.report import build, find_results, write

    found = find_results(config.results)
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    if config.calibration:
        from ..evaluation.calibrate import recalibrated

        found.results = [recalibrated(r, method) for r in found.results for method in config.calibration]
        found.paths = [p for p in found.paths for _ in config.calibration]
    reference = reference_index(found.results, found.paths, config.against)
    report = build(found.results, reference, config.paper, config.power)
    if not config.output_dir:
        print(report.text)
        return
    out = Path(config.output_dir)
    plots = write(report, found.results, out, config.plots)
    print(f"wrote {out / 'report.md'} ({len(found.results)} results) and {len(plots)} plots "
          f"in {out / 'plots'}, linked from report.md" if plots else f"wrote {out / 'report.md'}")


COMMAND = Command("report", USAGE, load, run, schema=ReportConfig, inputs=True, labelled_inputs=True)
