"""The comparison's statistics: headline metrics from confusion matrices, unit bootstrap intervals, paired
permutation tests over units with Holm's correction, and the summary of all runs.

Uncertainty: 95% percentile bootstrap intervals resample units (couples / families), not rows, within
scenario (scoring/uncertainty.py's cluster bootstrap, the evaluator's too; a scope with one unit gets none). Each
strategy is compared with its reference (``none``) on the same instances by a paired permutation test over
units (``scipy.stats.permutation_test``, ``permutation_type="samples"``: a unit's predictions of the two
strategies are swapped or not): exact, over all 2^u swap patterns, when 2^u is at most
``evaluation.permutations``, else that many random patterns with the add-one p-value. Holm's correction
(``statsmodels``) runs over all tests of one metric (every strategy and scope). The paired bootstrap
interval of the difference uses the same unit resamples for both strategies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..classifiers.classifier import LabelSpace
from ..scoring.metric import (FREQUENCY_GROUPS, ClassScores, balanced_accuracy, frequency_group, macro_f1,
                              predicted_labels, prediction_entropy, recall_of)
from ..scoring.uncertainty import Bootstrap, cluster_bootstrap
from .config import CompareConfig, EvalSettings, strategy_summary

HEADLINE = ("accuracy", "macro_f1", "balanced_accuracy", "weighted_f1", "mrr",
            "head_recall", "medium_recall", "tail_recall", "predicted_labels", "prediction_entropy")
COUNTS = ("predicted_labels", "prediction_entropy")  # the label-collapse line: a count and bits, not percents
GROUPS = FREQUENCY_GROUPS
TEST_BATCH = 250  # swap patterns scored at once (memory: seeds x batch x instances)


def frequency_groups(train_counts: dict[str, int], space: LabelSpace, head: float, tail: float) -> dict[str, str]:
    """class name -> head | medium | tail, by its share of its scenario's training instances."""
    groups = {}
    for scenario in sorted({s for s, _ in space.classes}):
        names = [n for (s, _), n in zip(space.classes, space.names) if s == scenario]
        total = sum(train_counts.get(n, 0) for n in names) or 1
        for n in names:
            groups[n] = frequency_group(train_counts.get(n, 0) / total, head, tail)
    return groups


def metrics_from_confusion(conf: np.ndarray, reciprocal_rank_sum: np.ndarray, group_of: np.ndarray
                           ) -> dict[str, np.ndarray]:
    """Headline metrics for a batch of confusion matrices ``conf[b, gold, predicted]`` (weighted counts)
    and the sums of the gold's reciprocal ranks. Macro scores average over the classes present in the
    gold, as metrics.aggregate does; a frequency group without test instances gives nan."""
    scores = ClassScores.of(conf)
    total = scores.support.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {"accuracy": scores.hits.sum(1) / total, "macro_f1": macro_f1(scores),
               "balanced_accuracy": balanced_accuracy(scores),
               "weighted_f1": (scores.f1 * scores.support).sum(1) / total, "mrr": reciprocal_rank_sum / total,
               "predicted_labels": predicted_labels(scores), "prediction_entropy": prediction_entropy(scores)}
    for code, group in enumerate(GROUPS):
        out[f"{group}_recall"] = recall_of(scores, (group_of == code)[None, :])  # nan when the group is absent
    return out


