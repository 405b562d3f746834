"""The paper's metrics, computed from per-instance prediction records (scikit-learn where it has them).

A prediction record is a dict with at least ``task``, ``scenario``, ``gold``, ``prediction`` and
``parse_status``; ``scores`` may carry judge and BERTScore values added by the evaluator. Predictions:

* ITP, RPP, STP, SSP: a ranked list of candidate labels (possibly of length 1; empty on a parse failure);
* ER: ``{"emotion": str, "intensity": int | None}``; VP: a list of ``{source, target, viewpoint}``;
* RSG: the generated therapist turn (a string).

Each task names its aggregation (``Task.metric``, a key of ``AGGREGATORS``) and its table columns
(``Task.report_columns``), so a new task is scored without this module knowing its name.

A failed parse is a wrong answer: it stays in every denominator, is counted in ``parse_failures`` and is
never replaced by the gold. Averages are micro (over instances), reported for couple, family and both.
"""

from __future__ import annotations

import warnings
from typing import Any, Iterable, Sequence

import numpy as np
from sklearn.metrics import accuracy_score, balanced_accuracy_score, f1_score, precision_recall_fscore_support

from ..tasks import TASKS
from ..tasks.answers import WORD

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
    metric = TASKS[task].metric
    if metric in ("binary", "ranking"):
        rank = gold_rank(gold, prediction or ())
        return {"rank": rank, "correct": float(rank == 1), "mrr": 1.0 / rank if rank else 0.0,
                **{f"recall@{k}": float(0 < rank <= k) for k in (1, 2, 3)}}
    if metric == "emotion":
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


JUDGE_ON_FAILURE = ("floor", "exclude")


def _bottom(scores: dict[str, Any], prefix: str) -> int:
    """The bottom of a check's scale ("1-5" -> 1, "0-6" -> 0)."""
    return int(str(scores.get(f"{prefix}scale", "1-5")).split("-")[0])


def verdict_values(scores: Sequence[dict[str, Any]], prefix: str = "judge_",
                   on_failure: str = "floor") -> list[float | None] | None:
    """Per record, the judge's score under ``prefix``: a readable verdict gives its score (a prediction that
    did not parse was given the bottom of the scale without a call); an unreadable verdict gives the bottom
    of the scale (``floor``) or None, out of the mean (``exclude``). None when a record has no verdict at all
    (the judge did not run), so that no mean runs over fewer instances unnoticed."""
    if on_failure not in JUDGE_ON_FAILURE:
        raise ValueError(f"judge.on_failure must be one of {', '.join(JUDGE_ON_FAILURE)}, got {on_failure!r}")
    values: list[float | None] = []
    for s in scores:
        status = s.get(f"{prefix}status")
        if not status:
            return None
        if status == "failed":
            values.append(_bottom(s, prefix) if on_failure == "floor" else None)
        else:
            values.append(s.get(f"{prefix}score"))
    return values


def _verdict_mean(scores: Sequence[dict[str, Any]], prefix: str, on_failure: str) -> float | None:
    values = verdict_values(scores, prefix, on_failure)
    return None if values is None else _mean(values)


def _unreadable(scores: Sequence[dict[str, Any]], prefix: str = "judge_") -> int:
    return sum(s.get(f"{prefix}status") == "failed" for s in scores)


