"""The RESCUE-Bench tasks: the paper's six and RSG (the therapist's next turn). A new task is one module
plus one line in ``TASKS``: building, prompting, parsing and scoring all dispatch on the ``Task`` object, and
the data configuration's keys come from the tasks' own options (``tasks.options``)."""

from __future__ import annotations

from typing import Sequence

from ..data.config import ANSWER_FORMATS, MODES
from ..data.schema import Sample
from .context import build_messages, classifier_input, without_dialogue
from .er import EmotionRecognition
from .itp import InterventionTiming
from .options import build_options, data_config
from .rpp import RelationPattern
from .rsg import SupportGeneration
from .ssp import SupportStrategy
from .stp import SupportTarget
from .task import Task
from .types import METRICS, BuildResult, Instance, JudgeCheck, Parsed, ReportColumn, Rubric
from .vp import ViewpointPrediction

TASKS: dict[str, Task] = {t.name: t for t in (
    InterventionTiming(), RelationPattern(), SupportTarget(), SupportStrategy(), EmotionRecognition(),
    ViewpointPrediction(), SupportGeneration(),
)}
CLOSED_SET_TASKS = tuple(name for name, t in TASKS.items() if t.closed_set)
# What every builder receives, and the one data configuration with each task's data.<option> keys.
BuildOptions = build_options(TASKS.values())
DataConfig = data_config(TASKS.values(), BuildOptions)


def report_columns() -> dict[str, ReportColumn]:
    """Every registered task's report columns by key."""
    return {c.key: c for task in TASKS.values() for c in task.report_columns}


def get_task(name: str) -> Task:
    try:
        return TASKS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; expected one of {', '.join(TASKS)}") from None


def build(task: str, samples: Sequence[Sample], options: BuildOptions | None = None,
          units: dict[str, str] | None = None) -> BuildResult:
    """Instances of ``task`` over ``samples`` (units default to the leak-free grouping of ``splits``)."""
    from ..data.splits import assign_units

    return get_task(task).build(samples, units or assign_units(samples), options or BuildOptions())


def render(inst: Instance, mode: str = "dialogue", fmt: str = "label") -> list[dict[str, str]]:
    """The chat messages (system, user) a model sees for ``inst``: one renderer for training and evaluation."""
    if fmt not in ANSWER_FORMATS:
        raise ValueError(f"answer format must be one of {ANSWER_FORMATS}, got {fmt!r}")
    return build_messages(inst, TASKS[inst.task].instruction(inst, fmt), mode)


def render_without_dialogue(inst: Instance, filler: str | None, fmt: str = "label") -> list[dict[str, str]]:
    """:func:`render` with the dialogue replaced by ``filler`` (a content-free input), or with no context at
    all (``None``: the task question alone); what calibrated ranking scores the candidates against."""
    return without_dialogue(inst, TASKS[inst.task].instruction(inst, fmt), filler)


def render_for_classifier(inst: Instance, mode: str = "dialogue") -> dict[str, str]:
    """A sequence classifier's input for ``inst`` (one renderer for convert's ``cls`` datasets and the
    classifiers): ``query`` (the question, then the setting) and ``conversation`` (oldest row first), which an
    encoder cuts from the left, and ``text``, the two joined, for classifiers that read every word (TF-IDF)."""
    query, conversation = classifier_input(inst, TASKS[inst.task].ask(inst), mode)
    return {"text": f"{query}\n\n{conversation}", "query": query, "conversation": conversation}


__all__ = ["ANSWER_FORMATS", "CLOSED_SET_TASKS", "METRICS", "MODES", "TASKS", "BuildOptions", "BuildResult",
           "DataConfig",
           "Instance", "JudgeCheck", "Parsed", "ReportColumn", "Rubric", "Task", "build", "get_task", "render",
           "render_for_classifier", "render_without_dialogue", "report_columns"]
