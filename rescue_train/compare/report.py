"""The comparison's report: the markdown tables and the plots of per-class recall and confusion."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..classifiers.classifier import LabelSpace
from ..data.splits import units_text
from .stats import COUNTS, HEADLINE


def _cell(estimate: float | None, ci: list[float] | None, scale: float = 100) -> str:
    if estimate is None:
        return "–"
    return f"{scale * estimate:.1f}" + (f" [{scale * ci[0]:.1f}, {scale * ci[1]:.1f}]" if ci else " [–]")  # [–]: none


def _delta(test: dict | None) -> str:
    if not test or test["difference"] is None:
        return "–"
    ci = test.get("ci")
    effect = f"{100 * test['difference']:+.1f}" + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "")
    if test.get("p_value") is None:
        return effect
    holm = "" if test.get("p_holm") is None else f", Holm {test['p_holm']:.3f}"
    return f"{effect} (p={test['p_value']:.3f}{holm})"


def markdown(results: dict) -> str:
    cols = HEADLINE
    lines = [f"# Rebalancing strategies: {results['task']} ({results['learner']})", "",
             f"Folds {results['folds']}, seeds {results['seeds']}; percent, 95% bootstrap interval over units in "
             f"brackets. Δ = difference from the strategy's reference (`none` of its learner) with its paired "
             f"bootstrap interval, the two-sided p-value of a paired permutation test over units and its "
             f"Holm-adjusted value (family: every test of that metric in this report). "
             f"Groups by share of the scenario's training instances: head ≥ {results['groups_rule']['head']:.0%}, "
             f"tail < {results['groups_rule']['tail']:.0%}. The label-collapse line: predicted_labels = distinct labels "
             f"predicted (top-1), prediction_entropy = their entropy in bits (0: one label for every instance). "
             f"The sample size is the number of units, not of "
             f"instances.", ""]
    lines += [f"- {note}" for note in results.get("fold_notes", [])] + [""] * bool(results.get("fold_notes"))
    for scope, stats in results["scopes"].items():
        lines += [f"## {scope} ({stats['n']} instances, {units_text(stats['units'])})", "",
                  "| strategy | " + " | ".join(cols) + " | Δ macro-F1 [CI] (p) | Δ tail recall [CI] (p) |",
                  "|---" * (len(cols) + 3) + "|"]
        kinds = set()
        for name, s in stats["strategies"].items():
            cells = [_cell(s["estimate"][c], s["ci"][c], 1 if c in COUNTS else 100) for c in cols]
            tests = [s.get("vs_none", {}).get(metric) for metric in ("macro_f1", "tail_recall")]
            kinds.update(t["test"] for t in tests if t and t.get("test"))
            lines.append(f"| {name} | " + " | ".join(cells + [_delta(t) for t in tests]) + " |")
        lines += [""] + [f"Permutation test: {kind}." for kind in sorted(kinds)] + ([""] if kinds else [])
    figures = results.get("plots", [])  # under the table they illustrate
    lines += ["## Per-class recall (percent; head/medium/tail group, test support)", ""]
    lines += [f"![{Path(f).stem}]({f})" for f in figures] + [""] * bool(figures)
    names = list(results["per_class_recall_table"])
    strategies = list(results["strategies"])
    lines += ["| class | group | n | " + " | ".join(strategies) + " |", "|---" * (len(strategies) + 3) + "|"]
    for name in names:
        row = results["per_class_recall_table"][name]
        lines.append(f"| {name} | {row['group']} | {row['support']} | "
                     + " | ".join(f"{100 * row[s]:.1f}" for s in strategies) + " |")
    return "\n".join(lines) + "\n"


def plots(results: dict, space: LabelSpace, confusions: dict[str, list], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    strategies = list(results["strategies"])
    table = results["per_class_recall_table"]
    for scenario in sorted({s for s, _ in space.classes}):
        names = sorted((n for n in table if n.startswith(scenario + ":")), key=lambda n: -table[n]["support"])
        if not names:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names) * max(1, len(strategies) / 4)), 4.5))
        width = 0.8 / len(strategies)
        for i, s in enumerate(strategies):
            ax.bar(np.arange(len(names)) + i * width, [table[n][s] for n in names], width, label=s)
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2)
        ax.set_xticklabels([f"{n.split(':', 1)[1]}\n({table[n]['group']}, n={table[n]['support']})" for n in names],
                           rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("recall")
        ax.set_ylim(0, 1)
        ax.set_title(f"{results['task']} {scenario}: per-class recall by strategy (classes from head to tail)")
        ax.legend(fontsize=7, ncol=2)
        written.append(_save(fig, out, f"per_class_recall_{scenario}.png"))
        idx = [space.names.index(n) for n in names]
        cols = min(4, len(strategies))
        rows_n = -(-len(strategies) // cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 3.2 * rows_n), squeeze=False)
        for ax, s in zip(axes.flat, strategies):
            mat = np.array(confusions[s])[np.ix_(idx, idx)]
            norm = mat / np.maximum(mat.sum(1, keepdims=True), 1e-9)
            ax.imshow(norm, vmin=0, vmax=1, cmap="Blues")
            ax.set_title(s, fontsize=9)
            ax.set_xticks(range(len(idx)))
            ax.set_yticks(range(len(idx)))
            classes = [n.split(":", 1)[1] for n in names]  # whole: the saved figure's box takes every label
            ax.set_xticklabels(classes, rotation=90, fontsize=6)
            ax.set_yticklabels(classes, fontsize=6)
        for ax in list(axes.flat)[len(strategies):]:
            ax.axis("off")
        fig.suptitle(f"{results['task']} {scenario}: confusion (rows gold, normalised; columns predicted)")
        written.append(_save(fig, out, f"confusion_{scenario}.png"))
    return written


def _save(fig, out: Path, name: str) -> str:
    """Save into ``out/plots`` with every label whole; the path relative to ``out`` (results.md links it)."""
    import matplotlib.pyplot as plt

    (out / "plots").mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(out / "plots" / name, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return f"plots/{name}"
