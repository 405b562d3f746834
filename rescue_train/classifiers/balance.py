"""Rebalancing strategies for long-tailed labels: class weights, losses, samplers and post-hoc adjustment.

Everything takes per-class training counts ``counts`` (length C, over the classifier's output classes;
a class may have count 0 when it never occurs in the training fold). Conventions shared by all parts:

* A class never seen in training gets weight 0 (it is never a target, so its weight never acts) and is
  treated as seen once wherever a logarithm or a root of its count is needed (log-prior, LDAM margin), so
  no adjustment becomes infinite.
* Weighted losses are normalised like ``torch.nn.functional.cross_entropy(weight=...)``: the sum of
  weighted per-example losses divided by the sum of the weights of the examples' targets. With uniform
  weights every loss is the plain mean, and focal loss with gamma=0 equals cross-entropy.
* Logits may hold ``-inf`` for classes masked out of an instance (see classifier.py); the losses and the
  adjustments below keep them at ``-inf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

# ---------------------------------------------------------------------------------------------- weights

def inverse_frequency_weights(counts: Sequence[int]) -> np.ndarray:
    """w_c = N / (K * n_c) over the K classes present (scikit-learn's "balanced" class weights)."""
    from sklearn.utils.class_weight import compute_class_weight

    counts = np.asarray(counts, dtype=np.int64)
    present = np.flatnonzero(counts > 0)
    y = np.repeat(present, counts[present])
    weights = np.zeros(len(counts))
    weights[present] = compute_class_weight("balanced", classes=present, y=y)
    return weights


def effective_number_weights(counts: Sequence[int], beta: float) -> np.ndarray:
    """Cui et al. (2019): w_c = (1 - beta) / (1 - beta^n_c), scaled so the present classes' weights sum to
    their number K (beta=0 gives uniform weights, beta -> 1 approaches inverse frequency)."""
    if not 0 <= beta < 1:
        raise ValueError(f"beta must be in [0, 1), got {beta}")
    counts = np.asarray(counts, dtype=np.float64)
    present = counts > 0
    weights = np.zeros(len(counts))
    weights[present] = (1.0 - beta) / (1.0 - np.power(beta, counts[present]))
    return weights * present.sum() / weights.sum()


def log_prior(counts: Sequence[int]) -> np.ndarray:
    """log pi_c = log(n_c / N), with unseen classes counted once."""
    counts = np.maximum(np.asarray(counts, dtype=np.float64), 1.0)
    return np.log(counts / counts.sum())


def ldam_margins(counts: Sequence[int], max_margin: float) -> np.ndarray:
    """Cao et al. (2019): Delta_c proportional to n_c^(-1/4), the rarest class getting ``max_margin``."""
    margins = np.power(np.maximum(np.asarray(counts, dtype=np.float64), 1.0), -0.25)
    return margins * (max_margin / margins.max())


# ----------------------------------------------------------------------------------------------- losses

def _weighted_mean(losses, targets, weight):
    if weight is None:
        return losses.mean()
    w = weight[targets]
    return (w * losses).sum() / w.sum()


def cross_entropy(logits, targets, weight=None):
    import torch.nn.functional as F

    return F.cross_entropy(logits, targets, weight=weight)


def focal_loss(logits, targets, gamma: float, weight=None):
    """Lin et al. (2017): -(1 - p_y)^gamma log p_y; with ``weight`` = effective-number weights this is the
    class-balanced focal loss of Cui et al. (2019)."""
    import torch.nn.functional as F

    log_p = F.log_softmax(logits, dim=-1).gather(1, targets[:, None]).squeeze(1)
    losses = -((1.0 - log_p.exp()) ** gamma) * log_p
    return _weighted_mean(losses, targets, weight)


def ldam_loss(logits, targets, margins, scale: float = 1.0, weight=None):
    """Cross-entropy on ``scale * (z - Delta_y e_y)``: the target's logit is lowered by its class margin."""
    import torch.nn.functional as F

    lowered = logits - F.one_hot(targets, logits.shape[-1]).to(logits.dtype) * margins[targets][:, None]
    return F.cross_entropy(scale * lowered, targets, weight=weight)


def logit_adjusted_loss(logits, targets, log_prior_t, tau: float = 1.0, weight=None):
    """Menon et al. (2021): cross-entropy on z + tau * log pi. Balanced softmax (Ren et al. 2020) is the
    case tau = 1, since log n_c and log pi_c differ by a constant that softmax ignores."""
    import torch.nn.functional as F

    return F.cross_entropy(logits + tau * log_prior_t, targets, weight=weight)


def posthoc_adjust(logits: np.ndarray, prior_log: np.ndarray, tau: float) -> np.ndarray:
    """Menon et al. (2021), post-hoc: predict argmax z - tau * log pi."""
    return logits - tau * prior_log


# ---------------------------------------------------------------------------------------------- samplers

def sampling_probabilities(counts: Sequence[int], power: float) -> np.ndarray:
    """Class sampling probabilities q_c = n_c^power / sum_k n_k^power over present classes: power 1 is
    instance-balanced (the data as it is), 0.5 square-root sampling, 0 class-balanced."""
    counts = np.asarray(counts, dtype=np.float64)
    mass = np.where(counts > 0, np.power(np.maximum(counts, 1.0), power), 0.0)
    return mass / mass.sum()


def draw_indices(y: Sequence[int], power: float, n_draws: int, seed: int) -> np.ndarray:
    """Indices drawn with replacement so that class c comes up with probability q_c (see above)."""
    y = np.asarray(y)
    counts = np.bincount(y)
    per_instance = sampling_probabilities(counts, power)[y] / counts[y]
    return np.random.default_rng(seed).choice(len(y), size=n_draws, replace=True, p=per_instance)


def oversample_indices(y: Sequence[int], seed: int) -> np.ndarray:
    """imbalanced-learn's random oversampling: every class repeated up to the largest class's count."""
    from imblearn.over_sampling import RandomOverSampler

    sampler = RandomOverSampler(random_state=seed)
    sampler.fit_resample(np.arange(len(y)).reshape(-1, 1), np.asarray(y))
    return sampler.sample_indices_


def undersample_indices(y: Sequence[int], seed: int) -> np.ndarray:
    """imbalanced-learn's random undersampling: every class cut down to the smallest class's count."""
    from imblearn.under_sampling import RandomUnderSampler

    sampler = RandomUnderSampler(random_state=seed)
    sampler.fit_resample(np.arange(len(y)).reshape(-1, 1), np.asarray(y))
    return sampler.sample_indices_


# -------------------------------------------------------------------------------------------- strategies

@dataclass(frozen=True)
class Strategy:
    """One named rebalancing strategy, as its parts: the training loss, class weights (``deferred``: only
    after ``drw_start`` of training), how training examples are sampled, whether logits are adjusted after
    training (``posthoc``: "tuned" picks tau on the validation fold, "fixed" uses ``tau``), and whether
    the head is re-trained on frozen features with class-balanced sampling (cRT)."""

    name: str
    summary: str
    loss: str = "ce"  # ce | focal | ldam | logit_adjusted | balanced_softmax
    weights: str | None = None  # inverse | effective
    deferred: bool = False
    sampling: str | None = None  # oversample | undersample | sqrt | smote
    posthoc: str | None = None  # tuned | fixed | balanced
    retrain_head: bool = False
    learners: tuple[str, ...] = ("sklearn", "torch")


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("none", "plain cross-entropy on the data as it is"),
    Strategy("inverse_freq", "cross-entropy with inverse-frequency class weights N/(K n_c)", weights="inverse"),
    Strategy("effective_number", "cross-entropy with effective-number weights (1-beta)/(1-beta^n_c)",
             weights="effective"),
    Strategy("focal", "focal loss (gamma)", loss="focal", learners=("torch",)),
    Strategy("cb_focal", "focal loss with effective-number weights", loss="focal", weights="effective",
             learners=("torch",)),
    Strategy("ldam_drw", "LDAM margins, effective-number weights deferred to the last part of training",
             loss="ldam", weights="effective", deferred=True, learners=("torch",)),
    # For a linear model with an unpenalised intercept (scikit-learn's lbfgs logistic regression),
    # training on z + tau*log(pi) only moves the intercept by tau*log(pi), so the scikit-learn path applies
    # these two as the equivalent fixed post-hoc shift (see sklearn_path.py).
    Strategy("logit_adjusted", "logit-adjusted cross-entropy, z + tau*log(pi) while training",
             loss="logit_adjusted"),
    Strategy("balanced_softmax", "balanced softmax, z + log(n_c) while training", loss="balanced_softmax"),
    Strategy("posthoc_la", "post-hoc logit adjustment z - tau*log(pi), tau chosen on the validation fold",
             posthoc="tuned"),
    Strategy("oversample", "random oversampling of every class to the largest (imbalanced-learn)",
             sampling="oversample"),
    Strategy("undersample", "random undersampling of every class to the smallest (imbalanced-learn)",
             sampling="undersample"),
    Strategy("sqrt_sampling", "square-root sampling: class c drawn with probability ~ sqrt(n_c)", sampling="sqrt"),
    Strategy("smote", "SMOTE on TF-IDF vectors (imbalanced-learn)", sampling="smote", learners=("sklearn",)),
    Strategy("crt", "cRT: train plainly, then re-train the head on frozen features with class-balanced sampling",
             retrain_head=True, learners=("torch",)),
)}


