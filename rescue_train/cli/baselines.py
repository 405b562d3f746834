"""``rescue-train baselines DATA``: fit and score every baseline over grouped folds and print the
Table 5-style table with the paper's LLM rows beside them (couple, family, both)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from rescue_train.data import config as data_config
from rescue_train.data.schema import DataError
from rescue_train.data.splits import LeakageError
from rescue_train.io import write_json_atomic
from rescue_train.scoring.metrics import SCOPES
from rescue_train.settings import deprecated, plain_warnings
from rescue_train.tasks import TASKS

from ..baselines.registry import BASELINES
from ..baselines.runner import SPLITS, RunConfig, load_records, run, score
from ..baselines.table import best_of, columns_for, paper_rows, render

BASELINE_DATA = ("context", "rpp_definition", "rpp_include_current", "stp_targets", "ssp_target_emotion",
                 "rsg_condition", "rsg_min_words", "rsg_per_sample", "split", "folds", "split_seed", "test_fold")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rescue-train baselines",
                                description="Trivial baselines scored like the models, beside the paper's LLMs. "
                                            "Without --test-fold every test fold is scored; the split seed "
                                            "also seeds the random baselines.")
    p.add_argument("source", help="benchmark_191.jsonl, a per-sample folder, a saved dataset or 'bundled'")
    p.add_argument("--tasks", nargs="+", choices=list(TASKS), default=list(TASKS))
    p.add_argument("--baselines", nargs="+", choices=list(BASELINES), default=list(BASELINES))
    data_config.add_flags(p, include=BASELINE_DATA, splits=SPLITS, defaults={"test_fold": None})
    p.add_argument("--bertscore", metavar="MODEL_DIR", default=None,
                   help="a local model folder for BERTScore on ER/VP/RSG (left out when not given)")
    p.add_argument("--bertscore-layers", type=int, default=None, help="layer bert-score reads (needed with a path)")
    p.add_argument("--judge-model", default=None, metavar="NAME",
                   help="judge the ER/VP/RSG predictions with this model of an OpenAI-compatible server (the "
                        "evaluator's rubrics; the key comes from $OPENAI_API_KEY)")
    p.add_argument("--judge-url", default=None, metavar="URL", help="the judge server's base URL (with --judge-model)")
    p.add_argument("--predictions", nargs="+", default=[], metavar="NAME=PATH",
                   help="also score these prediction records (a .jsonl file or a folder of them), e.g. a trained "
                        "model's evaluation output, and print them as rows")
    p.add_argument("--output-dir", default=None, help="write results.json and predictions/<baseline>.jsonl here")
    p.add_argument("--out", dest="output_dir", action=data_config.Renamed, new="--output-dir", help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true", help="print the results JSON instead of the tables")
    return p


def old_split_none(argv: list[str]) -> list[str]:
    """``--split none`` meant leave one unit out here ("everything is test" in convert and eval)."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--split=none" or (arg == "none" and i and out[i - 1] == "--split"):
            deprecated("--split none is deprecated for baselines; use --split leave_one_unit_out")
            out[i] = arg.replace("none", "leave_one_unit_out")
    return out


def scored_predictions(specs: Sequence[str]) -> dict[str, dict]:
    scored = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--predictions expects NAME=PATH, got {spec!r}")
        scored[name] = score(load_records(path))
    return scored


def tables(results: dict, models: dict[str, dict]) -> str:
    out = []
    columns = columns_for(results["config"]["tasks"])
    for scope in SCOPES:
        ours = {name: r["table"][scope] for name, r in results["baselines"].items() if scope in r["table"]}
        if not ours:
            continue
        mine = {name: r["table"][scope] for name, r in models.items() if scope in r["table"]}
        out.append(render(scope, [("paper LLMs (zero-shot, whole benchmark)", paper_rows(scope)),
                                  ("models (--predictions)", mine),
                                  (f"baselines ({results['config']['split']} split)", ours),
                                  ("best baseline per column", {"best baseline": best_of(ours, columns)})],
                          columns))
    prov = results["provenance"]
    out.append(f"split manifest {prov['split_manifest_hash']}, seed {prov['seed']}, data {prov['data_fingerprint'][:16]}, "
               f"commit {prov['git_commit']}. ITP/RPP/STP/SSP in %, ER/VP/RSG judge 1-5 only with --judge-model, "
               f"BERTScore F1 only with --bertscore, ER S_int 1-5.")
    out.extend(f"note: {n}" for n in prov["notes"])
    return "\n\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    plain_warnings()
    args = parser().parse_args(old_split_none(list(sys.argv[1:] if argv is None else argv)))
    try:
        one_fold, args.test_fold = args.test_fold, args.test_fold or 0
        data = data_config.from_flags(args)
        config = RunConfig(source=data.source, split=data.split, folds=data.folds, seed=data.split_seed,
                           test_fold=one_fold, tasks=tuple(args.tasks), baselines=tuple(args.baselines),
                           build=data.build_options(), bertscore=args.bertscore,
                           bertscore_layers=args.bertscore_layers, judge_model=args.judge_model,
                           judge_base_url=args.judge_url)
        models = scored_predictions(args.predictions)
        results, records = run(config)
    except (DataError, LeakageError, ValueError, FileNotFoundError) as exc:
        print(f"rescue-train baselines: error: {exc}", file=sys.stderr)
        return 2
    results["models"] = {name: {**r, "source": spec} for (name, r), spec in zip(models.items(), args.predictions)}
    if args.output_dir:
        out = Path(args.output_dir)
        write_json_atomic(out / "results.json", results)
        for name, chosen in records.items():
            path = out / "predictions" / f"{name}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen), encoding="utf-8")
    print(json.dumps(results, indent=2, ensure_ascii=False) if args.json else tables(results, models))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
