"""The paper's metrics, computed from per-instance prediction records (scikit-learn where it has them).

A prediction record is a dict with at least ``task``, ``scenario``, ``gold``, ``prediction`` and
``parse_status``; ``scores`` may carry judge and BERTScore values added by the evaluator. Predictions:

* ITP, RPP, STP, SSP: a ranked list of candidate labels (possibly of length 1; empty on a parse failure);
* ER: ``{"emotion": str, "intensity": int | None}``; VP: a list of ``{source, target, viewpoint}``;
* RSG: the generated therapist turn (a string).

Each task names its kind (``Task.metric``); the metrics of a kind are the :class:`~rescue_train.scoring.metric.Metric`
objects registered for it (the built-in ones below, one ``register_metric`` each), and a task's table columns
are ``Task.report_columns``, so a new task is scored without this module knowing its name, and a new metric
is one entry.

A failed parse is a wrong answer: it stays in every denominator, is counted in ``parse_failures`` and is
never replaced by the gold. Averages are micro (over instances), reported for couple, family and both.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, Sequence

import numpy as np
from sklearn.metrics import precision_recall_fscore_support

from ..tasks import TASKS
from ..tasks.answers import WORD
from .distinct import distinct_draws
from .metric import (PROPORTION, ClassScores, Metric, balanced_accuracy, few_classes, few_draws, macro_f1, metrics_of,
                     predicted_labels, prediction_entropy, recall_of, register_metric)

SCOPES = ("couple", "family", "both")
RANK_DEPTH = 3  # the paper scores the top-3 list: MRR is 0 when the gold is not among them
NO_ANSWER = "<no answer>"
# What any prediction record holds for its scoring (the evaluator's, the baselines', the kept classifiers'); read
# back, a record is checked for these (rescue_train.io.check_record) before anything is scored.
RECORD_FIELDS = {"task": str, "scenario": str, "gold": object, "prediction": object}
JUDGE_ON_FAILURE = ("floor", "exclude")


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


def gold_probability(record: dict) -> float | None:
    """The rank protocol's probability of the gold answer after normalising over the candidates,
    exp(loglik[gold] - logsumexp(loglik)), from the summed log-likelihoods whatever ``rank_score`` ranked
    by; None for a record without candidate log-likelihoods (a generated answer)."""
    loglik = record.get("loglik")
    if not loglik or record["gold"] not in loglik:
        return None
    # numpy's logaddexp reduction: the stable log-sum-exp, without scipy.special.logsumexp's per-call cost
    return float(np.exp(loglik[record["gold"]] - np.logaddexp.reduce(np.array(list(loglik.values()), float))))


def _floor(scores: dict[str, Any], prefix: str = "judge_") -> int:
    """The bottom of the judge's scale under ``prefix`` ("1-5" -> 1, "0-6" -> 0)."""
    return int(str(scores.get(f"{prefix}scale", "1-5")).split("-")[0])


def _judged(scores: Sequence[dict[str, Any]], prefix: str = "judge_") -> bool:
    """Whether every record has a verdict under ``prefix``: a mean never runs over fewer records unnoticed."""
    return bool(scores) and all(s.get(f"{prefix}status") for s in scores)


def check_on_failure(on_failure: str) -> None:
    if on_failure not in JUDGE_ON_FAILURE:
        raise ValueError(f"judge.on_failure must be one of {', '.join(JUDGE_ON_FAILURE)}, got {on_failure!r}")


def _verdict_values(scores: Sequence[dict[str, Any]], prefix: str = "judge_", on_failure: str = "floor"
                    ) -> list[float | None]:
    """Per record, the judge's score under ``prefix``: a readable verdict gives its score (a prediction that
    did not parse was given the bottom of the scale without a call); an unreadable verdict the bottom of the
    scale (``floor``) or None, out of the mean (``exclude``); None where the judge did not run."""
    check_on_failure(on_failure)
    values: list[float | None] = []
    for s in scores:
        status = s.get(f"{prefix}status")
        if status == "failed":
            values.append(_floor(s, prefix) if on_failure == "floor" else None)
        else:
            values.append(s.get(f"{prefix}score") if status else None)
    return values


