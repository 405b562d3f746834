"""Sentence-level agreement between the audit's judge and human annotators (``rescue-train agreement``).

The human file (CSV with a header, or JSONL) has one labelled sentence per line: ``dialogue_id``, ``turn_id``,
``sentence_id``, ``system`` (needed when the audit holds several), optionally ``rater`` and ``text`` (checked
against the audited sentence, which catches a different splitter), and one column per labelled measure:
``IF``, ``OS``, or a criterion key (``bond_anchoring``, ...). A value is present (``1``, ``o``, ``x``, ``yes``,
``true``, ``MET``) or absent (``0``, blank, ``no``, ``false``, ``NOT_MET``), as RELATE's annotators marked
``o`` or left a blank. Human IF is compared with both the published and the referent-gated judge IF.

Reported per measure and rater: n, positive rates, raw agreement, Cohen's kappa (scikit-learn) and Gwet's AC1
(chance 2π(1−π) for two categories); with several raters, also each pair of raters on their shared sentences.
"""

from __future__ import annotations

import csv
import itertools
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from ..io import check_record, iter_jsonl
from .criteria import CRITERIA
from .runner import RESULTS_FORMAT
from .stats import sentence_values

PRESENT = {"1", "o", "x", "yes", "y", "true", "met"}
ABSENT = {"0", "", "no", "n", "false", "not_met", "not met"}
KEY_COLUMNS = ("system", "dialogue_id", "turn_id", "sentence_id", "rater", "text", "line")
JUDGE_MEASURES = {"IF": ("IF", "IF_gated")}  # a human measure -> the judge measures it is compared with


