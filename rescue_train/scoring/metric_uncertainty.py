"""Error bars on every metric of an evaluation, and paired differences between two evaluations.

The statistics are :mod:`rescue_train.scoring.uncertainty`'s, the metrics :mod:`rescue_train.scoring.metrics`'s;
this module joins them. The cluster of a record is its split unit (``unit``: a couple or a family).

* :func:`result_uncertainty`: ``{scope: {metric: entry}}`` for every metric of ``aggregate`` that is a number
  (counts aside): a mean over records (``metrics.record_values``) gets its CR2 standard error and an interval
  inside its range (``Metric.bounds``; ``uncertainty.clustered_mean``); any other metric (``metrics.resampled_metrics``) an
  expanded percentile cluster bootstrap that resamples units within scenario. Each entry's estimate is checked to be the aggregate's value.
* :func:`paired_differences`: one result minus another on the instances both scored, per scope and metric:
  for a mean, the same estimator over per-instance differences (the metric's range [lo, hi] becomes
  [lo - hi, hi - lo]) and its t test
  (Bell-McCaffrey df); otherwise the cluster bootstrap of the difference (both results on the same draws) and
  its bootstrap p.
"""

from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import numpy as np

from .metrics import (SCOPES, aggregate, metric_value, record_values, resampled_metrics, scope_labels,
                      task_metrics)
from .uncertainty import (BOOTSTRAP_DRAWS, BOOTSTRAP_SEED, MIN_CLUSTERS, Bootstrap, cluster_bootstrap, cluster_index,
                          clustered_mean, no_interval, stream_seed)

# Numbers of an aggregate that count things rather than measure them: no interval.
COUNTS = ("n", "parse_failures", "truncated", "refused", "empty", "judged", "judge_failures", "tp", "fp", "fn", "tn",
          "gold_labels")
NO_UNIT = "the records carry no unit (cluster): results written before units were recorded"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _checked(task: str, scope: str, metric: str, entry: dict[str, Any], expected: float | None) -> dict[str, Any]:
    """``entry``, when its estimate is the number the results report; otherwise (the metric's two
    definitions in metrics.py drifted apart: a bug) no interval, with a warning, rather than an interval
    around another number."""
    estimate = entry["estimate"]
    if expected is None or (estimate is not None and math.isclose(estimate, expected, rel_tol=1e-9, abs_tol=1e-12)):
        return entry
    reason = (f"internal check failed: the interval's estimate {estimate} is not the aggregate's "
              f"{expected} (metrics.record_values / resampled_metrics disagree with aggregate)")
    warnings.warn(f"{task} {scope} {metric}: {reason}", RuntimeWarning, stacklevel=2)
    return {**entry, "estimate": expected, "se": None, "ci": None, "reason": reason,
            **({"p": None} if "p" in entry else {})}


def _clusters(records: Sequence[dict]) -> tuple[np.ndarray, np.ndarray] | None:
    """(each record's cluster position, each cluster's scenario), or None when a record has no unit."""
    if any(r.get("unit") is None for r in records):
        return None
    names, index = cluster_index([r["unit"] for r in records])
    scenario = {r["unit"]: r["scenario"] for r in records}
    return index, np.array([scenario[n] for n in names])


def _metrics(task: str, records: Sequence[dict], space: Sequence[str] | None, index: np.ndarray, n_clusters: int,
             judge_on_failure: str = "floor"):
    """(per-record values of the mean metrics, the resampled statistic or None, every metric's name)."""
    values = record_values(task, records, judge_on_failure)
    statistic = resampled_metrics(task, records, space, index, n_clusters)
    resampled = list(statistic(np.ones((1, n_clusters)))) if statistic else []
    return values, statistic, list(values) + resampled


def covered_metrics(task: str, records: Sequence[dict]) -> list[str]:
    """The names of the metrics that get an interval for ``task``'s records (means, then resampled ones)."""
    return _metrics(task, records, None, np.zeros(len(records), int), 1)[2]


def _means(task: str, scope: str, values: dict[str, list], index: np.ndarray, wanted: Sequence[str],
           expected: dict[str, float] | None, test: bool,
           ranges: dict[str, tuple[float, float] | None] | None = None) -> dict[str, dict]:
    """Each wanted mean's entry; ``ranges`` (metric -> its range, the Metric's) keeps the interval inside it
    (default: ``natural_bounds`` of the values)."""
    out = {}
    for metric in wanted:
        kept = [(v, i) for v, i in zip(values[metric], index) if v is not None]
        bounds = ranges[metric] if ranges and metric in ranges else "natural"
        entry = clustered_mean([v for v, _ in kept], [i for _, i in kept], bounds=bounds, test=test, where=scope)
        out[metric] = _checked(task, scope, metric, entry, None if expected is None else expected[metric])
    return out


def _ranges(task: str, records: Sequence[dict], paired: bool = False) -> dict[str, tuple[float, float]]:
    """Each of the task's metrics' range on ``records`` (``Metric.bounds``); for a difference of two
    results, [lo - hi, hi - lo]."""
    out = {}
    for name, metric in task_metrics(task).items():
        low, high = metric.bounds(records)
        out[name] = (low - high, high - low) if paired else (low, high)
    return out


def _bootstrapped(task: str, scope: str, statistic, names: list[str], strata: np.ndarray, n: int,
                  expected: dict[str, float], test: bool, *seed_names: str) -> dict[str, dict]:
    if not names:
        return {}
    seed = stream_seed(BOOTSTRAP_SEED, task, scope, *seed_names)

    def chosen(counts: np.ndarray) -> np.ndarray:
        values = statistic(counts)
        return np.stack([values[m] for m in names])

    drawn = cluster_bootstrap(chosen, strata, draws=BOOTSTRAP_DRAWS, seed=seed, where=scope, minimum=MIN_CLUSTERS)
    if not isinstance(drawn, Bootstrap):
        return {m: {**no_interval(drawn, estimate=expected[m], n=n, clusters=len(strata),
                                  method="expanded percentile cluster bootstrap"), **({"p": None} if test else {})}
                for m in names}
    out = {}
    for i, metric in enumerate(names):
        out[metric] = _checked(task, scope, metric, drawn.entry(i, n, test=test), expected[metric])
    return out


