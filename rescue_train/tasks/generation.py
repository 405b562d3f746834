"""Shared parts of the two generation tasks (ER, VP): checkpoint selection, JSON answers, judge material."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..data.schema import Row, Sample
from .options import Options, option
from .task import Task, count, evenly_spaced, window
from .types import BuildResult, Instance, instance_id


@dataclass(frozen=True)
class GenerationOptions:
    checkpoints_per_sample: int = option(5, "ER and VP instances per sample (the paper's)", key=False, low=1)


class GenerationTask(Task):
    options = GenerationOptions
    closed_set = False
    default_context = 3
    metric = "generation"
    bertscore = True
    judged = True

    def answer(self, inst: Instance, fmt: str, value: Any = None) -> str:
        return json.dumps(self.answer_payload(inst.gold if value is None else value, fmt), ensure_ascii=False)

    def answer_payload(self, value: Any, fmt: str) -> dict[str, Any]:
        raise NotImplementedError

    def add_checkpoints(self, result: BuildResult, sample: Sample, unit: str, candidates: Sequence[tuple[Row, Any]],
                        options: Options, gold: Callable[[Any], Any]) -> None:
        """Keep at most ``checkpoints_per_sample`` evenly spaced (row, gold item) candidates (the first one
        when one is kept) as instances showing the row as the current turn."""
        picked = evenly_spaced(candidates, options.checkpoints_per_sample, single="first")
        count(result.excluded, sample.scenario, "not among the evenly spaced checkpoints",
              len(candidates) - len(picked))
        k = self.context_size(options)
        for row, item in picked:
            result.instances.append(Instance(
                id=instance_id(sample.sample_id, self.name, row.row_index), task=self.name,
                sample_id=sample.sample_id, unit=unit, scenario=sample.scenario, row_index=row.row_index,
                context=window(row.row_index, k), current=row.row_index, candidates=(), gold=gold(item),
                given=(("speaker", row.speaker),), sample=sample,
            ))


def speaker_turn(inst: Instance | None) -> str:
    """The current turn, quoted for the judge (empty when the instance is not at hand)."""
    if inst is None or inst.sample is None or inst.current is None:
        return ""
    row = inst.sample.row(inst.current)
    return f"The speaker's turn: {row.speaker}: \"{row.dialogue}\"\n"


def first_value(payload: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in payload:
            return payload[key]
    return None
