"""Trivial baselines for RESCUE-Bench, scored by the same metric code as the models.

Each baseline is fitted on training instances only and predicts in the evaluator's prediction-record
format (rankings for the closed-set tasks), so ``rescue_train.evaluation.metrics`` scores it like any
model. ``rescue-train baselines DATA`` runs them all over grouped folds (see ``baselines.runner``).
"""

from __future__ import annotations

from .base import Baseline
from .heuristics import Heuristic
from .majority import Majority
from .prior import LabelPrior, Uniform
from .tfidf import TfidfLogReg, TfidfLogRegBalanced

BASELINES: dict[str, type[Baseline]] = {b.name: b for b in (
    Majority, LabelPrior, Uniform, TfidfLogReg, TfidfLogRegBalanced, Heuristic,
)}

__all__ = ["BASELINES", "Baseline", "Heuristic", "LabelPrior", "Majority", "TfidfLogReg", "TfidfLogRegBalanced",
           "Uniform"]
