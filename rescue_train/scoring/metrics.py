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
from collections import Counter
from typing import Any, Iterable, Sequence

import numpy as np
from sklearn.metrics import balanced_accuracy_score, f1_score, precision_recall_fscore_support

from ..tasks import TASKS
from ..tasks.answers import WORD

SCOPES = ("couple", "family", "both")
RANK_DEPTH = 3  # the paper scores the top-3 list: MRR is 0 when the gold is not among them
NO_ANSWER = "<no answer>"
# What any prediction record holds for its scoring (the evaluator's, the baselines', the kept classifiers'); read
# back, a record is checked for these (rescue_train.io.check_record) before anything is scored.
RECORD_FIELDS = {"task": str, "scenario": str, "gold": object, "prediction": object}


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
    """The mean of the values that are there (BERTScore, S_int, lengths)."""
    kept = [v for v in values if v is not None]
    return float(np.mean(kept)) if kept else None


def _mean_of_all(values: Sequence[float | None]) -> float | None:
    """The mean only when every instance has a value (the judge's scores): never a mean over fewer."""
    return _mean(values) if values and all(v is not None for v in values) else None


def gold_probability(record: dict) -> float | None:
    """The rank protocol's probability of the gold answer after normalising over the candidates,
    exp(loglik[gold] - logsumexp(loglik)), from the summed log-likelihoods whatever ``rank_score`` ranked
    by; None for a record without candidate log-likelihoods (a generated answer)."""
    loglik = record.get("loglik")
    if not loglik or record["gold"] not in loglik:
        return None
    # numpy's logaddexp reduction: the stable log-sum-exp, without scipy.special.logsumexp's per-call cost
    return float(np.exp(loglik[record["gold"]] - np.logaddexp.reduce(np.array(list(loglik.values()), float))))


def _closed_set_values(records: list[dict], task: str) -> dict[str, list[float | None]]:
    scores = [instance_scores(task, r["gold"], r["prediction"]) for r in records]
    values: dict[str, list[float | None]] = {"accuracy": [s["correct"] for s in scores]}
    if TASKS[task].metric == "ranking":
        values.update({f"recall@{k}": [s[f"recall@{k}"] for s in scores] for k in (1, 2, 3)})
        values["mrr"] = [s["mrr"] for s in scores]
    # Lower variance than 0/1 accuracy on the same instances; all or nothing, like the judge's means.
    values["expected_accuracy"] = [gold_probability(r) for r in records]
    return values


# The "few" (rare) classes of a scope: its gold classes from the rarest up, as many as together hold at most this
# share of the scope's instances (at least the rarest one). Defined on the evaluated gold, so that every model
# compared on the same instances is measured on the same classes, and any saved result can be re-scored alone.
FEW_SHARE = 1 / 3


def few_classes(gold: Sequence[str]) -> list[str]:
    """The rare classes of ``gold`` (:data:`FEW_SHARE`); ties in count go by name."""
    counts = Counter(gold)
    few: list[str] = []
    held = 0
    for label in sorted(counts, key=lambda c: (counts[c], c)):
        if few and held + counts[label] > FEW_SHARE * len(gold):
            break
        few.append(label)
        held += counts[label]
    return few


def _classes(records: list[dict], task: str) -> tuple[list[str], list[str | None]]:
    """Each record's gold class and predicted top-1 class (None without an answer), by the task's class of
    a label (``Task.class_key``: the label itself, STP's kind of target)."""
    key = TASKS[task].class_key
    return ([key(r["gold"]) for r in records],
            [None if top1(r["prediction"]) == NO_ANSWER else key(top1(r["prediction"])) for r in records])


def _tail(records: list[dict], task: str) -> dict[str, Any]:
    """The rare classes' mean recall (``few_recall``) and the label-collapse line: how many distinct classes the
    model predicted (``predicted_labels``) against how many the gold holds (``gold_labels``), and the entropy in
    bits of the predicted classes (``prediction_entropy``; answers that failed left out)."""
    gold, pred = _classes(records, task)
    few = few_classes(gold)
    answered = Counter(p for p in pred if p is not None)
    shares = np.array(list(answered.values()), float) / max(1, sum(answered.values()))
    return {"few_recall": float(np.mean([np.mean([p == c for g, p in zip(gold, pred) if g == c]) for c in few])),
            "few_classes": few, "predicted_labels": len(answered), "gold_labels": len(set(gold)),
            "prediction_entropy": float(-(shares * np.log2(shares)).sum()) + 0.0}


