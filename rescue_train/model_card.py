"""Hugging Face model cards for training runs, so ``hf upload`` (huggingface_hub's CLI) publishes a usable model.

Every run folder gets a ``README.md``: metadata (base model, library, tags, and the test results in the Hub's
``model-index`` form once evaluated) and a body that says what was trained on which data, on which fold,
and under which licence terms. ``rescue-train card RUN_DIR [EVAL_DIR ...]`` rewrites it with evaluation
results; a classifier run carries its own test-fold metrics from the start.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from .io import read_json
from .provenance import describe_split, weights_digest
from .scoring.cells import cell, row_errors
from .tasks import report_columns

DATASET_NAME = "RESCUE-Bench"
LICENCE_NOTE = ("RESCUE-Bench is released for research use only. This model was trained on it: use it for "
                "research, and check the base model's own licence before any other use.")
TEMPLATE = """\
---
{{ card_data }}
---

# {{ title }}

{{ summary }}
{% for note in fold_notes %}
- {{ note }}{% endfor %}

| | |
| --- | --- |
{% for key, value in facts %}| {{ key }} | {{ value }} |
{% endfor %}
{% if results %}
## Test results

{% for scope_results in results %}Evaluated as `{{ scope_results.source }}`: {{ scope_results.protocol }} protocol, {{ scope_results.split }}; n = {{ scope_results.n }} instances.

| scope | {{ scope_results.columns | join(" | ") }} |
| --- |{% for _ in scope_results.columns %} --- |{% endfor %}
{% for scope, row in scope_results.rows %}| {{ scope }} | {{ row | join(" | ") }} |
{% endfor %}
{% endfor %}{% else %}
Not evaluated yet: `rescue-train eval run=THIS_FOLDER`, then `rescue-train card THIS_FOLDER EVAL_OUTPUT`.
{% endif %}{% if pooled %}
## Cross-validation

This adapter is the fold-{{ pooled.fold }} model of a cross-validation (`rescue-train cv`): the model of each test
fold predicted that fold's instances, whose couples and families it never trained on, and the predictions of
all folds ({{ pooled.folds }}) are pooled into one row over {{ pooled.n }} instances, as the paper's rows cover the
benchmark: `{{ pooled.path }}` (`rescue-train report` reads it). The rows below are that pooled row, not this
adapter's alone.{% for note in pooled.notes %} {{ note }}{% endfor %}

| scope | {{ pooled.table.columns | join(" | ") }} |
| --- |{% for _ in pooled.table.columns %} --- |{% endfor %}
{% for scope, row in pooled.table.rows %}| {{ scope }} | {{ row | join(" | ") }} |
{% endfor %}{% endif %}
## Use

{{ usage }}

## Licence

{{ licence }}

