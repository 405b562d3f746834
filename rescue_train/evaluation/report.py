"""``rescue-train report RESULTS...``: paper-style tables and plots from results.json files.

* Table 5 layout (both scenarios pooled) and Table 11 layout (couple / family / both), with the paper's
  ten LLM rows beside ours;
* tasks beyond the paper (RSG, or any registered task) in their own columns (``Task.report_columns``),
  per scenario, each model followed by the human reference where the task scores one (RSG: the real
  therapists' turns under the same judge);
* parse failures and judged counts per task;
* error bars: our cells read ``value ± half-width`` of the 95% interval of results.json's ``uncertainty``
  (computed from the records for results written without one), ``*`` where it rests on fewer than 10
  clusters; cells without an interval list why under the table; the paper's rows have no per-instance
  data, hence no interval, and are not comparable;
* paired comparisons (two or more results): each result minus the reference (the first, or ``against``) on
  the instances both scored, per task, scenario and metric, Holm-corrected over the cells of one comparison
  (``comparisons.json``, a Δ table, a forest plot per task);
* a power section: the smallest difference each metric can detect at 80% power and alpha 0.05;
* our rows say which model (the base model, and the adapter), protocol, split (test fold, limit, whether it
  includes training data) and how many instances they rest on, beside the paper's whole-benchmark rows;
* plots (``--out``): one figure comparing every model per column with its 95% interval (``models.png``),
  per-class recall and confusion matrices per scenario for the tasks with a fixed label set (ITP, RPP, SSP).

RESULTS are results.json files or folders holding them at any depth (``NAME=PATH`` names their rows); a folder
holding an unfinished evaluation is skipped with a note.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from .. import paper
from ..provenance import describe_split
from ..data import taxonomy
from ..io import check_record, read_json, write_json_atomic
from ..scoring.metric_uncertainty import paired_differences, result_uncertainty
from ..scoring.metrics import NO_ANSWER, RECORD_FIELDS, SCOPES, table5_row, task_labels, top1
from ..scoring.uncertainty import BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, FEW_CLUSTERS, holm, minimal_detectable_difference
from ..tasks import TASKS, ReportColumn, report_columns
from .models import model_name

ALPHA, POWER = 0.05, 0.8
# What the tables read from an evaluation's results.json (its records, when it has them, are checked too).
RESULTS_FIELDS = {"table5": dict, "aggregates": dict}
EXPECTED_ACCURACY = "expected_accuracy"


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


def _row_errors(results: dict[str, Any], scope: str, source: str = "") -> dict[str, dict | None]:
    """Column key -> the uncertainty entry of that cell (``source``: ``human.`` for the real turns)."""
    uncertainty, known = uncertainty_of(results), report_columns()
    return {key: uncertainty.get(task, {}).get(scope, {}).get(source + known[key].metric)
            for key, task in _column_task().items()}


def cell(column: str, value: float | None, error: dict | None = None) -> str:
    """A table cell: the value, and ``± half-width`` of its interval when it has one (``*``: fewer than
    FEW_CLUSTERS clusters)."""
    if value is None:
        return "–"
    spec = report_columns()[column]
    text = f"{value:.{spec.digits}f}"
    if error and error.get("ci"):
        half = (error["ci"][1] - error["ci"][0]) / 2 * spec.scale
        text += f" ± {half:.{spec.digits}f}" + ("*" if error.get("few_clusters") else "")
    return text


def task_cells(results: dict[str, Any], task: str, scope: str = "both") -> list[str]:
    """``header value ± half-width`` of each of the task's table columns, as the report's cells read."""
    errors = _row_errors(results, scope)
    return [f"{c.header} {cell(c.key, results['table5'].get(scope, {}).get(c.key), errors.get(c.key))}"
            for c in TASKS[task].report_columns if results["table5"].get(scope, {}).get(c.key) is not None]


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
    rows += [(name_of(r), r["table5"]["both"], _row_errors(r, "both")) for r in results]
    return _table(rows, about=_about(results, "both", with_paper, paper_rows=paper.TABLE5_MODELS))


def table11(results: Sequence[dict[str, Any]], with_paper: bool = True) -> str:
    parts = []
    for scope in paper.TABLE11_SCENARIOS:
        rows = [(f"{m} (paper)", paper.TABLE11[m][scope], {}) for m in paper.TABLE11] if with_paper else []
        rows += [(name_of(r), r["table5"][scope], _row_errors(r, scope)) for r in results]
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
                rows.append((name_of(r), table5_row(r["aggregates"], scope), _row_errors(r, scope)))
                human = table5_row(r["aggregates"], scope, source="human")
                if any(human.get(c) is not None for c in columns):
                    rows.append((f"real therapists (same judge as {name_of(r)})", human,
                                 _row_errors(r, scope, "human.")))
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


# ---------------------------------------------------------------- paired comparisons and power

def compared_metrics(task: str) -> list[str]:
    """What a comparison tests per task: its table columns, and the expected accuracy of the rank protocol."""
    metrics = [c.metric for c in TASKS[task].report_columns]
    return metrics + ([EXPECTED_ACCURACY] if TASKS[task].closed_set else [])


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


def _display(task: str, metric: str) -> ReportColumn:
    for column in TASKS[task].report_columns:
        if column.metric == metric:
            return column
    if metric == EXPECTED_ACCURACY:
        return ReportColumn(f"{task}_expected_accuracy", metric, f"{task.upper()} expected acc.", 100)
    return ReportColumn(f"{task}_{metric}", metric, f"{task.upper()} {metric}", 1, 3)


def _delta(cell_: dict[str, Any]) -> str:
    spec = _display(cell_["task"], cell_["metric"])
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
            lines.append(f"| {task.upper()} | {_display(task, metric).header} | " + " | ".join(shown) + " |")
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
        spec = _display(task, metric)
        return "–" if value is None else f"{value * spec.scale:.{spec.digits}f}"

    for r in rows:
        lines.append(f"| {r['task'].upper()} | {_display(r['task'], r['metric']).header} | {r['scenario']} | {r['n']} | "
                     f"{r['clusters']} | {shown(r['task'], r['metric'], r['se'])} | "
                     f"{shown(r['task'], r['metric'], r['mdd_independent'])} | "
                     + "".join(f"{shown(r['task'], r['metric'], r['mdd_paired'].get(o))} | " for o in others))
    return "\n".join(lines)


def render(results: Sequence[dict[str, Any]], with_paper: bool = True, comparisons: Sequence[dict] | None = None,
           power: Sequence[dict] | None = None) -> str:
    notes = ("ITP/RPP/STP/SSP in percent; ER LLM = S_ER = (S_emo + S_int)/2 and VP LLM = judge score, both 1-5; "
             "BERT = BERTScore F1. Our rows are micro averages; '–' = not computed (e.g. no judge). n = the instances "
             "a row rests on, over the table's tasks (the paper's rows: its Table 6 counts of the whole benchmark); "
             "Split = which of them: the test fold(s) of a split, or the whole benchmark, any limit per task, and "
             "whether a trained model is scored on its own training data.")
    errors = (f"Our cells: value ± half-width of the 95% interval, the couple or family (the split unit) as the "
              f"cluster: for a mean over instances the cluster-robust CR1 standard error with t on G-1 degrees of "
              f"freedom, otherwise (ITP P/R/F1, RSG distinct-n) a percentile bootstrap of units within scenario "
              f"({BOOTSTRAP_DRAWS} draws, seed {BOOTSTRAP_SEED}); * = fewer than {FEW_CLUSTERS} clusters, an "
              f"interval to read with care. Rows marked (paper) are the published numbers: without per-instance "
              f"data they have no interval and are not comparable (never tested against).")
    further = further_tasks(results)
    told = [f"- {name_of(r)}: {note}" for r in results for note in r.get("notes", [])]  # e.g. a cv's family note
    sections = [
        "# RESCUE-Bench results", *(["\n".join(told)] if told else []),
        "## Table 5 layout (couple and family pooled)", notes, errors,
        table5(results, with_paper), "## Table 11 layout (per scenario)", table11(results, with_paper),
        *(["## Tasks beyond the paper", further] if further else []),
        "## Parse failures (counted as wrong answers)", failures(results)]
    if comparisons:
        sections += ["## Paired comparisons",
                     "Each result minus the reference on the instances both scored: Δ [95% interval], in the "
                     "tables' units. Means: the CR1 SE of the per-instance differences, t test on G-1 df; "
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
    (returned): the models side by side first, then each model's own."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(report.text)
    if len(results) > 1:
        write_json_atomic(out / "comparisons.json", report.comparisons)
    if report.power is not None:
        write_json_atomic(out / "power.json", report.power)
    if not plots:
        return []
    return [*models_plot(results, out), *[p for r in results for p in plot(r, out)],
            *forest_plots(report.comparisons, out)]


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
            error = _row_errors(r, scope).get(column) or {}
            if error.get("ci"):
                ax.plot([x * spec.scale for x in error["ci"]], [y, y], color="tab:blue", linewidth=1.5)
            ax.plot([value], [y], "o", color="tab:blue", markersize=4)
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
            scale = _display(task, c["metric"]).scale
            significant = c.get("p_holm") is not None and c["p_holm"] < ALPHA
            colour = "tab:red" if significant else "black"
            if c.get("ci"):
                ax.plot([c["ci"][0] * scale, c["ci"][1] * scale], [y, y], color=colour, linewidth=1.5)
            ax.plot([c["diff"] * scale], [y], "o", color=colour, markersize=4)
        ax.axvline(0, color="grey", linewidth=0.8, linestyle="--")
        ax.set_yticks(range(len(mine)), [f"{c['result']} − {c['against']}: {_display(task, c['metric']).header}, "
                                         f"{c['scenario']}" for c in mine], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("difference (tables' units); red: Holm p < 0.05")
        ax.set_title(f"{task.upper()}: paired differences, 95% intervals", fontsize=9)
        written.append(_save(fig, out / f"forest_{task}.png"))
    return written


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
