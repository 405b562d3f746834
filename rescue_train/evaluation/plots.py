"""The report's figures: every model per table column with its interval, the paired differences per task
(forest plots), and per-class recall and confusion matrices of the tasks with a fixed label set."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..data import taxonomy
from ..scoring.metrics import NO_ANSWER, task_labels, top1
from ..tasks import TASKS, report_columns
from .paired import ALPHA, metric_column
from ..scoring.cells import row_errors
from .tables import name_of


def models_plot(results: Sequence[dict[str, Any]], out: Path, scope: str = "both") -> list[Path]:
    """``models.png``: a panel per table column that any result fills, each model's value with its 95% interval
    (the tables' cells as a figure), couple and family pooled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    known = report_columns()
    columns = [c for c in known if any(r["table5"].get(scope, {}).get(c) is not None for r in results)]
    if not columns:
        return []
    names = [name_of(r) for r in results]
    width = min(4, len(columns))
    rows = -(-len(columns) // width)
    fig, axes = plt.subplots(rows, width, figsize=(3.4 * width, 0.28 * len(results) * rows + 1.4 * rows),
                             squeeze=False)
    for ax, column in zip(axes.flat, columns):
        spec = known[column]
        for y, r in enumerate(results):
            value = r["table5"].get(scope, {}).get(column)
            if value is None:
                continue
            error = row_errors(r, scope).get(column) or {}
            if error.get("ci"):
                ax.plot([x * spec.scale for x in error["ci"]], [y, y], color="tab:blue", linewidth=1.5)
            _point(ax, value, y, "tab:blue", has_interval=bool(error.get("ci")))
        ax.set_yticks(range(len(results)), names if ax in axes[:, 0] else [""] * len(results), fontsize=7)
        ax.set_ylim(len(results) - 0.5, -0.5)
        ax.set_title(spec.header, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(columns):]:
        ax.axis("off")
    fig.suptitle(f"Every model per column, {scope}: value and 95% interval (tables' units)", fontsize=9)
    return [_save(fig, out / "models.png")]


def forest_plots(cells: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """Per task, the paired differences with their 95% intervals, one line per comparison, metric and
    scope (Holm-significant ones in colour), in the tables' units."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for task in dict.fromkeys(c["task"] for c in cells):
        mine = [c for c in cells if c["task"] == task]
        fig, ax = plt.subplots(figsize=(7.5, 0.32 * len(mine) + 1.4))
        for y, c in enumerate(mine):
            scale = metric_column(task, c["metric"]).scale
            significant = c.get("p_holm") is not None and c["p_holm"] < ALPHA
            colour = "tab:red" if significant else "black"
            if c.get("ci"):
                ax.plot([c["ci"][0] * scale, c["ci"][1] * scale], [y, y], color=colour, linewidth=1.5)
            _point(ax, c["diff"] * scale, y, colour, has_interval=bool(c.get("ci")))
        ax.axvline(0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_yticks(range(len(mine)), [f"{c['result']} − {c['against']}: {metric_column(task, c['metric']).header}, "
                                         f"{c['scenario']}" for c in mine], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("difference (tables' units); red: Holm p < 0.05")
        ax.set_title(f"{task.upper()}: paired differences, 95% intervals", fontsize=9)
        written.append(_save(fig, out / f"forest_{task}.png"))
    return written


def _point(ax, x: float, y: float, colour: str, has_interval: bool) -> None:
    """The estimate: a filled dot on its interval, or a hollow one marked "no interval" (a bare dot would read
    as a value without uncertainty)."""
    if has_interval:
        ax.plot([x], [y], "o", color=colour, markersize=4)
        return
    ax.plot([x], [y], "o", markerfacecolor="white", markeredgecolor=colour, markersize=5)
    ax.annotate("no interval", (x, y), xytext=(5, 0), textcoords="offset points", va="center", fontsize=6,
                color=colour)


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text).strip("_")


def plot(results: dict[str, Any], out: Path) -> list[Path]:
    """Per-class recall bars (RPP, SSP) and confusion matrices (ITP, RPP, SSP) per scenario."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import ConfusionMatrixDisplay

    written = []
    folder = out / _slug(name_of(results))  # one folder per result
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
                written.append(_save(fig, folder / f"{task}_{scenario}_recall.png"))
            gold = [r["gold"] for r in records]
            pred = [top1(r["prediction"]) for r in records]
            # Labels outside the taxonomy (other data versions) still get a row; unparsed answers a column.
            shown = list(dict.fromkeys(labels + gold + [p for p in pred if p != NO_ANSWER]))
            shown += [NO_ANSWER] if NO_ANSWER in pred else []
            fig, ax = plt.subplots(figsize=(1.0 + 0.55 * len(shown), 1.0 + 0.55 * len(shown)))
            ConfusionMatrixDisplay.from_predictions(gold, pred, labels=shown, ax=ax, colorbar=False,
                                                    xticks_rotation="vertical")
            ax.set_title(f"{task.upper()} {scenario}", fontsize=9)
            written.append(_save(fig, folder / f"{task}_{scenario}_confusion.png"))
    return written


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the whole of every label, however long
    plt.close(fig)
    return path
