"""``rescue-train baselines DATA``: fit and score every baseline over grouped folds and print the Table 5-style
table with the paper's LLM rows beside them (couple, family, both)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..baselines.runner import RunConfig, load_records, run, score
from ..baselines.table import best_of, columns_for, paper_rows, render
from ..io import write_json_atomic
from ..scoring.metrics import SCOPES
from ..settings import compose
from .base import Command
from .convert import source_layer

USAGE = """usage: rescue-train baselines SOURCE [--tasks TASK ...] [--baselines NAME ...] [--predictions NAME=PATH ...]
                              [--output-dir DIR] [--json] [data keys ...]

Trivial baselines scored like the models, beside the paper's LLMs. --split kfold (default) fits on the training
folds and predicts each test fold (--test-fold F: only that one); --split leave_one_unit_out predicts every
instance from a fit on every other unit. The split seed also seeds the random baselines."""


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
                                  (f"baselines ({results['config']['data']['split']} split)", ours),
                                  ("best baseline per column", {"best baseline": best_of(ours, columns)})],
                          columns))
    prov = results["provenance"]
    out.append(f"split manifest {prov['split_manifest_hash']}, seed {prov['seed']}, data {prov['data_fingerprint'][:16]}, "
               f"commit {prov['git_commit']}. ITP/RPP/STP/SSP in %, ER/VP/RSG judge 1-5 only with --judge-model, "
               f"BERTScore F1 only with --bertscore, ER S_int 1-5.")
    out.extend(f"note: {n}" for n in prov["notes"])
    return "\n\n".join(out)


def load(inputs: list[str], overrides: list[str]) -> RunConfig:
    return compose(RunConfig, overrides, "baselines", base=source_layer(inputs, "baselines"))


def run_baselines(config: RunConfig) -> None:
    models = scored_predictions(config.predictions)
    results, records = run(config)
    results["models"] = {name: {**r, "source": spec} for (name, r), spec in zip(models.items(), config.predictions)}
    if config.output_dir:
        out = Path(config.output_dir)
        write_json_atomic(out / "results.json", results)
        for name, chosen in records.items():
            path = out / "predictions" / f"{name}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen), encoding="utf-8")
    print(json.dumps(results, indent=2, ensure_ascii=False) if config.json else tables(results, models))


COMMAND = Command("baselines", USAGE, load, run_baselines, schema=RunConfig, inputs=True)