def _unreadable(scores: Sequence[dict[str, Any]], prefix: str = "judge_") -> int:
    return sum(s.get(f"{prefix}status") == "failed" for s in scores)


class Scored:
    """The records of one task and scope, with what several metrics read computed once: the metrics'
    ``values`` and ``statistic`` take one of these."""

    def __init__(self, records: Sequence[dict], task: str, label_space: Sequence[str] | None = None,
                 on_failure: str = "floor"):
        self.records, self.task, self.label_space, self.on_failure = list(records), task, label_space, on_failure
        self._draws: dict[tuple, tuple] = {}

    @cached_property
    def scores(self) -> list[dict[str, Any]]:
        return [r.get("scores") or {} for r in self.records]

    @cached_property
    def instance(self) -> list[dict[str, float]]:
        return [instance_scores(self.task, r["gold"], r["prediction"]) for r in self.records]

    @cached_property
    def answered(self) -> list[bool]:
        return [r.get("parse_status") == "ok" for r in self.records]

    def verdicts(self, prefix: str) -> list[float | None]:
        return _verdict_values(self.scores, prefix, self.on_failure)

    def judged(self, prefix: str) -> bool:
        return _judged(self.scores, prefix)

    @cached_property
    def bertscore(self) -> list[float | None]:
        """BERTScore F1 per instance; a failed answer scores 0 (None where BERTScore was not computed)."""
        return [0.0 if not ok and s.get("bertscore_f1") is not None else s.get("bertscore_f1")
                for s, ok in zip(self.scores, self.answered)]

    @cached_property
    def intensity(self) -> list[float]:
        """S_int per instance; a failed answer gets the floor, 1."""
        return [i["intensity_score"] if ok else 1.0 for i, ok in zip(self.instance, self.answered)]

    @cached_property
    def s_er(self) -> list[float | None]:
        """S_ER = (S_emo + S_int) / 2 per instance with an S_emo."""
        return [None if e is None else (e + i) / 2 for e, i in zip(self.verdicts("judge_"), self.intensity)]

    @cached_property
    def texts(self) -> dict[str, list[str]]:
        """The turns whose length and distinct-n are measured, one per record: the model's answered turns and
        the real therapists' turns at the same rows (``human.``); a failed answer's row is empty in both."""
        return {"": [r["prediction"] if ok else "" for r, ok in zip(self.records, self.answered)],
                "human.": [r["gold"] if ok else "" for r, ok in zip(self.records, self.answered)]}

    def lengths(self, prefix: str) -> list[float | None]:
        return [len(WORD.findall(t)) if ok else None for t, ok in zip(self.texts[prefix], self.answered)]

    def draws(self, clusters: np.ndarray, n_clusters: int, labels: Sequence[str] = ()):
        """(the classes: gold, predicted and ``labels``, sorted; ``f(counts)`` -> the :class:`ClassScores` of
        each draw, each record counted as often as its cluster was drawn). The last draw is kept, so that
        the metrics of one confusion matrix share it."""
        key = (id(clusters), n_clusters, tuple(labels))
        if key not in self._draws:
            gold = [r["gold"] for r in self.records]
            pred = [top1(r["prediction"]) for r in self.records]
            classes = sorted(set(gold) | set(pred) | set(labels))
            code = {c: i for i, c in enumerate(classes)}
            cells = np.array([code[g] * len(classes) + code[p] for g, p in zip(gold, pred)], dtype=int)
            per_cluster = np.zeros((n_clusters, len(classes) ** 2))
            np.add.at(per_cluster, (np.asarray(clusters, int), cells), 1.0)
            last: list = [None, None]

            def scores(counts: np.ndarray) -> ClassScores:
                if last[0] is not counts:
                    k = len(classes)
                    last[:] = counts, ClassScores.of((counts @ per_cluster).reshape(-1, k, k))
                return last[1]
            self._draws[key] = (clusters, classes, scores)  # clusters kept: their id stays theirs
        return self._draws[key][1:]