def _binary(records: list[dict], task: str) -> dict[str, Any]:
    gold = [r["gold"] for r in records]
    pred = [top1(r["prediction"]) for r in records]
    p, r, f, _ = precision_recall_fscore_support(gold, pred, labels=["yes"], average=None, zero_division=0)
    tp = sum(g == "yes" and q == "yes" for g, q in zip(gold, pred))
    fp = sum(g != "yes" and q == "yes" for g, q in zip(gold, pred))
    fn = sum(g == "yes" and q != "yes" for g, q in zip(gold, pred))
    tn = sum(g == "no" and q == "no" for g, q in zip(gold, pred))
    recall_no = tn / max(1, sum(g == "no" for g in gold))
    recall_yes = tp / max(1, sum(g == "yes" for g in gold))
    values = _closed_set_values(records, task)
    return {**_tail(records, task), "precision": float(p[0]), "recall": float(r[0]), "f1": float(f[0]),
            "macro_f1": float(f1_score(gold, pred, labels=sorted(set(gold)), average="macro", zero_division=0)),
            "accuracy": _mean(values["accuracy"]), "expected_accuracy": _mean_of_all(values["expected_accuracy"]),
            # Mean recall of the two gold classes; an unparsed answer counts against its own class.
            "balanced_accuracy": (recall_yes + recall_no) / 2 if {"yes", "no"} <= set(gold) else None,
            "tp": tp, "fp": fp, "fn": fn, "tn": tn}


def _per_class(gold: list[str], pred: list[str], labels: list[str]) -> dict[str, dict[str, float]]:
    p, r, f, support = precision_recall_fscore_support(gold, pred, labels=labels, average=None, zero_division=0)
    return {label: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]), "support": int(support[i])}
            for i, label in enumerate(labels)}


def _ranking(records: list[dict], task: str, label_space: Sequence[str] | None) -> dict[str, Any]:
    values = _closed_set_values(records, task)
    out: dict[str, Any] = {f"recall@{k}": _mean(values[f"recall@{k}"]) for k in (1, 2, 3)}
    out["mrr"] = _mean(values["mrr"])
    out["accuracy"] = out["recall@1"]
    out["expected_accuracy"] = _mean_of_all(values["expected_accuracy"])
    gold = [r["gold"] for r in records]
    pred = [top1(r["prediction"]) for r in records]
    # Macro scores over the labels that occur in gold (labels never in gold would only add zeros).
    labels = sorted(set(gold)) if label_space is None else [lbl for lbl in label_space if lbl in set(gold)]
    out["macro_f1"] = float(f1_score(gold, pred, labels=labels, average="macro", zero_division=0))
    with warnings.catch_warnings():  # predictions outside the gold classes are expected: they count as misses
        warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
        out["balanced_accuracy"] = float(balanced_accuracy_score(gold, pred)) if len(set(gold)) > 1 else None
    out["per_class"] = _per_class(gold, pred, labels)
    return {**out, **_tail(records, task)}


JUDGE_ON_FAILURE = ("floor", "exclude")


def _floor(scores: dict[str, Any], prefix: str = "judge_") -> int:
    """The bottom of the judge's scale under ``prefix`` ("1-5" -> 1, "0-6" -> 0)."""
    return int(str(scores.get(f"{prefix}scale", "1-5")).split("-")[0])


def _judged(scores: Sequence[dict[str, Any]], prefix: str = "judge_") -> bool:
    """Whether every record has a verdict under ``prefix``: a mean never runs over fewer records unnoticed."""
    return bool(scores) and all(s.get(f"{prefix}status") for s in scores)


def _verdict_values(scores: Sequence[dict[str, Any]], prefix: str = "judge_", on_failure: str = "floor"
                    ) -> list[float | None]:
    """Per record, the judge's score under ``prefix``: a readable verdict gives its score (a prediction that
    did not parse was given the bottom of the scale without a call); an unreadable verdict the bottom of the
    scale (``floor``) or None, out of the mean (``exclude``); None where the judge did not run."""
    if on_failure not in JUDGE_ON_FAILURE:
        raise ValueError(f"judge.on_failure must be one of {', '.join(JUDGE_ON_FAILURE)}, got {on_failure!r}")
    values: list[float | None] = []
    for s in scores:
        status = s.get(f"{prefix}status")
        if status == "failed":
            values.append(_floor(s, prefix) if on_failure == "floor" else None)
        else:
            values.append(s.get(f"{prefix}score") if status else None)
    return values


