"""``rescue-train report RESULTS...``: paper-style tables and plots from results.json files (rescue_train.evaluation.report)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from ..evaluation.report import load_results, plot, render


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rescue-train report", description="paper-style tables and plots from results.json files")
    parser.add_argument("results", nargs="+", help="results.json files or run folders")
    parser.add_argument("--out", help="folder for report.md and the plots (default: print the tables)")
    parser.add_argument("--no-paper", action="store_true", help="leave out the paper's ten LLM rows")
    parser.add_argument("--no-plots", action="store_true", help="write no plots")
    args = parser.parse_args(argv)
    try:
        results = [load_results(p) for p in args.results]
    except (FileNotFoundError, ValueError, json.JSONDecodeError) as exc:
        print(f"rescue-train report: error: {exc}")
        return 2
    text = render(results, not args.no_paper)
    if not args.out:
        print(text)
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    plots = [] if args.no_plots else [p for r in results for p in plot(r, out)]
    print(f"wrote {out / 'report.md'} and {len(plots)} plots")
    return 0
