"""The paper's metrics, computed from per-instance prediction records (scikit-learn where it has them).

A prediction record is a dict with at least ``task``, ``scenario``, ``gold``, ``prediction`` and
``parse_status``; ``scores`` may carry judge and BERTScore values added by the evaluator. Predictions:

* ITP, RPP, STP, SSP: a ranked list of candidate labels (possibly of length 1; empty on a parse failure);
* ER: ``{"emotion": str, "intensity": int | None}``; VP: a list of ``{source, target, viewpoint}``.

A failed parse is a wrong answer: it stays in every denominator, is counted in ``parse_failures`` and is
never replaced by the gold. Averages are micro (over instances), reported for couple, family and both.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

import numpy as np
from sklearn.metrics import (accuracy_score, balanced_accuracy_score, f1_score,
                             precision_recall_fscore_support)

from ..data import taxonomy

SCOPES = ("couple", "family", "both")
RANK_DEPTH = 3  # the paper scores the top-3 list: MRR is 0 when the gold is not among them
NO_ANSWER = "<no answer>"


def gold_rank(gold: str, ranking: Sequence[str], depth: int = RANK_DEPTH) -> int:
    """1-based position of ``gold`` in the first ``depth`` predictions, 0 when absent."""
    top = list(ranking)[:depth]
    return top.index(gold) + 1 if gold in top else 0


def intensity_score(predicted: int | None, gold: int) -> int:
    """S_int = max(1, 5 - |predicted - gold|); a missing intensity gets the floor, 1."""
    return 1 if predicted is None else max(1, 5 - abs(predicted - gold))


def instance_scores(task: str, gold: Any, prediction: Any) -> dict[str, float]:
    """Scores that need no model: ranks and recalls for closed-set tasks, S_int for ER."""
    if task in ("itp", "rpp", "stp", "ssp"):
        rank = gold_rank(gold, prediction or ())
        return {"rank": rank, "correct": float(rank == 1), "mrr": 1.0 / rank if rank else 0.0,
                **{f"recall@{k}": float(0 < rank <= k) for k in (1, 2, 3)}}
    if task == "er":
        return {"intensity_score": float(intensity_score((prediction or {}).get("intensity"), gold["intensity"]))}
    return {}


def top1(prediction: Sequence[str] | None) -> str:
    return prediction[0] if prediction else NO_ANSWER


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _binary(records: list[dict]) -> dict[str, Any]:
    gold = [r["gold"] for r in records]
    pred = [top1(r["prediction"]) for r in records]
    p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=["yes"], average=None, zero_division=0)
    tp = sum(g == "yes" and q == "yes" for g, q in zip(gold, pred))
    fp = sum(g != "yes" and q == "yes" for g, q in zip(gold, pred))
    fn = sum(g == "yes" and q != "yes" for g, q in zip(gold, pred))
    tn = sum(g == "no" and q == "no" for g, q in zip(gold, pred))
    recall_no = tn / max(1, sum(g == "no" for g in gold))
    recall_yes = tp / max(1, sum(g == "yes" for g in gold))
    return {"precision": float(p[0]), "recall": float(r[0]), "f1": float(f[0]),
            "accuracy": float(accuracy_score(gold, pred)),
            # Mean recall of the two gold classes; an unparsed answer counts against its own class.
            "balanced_accuracy": (recall_yes + recall_no) / 2 if {"yes", "no"} <= set(gold) else None,
            "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def _per_class(gold: list[str], pred: list[str], labels: list[str]) -> dict[str, dict[str, float]]:
    p, r, f, support = precision_recall_fscore_support(gold, pred, labels=labels, average=None, zero_division=0)
    return {label: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(support[i])}
            for i, label in enumerate(labels)}


def _ranking(records: list[dict], task: str, label_space: Sequence[str] | None) -> dict[str, Any]:
    scores = [instance_scores(task, r["gold"], r["prediction"]) for r in records]
    out: dict[str, Any] = {f"recall@{k}": _mean(s[f"recall@{k}"] for s in scores) for k in (1, 2, 3)}
    out["mrr"] = _mean(s["mrr"] for s in scores)
    out["accuracy"] = out["recall@1"]
    gold = [r["gold"] for r in records]
    pred = [top1(r["prediction"]) for r in records]
    # Macro scores over the labels that occur in gold (labels never in gold would only add zeros).
    labels = sorted(set(gold)) if label_space is None else [lbl for lbl in label_space if lbl in set(gold)]
    out["macro_f1"] = float(f1_score(gold, pred, labels=labels, average="macro", zero_division=0))
    with warnings.catch_warnings():  # predictions outside the gold classes are expected: they count as misses
        warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
        out["balanced_accuracy"] = float(balanced_accuracy_score(gold, pred)) if len(set(gold)) > 1 else None
    out["per_class"] = _per_class(gold, pred, labels)
    return out


def _judge_floor(scores: dict[str, Any]) -> int:
    """The bottom of the judge's scale ("1-5" -> 1, "0-6" -> 0)."""
    return int(str(scores.get("judge_scale", "1-5")).split("-")[0])