def _verdict_mean(values: Sequence[float | None], scores: Sequence[dict[str, Any]], prefix: str) -> float | None:
    """The mean of a check's values, when every record has its verdict (None otherwise)."""
    return _mean(values) if _judged(scores, prefix) else None


def _unreadable(scores: Sequence[dict[str, Any]], prefix: str = "judge_") -> int:
    return sum(s.get(f"{prefix}status") == "failed" for s in scores)


def _bertscore_values(records: list[dict]) -> list[float | None]:
    """BERTScore F1 per instance; a failed answer scores 0 (None where BERTScore was not computed)."""
    return [0.0 if r.get("parse_status") != "ok" and (r.get("scores") or {}).get("bertscore_f1") is not None
            else (r.get("scores") or {}).get("bertscore_f1") for r in records]


def _generation_values(records: list[dict], task: str, on_failure: str = "floor") -> dict[str, list[float | None]]:
    """ER and VP. A failed answer (a parse failure, a refusal, a truncated answer) scores the bottom of the
    scale on every component (S_emo 1, S_int 1, VP judge 1, or 0 on the 0-6 scale) and BERTScore 0. An
    unreadable judge verdict is floored or excluded by ``on_failure``; it touches only what the judge decides
    (S_emo, the VP judge score): S_int is a formula on the intensities and BERTScore needs no judge.
    S_ER is (S_emo + S_int) / 2 per instance with an S_emo."""
    scores = [r.get("scores") or {} for r in records]
    judge = _verdict_values(scores, "judge_", on_failure)
    values = {"bertscore_f1": _bertscore_values(records)}
    if TASKS[task].metric != "emotion":
        return {**values, "judge": judge}
    intensity = [1.0 if r.get("parse_status") != "ok" else
                 instance_scores(task, r["gold"], r["prediction"])["intensity_score"] for r in records]
    s_er = [None if e is None else (e + i) / 2 for e, i in zip(judge, intensity)]
    return {**values, "s_int": intensity, "s_emo": judge, "s_er": s_er, "judge": s_er}


def _generation(records: list[dict], task: str, on_failure: str = "floor") -> dict[str, Any]:
    scores = [r.get("scores") or {} for r in records]
    values = _generation_values(records, task, on_failure)
    out: dict[str, Any] = {"bertscore_f1": _mean(values["bertscore_f1"]),
                           "judged": sum(s.get("judge_status") == "ok" for s in scores),
                           "judge_failures": _unreadable(scores), "judge_on_failure": on_failure}
    if "s_int" in values:
        out.update(s_int=_mean(values["s_int"]), s_emo=_verdict_mean(values["s_emo"], scores, "judge_"),
                   s_er=_verdict_mean(values["s_er"], scores, "judge_"))
    out["judge"] = _verdict_mean(values["judge"], scores, "judge_")
    return out


def _ngrams(text: str | None, n: int) -> list[tuple[str, ...]]:
    words = [w.lower() for w in WORD.findall(text or "")]
    return [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]


def distinct_n(texts: Sequence[str], n: int) -> float | None:
    """Distinct-n across ``texts``: distinct word n-grams / all word n-grams (lower-cased words), None when
    there is no n-gram at all. Low values expose generations that repeat themselves or each other."""
    grams = [gram for text in texts for gram in _ngrams(text, n)]
    return len(set(grams)) / len(grams) if grams else None


def _support_texts(records: list[dict]) -> dict[str, list[str]]:
    """The turns whose length and distinct-n are measured, one per record: the model's answered turns and the
    real therapists' turns at the same rows (``human.``); a failed answer's row is empty in both."""
    answered = [r.get("parse_status") == "ok" for r in records]
    return {"": [r["prediction"] if ok else "" for r, ok in zip(records, answered)],
            "human.": [r["gold"] if ok else "" for r, ok in zip(records, answered)]}