def batch_metrics(gold: np.ndarray, preds: np.ndarray, ranks: np.ndarray, weights: np.ndarray, n_classes: int,
                  group_of: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics for R variants at once, averaged over seeds: ``preds``/``ranks`` are seeds x R x instances
    (or broadcastable to it), ``weights`` R x instances (bootstrap multiplicities, or ones)."""
    n_variants = weights.shape[0]
    offsets = np.arange(n_variants)[:, None] * n_classes ** 2
    per_seed = []
    for pred, rank in zip(preds, ranks):
        cells = (gold[None, :] * n_classes + np.broadcast_to(pred, weights.shape) + offsets).ravel()
        conf = np.bincount(cells, weights=weights.ravel(), minlength=n_variants * n_classes ** 2)
        reciprocal = (weights / np.broadcast_to(rank, weights.shape)).sum(1)
        per_seed.append(metrics_from_confusion(conf.reshape(n_variants, n_classes, n_classes), reciprocal, group_of))
    return {k: np.mean([m[k] for m in per_seed], axis=0) for k in HEADLINE}


@dataclass
class Predictions:
    """One strategy's pooled test predictions as arrays: seeds x instances (instances in a fixed order)."""

    gold: np.ndarray
    pred: np.ndarray
    rank: np.ndarray


def as_arrays(records: list[dict], space: LabelSpace, order: list[str], seeds: list[int]) -> Predictions:
    by_seed: dict[int, dict[str, dict]] = {s: {} for s in seeds}
    for record in records:
        for p in record["predictions"]:
            by_seed[record["seed"]][p["id"]] = p
    first = by_seed[seeds[0]]
    gold = np.array([space.index(first[i]["scenario"], first[i]["gold"]) for i in order])
    pred = np.array([[space.index(by_seed[s][i]["scenario"], by_seed[s][i]["prediction"][0]) for i in order]
                     for s in seeds])
    rank = np.array([[by_seed[s][i]["prediction"].index(by_seed[s][i]["gold"]) + 1 for i in order] for s in seeds])
    return Predictions(gold, pred, rank)


def _number(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def paired_test(a: Predictions, b: Predictions, units: np.ndarray, n_classes: int, group_of: np.ndarray,
                settings: EvalSettings) -> dict[str, dict[str, Any]]:
    """Paired permutation test over units of every headline metric, ``a`` minus ``b`` (two-sided).

    scipy permutes each unit's pair (a, b); the data handed to it are unit numbers (``a``'s copy 0..u-1,
    ``b``'s copy u..2u-1, one row per metric), so the statistic reads off which units are swapped and
    scores the swapped predictions of all seeds with :func:`batch_metrics`."""
    from scipy.stats import permutation_test

    unit_names, unit_index = np.unique(units, return_inverse=True)
    n_units = len(unit_names)

    def differences(x, y, axis=-1):
        swapped = np.asarray(x)[..., 0, :] >= n_units  # (patterns, units), or (units,) for the observed data
        swap = swapped.reshape(-1, n_units)[:, unit_index]
        ones = np.ones(swap.shape)
        picked = {}
        for name, first, second in (("a", a, b), ("b", b, a)):
            pred = np.where(swap[None], second.pred[:, None, :], first.pred[:, None, :])
            rank = np.where(swap[None], second.rank[:, None, :], first.rank[:, None, :])
            picked[name] = batch_metrics(a.gold, pred, rank, ones, n_classes, group_of)
        out = np.stack([picked["a"][k] - picked["b"][k] for k in HEADLINE], axis=-1)
        return out.reshape(*swapped.shape[:-1], len(HEADLINE))

    if n_units < 2:  # swapping the only unit just mirrors the difference: p would be 1 whatever the data
        return {k: {"p_value": None, "test": "none: one unit cannot be permuted"} for k in HEADLINE}
    copies = np.tile(np.arange(n_units), (len(HEADLINE), 1))
    exact = 2 ** n_units <= settings.permutations
    result = permutation_test((copies, copies + n_units), differences, permutation_type="samples",
                              vectorized=True, n_resamples=settings.permutations, batch=TEST_BATCH,
                              alternative="two-sided", axis=-1, rng=settings.stats_seed)
    patterns = int(result.null_distribution.shape[0])
    test = (f"exact: all 2^{n_units} = {patterns} unit swap patterns" if exact
            else f"random: {patterns} of 2^{n_units} unit swap patterns, p = (extreme + 1) / ({patterns} + 1)")
    return {k: {"p_value": None if np.isnan(result.statistic[i]) else float(result.pvalue[i]), "test": test}
            for i, k in enumerate(HEADLINE)}


def scope_statistics(arrays: dict[str, Predictions], units: np.ndarray, n_classes: int, group_of: np.ndarray,
                     settings: EvalSettings, references: dict[str, str] | None = None,
                     strata: np.ndarray | None = None) -> dict[str, dict]:
    """Point estimates, unit-bootstrap intervals, and paired tests of each strategy against its reference
    (``references``: strategy -> reference strategy; default: every strategy but ``none`` against ``none``).
    ``strata`` (each instance's scenario) makes the bootstrap resample units within scenario."""
    if references is None:
        references = {name: "none" for name in arrays if name != "none"}
    unit_names, unit_index = np.unique(units, return_inverse=True)
    unit_strata = np.zeros(len(unit_names), dtype=int) if strata is None else \
        np.array([strata[unit_index == u][0] for u in range(len(unit_names))])
    tested = [(name, reference) for name, reference in references.items() if name in arrays]
    ones = np.ones((1, len(units)))

    def metrics(p: Predictions, weights: np.ndarray) -> dict[str, np.ndarray]:
        return batch_metrics(p.gold, p.pred[:, None, :], p.rank[:, None, :], weights, n_classes, group_of)

    def every_statistic(counts: np.ndarray) -> np.ndarray:
        # One set of unit draws shared by all strategies, so that differences are paired.
        weights = counts[:, unit_index]
        scored = {name: metrics(p, weights) for name, p in arrays.items()}
        return np.stack([scored[name][k] for name in arrays for k in HEADLINE] +
                        [scored[name][k] - scored[ref][k] for name, ref in tested for k in HEADLINE])

    drawn = cluster_bootstrap(every_statistic, unit_strata, draws=settings.bootstrap, seed=settings.stats_seed) \
        if settings.bootstrap else None
    row = {key: i for i, key in enumerate([(name, k) for name in arrays for k in HEADLINE] +
                                          [(name, ref, k) for name, ref in tested for k in HEADLINE])}

    def interval(*key) -> list[float] | None:
        return drawn.interval(row[key], settings.confidence) if isinstance(drawn, Bootstrap) else None

    estimates = {name: metrics(p, ones) for name, p in arrays.items()}
    out = {}
    for name, p in arrays.items():
        result: dict[str, Any] = {"estimate": {k: _number(estimates[name][k][0]) for k in HEADLINE},
                                  "ci": {k: interval(name, k) for k in HEADLINE}}
        reference = references.get(name)
        if reference is not None:
            tests = paired_test(p, arrays[reference], units, n_classes, group_of, settings) \
                if settings.permutations > 0 else {}
            result["vs_none"] = {k: {"reference": reference, "difference": _number(
                estimates[name][k][0] - estimates[reference][k][0]), "ci": interval(name, reference, k),
                "p_value": tests.get(k, {}).get("p_value"), "test": tests.get(k, {}).get("test")}
                for k in HEADLINE}
        out[name] = result
    return out


def add_holm(scopes: dict[str, dict], metrics: tuple[str, ...] = HEADLINE) -> None:
    """Holm-adjusted p-values (``p_holm``) beside the raw ones: one family per metric, holding the tests of
    every strategy in every scope."""
    from statsmodels.stats.multitest import multipletests

    for metric in metrics:
        tests = [s["vs_none"][metric] for scope in scopes.values() for s in scope["strategies"].values()
                 if "vs_none" in s]
        tested = [t for t in tests if t["p_value"] is not None]
        for t in tests:
            t["p_holm"] = None
        if tested:
            adjusted = multipletests([t["p_value"] for t in tested], method="holm")[1]
            for t, p in zip(tested, adjusted):
                t["p_holm"] = float(p)


def per_class(p: Predictions, space: LabelSpace) -> dict[str, dict[str, float]]:
    """Recall and F1 per class (mean over seeds), for classes with test instances."""
    from sklearn.metrics import precision_recall_fscore_support

    present = sorted(set(p.gold.tolist()))
    scores = [precision_recall_fscore_support(p.gold, p.pred[s], labels=present, zero_division=0)
              for s in range(len(p.pred))]
    return {space.names[c]: {"recall": float(np.mean([sc[1][i] for sc in scores])),
                             "f1": float(np.mean([sc[2][i] for sc in scores])), "support": int(scores[0][3][i])}
            for i, c in enumerate(present)}


def confusion(p: Predictions, n_classes: int) -> list[list[float]]:
    """Confusion counts (gold rows, predicted columns), averaged over seeds."""
    mats = [np.bincount(p.gold * n_classes + p.pred[s], minlength=n_classes ** 2) for s in range(len(p.pred))]
    return np.mean(mats, axis=0).reshape(n_classes, n_classes).tolist()


def summarise(config: CompareConfig, records: list[dict], space: LabelSpace, references: dict[str, str] | None = None,
              summaries: dict[str, str] | None = None) -> tuple[dict, dict]:
    """Every statistic of the comparison from its run records. ``references`` (strategy -> the strategy
    it is tested against; default ``none``) and ``summaries`` (strategy -> one line) serve merged
    comparisons, whose strategy names carry their learner."""
    from ..scoring.metrics import aggregate

    seeds = list(config.seeds)
    names = list(config.strategies)
    references = references if references is not None else {s: "none" for s in names if s != "none"}
    first = next(s for s in names if s not in references)  # a reference: its runs fix the instances' order
    by_strategy = {s: [r for r in records if r["strategy"] == s] for s in names}
    reference = [r for r in by_strategy[first] if r["seed"] == seeds[0]]
    train_counts: dict[str, int] = {}
    for r in reference:  # training counts summed over the evaluated folds
        for name, n in r["train_counts"].items():
            train_counts[name] = train_counts.get(name, 0) + n
    groups = frequency_groups(train_counts, space, config.evaluation.head_share, config.evaluation.tail_share)
    group_of = np.array([GROUPS.index(groups[n]) for n in space.names])
    test_rows = [p for r in reference for p in r["predictions"]]
    order = [p["id"] for p in test_rows]
    arrays = {s: as_arrays(by_strategy[s], space, order, seeds) for s in names}
    scenario = np.array([p["scenario"] for p in test_rows])
    units = np.array([p["unit"] for p in test_rows])
    label_spaces = {sc: [label for s, label in space.classes if s == sc] for sc in ("couple", "family")}
    scopes = {}
    for scope in ("couple", "family", "both"):
        keep = np.ones(len(order), dtype=bool) if scope == "both" else scenario == scope
        if not keep.any():
            continue
        sub = {s: Predictions(p.gold[keep], p.pred[:, keep], p.rank[:, keep]) for s, p in arrays.items()}
        scopes[scope] = {"n": int(keep.sum()), "units": int(len(set(units[keep]))),
                         "strategies": scope_statistics(sub, units[keep], len(space), group_of, config.evaluation,
                                                        references, strata=scenario[keep])}
    add_holm(scopes)
    strategies, confusions = {}, {}
    for s, p in arrays.items():
        records_s = by_strategy[s]
        strategies[s] = {
            "summary": (summaries or {}).get(s) or strategy_summary(s, config.learner), "per_class": per_class(p, space),
            "paper_metrics_by_seed": {seed: aggregate(config.task, [x for r in records_s if r["seed"] == seed
                                                                   for x in r["predictions"]], label_spaces)
                                      for seed in seeds},
            "taus": [r["tau"] for r in records_s if r["tau"] is not None],
            "train_seconds": sum(r["seconds"] for r in records_s),
            "runs": [r.get("file", f"runs/{s}/fold{r['fold']}_seed{r['seed']}.json") for r in records_s]}
        confusions[s] = confusion(p, len(space))
    table = {}
    for name in strategies[first]["per_class"]:
        table[name] = {"group": groups[name], "support": strategies[first]["per_class"][name]["support"],
                       **{s: strategies[s]["per_class"][name]["recall"] for s in strategies}}
    results = {"task": config.task, "learner": config.learner, "folds": sorted({r["fold"] for r in reference}),
               "seeds": seeds, "labels": space.names, "groups": groups,
               "groups_rule": {"head": config.evaluation.head_share, "tail": config.evaluation.tail_share},
               "training_counts_over_folds": train_counts, "scopes": scopes, "strategies": strategies,
               "per_class_recall_table": table, "confusion_labels": space.names,
               "confusion": confusions}
    return results, confusions
