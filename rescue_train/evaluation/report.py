"""``rescue-train report RESULTS...``: paper-style tables and plots from results.json files.

* Table 5 layout (both scenarios pooled) and Table 11 layout (couple / family / both), with the paper's
  ten LLM rows beside ours;
* tasks beyond the paper (RSG, or any registered task) in their own columns (``Task.report_columns``),
  per scenario, each model followed by the human reference where the task scores one (RSG: the real
  therapists' turns under the same judge);
* parse failures and judged counts per task;
* error bars: our cells read ``value [low, high]``, the 95% interval of results.json's ``uncertainty``
  (computed from the records for results written without one), ``*`` where it rests on fewer than 10
  clusters; cells without an interval list why under the table; the paper's rows have no per-instance
  data, hence no interval, and are not comparable;
* paired comparisons (two or more results): each result minus the reference (the first, or ``against``) on
  the instances both scored, per task, scenario and metric, Holm-corrected over the cells of one comparison
  (``comparisons.json``, a Δ table, a forest plot per task);
* a power section: the smallest difference each metric can detect at 80% power and alpha 0.05;
* our rows say which model (the base model, and the adapter), protocol, split (test fold, limit, whether it
  includes training data) and how many instances they rest on, beside the paper's whole-benchmark rows;
* plots (``--out``, in ``plots/``, linked from report.md): one figure comparing every model per column with its
  95% interval (``models.png``),
  per-class recall and confusion matrices per scenario for the tasks with a fixed label set (ITP, RPP, SSP).

RESULTS are results.json files or folders holding them at any depth (``NAME=PATH`` names their rows); a folder
holding an unfinished evaluation is skipped with a note.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ..io import check_record, read_json, write_json_atomic
from ..scoring.metrics import RECORD_FIELDS
from ..scoring.uncertainty import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, FEW_CLUSTERS
from .paired import ALPHA, POWER, compare_results, delta_tables, power_rows, power_table
from .plots import forest_plots, models_plot, plot
from .tables import failures, further_tasks, name_of, table5, table11, tail_table, tell_apart

# What the tables read from an evaluation's results.json (its records, when it has them, are checked too).
RESULTS_FIELDS = {"table5": dict, "aggregates": dict}
PLOTS = "plots"  # the report's figures: OUT/plots/, each result's own in OUT/plots/<its name>/
TABLE5 = "## Table 5 layout (couple and family pooled)"
TABLE11 = "## Table 11 layout (per scenario)"
PAIRED = "## Paired comparisons"


def load_results(path: str | Path, record_fields: dict[str, Any] = RECORD_FIELDS,
                 need_records: bool = False) -> dict[str, Any]:
    """An evaluation's results.json (or the one in a run folder); a document, or one of its records, not of the
    expected shape stops with the file and the field. ``record_fields``: what each record must hold;
    ``need_records``: refuse a results file without records (the tables alone do without them)."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    if not file.exists():
        raise FileNotFoundError(f"{file}: no results.json (run rescue-train eval first)")
    what = "an evaluation results file"
    results = read_json(file, RESULTS_FIELDS, what)
    if need_records or "records" in results:
        check_record(results, {"records": list}, str(file), what)
    for number, record in enumerate(results.get("records", [])):
        check_record(record, record_fields, f"{file}: records[{number}]", "a prediction record")
    return results


@dataclass
class Found:
    results: list[dict[str, Any]]
    paths: list[str]  # the folder (or file) each result was read from
    notes: list[str]  # what was skipped, and why


def find_results(inputs: Sequence[str]) -> Found:
    """Every evaluation result under ``inputs``: results.json files, or folders holding them at any depth
    (``runs/eval/*`` on the default layout ``runs/eval/<model>/<protocol>/``). ``NAME=PATH`` names the rows of
    PATH (``NAME/<subfolder>`` when it holds several). A folder with an unfinished evaluation (``run.json``
    without ``results.json``) and, below a named folder, other results files are skipped with a note."""
    found = Found([], [], [])
    for given in inputs:
        name, sep, target = given.partition("=")
        if not sep or not Path(target).expanduser().exists():
            name, target = "", given
        root = Path(target).expanduser()
        if not root.exists():
            raise FileNotFoundError(f"{given}: no such file or folder")
        files = [root] if root.is_file() else [root / "results.json"] if (root / "results.json").is_file() \
            else sorted(root.rglob("results.json"))
        if root.is_dir():
            found.notes += [f"skipped {run.parent}: an unfinished evaluation (no results.json; rerun its eval command "
                            "to finish it)" for run in sorted(root.rglob("run.json"))
                            if not (run.parent / "results.json").exists()]
        kept = []
        for file in files:
            try:
                kept.append((file, load_results(file)))
            except ValueError as exc:
                if file == root or file.parent == root:
                    raise
                found.notes.append(f"skipped {exc}")
        if not kept:
            found.notes.append(f"{given}: no evaluation results in it")
        for file, results in kept:
            if name:
                below = file.parent.relative_to(root) if root.is_dir() else Path(".")
                results["report_name"] = name if len(kept) == 1 or below == Path(".") else f"{name}/{below}"
            found.results.append(results)
            found.paths.append(str(file.parent if file.name == "results.json" else file))
    if not found.results:
        raise FileNotFoundError("no evaluation results in " + ", ".join(inputs) +
                                "".join(f"\n  {note}" for note in found.notes))
    return found