def _scoped(records: Sequence[dict], scope: str) -> list[dict]:
    return [r for r in records if scope == "both" or r["scenario"] == scope]


def result_uncertainty(task: str, records: Sequence[dict], label_spaces: dict[str, Sequence[str]] | None = None,
                       aggregates: dict[str, dict[str, Any]] | None = None) -> dict[str, dict[str, dict]]:
    """Every numeric metric's uncertainty per scope (see the module's doc); ``aggregates`` (``aggregate`` of
    the same records) saves recomputing them."""
    aggregates = aggregates if aggregates is not None else aggregate(task, records, label_spaces)
    on_failure = next((s["judge_on_failure"] for s in aggregates.values() if "judge_on_failure" in s), "floor")
    out: dict[str, dict[str, dict]] = {}
    for scope, scoped in aggregates.items():
        chosen = _scoped(records, scope)
        clusters = _clusters(chosen)
        index, strata = clusters if clusters else (np.zeros(len(chosen), int), np.array([scope]))
        values, statistic, names = _metrics(task, chosen, scope_labels(label_spaces, scope), index, len(strata),
                                            on_failure)
        expected = {m: metric_value(scoped, m) for m in names}
        wanted = [m for m in names if _number(expected[m])]
        if clusters is None:
            out[scope] = {m: no_interval(NO_UNIT, estimate=expected[m], n=len(chosen), clusters=0, method="none")
                          for m in wanted}
            continue
        entries = _means(task, scope, values, index, [m for m in wanted if m in values], expected, test=False,
                         ranges=_ranges(task, chosen))
        entries.update(_bootstrapped(task, scope, statistic, [m for m in wanted if m not in values], strata,
                                     len(chosen), expected, False))
        out[scope] = {m: entries[m] for m in wanted}
    return out


def paired_differences(task: str, records: Sequence[dict], reference: Sequence[dict],
                       label_spaces: dict[str, Sequence[str]] | None = None,
                       metrics: Sequence[str] | None = None, judge_on_failure: str = "floor") -> list[dict[str, Any]]:
    """``records`` minus ``reference`` on the instances both scored (matched by id), per scope and metric
    (``metrics``: default every one with an interval): cells with ``task``, ``scenario``, ``metric``,
    ``diff``, ``se``, ``ci``, ``p``, ``n_shared``, ``clusters``, ``method`` (and ``reason`` where none can be
    given). A metric without a value in one of the two (no judge, say) is left out."""
    theirs_by_id = {r["id"]: r for r in reference}
    mine_all = [r for r in records if r["id"] in theirs_by_id]
    theirs_all = [theirs_by_id[r["id"]] for r in mine_all]
    if not mine_all:
        return []
    names = list(metrics) if metrics is not None else covered_metrics(task, mine_all)
    differing = sum(r["gold"] != q["gold"] for r, q in zip(mine_all, theirs_all))
    mine_agg = aggregate(task, mine_all, label_spaces, judge_on_failure)
    theirs_agg = aggregate(task, theirs_all, label_spaces, judge_on_failure)
    cells = []
    for scope in [s for s in SCOPES if s in mine_agg]:
        mine, theirs = _scoped(mine_all, scope), _scoped(theirs_all, scope)
        pair = {m: (metric_value(mine_agg[scope], m), metric_value(theirs_agg[scope], m)) for m in names}
        present = [m for m in names if _number(pair[m][0]) and _number(pair[m][1])]
        clusters = _clusters(mine)
        reason = (f"the gold answers differ on {differing} shared instances (other data or build options)"
                  if differing else None if clusters is not None else NO_UNIT)
        if reason:
            entries = {m: {**no_interval(reason, estimate=pair[m][0] - pair[m][1], n=len(mine), clusters=0,
                                         method="none"), "p": None} for m in present}
        else:
            index, strata = clusters
            space = scope_labels(label_spaces, scope)
            values_mine, mine_stat, _ = _metrics(task, mine, space, index, len(strata), judge_on_failure)
            values_theirs, theirs_stat, _ = _metrics(task, theirs, space, index, len(strata), judge_on_failure)
            # A mean's difference: the mean of the per-instance differences where both have a value.
            differences = {m: [None if a is None or b is None else a - b
                               for a, b in zip(values_mine[m], values_theirs[m])] for m in values_mine}
            entries = _means(task, scope, differences, index, [m for m in present if m in differences], None,
                             test=True, ranges=_ranges(task, mine + theirs, paired=True))

            def statistic(counts, mine_stat=mine_stat, theirs_stat=theirs_stat):
                a, b = mine_stat(counts), theirs_stat(counts)
                return {m: a[m] - b[m] for m in a}

            entries.update(_bootstrapped(task, scope, statistic, [m for m in present if m not in differences],
                                         strata, len(mine), {m: pair[m][0] - pair[m][1] for m in present}, True,
                                         "paired"))
        for metric in present:
            entry = entries[metric]
            cells.append({"task": task, "scenario": scope, "metric": metric, "diff": entry["estimate"],
                          "se": entry["se"], "ci": entry["ci"], "p": entry["p"], "n_shared": entry["n"],
                          "clusters": entry["clusters"],
                          **{k: v for k, v in entry.items() if k not in ("estimate", "se", "ci", "p", "n", "clusters")}})
    return cells
