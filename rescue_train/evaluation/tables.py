"""The report's result tables: rows named after their model, protocol and split, the paper's rows beside ours,
cells with their 95% interval ([low, high]), and the tasks beyond the paper in their own tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from .. import paper
from ..provenance import describe_split
from ..scoring.cells import cell, row_errors, uncertainty_of
from ..scoring.metrics import table5_row
from ..tasks import TASKS, report_columns
from .models import model_name


def _plain_name(results: dict[str, Any]) -> str:
    """The model (the base model, and the adapter) and the protocol."""
    if "report_name" in results:
        return results["report_name"]
    cfg, model = results.get("config", {}), results.get("model") or {}
    label = str(results.get("label", "?"))
    base = model.get("name") or (model_name(model["base"]) if model.get("base") else None)
    if model.get("adapter") and base and base not in label:
        label = f"{base} + {label}"
    free = results.get("decoding") not in (None, "constrained")  # the default goes unsaid
    name = f"{label} [{cfg.get('protocol', '?')}{', ' + results['decoding'] if free else ''}]"
    if cfg.get("judge", {}).get("vp_scale") == "ref0to6":
        name += " (VP judge 0-6)"
    return name


def name_of(results: dict[str, Any]) -> str:
    """A result's row name; a result scored on its model's own training data says so."""
    return _plain_name(results) + (" (includes training data)" if results.get("includes_training_data") else "")


def instances_in(results: dict[str, Any], scope: str, tasks: Sequence[str] | None = None) -> int:
    return sum(scopes.get(scope, {}).get("n", 0) for task, scopes in results["aggregates"].items()
               if tasks is None or task in tasks)


def tell_apart(results: Sequence[dict[str, Any]]) -> None:
    """Results that would share a name in the tables (one model and protocol, other settings) are named
    after their folders too (``report_name``), so that rows, comparisons and plot files stay apart."""
    names = [_plain_name(r) for r in results]
    for r, name in zip(results, names):
        if names.count(name) > 1 and "report_name" not in r:
            r["report_name"] = f"{name} ({Path(r.get('output_dir') or '?').name})"


Row = tuple[str, dict[str, float | None], dict[str, dict | None]]
About = dict[str, tuple[str, str]]  # row name -> (n, split)


def _table(rows: Sequence[Row], columns: Sequence[str] = paper.TABLE5_COLUMNS, about: About | None = None) -> str:
    """A markdown table: a row per model, a column per metric; ``about`` adds each row's n and split."""
    known = report_columns()
    extra = ["n", "Split"] if about is not None else []
    lines = ["| Model | " + " | ".join([known[c].header for c in columns] + extra) + " |",
             "|---|" + "---:|" * len(columns) + "---:|---|" * bool(extra)]
    for name, values, errors in rows:
        cells = [cell(c, values.get(c), errors.get(c)) for c in columns]
        lines.append("| " + " | ".join([name, *cells, *(about or {}).get(name, ("–", "–"))[:len(extra)]]) + " |")
    return "\n".join(lines + _why_no_interval(rows, columns))


def _paper_n(scope: str) -> str:
    """The instances of the paper's six tasks in a scope (Table 6)."""
    scenarios = ("couple", "family") if scope == "both" else (scope,)
    return f"{sum(paper.TABLE6[t][f'{s}_instances'] for t in paper.TASKS for s in scenarios):,}"


def _about(results: Sequence[dict[str, Any]], scope: str, with_paper: bool, tasks: Sequence[str] = paper.TASKS,
           paper_rows: Sequence[str] = ()) -> About:
    about = {f"{m} (paper)": (_paper_n(scope), "whole benchmark") for m in paper_rows} if with_paper else {}
    about.update({name_of(r): (str(instances_in(r, scope, tasks)), describe_split(r)) for r in results})
    return about


def _why_no_interval(rows: Sequence[Row], columns: Sequence[str]) -> list[str]:
    """One line per reason, naming the rows and columns whose value has no interval."""
    known, reasons = report_columns(), {}
    for name, values, errors in rows:
        for c in columns:
            error = errors.get(c)
            if values.get(c) is not None and error and not error.get("ci"):
                headers = reasons.setdefault(error.get("reason") or "no interval", {}).setdefault(name, [])
                headers += [] if known[c].header in headers else [known[c].header]
    if not reasons:
        return []
    lines = [""]
    for reason, where in reasons.items():
        shown = "; ".join(f"{name} ({', '.join(headers)})" for name, headers in where.items())
        lines.append(f"No interval: {reason}: {shown}.  ")
    return lines


def _paper_rows(table: dict[str, dict[str, float | None]], names: Sequence[str]) -> list[Row]:
    return [(f"{m} (paper)", table[m], {}) for m in names]


