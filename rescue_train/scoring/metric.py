"""What a metric is, the registry of them, and the class-count statistics every application shares.

A :class:`Metric` is one named number of a task's aggregate, registered once with :func:`register_metric` for
the task kinds it scores (``Task.metric``: binary, ranking, emotion, generation, support). It says

* how it is computed: either ``values`` (one value per record; the aggregate is their mean, and the
  interval a clustered mean's) or ``statistic`` (a function of how often each cluster of records was drawn;
  the aggregate is the statistic on the records as they are, the interval a cluster bootstrap);
* its ``range``, which no estimate or interval of it may leave (a pair, or a function of the records for
  scales the run chooses, such as the VP judge's 1-5 or 0-6);
* optionally how a comparison shows it (``header``, ``scale``, ``digits``) when it is not a report column.

Macro-F1, balanced accuracy and per-class recall are defined here once, on batches of confusion matrices
(``conf[draw, gold, predicted]``), because both the evaluator's cluster bootstrap and ``compare``'s unit
bootstrap and permutation test score thousands of reweighted copies at once; on one matrix they are
scikit-learn's ``f1_score(average="macro")`` and ``balanced_accuracy_score`` (``zero_division=0``), which the
tests check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

MEAN = "clustered mean"
BOOTSTRAP = "cluster bootstrap"
PROPORTION = (0.0, 1.0)  # a proportion; tables show it times 100


@dataclass(frozen=True)
class Metric:
    """One metric: see the module's doc. ``values(scored)`` -> a value or None per record; ``defined(scored)``
    says whether the mean exists (the judge's: only when every record has a verdict); ``statistic(scored,
    clusters, n_clusters)`` -> ``f(counts)`` giving the metric of each draw (``counts[draw, cluster]``),
    NaN where undefined. ``scored`` is a :class:`rescue_train.scoring.metrics.Scored` (records of one task
    and scope with what they share computed once)."""

    name: str
    kinds: tuple[str, ...]
    range: tuple[float, float] | Callable[[Sequence[dict]], tuple[float, float]]
    values: Callable[[Any], list[float | None]] | None = None
    statistic: Callable[[Any, np.ndarray, int], Callable[[np.ndarray], np.ndarray]] | None = None
    defined: Callable[[Any], bool] = field(default=lambda scored: True)
    header: str | None = None
    scale: float = 1.0
    digits: int = 3

    def __post_init__(self):
        if (self.values is None) == (self.statistic is None):
            raise ValueError(f"metric {self.name!r}: give exactly one of values (a mean over records) or statistic")

    @property
    def method(self) -> str:
        """How its interval is computed: a clustered mean over records, or a cluster bootstrap."""
        return MEAN if self.values is not None else BOOTSTRAP

    def bounds(self, records: Sequence[dict]) -> tuple[float, float]:
        """The range of its values on ``records`` (for a difference of two: plus or minus its width)."""
        return self.range(records) if callable(self.range) else self.range

    def aggregate(self, scored) -> float | None:
        """Its value on the records of ``scored``: the mean of the values there are, or the statistic on
        the records as they are (one cluster drawn once); None where undefined."""
        if self.values is not None:
            kept = [v for v in self.values(scored) if v is not None]
            return float(np.mean(kept)) if kept and self.defined(scored) else None
        value = float(self.statistic(scored, np.zeros(len(scored.records), int), 1)(np.ones((1, 1)))[0])
        return None if np.isnan(value) else value


METRICS: dict[str, dict[str, Metric]] = {}  # task kind -> metric name -> metric


def register_metric(metric: Metric) -> Metric:
    """Add ``metric`` for each of its task kinds (a second definition of a name for a kind is refused)."""
    for kind in metric.kinds:
        if metric.name in METRICS.setdefault(kind, {}):
            raise ValueError(f"metric {metric.name!r} is already registered for {kind} tasks")
        METRICS[kind][metric.name] = metric
    return metric


def unregister_metric(metric: Metric) -> None:
    for kind in metric.kinds:
        METRICS.get(kind, {}).pop(metric.name, None)


def metrics_of(kind: str) -> dict[str, Metric]:
    """The metrics of a task kind, in registration order."""
    return METRICS.get(kind, {})


# ---------------------------------------------------------------- statistics of confusion matrices


@dataclass(frozen=True)
class ClassScores:
    """Per draw and class, from confusion matrices ``conf[draw, gold, predicted]`` (weighted counts): support,
    how often predicted, hits, and with scikit-learn's zero_division=0 precision, recall and F1."""

    support: np.ndarray
    predicted: np.ndarray
    hits: np.ndarray
    precision: np.ndarray
    recall: np.ndarray
    f1: np.ndarray

    @classmethod
    def of(cls, conf: np.ndarray) -> "ClassScores":
        hits, support, predicted = np.diagonal(conf, axis1=1, axis2=2), conf.sum(2), conf.sum(1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return cls(support, predicted, hits, np.where(predicted > 0, hits / predicted, 0.0),
                       np.where(support > 0, hits / support, 0.0),
                       np.where(support + predicted > 0, 2 * hits / (support + predicted), 0.0))

    @property
    def present(self) -> np.ndarray:
        """The classes with gold instances in each draw."""
        return self.support > 0


def _mean_over(values: np.ndarray, chosen: np.ndarray) -> np.ndarray:
    """Per draw, the mean of ``values`` over the ``chosen`` classes; NaN where none is chosen."""
    if len(values) == 1:  # one matrix (a point estimate): the mean of the chosen values, as scikit-learn takes it
        kept = values[0][chosen[0]]
        return np.array([kept.mean() if kept.size else np.nan])
    with np.errstate(invalid="ignore", divide="ignore"):
        return (values * chosen).sum(1) / chosen.sum(1)


def macro_f1(scores: ClassScores, labels: np.ndarray | None = None) -> np.ndarray:
    """Mean F1 over the classes present in the gold (and among ``labels``, a class mask, when given)."""
    chosen = scores.present if labels is None else scores.present & labels
    return _mean_over(scores.f1, chosen)


def balanced_accuracy(scores: ClassScores) -> np.ndarray:
    """Mean recall over the classes present in the gold."""
    return _mean_over(scores.recall, scores.present)


def recall_of(scores: ClassScores, classes: np.ndarray) -> np.ndarray:
    """Mean recall over the present classes of ``classes`` (a class mask): NaN where none is present."""
    return _mean_over(scores.recall, scores.present & classes)


def _prediction_shares(scores: ClassScores, answers: np.ndarray | None) -> np.ndarray:
    predicted = scores.predicted if answers is None else scores.predicted * answers
    return predicted / np.maximum(1e-300, predicted.sum(1, keepdims=True))


def predicted_labels(scores: ClassScores, answers: np.ndarray | None = None) -> np.ndarray:
    """Per draw, how many classes were predicted at least once (``answers``: a class mask leaving out what is no
    label, a failed answer): with the gold's count, the label-collapse line."""
    return (_prediction_shares(scores, answers) > 0).sum(1).astype(float)


def prediction_entropy(scores: ClassScores, answers: np.ndarray | None = None) -> np.ndarray:
    """Per draw, the entropy in bits of the predicted classes' distribution: 0 when one class is predicted for
    every instance, log2 K when K classes are predicted equally often."""
    shares = _prediction_shares(scores, answers)
    return -(shares * np.log2(np.where(shares > 0, shares, 1.0))).sum(1) + 0.0


# ---------------------------------------------------------------- "few": classes by their training frequency

FREQUENCY_GROUPS = ("head", "medium", "tail")


def frequency_group(share: float, head: float, tail: float) -> str:
    """A class's group by its share of its scenario's training instances: head at ``head`` or above, tail
    (the few-shot classes) below ``tail``, medium between."""
    return "head" if share >= head else "tail" if share < tail else "medium"
