"""The fast CPU path: TF-IDF features and multinomial logistic regression (scikit-learn), with the
rebalancing strategies that apply to a linear model on fixed features.

* class weights (inverse frequency, effective number) become per-example ``sample_weight``;
* samplers (random over/undersampling, SMOTE from imbalanced-learn; square-root sampling) resample the
  TF-IDF rows of the training fold; the vectoriser is always fitted on the fold as it is;
* logit-adjusted loss and balanced softmax: logistic regression does not penalise its intercept (lbfgs), so
  minimising cross-entropy on ``z + tau*log(pi)`` gives the plain model's weights with the intercept moved
  by ``-tau*log(pi)``. They are therefore applied exactly as that shift of the plain model's logits;
* post-hoc logit adjustment works on the logits (decision function) like in the torch path.

Focal loss, LDAM-DRW and cRT need a trained representation or a custom loss and are torch-only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from ..settings import meaning
from .. import rebalance
from ..rebalance import NONE, Strategy
from . import balance
from .classifier import BalanceSettings, LabelSpace, Split, training_indices


@dataclass
class SklearnSettings:
    max_features: int = field(default=20000, metadata=meaning("TF-IDF vocabulary size", low=1))
    ngram_max: int = field(default=2, metadata=meaning("longest word n-gram", low=1))
    min_df: int = field(default=2, metadata=meaning("a term must occur in this many training texts", low=1))
    sublinear_tf: bool = field(default=True, metadata=meaning("1 + log(tf) term weights"))
    C: float = field(default=1.0, metadata=meaning("inverse L2 strength of the logistic regression", above=0))
    max_iter: int = field(default=2000, metadata=meaning("solver iterations", low=1))
    smote_neighbors: int = field(default=5, metadata=meaning("SMOTE's k nearest neighbours", low=1))
    # BLAS threads while fitting: these small sparse fits are fastest on one, and several threads fighting
    # other processes for 2 cores made a comparison 4x slower. Raise it for large data on many cores.
    threads: int = field(default=1, metadata=meaning("BLAS threads while fitting", low=1))


def _smote(X, y: np.ndarray, k: int, seed: int) -> tuple[Any, np.ndarray, list[int]]:
    """SMOTE every class with at least two examples up to the largest class; singletons stay as they are
    (SMOTE needs a neighbour). Returns the resampled data and the classes left alone."""
    from imblearn.over_sampling import SMOTE

    counts = np.bincount(y)
    top = counts.max()
    targets = {int(c): int(top) for c in np.flatnonzero(counts >= 2) if counts[c] < top}
    singles = [int(c) for c in np.flatnonzero(counts == 1)]
    if not targets:
        return X, y, singles
    smallest = min(counts[c] for c in targets)
    sampler = SMOTE(sampling_strategy=targets, k_neighbors=min(k, smallest - 1), random_state=seed)
    X_res, y_res = sampler.fit_resample(X, y)
    return X_res, np.asarray(y_res), singles


def _logits(model, X, n_classes: int, mask: np.ndarray) -> np.ndarray:
    """Decision-function logits placed in the full label space; unknown and masked classes get -inf."""
    scores = model.decision_function(X)
    if scores.ndim == 1:  # binary: scikit-learn returns the logit of classes_[1] against classes_[0]
        scores = np.stack([np.zeros_like(scores), scores], axis=1)
    full = np.full((X.shape[0], n_classes), -np.inf)
    full[:, model.classes_] = scores
    return np.where(mask, full, -np.inf)


def _fit(X, y: np.ndarray, counts: np.ndarray, strategy: Strategy, settings: SklearnSettings,
         balance_settings: BalanceSettings, seed: int):
    info: dict[str, Any] = {}
    if strategy.sampling == "smote":  # the one sampler that makes new examples: it needs the features
        X, y, info["smote_skipped_singleton_classes"] = _smote(X, y, settings.smote_neighbors, seed)
    elif strategy.sampling != NONE:
        index = training_indices(strategy, y, len(y), seed)
        X, y = X[index], y[index]
    weights = rebalance.class_weights(strategy, counts, balance_settings.beta)
    model = LogisticRegression(C=settings.C, max_iter=settings.max_iter, random_state=seed)
    with threadpool_limits(settings.threads):
        model.fit(X, y, sample_weight=None if weights is None else weights[y])
    return model, {"sampled_training_examples": int(len(y)), **info}


def fit_predict_sklearn(splits: dict[str, Split], space: LabelSpace, strategy: Strategy, settings: SklearnSettings,
                        balance_settings: BalanceSettings, seed: int, cache: dict | None = None,
                        keep_model: bool = False) -> dict[str, Any]:
    """Fit on ``splits['train']`` under ``strategy``; return masked logits for validation and test, and
    with ``keep_model`` the fitted TF-IDF + logistic regression ``Pipeline`` and the logit shift that the
    strategy adds to its logits (under "fitted").

    ``cache`` (a dict kept by the caller for one comparison) shares what does not depend on the strategy
    or seed: the TF-IDF features of a fold, and the fitted model of strategies that differ only after
    fitting (lbfgs is deterministic, so without resampling the seed does not change the fit)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    cache = {} if cache is None else cache
    train = splits["train"]
    n_classes = len(space)
    counts = train.counts(n_classes)
    if (counts > 0).sum() < 2:
        raise ValueError(f"the training fold has {(counts > 0).sum()} class(es); a classifier needs at least two")
    fold_key = tuple(r["id"] for role in ("train", "validation", "test") for r in splits[role].rows)
    if ("features", fold_key) not in cache:
        vectorizer = TfidfVectorizer(max_features=settings.max_features, ngram_range=(1, settings.ngram_max),
                                     min_df=settings.min_df, sublinear_tf=settings.sublinear_tf)
        cache[("features", fold_key)] = (vectorizer, vectorizer.fit_transform(train.texts), {
            role: vectorizer.transform(splits[role].texts) for role in ("validation", "test") if len(splits[role])})
    vectorizer, X, held_out = cache[("features", fold_key)]
    model_key = ("model", fold_key, strategy.class_weights)
    resampled = strategy.sampling != NONE
    if not resampled and model_key in cache:
        model, info = cache[model_key]
    else:
        model, info = _fit(X, train.y, counts, strategy, settings, balance_settings, seed)
        if not resampled:  # only fits without resampling are shared (by other strategies and seeds)
            cache[model_key] = (model, info)
    shift = balance.INTERCEPT_SHIFT[strategy.loss](counts, balance_settings)
    result: dict[str, Any] = dict(info)
    for role in ("validation", "test"):
        split = splits[role]
        result[role] = _logits(model, held_out[role], n_classes, split.mask) + shift if len(split) \
            else np.zeros((0, n_classes))
    if keep_model:
        from sklearn.pipeline import Pipeline

        # Both steps are already fitted; the pipeline only chains them for new texts.
        result["fitted"] = {"pipeline": Pipeline([("tfidf", vectorizer), ("logreg", model)]), "logit_shift": shift}
    return result