def table5(results: Sequence[dict[str, Any]], with_paper: bool = True) -> str:
    rows = _paper_rows(paper.TABLE5, paper.TABLE5_MODELS) if with_paper else []
    rows += [(name_of(r), r["table5"]["both"], row_errors(r, "both")) for r in results]
    return _table(rows, about=_about(results, "both", with_paper, paper_rows=paper.TABLE5_MODELS))


def table11(results: Sequence[dict[str, Any]], with_paper: bool = True) -> str:
    parts = []
    for scope in paper.TABLE11_SCENARIOS:
        rows = [(f"{m} (paper)", paper.TABLE11[m][scope], {}) for m in paper.TABLE11] if with_paper else []
        rows += [(name_of(r), r["table5"][scope], row_errors(r, scope)) for r in results]
        parts.append(f"#### {scope.capitalize()}\n\n"
                     f"{_table(rows, about=_about(results, scope, with_paper, paper_rows=list(paper.TABLE11)))}")
    return "\n\n".join(parts)


def further_tasks(results: Sequence[dict[str, Any]]) -> str:
    """Tables of the evaluated tasks beyond the paper's six, per scope; each model row is followed by the
    human reference row when the task scores the gold answers too."""
    tasks = [t for t in TASKS.values() if t.name not in paper.TASKS and t.report_columns
             and any(t.name in r["aggregates"] for r in results)]
    parts = []
    for task in tasks:
        columns = [c.key for c in task.report_columns]
        if task.report_note:
            parts.append(task.report_note)
        for scope in ("couple", "family", "both"):
            rows = []
            for r in results:
                if scope not in r["aggregates"].get(task.name, {}):
                    continue
                rows.append((name_of(r), table5_row(r["aggregates"], scope), row_errors(r, scope)))
                human = table5_row(r["aggregates"], scope, source="human")
                if any(human.get(c) is not None for c in columns):
                    rows.append((f"real therapists (same judge as {name_of(r)})", human,
                                 row_errors(r, scope, "human.")))
            if rows:
                about = _about(results, scope, False, tasks=[task.name])
                parts.append(f"#### {task.name.upper()}, {scope}\n\n{_table(rows, columns, about)}")
    return "\n\n".join(parts)


def failures(results: Sequence[dict[str, Any]]) -> str:
    lines = ["| Model | Task | n | Parse failures | of which truncated | refused | Judged | Judge failures |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        for task, scopes in r["aggregates"].items():
            both = scopes.get("both", {})
            counts = [both.get(k, "–")
                      for k in ("n", "parse_failures", "truncated", "refused", "judged", "judge_failures")]
            lines.append(f"| {name_of(r)} | {task} | " + " | ".join(map(str, counts)) + " |")
    return "\n".join(lines)


TAIL_COLUMNS = (("accuracy", "acc.", 100), ("macro_f1", "macro-F1", 100), ("balanced_accuracy", "bal. acc.", 100),
                ("few_recall", "few rec.", 100))


def tail_table(results: Sequence[dict[str, Any]], scope: str = "both") -> str:
    """Per closed-set task and result: accuracy, macro-F1, balanced accuracy and the rare classes' recall (each
    with its 95% interval, [–] where none could be given), and the label-collapse line: the labels predicted of those in the gold,
    and the entropy of the predicted labels in bits (0: one label for every instance)."""
    lines = ["| Model | Task | n | " + " | ".join(h for _, h, _ in TAIL_COLUMNS) + " | labels predicted / gold | "
             "entropy (bits) | few classes |", "|---|---|---:|" + "---:|" * len(TAIL_COLUMNS) + "---:|---:|---|"]
    for r in results:
        errors = uncertainty_of(r)
        for task, scopes in r["aggregates"].items():
            agg = scopes.get(scope)
            if not agg or not TASKS[task].closed_set:
                continue

            def shown(metric: str, scale: float = 1.0, digits: int = 1) -> str:
                value = agg.get(metric)
                if value is None:
                    return "–"
                entry = errors.get(task, {}).get(scope, {}).get(metric)
                ci = entry.get("ci") if entry else None
                interval = (f" [{ci[0] * scale:.{digits}f}, {ci[1] * scale:.{digits}f}]" if ci else
                            " [–]" if entry else "")
                return f"{value * scale:.{digits}f}{interval}"
            lines.append(f"| {name_of(r)} | {task} | {agg.get('n')} | " +
                         " | ".join(shown(m, s) for m, _, s in TAIL_COLUMNS) +
                         f" | {agg.get('predicted_labels', 0):.0f} / {agg.get('gold_labels')} | "
                         f"{shown('prediction_entropy', 1.0, 2)} | {', '.join(agg.get('few_classes') or [])} |")
    return "\n".join(lines) if len(lines) > 2 else ""
