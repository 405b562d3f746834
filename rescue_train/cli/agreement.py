"""``rescue-train agreement RESULTS --human FILE``: how well an LLM judge agrees with human raters, for eval results
(instance scores, rescue_train.scoring.agreement) or an audit's folder (sentence labels, rescue_train.audit.agreement)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

from ..evaluation.report import load_results
from ..scoring.agreement import compare, read_human


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rescue-train agreement", description=__doc__.split("\n\n")[0])
    parser.add_argument("results", help="results.json (or its run folder) with judge scores, or an audit's")
    parser.add_argument("--human", required=True, help="CSV or JSONL with id, score[, rater]; for an audit: "
                        "dialogue_id, turn_id, sentence_id[, system, rater, text] and IF/OS columns")
    parser.add_argument("--weights", choices=("linear", "quadratic"), default="linear", help="kappa weights")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    try:
        human_path = Path(args.human)
        from ..audit.agreement import main_audit, read_results

        audit = read_results(args.results)
        if audit is not None:  # sentence labels of `rescue-train audit`
            return main_audit(audit, human_path, args.json)
        report = compare(load_results(args.results), read_human(human_path), args.weights, str(human_path))
    except (FileNotFoundError, ValueError) as exc:
        print(f"rescue-train agreement: error: {exc}")
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    kappa = f"kappa_{args.weights}"
    print(f"| Task | Rater | n | Exact | MAE | κ ({args.weights}) | AC1 |\n|---|---|---:|---:|---:|---:|---:|")
    for task, by_rater in report.items():
        for rater, m in by_rater.items():
            values = [m["exact_agreement"], m["mae"], m[kappa], m["gwet_ac1"]]
            print(f"| {task} | {rater} | {m['n']} | " + " | ".join("–" if v is None else f"{v:.3f}" for v in values)
                  + " |")
    return 0
