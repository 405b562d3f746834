"""Class balance and task mixing inside SFT: which instances to draw, and how much each one's answer weighs.

RPP and SSP labels are long-tailed, so a plain SFT run mostly learns the head classes. A strategy
(``balance.strategy``: a name of :mod:`rescue_train.rebalance`, shared with the classifiers, whose parts a LoRA run
implements) combines two remedies, both computed per task (label spaces are per task):

* sampling: the probability of drawing each training instance. ``balanced`` gives every class of a task the same
  share of the task's draws; ``sqrt`` gives class c a share proportional to sqrt(n_c), halfway between natural and
  balanced. Tasks get their mixing weight's share first.
* loss weights: each instance's answer tokens are weighted by its class weight, ``balanced`` = n / (K * n_c) as in
  scikit-learn, ``sqrt`` = its square root; the loss stays a mean over answer tokens (sum of weighted token
  losses / token count).

Generation tasks (ER, VP, RSG) have no classes: their instances count uniformly with weight 1.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Mapping, Sequence

from ..rebalance import STRATEGIES as VOCABULARY
from ..rebalance import Learner, register_learner, strategies_for
from ..tasks import get_task

PARTS = ("none", "balanced", "sqrt")  # what this file implements of sampling and of class weights

# A LoRA run implements class weights and sampling of the shared vocabulary (rescue_train.rebalance), per task, the
# answer-token loss ("ce") and the losses over the candidates (rescue_train.sft.candidates), and post-hoc logit
# adjustment of its rank scores (evaluation's calibration=prior; compare re-ranks a trained run's saved scores).
LORA = register_learner(Learner("lora", loss=frozenset({"ce", "candidate_ce", "logit_adjusted", "balanced_softmax"}),
                                class_weights=frozenset(PARTS[1:]), sampling=frozenset(PARTS[1:]),
                                posthoc=frozenset({"tuned"})))
STRATEGIES = {name: VOCABULARY[name] for name in strategies_for(LORA.name)}


def class_key(task: str, gold: Any) -> str | None:
    """The class an instance counts under for balancing (``Task.class_key``); None for generation tasks.

    STP golds are people's names, which differ from sample to sample, so STP balances the kind of target:
    the whole group, one person, or (with exact target sets) several people.
    """
    return get_task(task).class_key(gold)


def _check(strategy: str, what: str) -> None:
    if strategy not in PARTS:
        raise ValueError(f"{what} must be one of {', '.join(PARTS)}, got {strategy!r}")


def class_weights(tasks: Sequence[str], classes: Sequence[str | None], strategy: str) -> list[float]:
    """Per-instance loss weight: its class's weight within its task (1.0 for unclassed instances)."""
    _check(strategy, "class weights")
    if strategy == "none":
        return [1.0] * len(tasks)
    import numpy as np
    from sklearn.utils.class_weight import compute_class_weight

    weights = [1.0] * len(tasks)
    for task in dict.fromkeys(tasks):
        index = [i for i, (t, c) in enumerate(zip(tasks, classes)) if t == task and c is not None]
        if not index:
            continue
        labels = np.array([classes[i] for i in index])
        names = np.unique(labels)
        balanced = dict(zip(names, compute_class_weight("balanced", classes=names, y=labels)))
        for i in index:
            w = float(balanced[classes[i]])
            weights[i] = math.sqrt(w) if strategy == "sqrt" else w
    return weights


def sampling_weights(tasks: Sequence[str], classes: Sequence[str | None], mixing: Mapping[str, float],
                     strategy: str) -> list[float]:
    """Per-instance draw probability (summing to 1): the task's share of ``mixing``, split over its classes
    by ``strategy``, then evenly over each class's instances."""
    _check(strategy, "sampling")
    present = list(dict.fromkeys(tasks))
    missing = [t for t in present if t not in mixing]
    if missing:
        raise ValueError(f"no mixing weight for task(s) {missing}; set tasks.<name>: <weight>")
    bad = {t: mixing[t] for t in present if not mixing[t] > 0}
    if bad:
        raise ValueError(f"task mixing weights must be > 0, got {bad}")
    total = sum(float(mixing[t]) for t in present)
    probs = [0.0] * len(tasks)
    for task in present:
        share = float(mixing[task]) / total
        index = [i for i, t in enumerate(tasks) if t == task]
        counts = Counter(classes[i] for i in index)
        if strategy == "none" or None in counts:
            mass = {c: share * n / len(index) for c, n in counts.items()}
        else:
            scale = {c: (1.0 if strategy == "balanced" else math.sqrt(n)) for c, n in counts.items()}
            mass = {c: share * s / sum(scale.values()) for c, s in scale.items()}
        for i in index:
            probs[i] = mass[classes[i]] / counts[classes[i]]
    return probs
