"""An evaluation's results document: what it says of its records (counts, token usage, aggregates, uncertainty,
the report's rows), beside the provenance of the model, data, split and software."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..executor import executor_info
from ..io import write_json_atomic
from ..provenance import config_hash, git_commit, versions
from ..scoring.metric_uncertainty import result_uncertainty
from ..scoring.metrics import aggregate, table5_row, task_labels
from .config import to_dict
from .models import model_name
from .protocols import decoding
from .run_folder import RESULTS_FORMAT, scoring_identity
from .usage import usage_totals


def scored(tasks: list[str], records: list[dict], judge_on_failure: str) -> dict[str, Any]:
    """What a results document says of its ``records``: counts, token usage, aggregates, uncertainty and the
    report's rows (also the pooled results of ``rescue-train cv``)."""
    by_task = {task: [r for r in records if r["task"] == task] for task in tasks}
    aggregates = {task: aggregate(task, by_task[task], task_labels(task), judge_on_failure) for task in tasks}
    uncertainty = {task: result_uncertainty(task, by_task[task], task_labels(task), aggregates[task])
                   for task in tasks}
    return {
        "counts": {task: {scope: {k: agg[k] for k in ("n", "parse_failures", "truncated", "refused", "empty", "judge_failures")
                                  if k in agg}
                          for scope, agg in aggregates[task].items()} for task in tasks},
        "usage": usage_totals(records),
        "aggregates": aggregates,
        # Every numeric metric's SE and 95% interval per task and scope, units as clusters (scoring/uncertainty.py).
        "uncertainty": uncertainty,
        "table5": {scope: table5_row(aggregates, scope) for scope in ("couple", "family", "both")},
        # The same columns for the gold answers themselves, where a task scores them (RSG's real turns).
        "human_reference": {scope: table5_row(aggregates, scope, source="human") for scope in ("couple", "family", "both")},
    }


def label(name: str, calibration: str) -> str:
    """A results row's label: the model's, and the calibration that ranked it when there is one."""
    return name if calibration == "none" else f"{name} [{calibration}]"


def write_results(cfg, spec, variant, data, backend_info, identity, folder, records) -> dict:
    results = {
        "format": RESULTS_FORMAT,
        "label": label(variant.name if variant.adapter else model_name(spec.model), cfg.calibration),
        "output_dir": str(folder.path),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": to_dict(cfg),
        "prediction_hash": config_hash(identity),
        "scoring_hash": config_hash(scoring_identity(cfg)),
        "model": {"base": spec.model, "name": model_name(spec.model), "tokenizer": spec.tokenizer,
                  "adapter": identity["adapter"], "adapter_weights": identity["adapter_weights"],
                  "training_run": str(variant.run.folder) if variant.run else None,
                  "training_provenance": variant.provenance},
        # Scored on samples its training run trained or validated on (allow_training_data=true): which, how many.
        "includes_training_data": variant.training_data is not None,
        "training_data": variant.training_data,
        "backend": backend_info,
        "decoding": decoding(cfg.protocol, cfg.constrained, backend_info, cfg.data.answer_format),
        "versions": versions(),
        "git_commit": git_commit(),
        "executor": executor_info(),
        "seed": cfg.seed,
        "data": {"source": data.source, "fingerprint": data.fingerprint, "notes": data.notes},
        "split": data.split,
        **({"calibration": variant.calibration} if variant.calibration else {}),
        **scored(cfg.tasks, records, cfg.judge.on_failure),
        "records": records,
    }
    write_json_atomic(folder.path / "results.json", results)
    return results
