"""Hand-made samples for the baseline tests: rows as short calls, parsed by the project's own schema."""

from __future__ import annotations

from typing import Any

from rescue_train.data.fields import Location
from rescue_train.data.schema import Sample, parse_sample
from rescue_train.tasks import BuildOptions
from rescue_train.tasks import build


def row(speaker: str, dialogue: str = "I keep saying the same thing to you.", target: tuple[str, ...] = (),
        **fields: Any) -> dict[str, Any]:
    return {"primary_speaker": speaker, "target": list(target), "dialogue_cleaned": dialogue, **fields}


def therapist(strategy: str | None = None, target: tuple[str, ...] = (), relation: str | None = None,
              dialogue: str = "Let us slow down here.") -> dict[str, Any]:
    fields: dict[str, Any] = {}
    if strategy:
        fields["support_strategy"] = [{"provider": "Therapist", "target": list(target), "strategy_type": strategy,
                                       "strategy_content": dialogue}]
    if relation:
        fields["relation_cycle_state"] = relation
    return row("Therapist", dialogue, target, **fields)


def emotion(person: str, text: str, intensity: float) -> dict[str, Any]:
    return {"person": person, "emotion_description": text, "intensity": intensity}


def viewpoint(source: str, target: str, text: str) -> dict[str, Any]:
    return {"source": source, "target": target, "viewpoint": text, "attitude": "critical"}


def sample(sample_id: str, participants: list[str], rows: list[dict], scenario: str = "couple") -> Sample:
    raw = {"sample_id": sample_id, "scenario": scenario, "participants": participants, "rows": rows}
    return parse_sample(raw, Location(file="test"))


def instances(task: str, *samples: Sample, **options: Any):
    return build(task, samples, BuildOptions(**options)).instances
