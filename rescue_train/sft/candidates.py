"""Candidate-set losses in LoRA SFT: the closed-set instances' candidates ranked in the training forward pass.

A closed-set instance (ITP, RPP, STP, SSP) is trained on its answer tokens, and, under a strategy whose loss is
not the token loss alone (``candidate_ce``, ``logit_adjusted``, ``balanced_softmax`` of
:mod:`rescue_train.rebalance`), on a classification loss over its candidates too. Each candidate's logit is its
log-likelihood as the evaluator's rank protocol scores it: the answer text and its end-of-turn marker after the
prompt, encoded by :class:`~rescue_train.inference.base.ChatEncoder` and scored by
:func:`~rescue_train.inference.hf.candidate_logprobs` (prompt once, candidates appended under a 4D attention
mask), the very code rank evaluation runs. The gold candidate's log-likelihood is the instance's answer-token
loss as well, so a step costs one forward pass of the prompts plus the candidates' tokens; generation
instances of a mixed run keep the plain token loss.

The adjustments use the training fold's class prior of the instance's task and scenario: candidate c counts as
the training instances of its class (``Task.class_key``: the label itself, or STP's kind of target), an unseen
class once (:func:`rescue_train.rebalance.log_prior`). The step's loss is
``(1 - w) * answer-token loss + w * candidate loss`` with w = ``balance.candidate_loss_weight``; class weights
(a strategy's ``class_weights``) weigh both, the candidate loss as a weighted mean over instances.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Sequence

from ..rebalance import LOSSES, LossInputs, Strategy, log_prior
from ..tasks import get_task

# The dataset columns a candidate-set loss reads (the trainer adds the token ids of the last two).
COLUMNS = ("gold_index", "candidate_log_prior", "candidate_prompt_ids", "candidate_ids")


def uses_candidates(strategy: Strategy) -> bool:
    """Whether a LoRA run of ``strategy`` adds a loss over the candidates (every loss but the token loss "ce")."""
    return strategy.loss != "ce"


@dataclass(frozen=True)
class CandidateLoss:
    """What the trainer needs to add the candidate loss: the loss's name in ``LOSSES``, its weight and tau."""

    loss: str
    weight: float
    tau: float


def candidate_columns(tasks: Sequence[str], scenarios: Sequence[str], records: Sequence[dict[str, Any] | None],
                      fmt: str) -> dict[str, list]:
    """Per training row: the candidates' answer texts (as the rank protocol scores them), the gold's index
    among them (-1 for a generation instance) and each candidate's log class prior in the row's (task,
    scenario) of this training fold. ``records`` are the rows' ``instances.jsonl`` records (None: generation)."""
    counts: Counter = Counter()
    for task, scenario, record in zip(tasks, scenarios, records):
        if record is not None:
            counts[(task, scenario, get_task(task).class_key(record["gold"]))] += 1
    answers, golds, priors = [], [], []
    for task, scenario, record in zip(tasks, scenarios, records):
        if record is None:
            answers.append([]), golds.append(-1), priors.append([])
            continue
        spec = get_task(task)
        candidates = list(record["candidates"])
        if record["gold"] not in candidates:
            raise ValueError(f"instance {record['id']} ({task}): its gold {record['gold']!r} is not one of its "
                             f"candidates {candidates}")
        instance = SimpleNamespace(gold=record["gold"], candidates=tuple(candidates))
        answers.append([spec.answer(instance, fmt, value=c) for c in candidates])
        golds.append(candidates.index(record["gold"]))
        priors.append(log_prior([counts[(task, scenario, spec.class_key(c))] for c in candidates]).tolist())
    return {"candidates": answers, "gold_index": golds, "candidate_log_prior": priors}


def candidate_set_loss(loss: str, logits: Sequence[Any], golds: Sequence[int], log_priors: Sequence[Any],
                       weights: Sequence[float] | None, tau: float):
    """The ``LOSSES[loss]`` of each instance over its own candidates (their number differs between tasks), as
    the mean over instances weighted by ``weights`` (their class weights; None: the plain mean)."""
    import torch

    losses = torch.stack([
        LOSSES[loss](z[None], torch.tensor([g], device=z.device), None,
                     LossInputs(log_prior=torch.as_tensor(p, dtype=z.dtype, device=z.device), margins=None,
                                settings=SimpleNamespace(tau=tau)))
        for z, g, p in zip(logits, golds, log_priors)])
    if weights is None:
        return losses.mean()
    w = torch.as_tensor(weights, dtype=losses.dtype, device=losses.device)
    return (w * losses).sum() / w.sum()