def _support_values(records: list[dict], task: str, on_failure: str = "floor") -> dict[str, list[float | None]]:
    """Free-text support turns: BERTScore and the judge's 1-5 rubric against the real turn, the adherence
    rate (condition target_strategy) and the length in words; ``human.`` the same for the real therapists'
    turns (judged by the same rubric; BERTScore against themselves is 1). Failed answers score the bottom of
    each judged scale and BERTScore 0; unreadable verdicts are floored or excluded by ``on_failure``, each
    check on its own. Length describes text: the turns the model answered and the real turns at those rows."""
    scores = [r.get("scores") or {} for r in records]
    bert = _bertscore_values(records)
    texts = _support_texts(records)
    answered = [r.get("parse_status") == "ok" for r in records]
    return {"bertscore_f1": bert, "judge": _verdict_values(scores, "judge_", on_failure),
            "adherence": _verdict_values(scores, "adherence_", on_failure),
            "length_words": [len(WORD.findall(t)) if ok else None for t, ok in zip(texts[""], answered)],
            "human.bertscore_f1": [None if b is None else 1.0 for b in bert],
            "human.judge": _verdict_values(scores, "human_judge_", on_failure),
            "human.adherence": _verdict_values(scores, "human_adherence_", on_failure),
            "human.length_words": [len(WORD.findall(t)) if ok else None for t, ok in zip(texts["human."], answered)]}


def _support(records: list[dict], task: str, label_space=None, on_failure: str = "floor") -> dict[str, Any]:
    """RSG's turns, and the same numbers for the real turns under ``human``; distinct-1/2 are over the turns
    the model answered (and the real turns at those rows)."""
    scores = [r.get("scores") or {} for r in records]
    values = _support_values(records, task, on_failure)
    texts = _support_texts(records)
    out: dict[str, Any] = {"judged": sum(s.get("judge_status") == "ok" for s in scores),
                           "judge_on_failure": on_failure}
    for prefix, into, check in (("", out, ""), ("human.", out.setdefault("human", {}), "human_")):
        into.update(bertscore_f1=_mean(values[f"{prefix}bertscore_f1"]),
                    judge=_verdict_mean(values[f"{prefix}judge"], scores, f"{check}judge_"),
                    judge_failures=_unreadable(scores, f"{check}judge_"),
                    adherence=_verdict_mean(values[f"{prefix}adherence"], scores, f"{check}adherence_"),
                    adherence_failures=_unreadable(scores, f"{check}adherence_"),
                    length_words=_mean(values[f"{prefix}length_words"]),
                    distinct_1=distinct_n(texts[prefix], 1), distinct_2=distinct_n(texts[prefix], 2))
    return out


AGGREGATORS = {  # (records, task, label space, judge.on_failure) -> metrics
    "binary": lambda records, task, label_space, on_failure: _binary(records, task),
    "ranking": lambda records, task, label_space, on_failure: _ranking(records, task, label_space),
    "emotion": lambda records, task, label_space, on_failure: _generation(records, task, on_failure),
    "generation": lambda records, task, label_space, on_failure: _generation(records, task, on_failure),
    "support": _support,
}
VALUES = {"binary": _closed_set_values, "ranking": _closed_set_values, "emotion": _generation_values,
          "generation": _generation_values, "support": _support_values}


def record_values(task: str, records: Sequence[dict], judge_on_failure: str = "floor") -> dict[str, list[float | None]]:
    """Per record, the value of each of the task's metrics that is a mean over records (Recall@k, MRR,
    accuracy, expected accuracy, the judge's scores, S_int, BERTScore F1, adherence, length; ``human.``
    for RSG's real turns). ``aggregate`` gives the mean of these values: for BERTScore, S_int and lengths
    over the values that are there, for the others only when every record has one."""
    values = VALUES[TASKS[task].metric]
    return values(list(records), task) if values is _closed_set_values else values(list(records), task, judge_on_failure)


def metric_value(scoped: dict[str, Any], metric: str) -> Any:
    """A metric of one scope's aggregate by its name (``human.judge`` reads ``scoped["human"]["judge"]``)."""
    source, _, name = metric.rpartition(".")
    return (scoped.get(source) or {}).get(name) if source else scoped.get(name)


def task_labels(task: str) -> dict[str, tuple[str, ...]] | None:
    """scenario -> the task's labels in a fixed order, for tasks with a fixed label set (ITP, RPP, SSP);
    None for tasks whose candidates differ per instance (STP: each sample's people) or that have none."""
    return TASKS[task].label_space()


