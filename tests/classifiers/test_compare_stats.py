"""The comparison's tests of significance: the exact and random paired permutation tests over units, Holm's
correction, and their behaviour on synthetic data built for the purpose (a null, and a planted effect)."""

import numpy as np
import pytest

from rescue_train.compare.config import EvalSettings
from rescue_train.compare.stats import Predictions, add_holm, paired_test, scope_statistics

GROUP_OF = np.array([0, 1, 2, 2])  # classes 0 head, 1 medium, 2 and 3 tail


def _predictions(gold: np.ndarray, correct: np.ndarray) -> Predictions:
    """One seed: the gold when ``correct``, else the next class, ranked second."""
    pred = np.where(correct, gold, (gold + 1) % 2)
    return Predictions(gold, pred[None], np.where(correct, 1.0, 2.0)[None])


def test_exact_paired_permutation_p_value_by_hand():
    # Units u0 (2 instances), u1, u2 (1 each). A is right on u0 and u1, B only on u2: accuracy 3/4 vs 1/4.
    # Swapping a unit flips the sign of its share of the difference, (2, 1, -1)/4: the 8 patterns give
    # (4, 2, 2, 0, 0, -2, -2, -4)/4. Observed 2/4: P(D >= 2/4) = 3/8, P(D <= 2/4) = 7/8, two-sided 2 * 3/8.
    gold = np.zeros(4, dtype=int)
    units = np.array(["u0", "u0", "u1", "u2"])
    a = _predictions(gold, np.array([True, True, True, False]))
    b = _predictions(gold, np.array([False, False, False, True]))
    exact = paired_test(a, b, units, 2, np.array([0, 2]), EvalSettings(permutations=8))
    assert exact["accuracy"]["p_value"] == pytest.approx(0.75)
    assert exact["accuracy"]["test"] == "exact: all 2^3 = 8 unit swap patterns"
    # Fewer resamples than patterns: random patterns, p = 2 * (count + 1) / (R + 1), a multiple of 2/5.
    drawn = paired_test(a, b, units, 2, np.array([0, 2]), EvalSettings(permutations=4))
    assert drawn["accuracy"]["test"].startswith("random: 4 of 2^3 unit swap patterns")
    assert (drawn["accuracy"]["p_value"] * 5 / 2) == pytest.approx(round(drawn["accuracy"]["p_value"] * 5 / 2))
    # One unit cannot be permuted: no p-value rather than a meaningless 1.
    single = paired_test(a, b, np.array(["u0"] * 4), 2, np.array([0, 2]), EvalSettings(permutations=8))
    assert single["accuracy"]["p_value"] is None and single["accuracy"]["test"].startswith("none")


def test_holm_adjusts_within_each_metric_over_strategies_and_scopes():
    # Raw p (0.01, 0.04, 0.03, 0.2) -> sorted 0.01*4 = 0.04, 0.03*3 = 0.09, max(0.04*2, 0.09) = 0.09, 0.2.
    def tests(*ps):
        return {f"s{i}": {"vs_none": {"macro_f1": {"p_value": p}, "accuracy": {"p_value": None}}}
                for i, p in enumerate(ps)}

    scopes = {"couple": {"strategies": {"none": {}, **tests(0.01, 0.04)}},
              "both": {"strategies": tests(0.03, 0.2)}}
    add_holm(scopes, metrics=("macro_f1", "accuracy"))
    adjusted = [s["vs_none"]["macro_f1"]["p_holm"] for scope in scopes.values() for name, s in
                scope["strategies"].items() if name != "none"]
    assert adjusted == pytest.approx([0.04, 0.09, 0.09, 0.2])
    assert scopes["couple"]["strategies"]["s0"]["vs_none"]["accuracy"]["p_holm"] is None


def _synthetic(rng, tail_right: float, n_units: int = 24, per_unit: int = 6):
    """Gold labels of a long tail (50/30/12/8%) in units whose difficulty varies (a unit effect on the
    log-odds of a right answer, so rows of one unit are not independent); head and medium classes are
    answered right with probability ~0.6, tail classes with ``tail_right`` (both before the unit effect)."""
    gold = rng.choice(4, size=n_units * per_unit, p=[0.5, 0.3, 0.12, 0.08])
    units = np.repeat(np.arange(n_units), per_unit).astype(str)
    unit_effect = np.repeat(rng.normal(0.0, 1.5, n_units), per_unit)
    base = np.where(GROUP_OF[gold] == 2, tail_right, 0.6)

    def model(draw_rng):
        log_odds = np.log(base / (1 - base)) + unit_effect
        right = draw_rng.random(len(gold)) < 1 / (1 + np.exp(-log_odds))
        wrong = (gold + draw_rng.integers(1, 4, len(gold))) % 4
        rank = np.where(right, 1, draw_rng.integers(2, 5, len(gold)))
        return Predictions(gold, np.where(right, gold, wrong)[None], rank[None].astype(float))

    return model, units


def test_null_two_identical_strategies_reject_at_about_the_nominal_rate():
    """Two draws of the same model (different seeds) on the same instances: the share of p < 0.05 over
    many synthetic benchmarks stays near 5% (binomial sd over 300 draws: 1.3 points)."""
    settings = EvalSettings(bootstrap=0, permutations=199, stats_seed=0)
    rejected = {k: 0 for k in ("accuracy", "macro_f1", "tail_recall")}
    draws = 300
    for draw in range(draws):
        rng = np.random.default_rng(1000 + draw)
        model, units = _synthetic(rng, tail_right=0.3)
        arrays = {"none": model(rng), "same_model_other_seed": model(rng)}
        tests = scope_statistics(arrays, units, 4, GROUP_OF, settings)["same_model_other_seed"]["vs_none"]
        for k in rejected:
            rejected[k] += tests[k]["p_value"] < 0.05
    shares = {k: n / draws for k, n in rejected.items()}
    assert all(0.01 <= s <= 0.085 for s in shares.values()), shares  # discrete metrics run conservative


def test_planted_tail_effect_is_found():
    """A strategy truly better on the tail classes (right 85% instead of 30%) is found: its tail-recall
    difference is significant after Holm's correction in nearly every synthetic benchmark, while an
    identical copy of the reference is not."""
    settings = EvalSettings(bootstrap=200, permutations=499, stats_seed=0)
    found, copy_found, draws = 0, 0, 20
    for draw in range(draws):
        rng = np.random.default_rng(2000 + draw)
        reference, units = _synthetic(rng, tail_right=0.3)
        better, _ = _synthetic(np.random.default_rng(2000 + draw), tail_right=0.85)
        scope = {"strategies": scope_statistics({"none": reference(rng), "tail_better": better(rng),
                                                 "copy": reference(rng)}, units, 4, GROUP_OF, settings)}
        add_holm({"both": scope}, metrics=("tail_recall",))
        tail = scope["strategies"]["tail_better"]["vs_none"]["tail_recall"]
        found += tail["difference"] > 0 and tail["p_holm"] < 0.05 and tail["ci"][0] > 0
        copy_found += scope["strategies"]["copy"]["vs_none"]["tail_recall"]["p_holm"] < 0.05
    assert found >= 18 and copy_found <= 2, (found, copy_found)
