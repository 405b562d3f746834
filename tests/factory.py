"""Small hand-made samples for tests: rows written as compact tuples, expanded to the release format."""

from __future__ import annotations

from typing import Any

from rescue_train.data.fields import Location
from rescue_train.data.schema import Sample, parse_sample


def row(speaker: str, target: list[str] | None = None, dialogue: str = "I hear what you are saying there.",
        **fields: Any) -> dict[str, Any]:
    """One row in the release's layout; ``fields`` override or add keys (e.g. relation_cycle_state)."""
    base = {
        "start_time": 0.0, "end_time": 1.0, "primary_speaker": speaker, "target": target or [],
        "dialogue_cleaned": dialogue, "utterance_type": "" if speaker == "Therapist" else "disclosure",
        "background_dialogue": [], "tone_of_voice": "", "body_posture": [], "facial_expressions": [],
        "self_directed_behavior": [], "interaction_behavior": [], "internal_emotion": [],
        "viewpoints_attitudes": [], "support_strategy": [],
    }
    base.update(fields)
    return base


def raw_sample(sample_id: str, rows: list[dict[str, Any]], scenario: str = "couple",
               participants: list[str] | None = None) -> dict[str, Any]:
    numbered = [{**r, "row_index": i} for i, r in enumerate(rows, start=1)]
    return {"sample_id": sample_id, "scenario": scenario, "participants": participants or ["Ann", "Ben"],
            "source_file": f"test/{sample_id}.json", "rows": numbered}


def sample(sample_id: str, rows: list[dict[str, Any]], scenario: str = "couple",
           participants: list[str] | None = None) -> Sample:
    return parse_sample(raw_sample(sample_id, rows, scenario, participants), Location(file="test"))


def strategy(target: list[str], kind: str, content: str = "a therapist move") -> dict[str, Any]:
    return {"provider": "Therapist", "target": target, "strategy_type": kind, "strategy_content": content}


def emotion(person: str, text: str, intensity: Any) -> dict[str, Any]:
    return {"person": person, "emotion_description": text, "intensity": intensity}


def viewpoint(source: str, target: str, text: str, attitude: str = "critical") -> dict[str, Any]:
    return {"source": source, "target": target, "viewpoint": text, "attitude": attitude}
