"""The report's paired statistics: each result minus the reference on the instances both scored (Holm-corrected
over the cells of one comparison), and the smallest difference each metric can detect."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..scoring.metric_uncertainty import paired_differences
from ..scoring.metrics import SCOPES, task_labels, task_metrics
from ..scoring.uncertainty import holm, minimal_detectable_difference
from ..tasks import TASKS, ReportColumn
from ..scoring.cells import uncertainty_of
from .tables import name_of, tell_apart

ALPHA, POWER = 0.05, 0.8


def compared_metrics(task: str) -> list[str]:
    """What a comparison tests per task: its table columns, and the metrics that name a header of their own
    (the expected accuracy of the rank protocol, say)."""
    metrics = [c.metric for c in TASKS[task].report_columns]
    return metrics + [name for name, m in task_metrics(task).items() if m.header and name not in metrics]


def reference_index(results: Sequence[dict[str, Any]], paths: Sequence[str], against: str | None) -> int:
    """Which result the others are compared with: the first, or the one ``against`` names (its folder or
    results.json, its label or its name in the tables)."""
    if against is None:
        return 0
    tell_apart(results)
    named = Path(against).expanduser().resolve()
    matches = [i for i, (r, p) in enumerate(zip(results, paths))
               if against in (r.get("label"), name_of(r)) or named in (Path(p).resolve(), Path(p, "results.json").resolve())]
    if len(matches) != 1:
        shown = ", ".join(f"{name_of(r)} ({p})" for r, p in zip(results, paths))
        raise ValueError(f"--against {against!r} names {'no' if not matches else 'more than one'} result; "
                         f"the results are: {shown}")
    return matches[0]


def compare_results(results: Sequence[dict[str, Any]], reference: int = 0) -> list[dict[str, Any]]:
    """Every other result minus ``results[reference]`` on the instances both scored: the cells of
    ``comparisons.json`` (``p_holm``: Holm over the cells of one comparison, i.e. one result against the
    reference)."""
    base = results[reference]
    cells = []
    for i, other in enumerate(results):
        if i == reference:
            continue
        comparison = []
        for task in other["aggregates"]:
            if task not in TASKS or task not in base["aggregates"]:
                continue
            mine = [r for r in other.get("records", []) if r["task"] == task]
            theirs = [r for r in base.get("records", []) if r["task"] == task]
            if not all("id" in r for r in mine + theirs):
                continue  # results written without instance ids cannot be paired
            comparison += paired_differences(task, mine, theirs, task_labels(task), compared_metrics(task))
        for cell_, p in zip(comparison, holm([c["p"] for c in comparison])):
            cell_["p_holm"] = p
        cells += [{"result": name_of(other), "against": name_of(base), **c} for c in comparison]
    return cells


def metric_column(task: str, metric: str) -> ReportColumn:
    for column in TASKS[task].report_columns:
        if column.metric == metric:
            return column
    shown = task_metrics(task).get(metric)
    if shown is not None and shown.header:
        return ReportColumn(f"{task}_{metric}", metric, f"{task.upper()} {shown.header}", shown.scale, shown.digits)
    return ReportColumn(f"{task}_{metric}", metric, f"{task.upper()} {metric}", 1, 3)


def _delta(cell_: dict[str, Any]) -> str:
    spec = metric_column(cell_["task"], cell_["metric"])
    d = spec.digits
    text = f"{cell_['diff'] * spec.scale:+.{d}f}"
    if cell_.get("ci"):
        low, high = (x * spec.scale for x in cell_["ci"])
        text += f" [{low:+.{d}f}, {high:+.{d}f}]" + ("*" if cell_.get("few_clusters") else "")
        if cell_.get("p_holm") is not None:
            text += f" (Holm p {cell_['p_holm']:.3g})"
    else:
        text += " (no interval)"
    significant = cell_.get("p_holm") is not None and cell_["p_holm"] < ALPHA
    return f"**{text}**" if significant else text


def delta_tables(cells: Sequence[dict[str, Any]]) -> str:
    """One table per comparison: a row per task and metric, a column per scenario."""
    parts = []
    for result, against in dict.fromkeys((c["result"], c["against"]) for c in cells):
        mine = [c for c in cells if (c["result"], c["against"]) == (result, against)]
        rows = list(dict.fromkeys((c["task"], c["metric"]) for c in mine))
        by_key = {(c["task"], c["metric"], c["scenario"]): c for c in mine}
        scopes = [s for s in SCOPES if any(c["scenario"] == s for c in mine)]
        lines = [f"#### {result} − {against}", "", "| Task | Metric | " + " | ".join(scopes) + " |",
                 "|---|---|" + "---:|" * len(scopes)]
        for task, metric in rows:
            shown = [_delta(by_key[task, metric, s]) if (task, metric, s) in by_key else "–" for s in scopes]
            lines.append(f"| {task.upper()} | {metric_column(task, metric).header} | " + " | ".join(shown) + " |")
        lines += _why_no_delta(mine)
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def _why_no_delta(cells: Sequence[dict[str, Any]]) -> list[str]:
    reasons: dict[str, list[str]] = {}
    for c in cells:
        if not c.get("ci"):
            reasons.setdefault(c.get("reason") or "no interval", []).append(f"{c['task'].upper()} {c['scenario']}")
    return ([""] + [f"No interval: {reason}: {', '.join(dict.fromkeys(where))}.  " for reason, where in reasons.items()]
            if reasons else [])


def power_rows(results: Sequence[dict[str, Any]], cells: Sequence[dict[str, Any]], reference: int = 0
               ) -> list[dict[str, Any]]:
    """The smallest difference detectable at 80% power and alpha 0.05 for each compared metric and scope of
    the reference result: for two independent results (SE of a difference sqrt(2) times the reference's
    SE) and, for each comparison made, from its observed paired SE."""
    base = results[reference]
    uncertainty = uncertainty_of(base)
    rows = []
    for task in base["aggregates"]:
        if task not in TASKS:
            continue
        for metric in compared_metrics(task):
            for scope in SCOPES:
                entry = uncertainty.get(task, {}).get(scope, {}).get(metric)
                if entry is None:
                    continue
                se, clusters = entry.get("se"), entry["clusters"]
                paired = {c["result"]: minimal_detectable_difference(c["se"], c["clusters"], alpha=ALPHA, power=POWER)
                          for c in cells if (c["task"], c["metric"], c["scenario"]) == (task, metric, scope)}
                rows.append({"task": task, "metric": metric, "scenario": scope, "n": entry["n"],
                             "clusters": clusters, "se": se,
                             "mdd_independent": minimal_detectable_difference(
                                 None if se is None else se * 2 ** 0.5, clusters, alpha=ALPHA, power=POWER),
                             "mdd_paired": paired, "reason": entry.get("reason")})
    return rows


def power_table(rows: Sequence[dict[str, Any]]) -> str:
    others = list(dict.fromkeys(name for r in rows for name in r["mdd_paired"]))
    lines = ["| Task | Metric | Scope | n | Clusters | SE | MDD, two independent results | "
             + "".join(f"MDD paired, {o} | " for o in others),
             "|---|---|---|---:|---:|---:|---:|" + "---:|" * len(others)]

    def shown(task: str, metric: str, value: float | None) -> str:
        spec = metric_column(task, metric)
        return "–" if value is None else f"{value * spec.scale:.{spec.digits}f}"

    for r in rows:
        lines.append(f"| {r['task'].upper()} | {metric_column(r['task'], r['metric']).header} | {r['scenario']} | {r['n']} | "
                     f"{r['clusters']} | {shown(r['task'], r['metric'], r['se'])} | "
                     f"{shown(r['task'], r['metric'], r['mdd_independent'])} | "
                     + "".join(f"{shown(r['task'], r['metric'], r['mdd_paired'].get(o))} | " for o in others))
    return "\n".join(lines)
