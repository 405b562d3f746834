"""``rescue-train report RESULTS...``: paper-style tables and plots from results.json files (rescue_train.evaluation.report)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from ..evaluation.report import build, load_results, reference_index, write


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rescue-train report", description="paper-style tables and plots from results.json files")
    parser.add_argument("results", nargs="+", help="results.json files or run folders")
    parser.add_argument("--out", help="folder for report.md and the plots (default: print the tables)")
    parser.add_argument("--no-paper", action="store_true", help="leave out the paper's ten LLM rows")
    parser.add_argument("--no-plots", action="store_true", help="write no plots")
    parser.add_argument("--against", metavar="NAME", help="the result the others are compared with (its path, "
                        "label or table name; default: the first)")
    parser.add_argument("--power", action="store_true", help="add the smallest detectable difference per metric")
    args = parser.parse_args(argv)
    try:
        results = [load_results(p) for p in args.results]
        reference = reference_index(results, args.results, args.against)
    except (FileNotFoundError, ValueError, json.JSONDecodeError) as exc:
        print(f"rescue-train report: error: {exc}")
        return 2
    report = build(results, reference, not args.no_paper, args.power)
    if not args.out:
        print(report.text)
        return 0
    out = Path(args.out)
    plots = write(report, results, out, not args.no_plots)
    print(f"wrote {out / 'report.md'} and {len(plots)} plots")
    return 0