# ---------------------------------------------------------------- the built-in metrics
#
# Means over records take ``values``; the others a ``statistic`` of bootstrap draws (the statistic on the
# records as they are is the aggregate, so an interval is always around the reported number).


def _judge_range(prefix: str):
    """The range of a judge check: the scale its verdicts record (1-5 unless a record says otherwise)."""
    def bounds(records: Sequence[dict]) -> tuple[float, float]:
        scale = next((s[f"{prefix}scale"] for r in records if f"{prefix}scale" in (s := r.get("scores") or {})), "1-5")
        low, high = str(scale).split("-")
        return float(low), float(high)
    return bounds


def _yes_class(score: str):
    def statistic(scored: Scored, clusters: np.ndarray, n_clusters: int):
        classes, draws = scored.draws(clusters, n_clusters, ("yes", "no"))
        return lambda counts: getattr(draws(counts), score)[:, classes.index("yes")]
    return statistic


def _macro_f1(scored: Scored, clusters: np.ndarray, n_clusters: int):
    """Macro-F1 over the labels of the task's space that occur in the gold (all gold labels without one)."""
    classes, draws = scored.draws(clusters, n_clusters)
    space = scored.label_space
    in_space = np.array([space is None or c in space for c in classes])
    return lambda counts: macro_f1(draws(counts), in_space)


def _balanced_accuracy(scored: Scored, clusters: np.ndarray, n_clusters: int):
    """Balanced accuracy; undefined (NaN) when the gold has a single class."""
    labels = ("yes", "no") if TASKS[scored.task].metric == "binary" else ()
    _, draws = scored.draws(clusters, n_clusters, labels)

    def value(counts: np.ndarray) -> np.ndarray:
        scores = draws(counts)
        return np.where(scores.present.sum(1) > 1, balanced_accuracy(scores), np.nan)
    return value


def _few_recall(scored: Scored, clusters: np.ndarray, n_clusters: int):
    """The mean recall of the rare classes, chosen on each draw as on any record set."""
    _, draws = scored.draws(clusters, n_clusters)
    return lambda counts: recall_of(draws(counts), few_draws(draws(counts).support))


def _of_answers(measure):
    """``measure`` (:func:`predicted_labels`, :func:`prediction_entropy`) of the top-1 labels; a failed answer
    is no label."""
    def statistic(scored: Scored, clusters: np.ndarray, n_clusters: int):
        classes, draws = scored.draws(clusters, n_clusters)
        answers = np.array([c != NO_ANSWER for c in classes])
        return lambda counts: measure(draws(counts), answers)
    return statistic


def _distinct(prefix: str, n: int):
    return lambda scored, clusters, n_clusters: distinct_draws(scored.texts[prefix], n, clusters, n_clusters)


