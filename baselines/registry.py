"""The baselines by name (kept out of the package's ``__init__``, which stays import-free)."""

from __future__ import annotations

from .base import Baseline
from .heuristics import Heuristic
from .majority import Majority
from .prior import LabelPrior, Uniform
from .support import GenericReply, RepeatClient, TfidfRetrieval
from .tfidf import TfidfLogReg, TfidfLogRegBalanced

BASELINES: dict[str, type[Baseline]] = {b.name: b for b in (
    Majority, LabelPrior, Uniform, TfidfLogReg, TfidfLogRegBalanced, Heuristic, RepeatClient, GenericReply,
    TfidfRetrieval,
)}