def scope_labels(label_spaces: dict[str, Sequence[str]] | None, scope: str) -> list[str] | None:
    """The labels of one scope: the scenario's, or for 'both' the union in order."""
    if label_spaces is None:
        return None
    if scope == "both":
        return list(dict.fromkeys(lbl for sc in SCOPES[:2] for lbl in label_spaces.get(sc, ())))
    return list(label_spaces.get(scope, ()))


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
        metrics = AGGREGATORS[TASKS[task].metric](chosen, task, scope_labels(label_spaces, scope), judge_on_failure)
        metrics["n"] = len(chosen)
        metrics["parse_failures"] = sum(r.get("parse_status") != "ok" for r in chosen)
        metrics["truncated"] = sum(r.get("parse_error") == "truncated" for r in chosen)
        metrics["refused"] = sum(str(r.get("parse_error") or "").startswith("refused") for r in chosen)
        metrics["empty"] = sum(r.get("parse_error") == "empty" for r in chosen)
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


# ---------------------------------------------------------------- the same metrics on resampled clusters
#
# The metrics that are not means over records are recomputed on every bootstrap draw; calling the aggregator
# 10,000 times per scope would take minutes, so each is also written once more as a function of how often
# each cluster was drawn (a batch of draws at once). ``resampled_metrics(...)(ones)`` equals ``aggregate``
# on the records: the evaluator checks it on every run and tests check it on random record sets.


def _confusion_by_cluster(gold: list[str], pred: list[str], clusters: np.ndarray, n_clusters: int,
                          labels: Sequence[str] = ()) -> tuple[list[str], np.ndarray]:
    """The classes (gold, predicted and ``labels``, sorted) and each cluster's confusion counts, flattened
    (clusters x classes^2, gold major)."""
    classes = sorted(set(gold) | set(pred) | set(labels))
    code = {c: i for i, c in enumerate(classes)}
    cells = np.array([code[g] * len(classes) + code[p] for g, p in zip(gold, pred)], dtype=int)
    counts = np.zeros((n_clusters, len(classes) ** 2))
    np.add.at(counts, (clusters, cells), 1.0)
    return classes, counts


def _class_scores(conf: np.ndarray) -> dict[str, np.ndarray]:
    """Per draw and class, from confusion matrices ``conf[b, gold, predicted]``: support and, with
    scikit-learn's zero_division=0, precision, recall and F1."""
    hits, support, predicted = np.diagonal(conf, axis1=1, axis2=2), conf.sum(2), conf.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"support": support, "precision": np.where(predicted > 0, hits / predicted, 0.0),
                "recall": np.where(support > 0, hits / support, 0.0),
                "f1": np.where(support + predicted > 0, 2 * hits / (support + predicted), 0.0)}


def _confusion_draws(records: list[dict], clusters: np.ndarray, n_clusters: int, labels: Sequence[str]):
    gold = [r["gold"] for r in records]
    pred = [top1(r["prediction"]) for r in records]
    classes, per_cluster = _confusion_by_cluster(gold, pred, clusters, n_clusters, labels)
    k = len(classes)
    return classes, lambda counts: _class_scores((counts @ per_cluster).reshape(-1, k, k))


def _few_draws(support: np.ndarray) -> np.ndarray:
    """:func:`few_classes` on each draw: ``support[b, class]`` (classes sorted by name) -> which are rare."""
    present = support > 0
    order = np.argsort(np.where(present, support, np.inf), axis=1, kind="stable")  # rarest first, ties by name
    held = np.cumsum(np.take_along_axis(support, order, 1), axis=1)
    rare = held <= FEW_SHARE * support.sum(1, keepdims=True)
    rare[:, 0] = True
    few = np.zeros_like(present)
    np.put_along_axis(few, order, rare, 1)
    return few & present