def render(results: Sequence[dict[str, Any]], with_paper: bool = True, comparisons: Sequence[dict] | None = None,
           power: Sequence[dict] | None = None) -> str:
    notes = ("ITP/RPP/STP/SSP in percent; ER LLM = S_ER = (S_emo + S_int)/2 and VP LLM = judge score, both 1-5; "
             "BERT = BERTScore F1. Our rows are micro averages; '–' = not computed (e.g. no judge). n = the instances "
             "a row rests on, over the table's tasks (the paper's rows: its Table 6 counts of the whole benchmark); "
             "Split = which of them: the test fold(s) of a split, or the whole benchmark, any limit per task, and "
             "whether a trained model is scored on its own training data.")
    errors = (f"Our cells: value [low, high], its 95% interval, the couple or family (the split unit) as the "
              f"cluster: for a mean over instances the cluster-robust CR2 standard error with Satterthwaite degrees of "
              f"freedom, the interval kept within the metric's range, otherwise (ITP P/R/F1, RSG distinct-n) an "
              f"expanded percentile bootstrap of units within scenario "
              f"({BOOTSTRAP_DRAWS} draws, seed {BOOTSTRAP_SEED}); * = fewer than {FEW_CLUSTERS} clusters, an "
              f"interval to read with care. Rows marked (paper) are the published numbers: without per-instance "
              f"data they have no interval and are not comparable (never tested against).")
    further = further_tasks(results)
    told = [f"- {name_of(r)}: {note}" for r in results  # a cv's family note; what a trained model's fold held
            for note in [*r.get("notes", []), *r.get("split", {}).get("fold_notes", [])]]
    sections = [
        "# RESCUE-Bench results", *(["\n".join(told)] if told else []),
        TABLE5, notes, errors, table5(results, with_paper), TABLE11, table11(results, with_paper),
        *(["## Tasks beyond the paper", further] if further else []),
        *(["## Rare labels and label collapse (couple and family pooled)",
           "Beside accuracy: macro-F1, balanced accuracy (mean recall of the gold labels) and few rec. (the mean "
           "recall of the rare labels: the rarest gold labels holding together at most a third of the instances, "
           "listed last), in percent with the 95% interval (cluster bootstrap; [–]: none); then the label-collapse "
           "line: how many distinct labels the model predicted (top-1) of those in the gold, and the entropy of "
           "its predicted labels in bits (0: the same label for every instance).", tail] if (tail := tail_table(results)) else []),
        "## Parse failures (counted as wrong answers)", failures(results)]
    if comparisons:
        sections += [PAIRED,
                     "Each result minus the reference on the instances both scored: Δ [95% interval], in the "
                     "tables' units. Means: the CR2 SE of the per-instance differences, t test on Satterthwaite df; "
                     "ITP P/R/F1 and RSG distinct-n: the paired cluster bootstrap (both results on the same draws of "
                     "units). "
                     f"**Bold**: Holm-adjusted p < {ALPHA} over all cells of that comparison. "
                     "Expected acc. = the rank protocol's mean probability on the gold after normalising over the "
                     "candidates (less noisy than 0/1 accuracy on the same instances). The paper's rows: n/c "
                     "(published aggregates, no per-instance data).", delta_tables(comparisons)]
    if power:
        sections += ["## Power: the smallest detectable difference",
                     f"At {POWER:.0%} power and two-sided alpha {ALPHA}, the smallest true difference each metric "
                     "can detect (statsmodels TTestPower over G clusters: d * sqrt(G) * SE of the difference, about "
                     "2.8 SE for many clusters): for two independent results (SE of the difference = sqrt(2) * "
                     "the reference's SE) and, where a comparison was made, from its observed paired SE. Claims "
                     "of smaller differences are beyond what these instances can carry.", power_table(power)]
    return "\n\n".join(sections) + "\n"


@dataclass
class Report:
    text: str                       # report.md
    comparisons: list[dict]         # comparisons.json (two or more results)
    power: list[dict] | None        # power.json (asked for)


def build(results: Sequence[dict[str, Any]], reference: int = 0, with_paper: bool = True,
          power: bool = False) -> Report:
    """The report of ``results``: tables, paired comparisons against ``results[reference]`` (two or more
    results), and the power section when asked for."""
    tell_apart(results)
    comparisons = compare_results(results, reference) if len(results) > 1 else []
    power_list = power_rows(results, comparisons, reference) if power else None
    return Report(render(results, with_paper, comparisons, power_list), comparisons, power_list)


def write(report: Report, results: Sequence[dict[str, Any]], out: Path, plots: bool = True) -> list[Path]:
    """``out/report.md``, ``comparisons.json`` and ``power.json`` where there are any, and the plots
    (returned) in ``out/plots``: the models side by side first, then each model's own, then the paired
    differences; report.md links each figure under the heading of its table."""
    out.mkdir(parents=True, exist_ok=True)
    if len(results) > 1:
        write_json_atomic(out / "comparisons.json", report.comparisons)
    if report.power is not None:
        write_json_atomic(out / "power.json", report.power)
    text, written = report.text, []
    if plots:
        folder = out / PLOTS
        models, forests = models_plot(results, folder), forest_plots(report.comparisons, folder)
        own = {name_of(r): plot(r, folder) for r in results}
        link = lambda path: f"[{path.stem}]({path.relative_to(out).as_posix()})"  # noqa: E731
        figures = {TABLE5: [f"![every model per column, with its interval]({m.relative_to(out).as_posix()})"
                            for m in models],
                   TABLE11: [f"Per-class recall and confusion, {name}: " + ", ".join(map(link, paths))
                             for name, paths in own.items() if paths],
                   PAIRED: [f"![{f.stem}]({f.relative_to(out).as_posix()})" for f in forests]}
        for heading, lines in figures.items():
            if lines:
                text = text.replace(f"{heading}\n", f"{heading}\n\n" + "\n\n".join(lines) + "\n", 1)
        written = [*models, *[p for paths in own.values() for p in paths], *forests]
    (out / "report.md").write_text(text)
    return written
