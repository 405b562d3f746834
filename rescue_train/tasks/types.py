"""The value types every part of the toolkit shares: :class:`Instance` (one gold decision, the currency of
convert, training and evaluation), what a builder returns, a parsed answer, report columns and judge rubrics."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..data.schema import Sample

# How a task's records are aggregated (rescue_train.scoring.metrics.AGGREGATORS): yes/no precision and
# recall, top-3 rankings, emotion phrase plus intensity, judged free text, and free-text support turns.
METRICS = ("binary", "ranking", "emotion", "generation", "support")


class Instance(NamedTuple):
    """One gold decision. ``context`` are the rows shown before ``current`` (the row shown as the current
    turn, or None when it is hidden); ``given`` holds task inputs such as the known support target.
    A NamedTuple: immutable, and cheap to make by the ten thousand."""

    id: str
    task: str
    sample_id: str
    unit: str
    scenario: str
    row_index: int
    context: range  # consecutive rows: a range costs the same for 3 rows or 3,000 (all prior rows)
    current: int | None
    candidates: tuple[str, ...]
    gold: Any
    given: tuple[tuple[str, Any], ...] = ()
    sample: Sample | None = None

    def __repr__(self) -> str:  # the attached sample would flood the output
        return f"Instance({self.id!r}, gold={self.gold!r})"

    def given_value(self, key: str, default: Any = None) -> Any:
        return dict(self.given).get(key, default)

    def to_record(self) -> dict[str, Any]:
        """The ``instances.jsonl`` contract read by trainers, evaluator and outside checks."""
        return {
            "id": self.id,
            "task": self.task,
            "sample_id": self.sample_id,
            "unit": self.unit,
            "scenario": self.scenario,
            "row_index": self.row_index,
            "context_rows": list(self.context),
            "current_row": self.current,
            "candidates": list(self.candidates),
            "given": dict(self.given),
            "gold": self.gold,
        }


def instance_id(sample_id: str, task: str, row_index: int) -> str:
    """Ids name the sample, task and row only: nothing that reveals the gold (the reference's ITP ids do)."""
    return f"{sample_id}::{task}::row{row_index}"




@dataclass
class BuildResult:
    """Instances plus the rows and candidates left out, counted per (scenario, reason)."""

    instances: list[Instance]
    excluded: Counter = field(default_factory=Counter)


@dataclass(frozen=True)
class Parsed:
    """A model answer read back. ``status`` is ``ok``, or ``failed`` (the value is then empty and scored
    as wrong; it is never filled with the gold)."""

    status: str
    value: Any
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class ReportColumn:
    """One column of the results tables: ``metric`` of the task's aggregate, times ``scale``."""

    key: str
    metric: str
    header: str
    scale: float = 1.0
    digits: int = 2


@dataclass(frozen=True)
class Rubric:
    """What an LLM judge is told to grade, and the integer fields of its JSON reply; the judge score is the
    sum of the fields (one ``score`` field for a plain 1-5 scale)."""

    text: str
    fields: tuple[tuple[str, int, int], ...] = (("score", 1, 5),)

    @property
    def low(self) -> int:
        return sum(low for _, low, _ in self.fields)

    @property
    def high(self) -> int:
        return sum(high for _, _, high in self.fields)


class JudgeCheck(NamedTuple):
    """One judge question about one record: its scores are written under ``prefix`` (``judge_score``,
    ``judge_status``, ...); ``of_prediction`` False grades the gold itself (the human reference); ``system``
    replaces the judge's system message for grading against a reference (rescue_train.scoring.judge.SYSTEM)."""

    prefix: str
    rubric: Rubric
    material: str
    of_prediction: bool = True
    system: str | None = None

