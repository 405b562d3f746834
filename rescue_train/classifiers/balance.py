"""What the classifiers implement of the rebalancing vocabulary (:mod:`rescue_train.rebalance`): the samplers of
training examples, the scikit-learn path's equivalent of the logit-adjusted losses, and the two learners'
declarations (``sklearn``, ``torch``) of the parts they support."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..rebalance import LOSSES, POSTHOC, EntriesOf, Learner, log_prior, register_learner

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


# sampling by name: (training classes, draws wanted, seed) -> indices of the examples a model sees
SAMPLERS = {
    "none": lambda y, n_draws, seed: np.arange(len(y)),
    "oversample": lambda y, n_draws, seed: oversample_indices(y, seed),
    "undersample": lambda y, n_draws, seed: undersample_indices(y, seed),
    "sqrt": lambda y, n_draws, seed: draw_indices(y, 0.5, n_draws, seed),
    "balanced": lambda y, n_draws, seed: draw_indices(y, 0.0, n_draws, seed),
}

# For a linear model with an unpenalised intercept (scikit-learn's lbfgs logistic regression), training on
# z + tau*log(pi) only moves the intercept by tau*log(pi), so the scikit-learn path applies the logit-adjusted
# losses as that fixed shift of the plain model's logits: loss -> (training counts, balance settings) -> shift.
INTERCEPT_SHIFT = {
    "ce": lambda counts, settings: np.zeros(len(counts)),
    "logit_adjusted": lambda counts, settings: -settings.tau * log_prior(counts),
    "balanced_softmax": lambda counts, settings: -1.0 * log_prior(counts),
}

WEIGHTED = frozenset({"balanced", "effective"})
# Class-balanced draws are implemented (cRT uses them) but not offered as a strategy of their own, so that the
# classifiers' strategy lists (and ``strategies=all``) stay what they were.
# A classifier's classes are its candidates, so candidate_ce would be its plain ce under another name: not offered.
register_learner(Learner("torch", loss=EntriesOf(LOSSES, without={"candidate_ce"}), class_weights=WEIGHTED,
                         sampling=frozenset({"oversample", "undersample", "sqrt"}), posthoc=POSTHOC.keys(),
                         deferred=True, retrain_head=True))
register_learner(Learner("sklearn", loss=INTERCEPT_SHIFT.keys(), class_weights=WEIGHTED,
                         sampling=frozenset({"oversample", "undersample", "sqrt", "smote"}),
                         posthoc=POSTHOC.keys()))
