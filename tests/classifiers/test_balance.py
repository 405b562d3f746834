"""Every class weight, loss and sampler of balance.py against its formula, worked out by hand.

Loss example: logits z1 = (2, 0) with target 0, z2 = (0, 0) with target 1.
  CE:   l1 = log(1 + e^-2) = 0.126928, l2 = log 2 = 0.693147.
"""

import math
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np
import pytest
import torch

from rescue_train import rebalance
from rescue_train.classifiers import balance

L1, L2 = 0.1269280110, 0.6931471806
LOGITS = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
TARGETS = torch.tensor([0, 1])


def test_inverse_frequency_weights_are_n_over_k_times_count_and_zero_for_unseen_classes():
    # N = 10 over K = 3 present classes: 10/(3*6), 10/(3*3), 10/(3*1); the unseen class gets 0.
    assert rebalance.inverse_frequency_weights([6, 3, 1, 0]) == pytest.approx([10 / 18, 10 / 9, 10 / 3, 0.0])


def test_effective_number_weights_follow_cui_and_sum_to_the_number_of_classes():
    # beta=0.5: raw (1-b)/(1-b^1) = 1 and (1-b)/(1-b^2) = 0.5/0.75 = 2/3; sum 5/3 scaled to K=2 -> 1.2, 0.8.
    assert rebalance.effective_number_weights([1, 2, 0], 0.5) == pytest.approx([1.2, 0.8, 0.0])
    assert rebalance.effective_number_weights([5, 50], 0.0) == pytest.approx([1.0, 1.0])
    with pytest.raises(ValueError, match="beta"):
        rebalance.effective_number_weights([1, 2], 1.0)


def test_log_prior_counts_unseen_classes_once():
    assert rebalance.log_prior([3, 1, 0]) == pytest.approx([math.log(0.6), math.log(0.2), math.log(0.2)])


def test_ldam_margins_scale_with_count_to_the_minus_quarter():
    # 16^-1/4 = 0.5 and 1^-1/4 = 1, scaled so the largest is 0.5.
    assert rebalance.ldam_margins([16, 1], 0.5) == pytest.approx([0.25, 0.5])


def test_cross_entropy_plain_and_weighted():
    assert rebalance.cross_entropy(LOGITS, TARGETS).item() == pytest.approx((L1 + L2) / 2, abs=1e-6)
    weight = torch.tensor([1.0, 3.0])  # (1*l1 + 3*l2) / (1 + 3)
    assert rebalance.cross_entropy(LOGITS, TARGETS, weight).item() == pytest.approx((L1 + 3 * L2) / 4, abs=1e-6)


def test_focal_loss_and_class_balanced_focal():
    # p1 = 1/(1+e^-2) = 0.880797, (1-p1)^2 l1 = 0.0018036; p2 = 0.5, 0.25 l2 = 0.1732868.
    assert rebalance.focal_loss(LOGITS, TARGETS, 2.0).item() == pytest.approx((0.0018036 + 0.1732868) / 2, abs=1e-6)
    weight = torch.tensor([1.0, 3.0])
    assert rebalance.focal_loss(LOGITS, TARGETS, 2.0, weight).item() == pytest.approx(
        (0.0018036 + 3 * 0.1732868) / 4, abs=1e-6)
    # gamma = 0 is cross-entropy, weighted the same way as torch's.
    assert rebalance.focal_loss(LOGITS, TARGETS, 0.0, weight).item() == pytest.approx((L1 + 3 * L2) / 4, abs=1e-6)


def test_ldam_lowers_only_the_target_logit_by_its_margin():
    # margins (0.25, 0.5): z1 -> (1.75, 0): log(1+e^-1.75) = 0.160224; z2 -> (0, -0.5): log(1+e^0.5) = 0.974077.
    margins = torch.tensor([0.25, 0.5])
    assert rebalance.ldam_loss(LOGITS, TARGETS, margins).item() == pytest.approx((0.160224 + 0.974077) / 2, abs=1e-6)
    # scale s multiplies the lowered logits: s=2 -> z1 (3.5, 0), z2 (0, -1).
    expected = (math.log(1 + math.exp(-3.5)) + math.log(1 + math.exp(1.0))) / 2
    assert rebalance.ldam_loss(LOGITS, TARGETS, margins, scale=2.0).item() == pytest.approx(expected, abs=1e-6)


def test_logit_adjusted_loss_and_balanced_softmax():
    # counts (3, 1): log pi = (log .75, log .25). z1 + log pi: margin 2 + log 3 -> log(1 + e^-(2+log 3)) = 0.044124;
    # z2 + log pi = (log .75, log .25), target 1 -> -log .25 = log 4.
    prior = torch.tensor(rebalance.log_prior([3, 1]), dtype=torch.float32)
    expected = (0.0441238 + math.log(4)) / 2
    assert rebalance.logit_adjusted_loss(LOGITS, TARGETS, prior, 1.0).item() == pytest.approx(expected, abs=1e-6)
    # tau = 0 is plain cross-entropy; balanced softmax (z + log n_c) equals tau = 1.
    assert rebalance.logit_adjusted_loss(LOGITS, TARGETS, prior, 0.0).item() == pytest.approx((L1 + L2) / 2, abs=1e-6)
    log_counts = torch.log(torch.tensor([3.0, 1.0]))
    assert rebalance.cross_entropy(LOGITS + log_counts, TARGETS).item() == pytest.approx(expected, abs=1e-6)


