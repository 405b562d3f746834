"""A Table 5-style text table: the paper's LLM rows beside our rows, for one scope."""

from __future__ import annotations

from typing import Mapping, Sequence

from rescue_train.paper import TABLE5, TABLE5_COLUMNS, TABLE11
from rescue_train.paper import TASKS as PAPER_TASKS
from rescue_train.tasks import TASKS, report_columns

COLUMNS = (*TABLE5_COLUMNS, "er_s_int")
S_INT = ("er_s_int", "ER S_int", 2)  # the judge-free S_int, beside the report's columns


def columns_for(tasks: Sequence[str]) -> tuple[str, ...]:
    """The paper's columns plus the report columns of the run's tasks beyond the paper."""
    return COLUMNS + tuple(c.key for t in tasks if t not in PAPER_TASKS for c in TASKS[t].report_columns)


def header(column: str) -> str:
    return S_INT[1] if column == S_INT[0] else report_columns()[column].header


def digits(column: str) -> int:
    return S_INT[2] if column == S_INT[0] else report_columns()[column].digits


def paper_rows(scope: str) -> dict[str, dict[str, float]]:
    """The ten LLMs and their average: Table 5 for 'both', Table 11 for one scenario."""
    if scope == "both":
        rows = {f"{m} (paper)": dict(r) for m, r in TABLE5.items()}
        rows["LLM average (paper)"] = dict(TABLE11["Average"]["both"])
        return rows
    return {(f"{m} (paper)" if m != "Average" else "LLM average (paper)"): dict(r[scope]) for m, r in TABLE11.items()}


def best_rows(rows: Mapping[str, Mapping[str, float | None]], tasks: Sequence[str]) -> dict[str, dict[str, float]]:
    """For each task, the whole row of the baseline with the largest headline metric (``Task.headline``; the
    first such baseline on a tie), restricted to the task's columns and named ``TASK (metric): baseline``."""
    best: dict[str, dict[str, float]] = {}
    for task in tasks:
        key = TASKS[task].headline
        scored = [name for name, row in rows.items() if row.get(key) is not None]
        if not scored:
            continue
        name = max(scored, key=lambda n: rows[n][key])
        columns = {c.key for c in TASKS[task].report_columns} | ({S_INT[0]} if task == "er" else set())
        best[f"{task.upper()} ({header(key)}): {name}"] = {c: v for c, v in rows[name].items() if c in columns}
    return best


def cell(value: float | None, column: str) -> str:
    return "-" if value is None else f"{value:.{digits(column)}f}"


def render(scope: str, sections: list[tuple[str, Mapping[str, Mapping[str, float | None]]]],
           columns: Sequence[str] = COLUMNS) -> str:
    """One table: ``sections`` are (title, name -> row) groups printed one after the other."""
    names = [name for _, rows in sections for name in rows]
    width = max([len(n) for n in names] + [10])
    widths = [max(len(header(c)), 7) for c in columns]
    head = f"{'':<{width}}  " + "  ".join(f"{header(c):>{w}}" for c, w in zip(columns, widths))
    lines = [f"== {scope} ==", head]
    for title, rows in sections:
        if not rows:
            continue
        lines.append(f"-- {title}")
        for name, row in rows.items():
            lines.append(f"{name:<{width}}  " + "  ".join(f"{cell(row.get(c), c):>{w}}"
                                                           for c, w in zip(columns, widths)))
    return "\n".join(lines)