CLOSED, RANKING = ("binary", "ranking"), ("ranking",)
BERTSCORE = (-1.0, 1.0)  # cosine-based; bert-score's baseline rescaling can take it below 0
for _metric in (
    Metric("accuracy", CLOSED, PROPORTION, values=lambda s: [i["correct"] for i in s.instance]),
    *(Metric(f"recall@{k}", RANKING, PROPORTION, values=lambda s, k=k: [i[f"recall@{k}"] for i in s.instance])
      for k in (1, 2, 3)),
    Metric("mrr", RANKING, PROPORTION, values=lambda s: [i["mrr"] for i in s.instance]),
    # Lower variance than 0/1 accuracy on the same instances; all or nothing, like the judge's means.
    Metric("expected_accuracy", CLOSED, PROPORTION, values=lambda s: [gold_probability(r) for r in s.records],
           defined=lambda s: all(gold_probability(r) is not None for r in s.records),
           header="expected acc.", scale=100, digits=2),
    *(Metric(score, ("binary",), PROPORTION, statistic=_yes_class(score)) for score in ("precision", "recall", "f1")),
    Metric("balanced_accuracy", CLOSED, PROPORTION, statistic=_balanced_accuracy),
    Metric("macro_f1", CLOSED, PROPORTION, statistic=_macro_f1),
    # The tail: the rare classes' recall and the label-collapse line (labels predicted against gold_labels).
    Metric("few_recall", CLOSED, PROPORTION, statistic=_few_recall, header="few rec.", scale=100, digits=1),
    Metric("predicted_labels", CLOSED, (0.0, float("inf")), statistic=_of_answers(predicted_labels), header="labels",
           digits=1),
    Metric("prediction_entropy", CLOSED, (0.0, float("inf")), statistic=_of_answers(prediction_entropy),
           header="entropy", digits=2),
    Metric("bertscore_f1", ("emotion", "generation"), BERTSCORE, values=lambda s: s.bertscore),
    Metric("s_int", ("emotion",), (1.0, 5.0), values=lambda s: s.intensity),
    Metric("s_emo", ("emotion",), (1.0, 5.0), values=lambda s: s.verdicts("judge_"),
           defined=lambda s: s.judged("judge_")),
    *(Metric(name, ("emotion",), (1.0, 5.0), values=lambda s: s.s_er, defined=lambda s: s.judged("judge_"))
      for name in ("s_er", "judge")),  # ER's judge column is S_ER
    Metric("judge", ("generation",), _judge_range("judge_"), values=lambda s: s.verdicts("judge_"),
           defined=lambda s: s.judged("judge_")),
):
    register_metric(_metric)
for _prefix, _check in (("", ""), ("human.", "human_")):  # RSG's turns, and the real therapists' (``human``)
    register_metric(Metric(f"{_prefix}bertscore_f1", ("support",), BERTSCORE, values=(
        (lambda s: s.bertscore) if not _prefix else  # the real turn against itself: 1
        (lambda s: [None if b is None else 1.0 for b in s.bertscore]))))
    for _name in ("judge", "adherence"):
        register_metric(Metric(f"{_prefix}{_name}", ("support",), _judge_range(f"{_check}{_name}_"),
                               values=lambda s, c=f"{_check}{_name}_": s.verdicts(c),
                               defined=lambda s, c=f"{_check}{_name}_": s.judged(c)))
    # Length describes text: the turns the model answered and the real turns at those rows.
    register_metric(Metric(f"{_prefix}length_words", ("support",), (0.0, float("inf")),
                           values=lambda s, p=_prefix: s.lengths(p)))
    for _n in (1, 2):
        register_metric(Metric(f"{_prefix}distinct_{_n}", ("support",), PROPORTION, statistic=_distinct(_prefix, _n)))


# ---------------------------------------------------------------- what an aggregate reports beside its metrics


def _gold_classes(scored: Scored) -> dict[str, Any]:
    """The gold's side of the tail: its distinct labels and which are rare."""
    gold = [r["gold"] for r in scored.records]
    return {"gold_labels": len(set(gold)), "few_classes": few_classes(gold)}


def _confusion_counts(scored: Scored) -> dict[str, Any]:
    pairs = [(r["gold"], top1(r["prediction"])) for r in scored.records]
    return {**_gold_classes(scored), "tp": sum(g == "yes" and q == "yes" for g, q in pairs), "fp": sum(g != "yes" and q == "yes" for g, q in pairs),
            "fn": sum(g == "yes" and q != "yes" for g, q in pairs), "tn": sum(g == "no" and q == "no" for g, q in pairs)}


