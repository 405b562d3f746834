"""The audit report: report.md and PNG plots (rates with CIs, composition, per-turn trajectories).

The real therapists (``reference``) come first wherever they were audited, so models read beside them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .criteria import CRITERIA
from .inputs import REFERENCE
from .stats import COMPOSITION, HEADLINE

OURS = {"GATE": " (ours)", "EXPLORATORY": " (exploratory, ours)"}
TITLES = {"IF": "IF (published)", "IF_gated": "IF (referent-gated, ours)", "OS": "OS",
          **{k: c.name + OURS.get(c.dimension, "") for k, c in CRITERIA.items()}}

CAVEAT = (
    "**Read with care.** These labels come from an LLM judge. In the RELATE paper, judges agreed with human "
    "annotators about OS only moderately (Cohen's κ 0.40–0.59) and about IF barely above chance (κ 0.01–0.17): "
    "judges mistake talk *about* other people for inward-facing language and over-fire Intimate Dyad and Return "
    "Hooks. Couple and family therapy is full of talk about other people, so the published IF is least "
    "trustworthy exactly here; the referent-gated IF is our attempt to narrow it, and the hub/inter-member pair "
    "is our own, untested proposal. Neither direction is a quality judgment. Validate on your own data with "
    "`rescue-train agreement` before drawing conclusions.")


def ordered_systems(analysis: dict[str, Any]) -> list[str]:
    systems = analysis["systems"]
    return ([REFERENCE] if REFERENCE in systems else []) + [s for s in systems if s != REFERENCE]


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _rate_cell(r: dict[str, Any]) -> str:
    if r["rate"] is None:
        return "–"
    ci = f" [{_percent(r['ci'][0])}, {_percent(r['ci'][1])}]" if r["ci"] else ""
    return f"{_percent(r['rate'])}{ci} (n={r['n']})"


def markdown(results: dict[str, Any]) -> str:
    analysis = results["analysis"]
    systems = ordered_systems(analysis)
    per = analysis["per_system"]
    cfg = results["config"]
    boot = results["bootstrap"]
    lines = [
        "# Relational-orientation audit",
        "",
        f"Judge: {results['judge'].get('backend')} `{cfg.get('model')}`; splitter `{cfg.get('splitter')}`; "
        f"criteria: {', '.join(results['criteria'])}; 95% CIs from {boot['resamples']} bootstrap resamples of "
        f"units (seed {boot['seed']}): a couple or family for benchmark turns, whose segments share people; a "
        "dialogue for dialogue files.",
        "",
        CAVEAT,
        "",
    ]
    criteria = [m for m in analysis["measures"] if m not in HEADLINE]
    for title, group in (("Rates (% of labelled sentences) [95% CI]", HEADLINE), ("Per criterion", criteria)):
        lines += [f"## {title}", "", "| System | Units | Dialogues | Turns | Sentences | "
                  + " | ".join(TITLES[m] for m in group) + " |", "|---|---:|---:|---:|---:|" + "---|" * len(group)]
        for s in systems:
            p = per[s]
            lines.append(f"| {s} | {p['units']} | {p['dialogues']} | {p['turns']} | {p['sentences']} | "
                         + " | ".join(_rate_cell(p["rates"][m]) for m in group) + " |")
        lines.append("")
    lines += ["## Judge answers", "", "| System | MET | NOT_MET | PARSE_FAIL | missing |",
              "|---|---:|---:|---:|---:|"]
    lines += [f"| {s} | " + " | ".join(str(per[s]["labels"][k]) for k in ("MET", "NOT_MET", "PARSE_FAIL", "missing"))
              + " |" for s in systems]
    lines += ["", "## Composition (% of sentences with an OS label; IF = published IF)", "",
              "| System | IF only | OS only | Both | Neither | IF among OS |", "|---|---:|---:|---:|---:|---:|"]
    for s in systems:
        comp = per[s]["composition"]
        lines.append(f"| {s} | " + " | ".join(_percent(comp["shares"][c]) for c in COMPOSITION)
                     + f" | {_percent(comp['IF_among_OS'])} |")
    lines += ["", "## Per supporter turn (pooled %)", "", "| System | Turn | Sentences | "
              + " | ".join(TITLES[m] for m in HEADLINE) + " |", "|---|---:|---:|" + "---:|" * len(HEADLINE)]
    for s in systems:
        for turn, row in per[s]["per_turn"].items():
            lines.append(f"| {s} | {turn} | {row['sentences']} | "
                         + " | ".join(_percent(row[m]["rate"]) for m in HEADLINE) + " |")
    lines += ["", "## Change from each dialogue's first to its last audited turn (percentage points, mean over "
              "dialogues with two or more turns) [95% CI]", "",
              "| System | " + " | ".join(f"{TITLES[m]} (dialogues)" for m in HEADLINE) + " |",
              "|---|" + "---|" * len(HEADLINE)]
    for s in systems:
        cells = []
        for m in HEADLINE:
            c = per[s]["turn_change"][m]
            ci = f" [{100 * c['ci'][0]:+.1f}, {100 * c['ci'][1]:+.1f}]" if c["ci"] else ""
            cells.append("–" if c["mean"] is None else f"{100 * c['mean']:+.1f}{ci} ({c['dialogues']})")
        lines.append(f"| {s} | " + " | ".join(cells) + " |")
    if analysis["comparisons"]:
        lines += ["", "## Comparisons (a − b, percentage points; p Holm-corrected within each measure)", "",
                  "| Measure | a | b | Difference [95% CI] | p | p (Holm) |", "|---|---|---|---|---:|---:|"]
        for measure, family in analysis["comparisons"].items():
            for c in family:
                diff = "–" if c["difference"] is None else f"{100 * c['difference']:+.1f}"
                ci = f" [{100 * c['ci'][0]:+.1f}, {100 * c['ci'][1]:+.1f}]" if c["ci"] else ""
                p = "–" if c["p"] is None else f"{c['p']:.4f}"
                holm = f"{c['p_holm']:.4f}" if c.get("p_holm") is not None else "–"
                lines.append(f"| {TITLES[measure]} | {c['a']} | {c['b']} | {diff}{ci} | {p} | {holm} |")
    if results["skipped"]:
        lines += ["", f"## Not audited ({len(results['skipped'])} records)", ""]
        lines += [f"- {k['system']}: {k['id']}: {k['reason']}" for k in results["skipped"]]
    return "\n".join(lines) + "\n"


def plots(results: dict[str, Any], out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.ticker import MaxNLocator

    analysis = results["analysis"]
    systems = ordered_systems(analysis)
    per = analysis["per_system"]
    written = []

    measures = analysis["measures"]
    fig, ax = plt.subplots(figsize=(max(8, 1.5 * len(measures)), 4))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        rates = [per[s]["rates"][m] for m in measures]
        heights = [100 * (r["rate"] or 0) for r in rates]
        errors = np.array([[100 * ((r["rate"] or 0) - r["ci"][0]), 100 * (r["ci"][1] - (r["rate"] or 0))]
                           if r["ci"] else [0, 0] for r in rates]).T
        ax.bar(np.arange(len(measures)) + i * width, heights, width, yerr=errors, capsize=3, label=s)
    ax.set_xticks(np.arange(len(measures)) + width * (len(systems) - 1) / 2)
    ax.set_xticklabels([TITLES[m].replace(" (", "\n(") for m in measures], fontsize=7)
    ax.set_ylabel("% of labelled sentences")
    ax.set_title("Relational orientation with 95% CIs (bootstrap over units)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    written.append(out / "rates.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 0.6 * len(systems) + 1.5))
    left = np.zeros(len(systems))
    for c in COMPOSITION:
        shares = np.array([100 * (per[s]["composition"]["shares"][c] or 0) for s in systems])
        ax.barh(systems, shares, left=left, label=c.replace("_", " "))
        left += shares
    ax.invert_yaxis()  # the first system (the real therapists) on top
    ax.set_xlabel("% of sentences with an OS label")
    ax.set_title("Composition (IF = published IF)")
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.3))
    fig.tight_layout()
    written.append(out / "composition.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)

    fig, axes = plt.subplots(1, len(HEADLINE), figsize=(4 * len(HEADLINE), 3.5), sharey=True)
    for ax, measure in zip(axes, HEADLINE):
        for s in systems:
            turns = sorted(per[s]["per_turn"], key=int)
            values = [per[s]["per_turn"][t][measure]["rate"] for t in turns]
            ax.plot([int(t) for t in turns], [None if v is None else 100 * v for v in values], marker="o", label=s)
        ax.set_title(TITLES[measure], fontsize=9)
        ax.set_xlabel("supporter turn")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0].set_ylabel("% of labelled sentences")
    axes[-1].legend(fontsize=8)
    fig.tight_layout()
    written.append(out / "trajectories.png")
    fig.savefig(written[-1], dpi=120)
    plt.close(fig)
    return written


def write_report(results: dict[str, Any], out: Path, with_plots: bool = True) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(markdown(results), encoding="utf-8")
    return [out / "report.md"] + (plots(results, out) if with_plots else [])
