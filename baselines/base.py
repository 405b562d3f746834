"""What every baseline shares: fitting that remembers the units it saw, a predict that refuses them,
and the support-target roles that turn per-sample names into classes."""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

from rescue_train.data.splits import LeakageError
from rescue_train.tasks import TASKS, Instance


class Baseline:
    """Fit on training instances of one task, then predict test instances of the same task.

    ``predict`` raises :class:`LeakageError` for an instance whose unit (couple or family) was among the
    fitted ones, so no score can come from a baseline that saw its test data."""

    name: str = ""
    tasks: tuple[str, ...] = ()  # the tasks covered by name; ``covers`` may widen it by a task's kind

    @classmethod
    def covers(cls, task: str) -> bool:
        return task in cls.tasks

    @classmethod
    def covered(cls) -> list[str]:
        return [t for t in TASKS if cls.covers(t)]

    def __init__(self, task: str, seed: int = 0):
        if not self.covers(task):
            raise ValueError(f"baseline {self.name!r} does not cover task {task!r} (it covers "
                             f"{', '.join(self.covered())})")
        self.task = task
        self.seed = seed
        self.fitted_units: frozenset[str] | None = None

    def fit(self, train: Sequence[Instance]) -> "Baseline":
        wrong = sorted({i.task for i in train} - {self.task})
        if wrong:
            raise ValueError(f"{self.name} for {self.task} got training instances of task(s) {', '.join(wrong)}")
        self.fitted_units = frozenset(i.unit for i in train)
        self._fit(list(train))
        return self

    def predict(self, test: Sequence[Instance]) -> list[Any]:
        if self.fitted_units is None:
            raise RuntimeError(f"{self.name} for {self.task}: call fit before predict")
        leaked = sorted({i.unit for i in test} & self.fitted_units)
        if leaked:
            raise LeakageError(f"{self.name} for {self.task} was fitted on test unit(s) {', '.join(leaked)}")
        return self._predict(list(test))

    def _fit(self, train: list[Instance]) -> None:
        raise NotImplementedError

    def _predict(self, test: list[Instance]) -> list[Any]:
        raise NotImplementedError


class ClosedSetBaseline(Baseline):
    """A baseline that ranks candidates from training labels: it covers every closed-set task."""

    @classmethod
    def covers(cls, task: str) -> bool:
        return task in TASKS and TASKS[task].closed_set


def by_scenario(train: Sequence[Instance], value) -> dict[str, Counter]:
    """Counters of ``value(inst)`` per scenario, plus the pooled counter under 'both'."""
    counts: dict[str, Counter] = {"both": Counter()}
    for inst in train:
        key = value(inst)
        counts.setdefault(inst.scenario, Counter())[key] += 1
        counts["both"][key] += 1
    return counts


def scenario_counts(counts: dict[str, Counter], inst: Instance) -> Counter:
    """The instance's scenario counter; the pooled one when training had none of that scenario."""
    return counts.get(inst.scenario) or counts["both"]


# --- support target (STP): per-sample names become roles that mean the same in every sample -------------

GROUP, LAST_SPEAKER, OTHER, SUBSET = "group", "last_speaker", "other_person", "subset"
ROLES = (GROUP, LAST_SPEAKER, OTHER, SUBSET)


def shown_rows(inst: Instance) -> tuple[int, ...]:
    return (*inst.context, *((inst.current,) if inst.current is not None else ()))


def clients_by_recency(inst: Instance) -> list[str]:
    """Participants who speak in the shown rows, the latest speaker first."""
    order: list[str] = []
    for index in reversed(shown_rows(inst)):
        speaker = inst.sample.row(index).speaker
        if speaker in inst.sample.participants and speaker not in order:
            order.append(speaker)
    return order


def stp_role(inst: Instance, candidate: str) -> str:
    if candidate == inst.sample.group_label:
        return GROUP
    if candidate not in inst.sample.participants:
        return SUBSET  # "A & B" labels of the exact-set target mode
    recent = clients_by_recency(inst)
    return LAST_SPEAKER if recent and recent[0] == candidate else OTHER


def rank_candidates(inst: Instance, score: dict[str, float]) -> list[str]:
    """Candidates by descending score; ties (and unscored labels, score 0) keep the candidate order,
    except that people sharing a role are ordered by how recently they spoke."""
    recent = clients_by_recency(inst) if inst.task == "stp" else []
    recency = {name: i for i, name in enumerate(recent)}

    def key(pair: tuple[int, str]) -> tuple[float, int, int]:
        position, label = pair
        return (-score.get(label, 0.0), recency.get(label, len(recency)), position)

    return [label for _, label in sorted(enumerate(inst.candidates), key=key)]


def class_of(inst: Instance) -> str:
    """The class a baseline learns: the gold label, or for STP the gold's role."""
    return stp_role(inst, inst.gold) if inst.task == "stp" else inst.gold


def candidate_scores(inst: Instance, class_score: dict[str, float]) -> dict[str, float]:
    """Per-candidate scores from per-class scores (STP: each candidate gets its role's score)."""
    if inst.task != "stp":
        return {c: class_score.get(c, 0.0) for c in inst.candidates}
    return {c: class_score.get(stp_role(inst, c), 0.0) for c in inst.candidates}
