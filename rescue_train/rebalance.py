"""One rebalancing vocabulary for long-tailed labels, shared by the classifiers and LoRA runs.

A strategy is built from **parts**, each spelled one way:

* ``loss``: the training loss, one of ``LOSSES`` (a name and its function);
* ``class_weights``: per-class loss weights from the training counts, one of ``WEIGHTS`` ("balanced": scikit-learn's
  n / (K n_c), every class the same total weight; "sqrt": its square root, halfway; "effective": Cui et al.'s
  effective number), and their schedule (``deferred``: only from ``balance.drw_start`` of training on, DRW);
* ``sampling``: which training examples are drawn ("balanced": every class equally often; "sqrt": class c with
  probability ~ sqrt(n_c); "oversample" / "undersample" / "smote": imbalanced-learn's resamplers);
* ``posthoc``: an adjustment of the logits after training, one of ``POSTHOC`` ("tuned": z - tau log pi with tau
  chosen on the validation fold);
* ``retrain_head``: re-train the output layer on frozen features with class-balanced sampling (cRT).

``STRATEGIES`` names the combinations users type (``strategy=``, ``balance.strategy=``, ``strategies=[...]``);
a new one from existing parts is one :func:`register_strategy` line. Each learner registers what it implements
(:class:`Learner`); :func:`check_strategies` refuses a strategy with a part its learner lacks and lists what the
learner supports. A new loss or post-hoc adjustment is one entry of ``LOSSES`` / ``POSTHOC`` plus its function.

Conventions of the functions: a class never seen in training gets weight 0 and is treated as seen once wherever a
logarithm or a root of its count is needed (log-prior, LDAM margin). Weighted losses are normalised like
``torch.nn.functional.cross_entropy(weight=...)`` (the sum of weighted losses over the sum of the targets'
weights), so uniform weights give the plain mean. Logits may hold ``-inf`` for classes masked out of an
instance; the losses and adjustments keep them at ``-inf``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Sequence

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


# class weights by name: (training counts, effective-number beta) -> weight per class
WEIGHTS: dict[str, Callable[[Sequence[int], float], np.ndarray]] = {
    "balanced": lambda counts, beta: inverse_frequency_weights(counts),
    "sqrt": lambda counts, beta: np.sqrt(inverse_frequency_weights(counts)),
    "effective": effective_number_weights,
}

# sampling values and what they mean (each learner draws them its own way: indices, or draw probabilities)
SAMPLING = {"balanced": "every class drawn equally often", "sqrt": "class c drawn with probability ~ sqrt(n_c)",
            "oversample": "random oversampling of every class to the largest (imbalanced-learn)",
            "undersample": "random undersampling of every class to the smallest (imbalanced-learn)",
            "smote": "SMOTE: synthetic examples of the smaller classes (imbalanced-learn)"}

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


@dataclass(frozen=True)
class LossInputs:
    """What a loss may read besides logits, targets and class weights: the training counts' log-prior and
    LDAM margins (tensors on the logits' device) and the ``balance`` settings (gamma, tau, ldam_scale, ...)."""

    log_prior: Any
    margins: Any
    settings: Any


# losses by name: (logits, targets, class weights or None, LossInputs) -> scalar loss. A LoRA run's "ce" is the
# answer tokens' loss alone; with any other loss it adds that loss over the instance's candidate answers, their
# log-likelihoods as the logits (rescue_train.sft.candidates), "candidate_ce" being the plain softmax cross-entropy
# there (for a classifier, whose classes are its candidates, the same as "ce").
LOSSES: dict[str, Callable[..., Any]] = {
    "ce": lambda logits, targets, weight, inputs: cross_entropy(logits, targets, weight),
    "candidate_ce": lambda logits, targets, weight, inputs: cross_entropy(logits, targets, weight),
    "focal": lambda logits, targets, weight, inputs: focal_loss(logits, targets, inputs.settings.gamma, weight),
    "ldam": lambda logits, targets, weight, inputs: ldam_loss(logits, targets, inputs.margins,
                                                              inputs.settings.ldam_scale, weight),
    "logit_adjusted": lambda logits, targets, weight, inputs: logit_adjusted_loss(
        logits, targets, inputs.log_prior, inputs.settings.tau, weight),
    "balanced_softmax": lambda logits, targets, weight, inputs: logit_adjusted_loss(
        logits, targets, inputs.log_prior, 1.0, weight),
}

# ------------------------------------------------------------------------------------------ post-hoc


def posthoc_adjust(logits: np.ndarray, prior_log: np.ndarray, tau: float) -> np.ndarray:
    """Menon et al. (2021), post-hoc: predict argmax z - tau * log pi."""
    return logits - tau * prior_log


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


def tuned_logit_adjustment(val_logits: np.ndarray, val_targets: np.ndarray, counts: Sequence[int],
                           settings) -> tuple[np.ndarray, dict[str, Any]]:
    """Post-hoc logit adjustment with tau chosen on the validation fold (``balance.tau`` when it is empty)."""
    prior = log_prior(counts)
    if len(val_targets):
        tau, scores = choose_tau(val_logits, val_targets, prior, settings.tau_grid)
        info = {"tau": tau, "tau_scores": scores}
    else:
        tau = settings.tau
        info = {"tau": tau, "tau_note": "empty validation fold: fixed balance.tau used"}
    return -tau * prior, info


# post-hoc adjustments by name: (validation logits, validation targets, training counts, balance settings)
# -> (the offset added to every prediction's logits, what the run record keeps about it)
POSTHOC: dict[str, Callable[..., tuple[np.ndarray, dict[str, Any]]]] = {"tuned": tuned_logit_adjustment}

# ------------------------------------------------------------------------------------------ strategies

NONE = "none"


@dataclass(frozen=True)
class Strategy:
    """One named rebalancing strategy as its parts (see the module's doc); ``"none"`` leaves a part out."""

    name: str
    summary: str
    loss: str = "ce"
    class_weights: str = NONE
    deferred: bool = False
    sampling: str = NONE
    posthoc: str = NONE
    retrain_head: bool = False


@dataclass(frozen=True)
class Learner:
    """What one learner implements of each part (the values of ``loss``, ``class_weights``, ``sampling`` and
    ``posthoc`` it has, and whether it can defer weights or re-train a head)."""

    name: str
    loss: Collection[str]  # a registry's keys() where the learner takes every entry, new ones included
    class_weights: Collection[str]
    sampling: Collection[str]
    posthoc: Collection[str] = frozenset()
    deferred: bool = False
    retrain_head: bool = False

    def lacks(self, strategy: Strategy) -> list[str]:
        """The parts of ``strategy`` this learner does not implement, as ``part=value``."""
        missing = []
        for part in ("loss", "class_weights", "sampling", "posthoc"):
            value = getattr(strategy, part)
            if value != NONE and value not in getattr(self, part):
                missing.append(f"{part}={value}")
        missing += [f"{flag}=true" for flag in ("deferred", "retrain_head")
                    if getattr(strategy, flag) and not getattr(self, flag)]
        return missing

    def describe(self) -> str:
        parts = [f"{p}: {', '.join(sorted(getattr(self, p))) or '-'}" for p in ("loss", "class_weights", "sampling",
                                                                                "posthoc")]
        return "; ".join(parts + [f"{flag}: {'yes' if getattr(self, flag) else 'no'}"
                                  for flag in ("deferred", "retrain_head")])


class EntriesOf(Collection):
    """A table's names, entries added later included, less ``without``: a learner's part that takes every entry
    but a few."""

    def __init__(self, table: dict, without: Collection[str] = ()):
        self.table, self.without = table, frozenset(without)

    def __contains__(self, name: object) -> bool:
        return name in self.table and name not in self.without

    def __iter__(self):
        return (name for name in self.table if name not in self.without)

    def __len__(self) -> int:
        return sum(1 for _ in self)


STRATEGIES: dict[str, Strategy] = {}
LEARNERS: dict[str, Learner] = {}


def register_strategy(strategy: Strategy) -> Strategy:
    """Add a named strategy; its parts must be known ones (a new part value is an entry of its table first)."""
    known = {"loss": set(LOSSES), "class_weights": set(WEIGHTS), "sampling": set(SAMPLING), "posthoc": set(POSTHOC)}
    for part, values in known.items():
        value = getattr(strategy, part)
        if value != NONE and value not in values:
            raise ValueError(f"strategy {strategy.name!r}: unknown {part} {value!r}; known: {', '.join(sorted(values))}")
    if strategy.name in STRATEGIES:
        raise ValueError(f"strategy {strategy.name!r} is already registered")
    STRATEGIES[strategy.name] = strategy
    return strategy


def register_learner(learner: Learner) -> Learner:
    LEARNERS[learner.name] = learner
    return learner


def learner(name: str) -> Learner:
    if name not in LEARNERS:
        raise ValueError(f"unknown learner {name!r}; known: {', '.join(LEARNERS)}")
    return LEARNERS[name]


def strategies_for(learner_name: str) -> list[str]:
    """The strategies whose every part ``learner_name`` implements, in registration order."""
    able = learner(learner_name)
    return [name for name, s in STRATEGIES.items() if not able.lacks(s)]


def check_strategies(names: Sequence[str], learner_name: str) -> list[Strategy]:
    """The strategies ``names``, refused when unknown or when the learner lacks one of their parts."""
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strategies {unknown}; known: {', '.join(STRATEGIES)}")
    able = learner(learner_name)
    unsupported = {n: able.lacks(STRATEGIES[n]) for n in names if able.lacks(STRATEGIES[n])}
    if unsupported:
        needs = "; ".join(f"{n} needs {', '.join(parts)}" for n, parts in unsupported.items())
        raise ValueError(f"strategies {list(unsupported)} do not apply to learner={learner_name} ({needs}); "
                         f"it supports: {', '.join(strategies_for(learner_name))} ({able.describe()})")
    return [STRATEGIES[n] for n in names]


def class_weights(strategy: Strategy, counts: Sequence[int], beta: float) -> np.ndarray | None:
    """The strategy's per-class weights from the training counts, or None for unweighted training."""
    return None if strategy.class_weights == NONE else WEIGHTS[strategy.class_weights](counts, beta)


for _strategy in (
    Strategy("none", "no rebalancing: plain loss on the data as it is"),
    Strategy("inverse_freq", "loss weighted by inverse class frequency N/(K n_c)", class_weights="balanced"),
    Strategy("effective_number", "cross-entropy with effective-number weights (1-beta)/(1-beta^n_c)",
             class_weights="effective"),
    Strategy("focal", "focal loss (gamma)", loss="focal"),
    Strategy("cb_focal", "focal loss with effective-number weights", loss="focal", class_weights="effective"),
    Strategy("ldam_drw", "LDAM margins, effective-number weights deferred to the last part of training",
             loss="ldam", class_weights="effective", deferred=True),
    Strategy("logit_adjusted", "logit-adjusted cross-entropy, z + tau*log(pi) while training", loss="logit_adjusted"),
    Strategy("balanced_softmax", "balanced softmax, z + log(n_c) while training", loss="balanced_softmax"),
    Strategy("candidate_ce", "softmax cross-entropy over the candidate answers' log-likelihoods (LoRA: beside the "
             "answer tokens' loss)", loss="candidate_ce"),
    Strategy("posthoc_la", "post-hoc logit adjustment z - tau*log(pi), tau chosen on the validation fold",
             posthoc="tuned"),
    Strategy("oversample", SAMPLING["oversample"], sampling="oversample"),
    Strategy("undersample", SAMPLING["undersample"], sampling="undersample"),
    Strategy("sqrt_sampling", "square-root sampling: class c drawn with probability ~ sqrt(n_c)", sampling="sqrt"),
    Strategy("smote", "SMOTE on TF-IDF vectors (imbalanced-learn)", sampling="smote"),
    Strategy("crt", "cRT: train plainly, then re-train the head on frozen features with class-balanced sampling",
             retrain_head=True),
    Strategy("balanced_sampling", "every class of a task drawn equally often", sampling="balanced"),
    Strategy("sqrt_weights", "loss weighted by sqrt(n/(K n_c))", class_weights="sqrt"),
    Strategy("sqrt_sampling_sqrt_weights", "square-root draws and sqrt(n/(K n_c)) weights", sampling="sqrt",
             class_weights="sqrt"),
):
    register_strategy(_strategy)