def read_results(path: str | Path) -> dict[str, Any] | None:
    """The audit results document at ``path`` (a results.json or its folder), or None for anything else."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("format") == RESULTS_FORMAT else None


def _rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    if path.suffix == ".jsonl":
        rows = list(iter_jsonl(path))
        for number, row in rows:
            check_record(row, {}, f"{path}:{number}", "a row of human labels")
        return rows
    return list(enumerate(csv.DictReader(path.read_text(encoding="utf-8").splitlines()), start=2))


def _presence(value: Any, where: str, column: str) -> int:
    word = "" if value is None else str(value).strip().lower()
    if word in PRESENT:
        return 1
    if word in ABSENT:
        return 0
    raise ValueError(f"{where}: column {column!r}: expected a presence mark (1/o/yes/MET) or absence "
                     f"(0/blank/no/NOT_MET), got {value!r}")


def pair_stats(a: list[int], b: list[int]) -> dict[str, Any]:
    from sklearn.metrics import cohen_kappa_score

    from ..scoring.agreement import gwet_ac1

    n = len(a)
    kappa = float(cohen_kappa_score(a, b, labels=[0, 1])) if n > 1 else None
    return {"n": n, "positive_a": sum(a) / n if n else None, "positive_b": sum(b) / n if n else None,
            "agreement": sum(x == y for x, y in zip(a, b)) / n if n else None,
            "kappa": None if kappa is None or kappa != kappa else kappa, "gwet_ac1": gwet_ac1(a, b, [0, 1])}


def compare(results: dict[str, Any], human_path: Path) -> dict[str, Any]:
    """{"judge": {measure: {judge measure: {rater: stats}}}, "raters": {measure: {"r1 vs r2": stats}}}."""
    systems = {s["system"] for s in results["sentences"]}
    sentences = {(s["system"], s["dialogue_id"], str(s["turn_id"]), str(s["sentence_id"])): s
                 for s in results["sentences"]}
    values = {key: sentence_values(s["labels"]) for key, s in sentences.items()}
    judged: dict[str, dict[str, dict[str, list[tuple[int, int]]]]] = defaultdict(lambda: defaultdict(
        lambda: defaultdict(list)))
    by_rater: dict[str, dict[str, dict[tuple, int]]] = defaultdict(lambda: defaultdict(dict))
    for line, row in _rows(human_path):
        where = f"{human_path}:{line}"
        ids = ("dialogue_id", "turn_id", "sentence_id")
        if not isinstance(row, dict) or any(row.get(k) in (None, "") for k in ids):
            raise ValueError(f"{where}: need dialogue_id, turn_id and sentence_id")
        system = row.get("system") or (next(iter(systems)) if len(systems) == 1 else None)
        if system is None:
            raise ValueError(f"{where}: the audit holds several systems ({', '.join(sorted(systems))}); "
                             "add a 'system' column")
        key = (str(system), str(row["dialogue_id"]), str(row["turn_id"]), str(row["sentence_id"]))
        if key not in sentences:
            raise ValueError(f"{where}: sentence {key} is not in the audit results")
        if row.get("text") not in (None, "") and row["text"].strip() != sentences[key]["text"]:
            raise ValueError(f"{where}: the text differs from the audited sentence {sentences[key]['text']!r} "
                             "(was the audit run with another splitter?)")
        rater = str(row.get("rater") or "human")
        measures = [c for c in row if c not in KEY_COLUMNS]
        if not measures:
            raise ValueError(f"{where}: no label column (IF, OS or a criterion key)")
        for measure in measures:
            if measure not in ("IF", "OS", *CRITERIA):
                raise ValueError(f"{where}: unknown label column {measure!r} (IF, OS or one of {', '.join(CRITERIA)})")
            human = _presence(row[measure], where, measure)
            by_rater[measure][rater][key] = human
            for judge_measure in JUDGE_MEASURES.get(measure, (measure,)):
                judge = values[key].get(judge_measure)
                if judge is not None:  # a judge answer that failed to parse leaves the comparison
                    judged[measure][judge_measure][rater].append((judge, human))
    for per_judge in judged.values():
        for per_rater in per_judge.values():
            if len(per_rater) > 1:
                per_rater["all raters"] = [pair for pairs in list(per_rater.values()) for pair in pairs]
    report: dict[str, Any] = {"judge": {}, "raters": {}}
    for measure, per_judge in judged.items():
        report["judge"][measure] = {jm: {rater: pair_stats([j for j, _ in p], [h for _, h in p])
                                         for rater, p in per_rater.items()} for jm, per_rater in per_judge.items()}
    for measure, raters in by_rater.items():
        for r1, r2 in itertools.combinations(sorted(raters), 2):
            shared = sorted(set(raters[r1]) & set(raters[r2]))
            report["raters"].setdefault(measure, {})[f"{r1} vs {r2}"] = pair_stats(
                [raters[r1][k] for k in shared], [raters[r2][k] for k in shared])
    return report


def table(report: dict[str, Any]) -> str:
    def fmt(v):
        return "–" if v is None else f"{v:.3f}"

    lines = ["| Human measure | Compared with | Rater | n | Positive (a / b) | Agreement | Cohen κ | Gwet AC1 |",
             "|---|---|---|---:|---|---:|---:|---:|"]
    for measure, per_judge in report["judge"].items():
        for judge_measure, per_rater in per_judge.items():
            for rater, m in per_rater.items():
                lines.append(f"| {measure} | judge {judge_measure} | {rater} | {m['n']} | {fmt(m['positive_a'])} / "
                             f"{fmt(m['positive_b'])} | {fmt(m['agreement'])} | {fmt(m['kappa'])} | "
                             f"{fmt(m['gwet_ac1'])} |")
    for measure, pairs in report["raters"].items():
        for pair, m in pairs.items():
            lines.append(f"| {measure} | rater | {pair} | {m['n']} | {fmt(m['positive_a'])} / {fmt(m['positive_b'])} "
                         f"| {fmt(m['agreement'])} | {fmt(m['kappa'])} | {fmt(m['gwet_ac1'])} |")
    return "\n".join(lines)
