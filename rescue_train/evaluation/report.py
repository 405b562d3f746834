"""``rescue-train report RESULTS...``: paper-style tables and plots from results.json files.

* Table 5 layout (both scenarios pooled) and Table 11 layout (couple / family / both), with the paper's
  ten LLM rows beside ours;
* tasks beyond the paper (RSG, or any registered task) in their own columns (``Task.report_columns``),
  per scenario, each model followed by the human reference where the task scores one (RSG: the real
  therapists' turns under the same judge);
* parse failures and judged counts per task;
* plots (``--out``): per-class recall and confusion matrices per scenario for the tasks with a fixed label
  set (ITP, RPP, SSP).

RESULTS are results.json files or run folders holding one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from .. import paper
from ..data import taxonomy
from ..scoring.metrics import NO_ANSWER, table5_row, task_labels, top1
from ..tasks import TASKS, report_columns


def load_results(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    if not file.exists():
        raise FileNotFoundError(f"{file}: no results.json (run rescue-train eval first)")
    data = json.loads(file.read_text())
    if "table5" not in data or "aggregates" not in data:
        raise ValueError(f"{file}: not an evaluation results file (no table5/aggregates)")
    return data


def name_of(results: dict[str, Any]) -> str:
    cfg = results.get("config", {})
    name = f"{results.get('label', '?')} [{cfg.get('protocol', '?')}]"
    if cfg.get("judge", {}).get("vp_scale") == "ref0to6":
        name += " (VP judge 0-6)"
    return name


def cell(column: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.{report_columns()[column].digits}f}"


def _table(rows: Sequence[tuple[str, dict[str, float | None]]], columns: Sequence[str] = paper.TABLE5_COLUMNS) -> str:
    known = report_columns()
    lines = ["| Model | " + " | ".join(known[c].header for c in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    lines += ["| " + name + " | " + " | ".join(cell(c, values.get(c)) for c in columns) + " |" for name, values in rows]
    return "\n".join(lines)


def table5(results: Sequence[dict[str, Any]], with_paper: bool = True) -> str:
    rows = [(f"{m} (paper)", paper.TABLE5[m]) for m in paper.TABLE5_MODELS] if with_paper else []
    rows += [(name_of(r), r["table5"]["both"]) for r in results]
    return _table(rows)


def table11(results: Sequence[dict[str, Any]], with_paper: bool = True) -> str:
    parts = []
    for scope in paper.TABLE11_SCENARIOS:
        rows = [(f"{m} (paper)", paper.TABLE11[m][scope]) for m in paper.TABLE11] if with_paper else []
        rows += [(name_of(r), r["table5"][scope]) for r in results]
        parts.append(f"#### {scope.capitalize()}\n\n{_table(rows)}")
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
                rows.append((name_of(r), table5_row(r["aggregates"], scope)))
                human = table5_row(r["aggregates"], scope, source="human")
                if any(human.get(c) is not None for c in columns):
                    rows.append((f"real therapists (same judge as {name_of(r)})", human))
            if rows:
                parts.append(f"#### {task.name.upper()}, {scope}\n\n{_table(rows, columns)}")
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


def render(results: Sequence[dict[str, Any]], with_paper: bool = True) -> str:
    notes = ("ITP/RPP/STP/SSP in percent; ER LLM = S_ER = (S_emo + S_int)/2 and VP LLM = judge score, both 1-5; "
             "BERT = BERTScore F1. Our rows are micro averages; '–' = not computed (e.g. no judge).")
    further = further_tasks(results)
    return "\n\n".join([
        "# RESCUE-Bench results", "## Table 5 layout (couple and family pooled)", notes, table5(results, with_paper),
        "## Table 11 layout (per scenario)", table11(results, with_paper),
        *(["## Tasks beyond the paper", further] if further else []),
        "## Parse failures (counted as wrong answers)", failures(results)]) + "\n"


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text).strip("_")


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """Per-class recall bars (RPP, SSP) and confusion matrices (ITP, RPP, SSP) per scenario."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import ConfusionMatrixDisplay

    written = []
    stem = _slug(name_of(results))
    fixed = [t for t in results["aggregates"] if t in TASKS and task_labels(t) is not None]
    for task in fixed:
        for scenario in taxonomy.SCENARIOS:
            records = [r for r in results["records"] if r["task"] == task and r["scenario"] == scenario]
            if not records:
                continue
            labels = list(task_labels(task)[scenario])
            per_class = results["aggregates"][task].get(scenario, {}).get("per_class")
            if per_class:
                fig, ax = plt.subplots(figsize=(7, 0.4 * len(per_class) + 1.2))
                names = list(per_class)
                ax.barh(names, [per_class[n]["recall"] for n in names])
                ax.set_xlim(0, 1)
                ax.invert_yaxis()
                ax.set_xlabel("recall")
                ax.set_title(f"{task.upper()} per-class recall, {scenario}: {name_of(results)}", fontsize=9)
                for i, n in enumerate(names):
                    ax.text(0.01, i, f"n={per_class[n]['support']}", va="center", fontsize=7)
                written.append(_save(fig, out / f"{stem}_{task}_{scenario}_recall.png"))
            gold = [r["gold"] for r in records]
            pred = [top1(r["prediction"]) for r in records]
            # Labels outside the taxonomy (other data versions) still get a row; unparsed answers a column.
            shown = list(dict.fromkeys(labels + gold + [p for p in pred if p != NO_ANSWER]))
            shown += [NO_ANSWER] if NO_ANSWER in pred else []
            fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(shown), 1.0 + 0.55 * len(shown)))
            ConfusionMatrixDisplay.from_predictions(gold, pred, labels=shown, ax=ax, colorbar=False,
                                                    xticks_rotation="vertical")
            ax.set_title(f"{task.upper()} {scenario}", fontsize=9)
            written.append(_save(fig, out / f"{stem}_{task}_{scenario}_confusion.png"))
    return written


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