Made with rescue-train.
"""


def _hub_id(name: str | None) -> str | None:
    """A base model the Hub can link: ``owner/name``, not a local folder or one of our presets."""
    if not name or name.startswith(("/", ".", "~", "package:")) or name.count("/") != 1 or Path(name).exists():
        return None
    return name


def _counts(results: dict[str, Any]) -> str:
    """Instances per task, both scenarios: ``ssp 23, rpp 15``."""
    return ", ".join(f"{task} {scopes.get('both', {}).get('n', 0)}"
                     for task, scopes in results.get("aggregates", {}).items())


def _protocol(results: dict[str, Any]) -> str:
    return str(results.get("config", {}).get("protocol", "?"))


def _results_table(results: dict[str, Any]) -> dict[str, Any]:
    """The card's table of a result: its cells as the report writes them (value [low, high], its 95%
    interval, ``[–]`` without one)."""
    scopes = [s for s in ("couple", "family", "both") if s in results.get("table5", {})]
    columns = [c for c in results["table5"][scopes[-1]] if results["table5"][scopes[-1]][c] is not None]
    rows = []
    for scope in scopes:
        errors = row_errors(results, scope) if results.get("records") or results.get("uncertainty") else {}
        rows.append((scope, [cell(c, results["table5"][scope][c], errors.get(c)) for c in columns]))
    return {"source": results.get("label", "eval"), "protocol": _protocol(results), "split": describe_split(results),
            "n": _counts(results) or "?", "columns": [report_columns()[c].header for c in columns], "rows": rows}


def _eval_results(results: Sequence[dict[str, Any]]):
    """The Hub's model-index entries: one per metric of each result, the protocol and split telling results
    apart (each is one task-and-dataset entry, its n and limit in the dataset's args)."""
    from huggingface_hub import EvalResult

    return [EvalResult(task_type="text-classification", task_name=f"RESCUE-Bench, {_protocol(r)} protocol",
                       dataset_type="rescue-bench", dataset_name=DATASET_NAME, dataset_config=_protocol(r),
                       dataset_split=describe_split(r),
                       dataset_args={"instances": _counts(r), "limit": r.get("config", {}).get("limit")},
                       metric_type=column, metric_value=round(value, 4), metric_name=f"{column} (both scenarios)")
            for r in results for column, value in r["table5"].get("both", {}).items() if value is not None]


def of_this_run(results: dict[str, Any], run_dir: Path, prov: dict[str, Any]) -> bool:
    """Whether an evaluation result is of this run's model: its adapter's weights (wherever they were loaded
    from), or, for a merged model, this run's training provenance."""
    model = results.get("model") or {}
    if model.get("adapter_weights"):
        return model["adapter_weights"] == weights_digest(run_dir / str(prov.get("adapter", "adapter")))
    return bool(model.get("training_provenance")) and model["training_provenance"] == prov


def choose_results(run_dir: str | Path, results: Sequence[dict[str, Any]]) -> tuple[list[dict], list[dict]]:
    """(this run's results, each once: the newest of those evaluated alike; the others, left out)."""
    prov = json.loads((Path(run_dir) / "provenance.json").read_text(encoding="utf-8"))
    mine, others = {}, []
    for r in sorted(results, key=lambda r: str(r.get("created", ""))):
        if of_this_run(r, Path(run_dir), prov):
            mine[(_protocol(r), describe_split(r))] = r  # one entry per protocol and split
        else:
            others.append(r)
    return list(mine.values()), others


def _lora_facts(prov: dict[str, Any]) -> tuple[str, list[tuple[str, Any]], str]:
    data = prov.get("data", {})
    facts = [("recipe", prov.get("recipe")), ("tasks (mixing weights)", json.dumps(prov.get("tasks", {}))),
             ("base model", prov.get("model_path")), ("model preset", prov.get("model_preset")),
             ("data source fingerprint", data.get("source_fingerprint")),
             ("training data fingerprint", data.get("data_fingerprint")),
             ("split manifest hash", prov.get("manifest_hash")), ("test fold (never trained on)", data.get("test_fold")),
             ("seed", prov.get("seed")), ("steps", prov.get("global_step")), ("rescue-train commit", prov.get("git_commit"))]
    usage = ("A PEFT LoRA adapter (`adapter/`). Load it on its base model with "
             "`PeftModel.from_pretrained(base, \"adapter\")`, serve it with "
             "`vllm serve BASE --enable-lora --lora-modules rescue=adapter`, or evaluate it with "
             "`rescue-train eval run=THIS_FOLDER`.")
    return f"LoRA adapter of {prov.get('model_path')} for RESCUE-Bench ({prov.get('recipe')})", facts, usage


def _classifier_facts(prov: dict[str, Any]) -> tuple[str, list[tuple[str, Any]], str]:
    facts = [("recipe", prov.get("recipe")), ("task", prov.get("task")), ("learner", prov.get("learner")),
             ("rebalancing strategy", f"{prov.get('strategy')}: {prov.get('strategy_summary')}"),
             ("data source fingerprint", prov.get("source_fingerprint")),
             ("training data fingerprint", prov.get("data_fingerprint")),
             ("split manifest hash", prov.get("manifest_hash")), ("test fold (never trained on)", prov.get("test_fold")),
             ("seed", prov.get("seed")), ("rescue-train commit", prov.get("git_commit"))]
    usage = ("A class-balanced classifier with its test-fold predictions (`predictions.jsonl`, the evaluator's "
             "record format) and metrics (`metrics.json`); `rescue-train baselines DATA --predictions "
             "NAME=THIS_FOLDER` sets it beside the baselines.")
    return f"RESCUE-Bench {prov.get('task', '').upper()} classifier ({prov.get('strategy')})", facts, usage


def trained_on(source: str | None, fingerprint: str | None) -> str:
    """What the run trained on: the bundled synthetic samples, or a user's data named by file name and
    content fingerprint (never its path, which is the machine's)."""
    if source == "bundled":
        return (f"Trained with rescue-train on the bundled synthetic samples (made-up dialogues in {DATASET_NAME}'s "
                f"format, shipped for demonstrations and tests; content fingerprint {fingerprint}), not on "
                f"{DATASET_NAME} itself: a demonstration model, not one to use.")
    return (f"Trained with rescue-train on `{Path(str(source)).name}` (content fingerprint {fingerprint}), data in "
            f"{DATASET_NAME}'s format (relation-aware multi-party emotional support).")


def _pooled(cross_validation: dict[str, Any] | None) -> dict[str, Any] | None:
    """The card's cross-validation section: ``{"results": pooled results, "path": where they are, "fold": F}``."""
    if not cross_validation:
        return None
    results = cross_validation["results"]
    return {"fold": cross_validation["fold"], "path": cross_validation["path"], "table": _results_table(results),
            "folds": ", ".join(map(str, results["split"]["folds"])), "n": len(results.get("records", [])),
            "notes": results.get("notes", [])}


def write_model_card(run_dir: str | Path, eval_results: Sequence[dict[str, Any]] = (),
                     cross_validation: dict[str, Any] | None = None) -> Path:
    """Write ``run_dir/README.md`` from the run's provenance and, if given, evaluation results documents (this
    model's own) and the pooled results of the cross-validation the run is one fold of (linked, shown apart)."""
    from huggingface_hub import ModelCard, ModelCardData

    run_dir = Path(run_dir)
    prov = read_json(run_dir / "provenance.json", {"kind": str}, "a training run's provenance")
    is_lora = prov.get("kind") == "lora_sft"
    title, facts, usage = (_lora_facts if is_lora else _classifier_facts)(prov)
    results = choose_results(run_dir, eval_results)[0]  # only this run's model, each protocol and split once
    if not is_lora and (run_dir / "metrics.json").exists() and not results:
        # A classifier run evaluated its own test fold; shown through the same table as eval results.
        from .scoring.metrics import table5_row

        aggregates = {prov["task"]: read_json(run_dir / "metrics.json", {}, "a classifier run's metrics")}
        records = [json.loads(line) for line in (run_dir / "predictions.jsonl").read_text().splitlines()]
        results = [{"label": "the run's own test-fold predictions", "aggregates": aggregates, "records": records,
                    "split": {"scheme": "kfold", "test_fold": prov.get("test_fold")},
                    "table5": {s: table5_row(aggregates, s) for s in ("couple", "family", "both")
                               if s in aggregates[prov["task"]]}}]
    tasks = sorted(prov.get("tasks", {})) if is_lora else [prov.get("task")]
    source = prov.get("data", {}) if is_lora else prov  # where each kind of run keeps its data's provenance
    data = ModelCardData(
        base_model=_hub_id(prov.get("model_path")), library_name="peft" if is_lora else None,
        tags=["rescue-bench", "emotional-support", "couple-and-family-therapy", *(["lora"] if is_lora else []),
              *[f"rescue-{t}" for t in tasks if t]],
        eval_results=_eval_results(results) or None, model_name=title if results else None)
    card = ModelCard.from_template(
        data, template_str=TEMPLATE, title=title, licence=LICENCE_NOTE, usage=usage,
        summary=trained_on(source.get("source"), source.get("source_fingerprint")),
        fold_notes=prov.get("fold_notes") or source.get("fold_notes") or [],
        facts=[(k, "–" if v is None else v) for k, v in facts], results=[_results_table(r) for r in results],
        pooled=_pooled(cross_validation))
    path = run_dir / "README.md"
    card.save(path)
    return path


def read_results(path: str) -> list[dict[str, Any]]:
    target = Path(path)
    files = [target] if target.is_file() else sorted(target.rglob("results.json"))
    if not files:
        raise FileNotFoundError(f"no results.json in {target}")
    return [read_json(f, {"table5": dict}, "an evaluation results file") for f in files]