def _generation(records: list[dict], task: str, on_failure: str = "floor") -> dict[str, Any]:
    """ER and VP. A failed answer (a parse failure, a refusal, a truncated answer) scores the bottom of the
    scale on every component (S_emo 1, S_int 1, VP judge 1, or 0 on the 0-6 scale) and BERTScore 0. An
    unreadable judge verdict is floored or excluded by ``on_failure``; it touches only what the judge decides
    (S_emo, the VP judge score): S_int is a formula on the intensities and BERTScore needs no judge.
    S_ER is the mean of (S_emo + S_int) / 2 over the instances with an S_emo."""
    scores = [r.get("scores") or {} for r in records]
    failed_answer = [r.get("parse_status") != "ok" for r in records]
    judge = verdict_values(scores, "judge_", on_failure)
    bert = [0.0 if bad and s.get("bertscore_f1") is not None else s.get("bertscore_f1")
            for s, bad in zip(scores, failed_answer)]
    out: dict[str, Any] = {"bertscore_f1": _mean(bert), "judged": sum(s.get("judge_status") == "ok" for s in scores),
                           "judge_failures": _unreadable(scores), "judge_on_failure": on_failure}
    if TASKS[task].metric == "emotion":
        intensity = [1.0 if bad else instance_scores(task, r["gold"], r["prediction"])["intensity_score"]
                     for r, bad in zip(records, failed_answer)]
        out["s_int"] = _mean(intensity)
        pairs = [] if judge is None else [(e, i) for e, i in zip(judge, intensity) if e is not None]
        out["s_emo"] = None if judge is None else _mean(e for e, _ in pairs)
        out["s_er"] = None if judge is None else _mean((e + i) / 2 for e, i in pairs)
        out["judge"] = out["s_er"]
    else:
        out["judge"] = None if judge is None else _mean(judge)
    return out


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Distinct-n across ``texts``: distinct word n-grams / all word n-grams (lower-cased words), None when
    there is no n-gram at all. Low values expose generations that repeat themselves or each other."""
    grams = []
    for text in texts:
        words = [w.lower() for w in WORD.findall(text or "")]
        grams += [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else None


def _text_profile(texts: Sequence[str]) -> dict[str, float | None]:
    return {"length_words": _mean(len(WORD.findall(t or "")) for t in texts),
            "distinct_1": distinct_n(texts, 1), "distinct_2": distinct_n(texts, 2)}


def _support(records: list[dict], task: str, label_space=None, on_failure: str = "floor") -> dict[str, Any]:
    """Free-text support turns: BERTScore against the real turn, the judge's 1-5 rubric, the adherence rate
    (condition target_strategy), length and distinct-1/2; ``human`` holds the same numbers for the real
    therapists' turns (judged by the same rubric; BERTScore against themselves is 1). Failed answers score
    the bottom of each judged scale and BERTScore 0; unreadable verdicts are floored or excluded by
    ``on_failure``, each check on its own. Length and distinct-n describe text, so they run over the turns
    the model answered and, for the human reference, the real turns at the same rows."""
    scores = [r.get("scores") or {} for r in records]
    failed_answer = [r.get("parse_status") != "ok" for r in records]
    bert = _mean(0.0 if bad and s.get("bertscore_f1") is not None else s.get("bertscore_f1")
                 for s, bad in zip(scores, failed_answer))
    answered = [r for r, bad in zip(records, failed_answer) if not bad]
    out: dict[str, Any] = {
        "bertscore_f1": bert, "judge": _verdict_mean(scores, "judge_", on_failure),
        "judged": sum(s.get("judge_status") == "ok" for s in scores),
        "judge_failures": _unreadable(scores), "judge_on_failure": on_failure,
        "adherence": _verdict_mean(scores, "adherence_", on_failure),
        "adherence_failures": _unreadable(scores, "adherence_"),
        **_text_profile([r["prediction"] for r in answered]),
    }
    out["human"] = {"bertscore_f1": None if bert is None else 1.0,
                    "judge": _verdict_mean(scores, "human_judge_", on_failure),
                    "judge_failures": _unreadable(scores, "human_judge_"),
                    "adherence": _verdict_mean(scores, "human_adherence_", on_failure),
                    "adherence_failures": _unreadable(scores, "human_adherence_"),
                    **_text_profile([r["gold"] for r in answered])}
    return out


AGGREGATORS = {  # (records, task, label space, judge.on_failure) -> metrics
    "binary": lambda records, task, label_space, on_failure: _binary(records),
    "ranking": lambda records, task, label_space, on_failure: _ranking(records, task, label_space),
    "emotion": lambda records, task, label_space, on_failure: _generation(records, task, on_failure),
    "generation": lambda records, task, label_space, on_failure: _generation(records, task, on_failure),
    "support": _support,
}


def task_labels(task: str) -> dict[str, tuple[str, ...]] | None:
    """scenario -> the task's labels in a fixed order, for tasks with a fixed label set (ITP, RPP, SSP);
    None for tasks whose candidates differ per instance (STP: each sample's people) or that have none."""
    return TASKS[task].label_space()


def aggregate(task: str, records: Sequence[dict], label_spaces: dict[str, Sequence[str]] | None = None,
              judge_on_failure: str = "floor") -> dict[str, dict[str, Any]]:
    """Metrics per scope (couple, family, both); scopes without instances are left out.
    ``label_spaces`` (scenario -> labels) orders per-class results; the union serves 'both'.
    ``judge_on_failure``: what an unreadable judge verdict counts as (``floor`` or ``exclude``)."""
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
        metrics = AGGREGATORS[TASKS[task].metric](chosen, task, space, judge_on_failure)
        metrics["n"] = len(chosen)
        metrics["parse_failures"] = sum(r.get("parse_status") != "ok" for r in chosen)
        metrics["truncated"] = sum(r.get("parse_error") == "truncated" for r in chosen)
        metrics["refused"] = sum(str(r.get("parse_error") or "").startswith("refused") for r in chosen)
        out[scope] = metrics
    return out


def table5_row(aggregates: dict[str, dict[str, dict[str, Any]]], scope: str = "both",
               source: str | None = None) -> dict[str, float | None]:
    """One row of every task's report columns (the paper's Table 5 ones in its units: percentages, 1-5
    judge scores, BERTScore F1) from ``{task: aggregate(task, ...)}``; columns whose task or value is
    missing are None. ``source`` reads a sub-dict of each aggregate instead (``human``: the real turns)."""
    row: dict[str, float | None] = {}
    for task in TASKS.values():
        scoped = aggregates.get(task.name, {}).get(scope, {})
        if source is not None:
            scoped = scoped.get(source) or {}
        for column in task.report_columns:
            value = scoped.get(column.metric)
            row[column.key] = None if value is None else value * column.scale
    return row
