"""Post-hoc calibration of rank scores: re-rank a closed-set record's candidates without running the model again.

The rank protocol keeps every candidate's raw log-likelihood in its record (``loglik``, summed over the answer's
tokens, with ``answer_tokens``), and, when a run is calibrated, the same candidates' log-likelihoods under
prompts without the dialogue (``loglik_content_free``, one per :data:`CONTENT_FREE` input, and
``loglik_premise``). Each method turns those into one score per candidate, and the ranking sorts by it:

* ``none``: the raw score (``rank_score`` sum or mean per token), today's ranking.
* ``contextual`` (Zhao et al. 2021, "Calibrate Before Use"): the model's bias is its answer distribution when
  the dialogue carries no content. p(c | x) and each content-free p(c | cf) are normalised over the candidates,
  p_cf is their mean, and the calibrated distribution is p(c | x) / p_cf(c) renormalised: the score is
  log p(c | x) - log p_cf(c).
* ``pmi`` (Holtzman et al. 2021, domain-conditional PMI; lm-eval's ``acc_mutual_info``): the score minus the
  candidate's score under a domain premise, here the task question and candidates alone (no setting, no
  dialogue): log P(c | x) - log P(c | premise).
* ``prior`` (post-hoc logit adjustment, Menon et al. 2021): log p(c | x) - tau * log pi(c), pi the class prior
  of the task and scenario in the trained run's training fold (add-one smoothed, so that a class never seen in
  training is not boosted without bound), tau fixed or chosen on the run's validation fold by balanced accuracy.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from sklearn.metrics import balanced_accuracy_score

from .metrics import instance_scores

CALIBRATIONS = ("none", "prior", "contextual", "pmi")
# What each method needs in a record besides the raw log-likelihoods.
NEEDS = {"none": (), "prior": (), "contextual": ("loglik_content_free",), "pmi": ("loglik_premise",)}
# Zhao et al.'s content-free inputs, in the instance's own prompt: a placeholder for the dialogue, and none.
CONTENT_FREE = ("N/A", "")
# The taus tried on the validation fold (Menon et al. sweep tau around 1, the Bayes-optimal value for balanced error).
TAU_GRID = tuple(round(0.25 * k, 2) for k in range(0, 9))


def values(loglik: Mapping[str, float], tokens: Mapping[str, int] | None, rank_score: str) -> dict[str, float]:
    """The raw score of each candidate: its summed log-likelihood, or per answer token (``mean``)."""
    if rank_score == "mean":
        return {c: v / max(1, (tokens or {}).get(c, 1)) for c, v in loglik.items()}
    return dict(loglik)


def log_normalised(scores: Mapping[str, float]) -> dict[str, float]:
    """log softmax over the candidates."""
    total = float(np.logaddexp.reduce(np.array(list(scores.values()), float)))
    return {c: v - total for c, v in scores.items()}


def calibrated(record: Mapping[str, Any], method: str, *, rank_score: str = "sum",
               prior: Mapping[str, float] | None = None, tau: float = 1.0,
               class_of: Callable[[str], str] | None = None) -> dict[str, float]:
    """Each candidate's score under ``method`` (higher ranks first). ``prior`` maps a class to its training
    prior (``prior`` only), ``class_of`` a candidate to its class (default: itself)."""
    if method not in CALIBRATIONS:
        raise ValueError(f"calibration must be one of {', '.join(CALIBRATIONS)}, got {method!r}")
    missing = [key for key in NEEDS[method] if not record.get(key)]
    if missing:
        raise ValueError(f"record {record.get('id')!r} holds no {missing[0]}: calibration={method} needs the scores "
                         "a calibrated evaluation keeps (evaluate with calibration=contextual or pmi; either keeps "
                         "the scores of both)")
    tokens = record.get("answer_tokens")
    raw = values(record["loglik"], tokens, rank_score)
    if method == "none":
        return raw
    if method == "pmi":
        premise = values(record["loglik_premise"], tokens, rank_score)
        return {c: raw[c] - premise[c] for c in raw}
    logp = log_normalised(raw)
    if method == "contextual":
        free = [log_normalised(values(scores, tokens, rank_score)) for scores in record["loglik_content_free"]]
        mean = {c: float(np.logaddexp.reduce([f[c] for f in free])) - math.log(len(free)) for c in raw}
        return {c: logp[c] - mean[c] for c in raw}
    if prior is None:
        raise ValueError("calibration=prior needs the training fold's class prior")
    key = class_of or (lambda c: c)
    return {c: logp[c] - tau * math.log(prior[key(c)]) for c in raw}


def ranking(scores: Mapping[str, float], candidates: Sequence[str]) -> list[str]:
    """Candidates by score, highest first; ties keep the candidate order (as the uncalibrated ranking)."""
    return sorted(candidates, key=lambda c: -scores[c])


def class_prior(classes: Iterable[str], space: Sequence[str]) -> dict[str, float]:
    """Add-one smoothed frequencies of ``classes`` over the class ``space``: (n_c + 1) / (N + K)."""
    counts = Counter(classes)
    unknown = set(counts) - set(space)
    space = [*space, *sorted(unknown)]
    total = sum(counts.values()) + len(space)
    return {c: (counts[c] + 1) / total for c in space}


def choose_tau(records: Sequence[Mapping[str, Any]], prior_of: Callable[[Mapping[str, Any]], Mapping[str, float]],
               *, rank_score: str = "sum", class_of: Callable[[str], str] | None = None,
               grid: Sequence[float] = TAU_GRID) -> tuple[float, dict[float, float]]:
    """The tau of ``grid`` with the highest balanced accuracy of the prior-adjusted top-1 on ``records`` (the
    validation fold's), the smallest on ties (the least adjustment); and every tau's balanced accuracy."""
    if not records:
        raise ValueError("no validation records to choose tau on: give calibration_tau=<number>")
    gold = [r["gold"] for r in records]
    found = {}
    for tau in grid:
        top = [ranking(calibrated(r, "prior", rank_score=rank_score, prior=prior_of(r), tau=tau, class_of=class_of),
                       list(r["loglik"]))[0] for r in records]
        with warnings.catch_warnings():  # predictions outside the gold classes count as misses
            warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
            found[tau] = float(balanced_accuracy_score(gold, top))
    best = max(found.values())
    return min(t for t, v in found.items() if v == best), found


def rerank(record: Mapping[str, Any], method: str, **settings: Any) -> dict[str, Any]:
    """``record`` ranked under ``method`` (:func:`calibrated`'s ``settings``), its scores recomputed; a
    calibrated record says which calibration ranked it (``calibration``), an uncalibrated one says nothing."""
    order = ranking(calibrated(record, method, **settings), list(record["loglik"]))
    out = {**record, "prediction": order,
           "scores": {**(record.get("scores") or {}), **instance_scores(record["task"], record["gold"], order)}}
    out.pop("calibration", None)
    return out if method == "none" else {**out, "calibration": method}