def test_masked_classes_at_minus_infinity_change_no_loss():
    masked = torch.tensor([[2.0, 0.0, float("-inf")], [0.0, 0.0, float("-inf")]], requires_grad=True)
    margins, prior = torch.tensor([0.25, 0.5, 0.5]), torch.tensor([-0.3, -1.4, -2.0])
    values = [rebalance.cross_entropy(masked, TARGETS), rebalance.focal_loss(masked, TARGETS, 2.0),
              rebalance.ldam_loss(masked, TARGETS, margins), rebalance.logit_adjusted_loss(masked, TARGETS, prior)]
    assert values[0].item() == pytest.approx((L1 + L2) / 2, abs=1e-6)
    assert values[1].item() == pytest.approx((0.0018036 + 0.1732868) / 2, abs=1e-6)
    assert values[2].item() == pytest.approx((0.160224 + 0.974077) / 2, abs=1e-6)
    sum(values).backward()
    assert torch.isfinite(masked.grad).all() and (masked.grad[:, 2] == 0).all()


def test_sampling_probabilities_square_root_class_balanced_and_instance():
    assert balance.sampling_probabilities([9, 4, 1, 0], 0.5) == pytest.approx([3 / 6, 2 / 6, 1 / 6, 0])
    assert balance.sampling_probabilities([9, 4, 1, 0], 0.0) == pytest.approx([1 / 3, 1 / 3, 1 / 3, 0])
    assert balance.sampling_probabilities([9, 4, 1, 0], 1.0) == pytest.approx([9 / 14, 4 / 14, 1 / 14, 0])


def test_square_root_draws_match_their_class_probabilities():
    y = np.array([0] * 9 + [1] * 4 + [2])
    drawn = y[balance.draw_indices(y, 0.5, 60000, seed=0)]
    assert np.bincount(drawn) / len(drawn) == pytest.approx([0.5, 1 / 3, 1 / 6], abs=0.01)
    again = balance.draw_indices(y, 0.5, 100, seed=0)
    assert (again == balance.draw_indices(y, 0.5, 100, seed=0)).all()


def test_oversampling_equalises_class_frequencies_and_keeps_every_example():
    y = np.array([0, 0, 0, 0, 0, 1, 1, 2])
    index = balance.oversample_indices(y, seed=0)
    assert np.bincount(y[index]).tolist() == [5, 5, 5]
    assert set(index.tolist()) == set(range(8))
    under = balance.undersample_indices(y, seed=0)
    assert np.bincount(y[under]).tolist() == [1, 1, 1]


def _gaussian_problem(n: int, seed: int):
    """Class 0 ~ N(+1, 1) with prior 0.9, class 1 ~ N(-1, 1) with prior 0.1; the logits are the exact
    Bayes log-posteriors log p(x|c) + log pi_c, which is what a well-fitted plain classifier learns."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.1).astype(int)
    x = rng.normal(np.where(y == 1, -1.0, 1.0), 1.0)
    prior = np.array([0.9, 0.1])
    logits = np.stack([-(x - 1) ** 2 / 2, -(x + 1) ** 2 / 2], axis=1) + np.log(prior)
    return logits, y, np.log(prior)


def test_posthoc_logit_adjustment_raises_minority_recall_to_the_balanced_optimum():
    logits, y, prior = _gaussian_problem(200_000, seed=0)
    minority = y == 1
    # Plain argmax predicts class 1 when x < -log(9)/2: recall Phi(1 - 1.0986) = 0.4607.
    assert (logits.argmax(1)[minority] == 1).mean() == pytest.approx(0.4607, abs=0.01)
    # tau = 1 removes the prior: threshold x < 0, recall Phi(1) = 0.8413.
    adjusted = rebalance.posthoc_adjust(logits, prior, 1.0)
    assert (adjusted.argmax(1)[minority] == 1).mean() == pytest.approx(0.8413, abs=0.01)


def test_choose_tau_picks_the_balanced_accuracy_optimum_on_validation():
    logits, y, prior = _gaussian_problem(50_000, seed=1)
    tau, scores = rebalance.choose_tau(logits, y, prior, [0.0, 0.5, 1.0, 1.5, 2.0])
    # Balanced accuracy: tau=1 -> Phi(1) = 0.841; tau=0.5 or 1.5 -> (Phi(0.451) + Phi(1.549))/2 = 0.807.
    assert tau == 1.0
    assert scores[1.0] == pytest.approx(0.841, abs=0.01)
    assert scores[0.5] == pytest.approx(0.807, abs=0.01)


def test_strategy_registry_names_backends_and_errors():
    assert len(rebalance.strategies_for("sklearn")) >= 10 and len(rebalance.strategies_for("torch")) >= 10
    assert {"focal", "cb_focal", "ldam_drw", "crt"} <= set(rebalance.strategies_for("torch"))
    assert rebalance.class_weights(rebalance.STRATEGIES["none"], [3, 1], 0.9) is None
    assert rebalance.class_weights(rebalance.STRATEGIES["cb_focal"], [1, 2], 0.5) == pytest.approx([1.2, 0.8])
    with pytest.raises(ValueError, match="unknown strategies"):
        rebalance.check_strategies(["none", "magic"], "sklearn")
    with pytest.raises(ValueError, match="do not apply to learner=sklearn"):
        rebalance.check_strategies(["focal"], "sklearn")