def _generation(records: list[dict], task: str) -> dict[str, Any]:
    """ER and VP under one failure rule: a failed answer (a parse failure, a refusal, a truncated answer) or
    an unreadable judge verdict scores the bottom of the scale on every judged component (S_emo 1, S_int 1,
    VP judge 1, or 0 on the 0-6 scale), and a failed answer BERTScore 0; so every mean, and
    S_ER = (S_emo + S_int) / 2, runs over the same instances."""
    scores = [r.get("scores") or {} for r in records]
    failed_answer = [r.get("parse_status") != "ok" for r in records]
    failed_verdict = [s.get("judge_status") == "failed" for s in scores]
    judge = [None if not s.get("judge_status") else _judge_floor(s) if bad else s.get("judge_score")
             for s, bad in zip(scores, failed_verdict)]
    bert = [0.0 if bad and s.get("bertscore_f1") is not None else s.get("bertscore_f1")
            for s, bad in zip(scores, failed_answer)]
    out: dict[str, Any] = {"bertscore_f1": _mean(bert), "judged": sum(s.get("judge_status") == "ok" for s in scores),
                           "judge_failures": sum(failed_verdict)}
    if task == "er":
        intensity = [1.0 if answer or verdict else instance_scores("er", r["gold"], r["prediction"])["intensity_score"]
                     for r, answer, verdict in zip(records, failed_answer, failed_verdict)]
        out["s_int"] = _mean(intensity)
        out["s_emo"] = _mean(judge) if all(j is not None for j in judge) else None
        out["s_er"] = None if out["s_emo"] is None else _mean((e + i) / 2 for e, i in zip(judge, intensity))
        out["judge"] = out["s_er"]
    else:
        out["judge"] = _mean(judge) if all(j is not None for j in judge) else None
    return out


def task_labels(task: str) -> dict[str, tuple[str, ...]] | None:
    """scenario -> the task's labels in taxonomy order, for tasks with a fixed label set (ITP, RPP, SSP);
    None for STP, whose candidates are each sample's people."""
    if task == "itp":
        return {sc: ("yes", "no") for sc in taxonomy.SCENARIOS}
    kind = {"rpp": "relation", "ssp": "strategy"}.get(task)
    return {sc: taxonomy.label_names(kind, sc) for sc in taxonomy.SCENARIOS} if kind else None


def aggregate(task: str, records: Sequence[dict], label_spaces: dict[str, Sequence[str]] | None = None
              ) -> dict[str, dict[str, Any]]:
    """Metrics per scope (couple, family, both); scopes without instances are left out.
    ``label_spaces`` (scenario -> labels) orders per-class results; the union serves 'both'."""
    out: dict[str, dict[str, Any]] = {}
    for scope in SCOPES:
        chosen = [r for r in records if scope == "both" or r["scenario"] == scope]
        if not chosen:
            continue
        if label_spaces is None:
            space = None
        elif scope == "both":
            space = list(dict.fromkeys(lbl for sc in SCOPES[:2] for lbl in label_spaces.get(sc, ())))
        else:
            space = list(label_spaces.get(scope, ()))
        if task == "itp":
            metrics = _binary(chosen)
        elif task in ("rpp", "stp", "ssp"):
            metrics = _ranking(chosen, task, space)
        else:
            metrics = _generation(chosen, task)
        metrics["n"] = len(chosen)
        metrics["parse_failures"] = sum(r.get("parse_status") != "ok" for r in chosen)
        metrics["truncated"] = sum(r.get("parse_error") == "truncated" for r in chosen)
        metrics["refused"] = sum(str(r.get("parse_error") or "").startswith("refused") for r in chosen)
        out[scope] = metrics
    return out


# The paper's Table 5 columns, from our aggregates: (task, metric, scale to the paper's unit).
TABLE5_SOURCES = {
    "itp_precision": ("itp", "precision", 100), "itp_recall": ("itp", "recall", 100), "itp_f1": ("itp", "f1", 100),
    "rpp_accuracy": ("rpp", "accuracy", 100),
    "stp_recall": ("stp", "recall@1", 100), "stp_mrr": ("stp", "mrr", 100),
    "ssp_recall": ("ssp", "recall@1", 100), "ssp_mrr": ("ssp", "mrr", 100),
    "er_llm": ("er", "judge", 1), "er_bert": ("er", "bertscore_f1", 1),
    "vp_llm": ("vp", "judge", 1), "vp_bert": ("vp", "bertscore_f1", 1),
}


def table5_row(aggregates: dict[str, dict[str, dict[str, Any]]], scope: str = "both") -> dict[str, float | None]:
    """One Table 5 row (paper units: percentages, 1-5 judge scores, BERTScore F1) from
    ``{task: aggregate(task, ...)}``; columns whose task or value is missing are None."""
    row: dict[str, float | None] = {}
    for column, (task, metric, scale) in TABLE5_SOURCES.items():
        value = aggregates.get(task, {}).get(scope, {}).get(metric)
        row[column] = None if value is None else value * scale
    return row
