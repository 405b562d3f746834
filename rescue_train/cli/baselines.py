"""``rescue-train baselines DATA``: fit and score every baseline over grouped folds and print the Table 5-style
table with the paper's LLM rows beside them (couple, family, both)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..baselines.runner import RunConfig, load_records, run, score
from ..baselines.table import best_rows, columns_for, paper_rows, render
from ..io import write_json_atomic
from ..scoring.metrics import SCOPES
from ..settings import compose
from .base import Command
from .convert import source_layer

USAGE = """usage: rescue-train baselines SOURCE [--tasks TASK ...] [--baselines NAME ...] [--predictions NAME=PATH ...]
                              [--output-dir DIR] [--json] [data keys ...]

Trivial baselines scored like the models, beside the paper's LLMs. --split kfold (default) fits on the training
folds and predicts each test fold (--test-fold F: only that one); --split leave_one_unit_out predicts every
instance from a fit on every other unit. The split seed also seeds the random baselines.
--predictions NAME=PATH adds one model's row (PATH: a .jsonl of prediction records, or one results folder: an
eval output of one model, a kept classifier); the baselines are then scored on exactly that model's instances.
With --output-dir DIR: DIR/results.json and DIR/predictions/<baseline>.jsonl."""


def model_records(specs: Sequence[str]) -> dict[str, list[dict]]:
    """NAME -> the prediction records of one model (``--predictions NAME=PATH``)."""
    found = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"--predictions expects NAME=PATH, got {spec!r}")
        if name in found:
            raise ValueError(f"--predictions names {name} twice")
        found[name] = load_records(path)
    return found


def shared_instances(models: dict[str, list[dict]]) -> set[str] | None:
    """The instance ids every --predictions model was scored on, which the baselines are then scored on: models
    scored on different instances cannot share one table of baselines."""
    if not models:
        return None
    sets = {name: {r["id"] for r in records} for name, records in models.items()}
    (first, ids), *others = sets.items()
    for name, other in others:
        if other != ids:
            raise ValueError(f"--predictions {first} ({len(ids)} instances) and {name} ({len(other)}) were scored on "
                             f"different instances ({len(ids ^ other)} differ): the baselines are scored on one set; "
                             "compare them in separate runs")
    return ids


def tables(results: dict, models: dict[str, dict]) -> str:
    out = []
    columns = columns_for(results["config"]["tasks"])
    for scope in SCOPES:
        ours = {name: r["table"][scope] for name, r in results["baselines"].items() if scope in r["table"]}
        if not ours:
            continue
        mine = {name: r["table"][scope] for name, r in models.items() if scope in r["table"]}
        where = "on the instances of --predictions" if mine else f"{results['config']['data']['split']} split"
        out.append(render(scope, [("paper LLMs (zero-shot, whole benchmark)", paper_rows(scope)),
                                  ("models (--predictions)", mine),
                                  (f"baselines ({where})", ours),
                                  ("best baseline per task, by its headline metric",
                                   best_rows(ours, results["config"]["tasks"]))],
                          columns))
    out.append("n per task (both scenarios): " + "; ".join(
        f"{what} " + ", ".join(f"{task} {n}" for task, n in counts.items())
        for what, counts in (("models", _counts(models)), ("baselines", _counts(results["baselines"]))) if counts))
    prov = results["provenance"]
    out.append(f"split manifest {prov['split_manifest_hash']}, seed {prov['seed']}, data {prov['data_fingerprint'][:16]}, "
               f"commit {prov['git_commit']}. ITP/RPP/STP/SSP in %, ER/VP/RSG judge 1-5 only with --judge-model, "
               f"BERTScore F1 only with --bertscore, ER S_int 1-5.")
    out.extend(f"note: {n}" for n in prov["notes"])
    return "\n\n".join(out)


def _counts(rows: dict[str, dict]) -> dict[str, int]:
    """task -> the instances scored (both scenarios), the largest over the rows that cover it."""
    counts: dict[str, int] = {}
    for row in rows.values():
        for task, scopes in row["aggregates"].items():
            counts[task] = max(counts.get(task, 0), scopes.get("both", {}).get("n", 0))
    return counts


def load(inputs: list[str], overrides: list[str]) -> RunConfig:
    return compose(RunConfig, overrides, "baselines", base=source_layer(inputs, "baselines"))


def run_baselines(config: RunConfig) -> None:
    given = model_records(config.predictions)
    only = shared_instances(given)
    results, records = run(config, only)
    models = {name: score(chosen) for name, chosen in given.items()}
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
