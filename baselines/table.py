"""A Table 5-style text table: the paper's LLM rows beside our rows, for one scope."""

from __future__ import annotations

from typing import Mapping

from rescue_train.evaluation.report import HEADERS as REPORT_HEADERS
from rescue_train.paper import TABLE5, TABLE5_COLUMNS, TABLE11

COLUMNS = (*TABLE5_COLUMNS, "er_s_int")
HEADERS = {**REPORT_HEADERS, "er_s_int": "ER S_int"}  # the report's column names, plus the judge-free S_int
DIGITS = {"er_bert": 4, "vp_bert": 4}


def paper_rows(scope: str) -> dict[str, dict[str, float]]:
    """The ten LLMs and their average: Table 5 for 'both', Table 11 for one scenario."""
    if scope == "both":
        rows = {f"{m} (paper)": dict(r) for m, r in TABLE5.items()}
        rows["LLM average (paper)"] = dict(TABLE11["Average"]["both"])
        return rows
    return {(f"{m} (paper)" if m != "Average" else "LLM average (paper)"): dict(r[scope]) for m, r in TABLE11.items()}


def best_of(rows: Mapping[str, Mapping[str, float | None]]) -> dict[str, float | None]:
    """Column-wise best over ``rows`` (None when no row has the column)."""
    best: dict[str, float | None] = {}
    for column in COLUMNS:
        values = [r.get(column) for r in rows.values() if r.get(column) is not None]
        best[column] = max(values) if values else None
    return best


def cell(value: float | None, column: str) -> str:
    return "-" if value is None else f"{value:.{DIGITS.get(column, 2)}f}"


def render(scope: str, sections: list[tuple[str, Mapping[str, Mapping[str, float | None]]]]) -> str:
    """One table: ``sections`` are (title, name -> row) groups printed one after the other."""
    names = [name for _, rows in sections for name in rows]
    width = max([len(n) for n in names] + [10])
    widths = [max(len(HEADERS[c]), 7) for c in COLUMNS]
    header = f"{'':<{width}}  " + "  ".join(f"{HEADERS[c]:>{w}}" for c, w in zip(COLUMNS, widths))
    lines = [f"== {scope} ==", header]
    for title, rows in sections:
        if not rows:
            continue
        lines.append(f"-- {title}")
        for name, row in rows.items():
            lines.append(f"{name:<{width}}  " + "  ".join(f"{cell(row.get(c), c):>{w}}"
                                                           for c, w in zip(COLUMNS, widths)))
    return "\n".join(lines)
