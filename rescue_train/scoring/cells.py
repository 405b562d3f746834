"""A result's table cells, as every report and console summary writes them: the value in the tables' units
with its 95% interval as ``[low, high]`` (``[–]`` where it has none): the intervals respect the metric's range and
are not symmetric, so a half-width would misstate them. The evaluation report, eval's and a
classifier run's console summaries and the model cards all read these."""

from __future__ import annotations

from typing import Any

from ..tasks import TASKS, report_columns
from .metric_uncertainty import result_uncertainty
from .metrics import task_labels


def uncertainty_of(results: dict[str, Any]) -> dict[str, Any]:
    """results.json's ``uncertainty``; for results written before it existed, computed from the records
    (once: kept in the loaded document)."""
    if "uncertainty" not in results:
        records = results.get("records", [])
        results["uncertainty"] = {
            task: result_uncertainty(task, [r for r in records if r["task"] == task], task_labels(task), scopes)
            for task, scopes in results["aggregates"].items() if task in TASKS}
    return results["uncertainty"]


def _column_task() -> dict[str, str]:
    return {c.key: t.name for t in TASKS.values() for c in t.report_columns}


def row_errors(results: dict[str, Any], scope: str, source: str = "") -> dict[str, dict | None]:
    """Column key -> the uncertainty entry of that cell (``source``: ``human.`` for the real turns)."""
    uncertainty, known = uncertainty_of(results), report_columns()
    return {key: uncertainty.get(task, {}).get(scope, {}).get(source + known[key].metric)
            for key, task in _column_task().items()}


def cell(column: str, value: float | None, error: dict | None = None) -> str:
    """A table cell: the value, and ``[low, high]``, its interval, when it has one (``*``: fewer than
    FEW_CLUSTERS clusters), ``[–]`` when it was computed without one (the table's notes say why), so an absent
    interval never reads as no uncertainty. The report's tables and eval's console summary both read this."""
    if value is None:
        return "–"
    spec = report_columns()[column]
    text = f"{value:.{spec.digits}f}"
    if error and error.get("ci"):
        low, high = (bound * spec.scale for bound in error["ci"])
        text += f" [{low:.{spec.digits}f}, {high:.{spec.digits}f}]" + ("*" if error.get("few_clusters") else "")
    elif error:
        text += " [–]"
    return text


def task_cells(results: dict[str, Any], task: str, scope: str = "both") -> list[str]:
    """``header value [low, high]`` of each of the task's table columns, as the report's cells read."""
    errors = row_errors(results, scope)
    return [f"{c.header} {cell(c.key, results['table5'].get(scope, {}).get(c.key), errors.get(c.key))}"
            for c in TASKS[task].report_columns if results["table5"].get(scope, {}).get(c.key) is not None]