def _tail_draws(records: list[dict], task: str, clusters: np.ndarray, n_clusters: int):
    """:func:`_tail`'s numbers on each draw (its rare classes chosen on the draw, as on any record set)."""
    gold, pred = _classes(records, task)
    classes, per_cluster = _confusion_by_cluster(gold, [NO_ANSWER if p is None else p for p in pred], clusters,
                                                 n_clusters)
    k = len(classes)
    answer = np.array([c != NO_ANSWER for c in classes])

    def metrics(counts: np.ndarray) -> dict[str, np.ndarray]:
        conf = (counts @ per_cluster).reshape(-1, k, k)
        s = _class_scores(conf)
        few = _few_draws(s["support"])
        predicted = conf.sum(1) * answer
        shares = predicted / np.maximum(1.0, predicted.sum(1, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            return {"few_recall": (s["recall"] * few).sum(1) / few.sum(1),
                    "predicted_labels": (predicted > 0).sum(1).astype(float),
                    "prediction_entropy": -np.where(shares > 0, shares * np.log2(np.where(shares > 0, shares, 1)),
                                                    0.0).sum(1) + 0.0}
    return metrics


def _binary_resampled(records, task, label_space, clusters, n_clusters):
    classes, draw_scores = _confusion_draws(records, clusters, n_clusters, ("yes", "no"))
    yes, no = classes.index("yes"), classes.index("no")
    tail = _tail_draws(records, task, clusters, n_clusters)
    gold_classes = np.array([c in {r["gold"] for r in records} for c in classes])

    def metrics(counts: np.ndarray) -> dict[str, np.ndarray]:
        s = draw_scores(counts)
        both = (s["support"][:, yes] > 0) & (s["support"][:, no] > 0)
        macro = gold_classes & (s["support"] > 0)
        with np.errstate(invalid="ignore"):
            return {"precision": s["precision"][:, yes], "recall": s["recall"][:, yes], "f1": s["f1"][:, yes],
                    "balanced_accuracy": np.where(both, (s["recall"][:, yes] + s["recall"][:, no]) / 2, np.nan),
                    "macro_f1": (s["f1"] * macro).sum(1) / macro.sum(1), **tail(counts)}
    return metrics


def _ranking_resampled(records, task, label_space, clusters, n_clusters):
    classes, draw_scores = _confusion_draws(records, clusters, n_clusters, ())
    in_space = np.array([label_space is None or c in label_space for c in classes])
    tail = _tail_draws(records, task, clusters, n_clusters)

    def metrics(counts: np.ndarray) -> dict[str, np.ndarray]:
        s = draw_scores(counts)
        present = s["support"] > 0
        macro = present & in_space  # macro-F1 over the labels of the space that occur in gold
        with np.errstate(invalid="ignore"):
            return {"macro_f1": (s["f1"] * macro).sum(1) / macro.sum(1),
                    "balanced_accuracy": np.where(present.sum(1) > 1,
                                                  (s["recall"] * present).sum(1) / present.sum(1), np.nan),
                    **tail(counts)}
    return metrics


def _distinct_draws(texts: list[str], n: int, clusters: np.ndarray, n_clusters: int):
    """Distinct-n of each draw: an n-gram counts once when any drawn cluster has it, the n-grams of a
    cluster drawn twice count twice in the denominator. n-grams held by the same clusters are counted
    together, which keeps the product small."""
    totals = np.zeros(n_clusters)
    holders: dict[tuple[str, ...], set[int]] = {}
    for text, cluster in zip(texts, clusters):
        grams = _ngrams(text, n)
        totals[cluster] += len(grams)
        for gram in grams:
            holders.setdefault(gram, set()).add(int(cluster))
    together: dict[frozenset[int], int] = {}
    for held_by in holders.values():
        together[frozenset(held_by)] = together.get(frozenset(held_by), 0) + 1
    holders_of_group = np.zeros((n_clusters, len(together)), dtype=np.float32)
    for column, held_by in enumerate(together):
        holders_of_group[list(held_by), column] = 1.0
    sizes = np.array(list(together.values()), dtype=float)

    def value(counts: np.ndarray) -> np.ndarray:
        distinct = (((counts > 0).astype(np.float32) @ holders_of_group) > 0) @ sizes
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(counts @ totals > 0, distinct / (counts @ totals), np.nan)
    return value


def _support_resampled(records, task, label_space, clusters, n_clusters):
    draws = {f"{prefix}distinct_{n}": _distinct_draws(texts, n, clusters, n_clusters)
             for prefix, texts in _support_texts(records).items() for n in (1, 2)}
    return lambda counts: {name: value(counts) for name, value in draws.items()}


RESAMPLED = {"binary": _binary_resampled, "ranking": _ranking_resampled, "support": _support_resampled}


def resampled_metrics(task: str, records: Sequence[dict], label_space: Sequence[str] | None,
                      clusters: np.ndarray, n_clusters: int):
    """The task's metrics that are not means over records (ITP precision, recall, F1 and balanced accuracy;
    macro-F1 and balanced accuracy; RSG distinct-1/2) as one function of bootstrap draws, or None when
    the task has none: ``f(counts)[metric][b]`` is the metric on the records of draw b, each record counted
    as often as its cluster (``clusters[i]`` of record i) was drawn (``counts[b, cluster]``); NaN where it
    is undefined (a draw without one of ITP's two gold classes)."""
    make = RESAMPLED.get(TASKS[task].metric)
    return None if make is None else make(list(records), task, label_space, np.asarray(clusters), n_clusters)