def strategies_for(learner: str) -> list[str]:
    return [name for name, s in STRATEGIES.items() if learner in s.learners]


def check_strategies(names: Sequence[str], learner: str) -> list[Strategy]:
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES)}")
    unsupported = [n for n in names if learner not in STRATEGIES[n].learners]
    if unsupported:
        raise ValueError(f"strategies {unsupported} do not apply to learner={learner}; "
                         f"it supports: {', '.join(strategies_for(learner))}")
    return [STRATEGIES[n] for n in names]


def class_weights(strategy: Strategy, counts: Sequence[int], beta: float) -> np.ndarray | None:
    if strategy.weights == "inverse":
        return inverse_frequency_weights(counts)
    if strategy.weights == "effective":
        return effective_number_weights(counts, beta)
    return None


def choose_tau(val_logits: np.ndarray, val_targets: np.ndarray, prior_log: np.ndarray,
               grid: Sequence[float]) -> tuple[float, dict[float, float]]:
    """The tau in ``grid`` whose post-hoc adjusted predictions have the best balanced accuracy (mean
    per-class recall) on the validation fold; ties go to the earlier grid value."""
    import warnings

    from sklearn.metrics import balanced_accuracy_score

    scores = {}
    for tau in grid:
        predicted = posthoc_adjust(val_logits, prior_log, tau).argmax(axis=1)
        with warnings.catch_warnings():  # predicting a class absent from the validation fold is expected
            warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
            scores[float(tau)] = float(balanced_accuracy_score(val_targets, predicted))
    best = max(scores, key=lambda t: (scores[t], -list(scores).index(t)))
    return best, scores