def _per_class(scored: Scored) -> dict[str, Any]:
    gold = [r["gold"] for r in scored.records]
    pred = [top1(r["prediction"]) for r in scored.records]
    space = scored.label_space
    labels = sorted(set(gold)) if space is None else [lbl for lbl in space if lbl in set(gold)]
    p, r, f, support = precision_recall_fscore_support(gold, pred, labels=labels, average=None, zero_division=0)
    return {**_gold_classes(scored), "per_class": {label: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                                  "support": int(support[i])} for i, label in enumerate(labels)}}


def _judge_counts(scored: Scored) -> dict[str, Any]:
    return {"judged": sum(s.get("judge_status") == "ok" for s in scored.scores),
            "judge_failures": _unreadable(scored.scores), "judge_on_failure": scored.on_failure}


def _support_counts(scored: Scored) -> dict[str, Any]:
    out = {**_judge_counts(scored), "adherence_failures": _unreadable(scored.scores, "adherence_"),
           "human": {"judge_failures": _unreadable(scored.scores, "human_judge_"),
                     "adherence_failures": _unreadable(scored.scores, "human_adherence_")}}
    return out


COUNTED = {"binary": _confusion_counts, "ranking": _per_class, "emotion": _judge_counts,
           "generation": _judge_counts, "support": _support_counts}


def _put(scoped: dict[str, Any], metric: str, value: Any) -> None:
    source, _, name = metric.rpartition(".")
    (scoped.setdefault(source, {}) if source else scoped)[name] = value


def metric_value(scoped: dict[str, Any], metric: str) -> Any:
    """A metric of one scope's aggregate by its name (``human.judge`` reads ``scoped["human"]["judge"]``)."""
    source, _, name = metric.rpartition(".")
    return (scoped.get(source) or {}).get(name) if source else scoped.get(name)


def task_metrics(task: str) -> dict[str, Metric]:
    """The metrics registered for ``task``'s kind."""
    return metrics_of(TASKS[task].metric)


def record_values(task: str, records: Sequence[dict], judge_on_failure: str = "floor") -> dict[str, list[float | None]]:
    """Per record, the value of each of the task's metrics that is a mean over records (Recall@k, MRR,
    accuracy, expected accuracy, the judge's scores, S_int, BERTScore F1, adherence, length; ``human.``
    for RSG's real turns). ``aggregate`` gives the mean of these values: for BERTScore, S_int and lengths
    over the values that are there, for the others only when every record has one."""
    scored = Scored(records, task, None, judge_on_failure)
    return {name: m.values(scored) for name, m in task_metrics(task).items() if m.values is not None}


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
    check_on_failure(judge_on_failure)
    out: dict[str, dict[str, Any]] = {}
    for scope in SCOPES:
        chosen = [r for r in records if scope == "both" or r["scenario"] == scope]
        if not chosen:
            continue
        scored = Scored(chosen, task, scope_labels(label_spaces, scope), judge_on_failure)
        metrics: dict[str, Any] = COUNTED[TASKS[task].metric](scored)
        for name, metric in task_metrics(task).items():
            _put(metrics, name, metric.aggregate(scored))
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


def resampled_metrics(task: str, records: Sequence[dict], label_space: Sequence[str] | None,
                      clusters: np.ndarray, n_clusters: int, judge_on_failure: str = "floor"):
    """The task's metrics that are not means over records (ITP precision, recall, F1 and balanced accuracy;
    macro-F1 and balanced accuracy; RSG distinct-1/2) as one function of bootstrap draws, or None when
    the task has none: ``f(counts)[metric][b]`` is the metric on the records of draw b, each record counted
    as often as its cluster (``clusters[i]`` of record i) was drawn (``counts[b, cluster]``); NaN where it
    is undefined (a draw without one of ITP's two gold classes)."""
    scored = Scored(records, task, label_space, judge_on_failure)
    clusters = np.asarray(clusters)
    statistics = {name: m.statistic(scored, clusters, n_clusters)
                  for name, m in task_metrics(task).items() if m.statistic is not None}
    if not statistics:
        return None
    return lambda counts: {name: statistic(counts) for name, statistic in statistics.items()}
