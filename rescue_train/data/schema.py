"""Typed, validated records for RESCUE-Bench samples.

Parsing is strict about structure (a row that is not an object, a list that is a string, an intensity
that is not a number) and lenient about the release's conventions (DATA_FORMAT.md):

* ``null`` or a missing key means "not annotated"; for the relation fields that is kept as ``None``;
* ``""`` means "annotators saw no clear label" and is kept as ``""`` (the task builders exclude it
  under its own reason);
* a list field given as ``null`` is read as an empty list (the release never does this, but other
  exports of the same data do);
* text is kept exactly as stored, mis-encoded punctuation included.

Every error is a :class:`DataError` that names where it happened (file, line, sample, row, field)
and what was expected.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

THERAPIST = "Therapist"
GROUP_SPEAKERS = ("Couple", "Family")
SCENARIOS = ("couple", "family")


@dataclass(frozen=True)
class Location:
    """Where a value came from, for error messages."""

    file: str | None = None
    line: int | None = None
    sample_id: str | None = None
    row_index: int | None = None
    field: str | None = None

    def at(self, **changes: Any) -> "Location":
        return Location(**{**self.__dict__, **changes})

    def __str__(self) -> str:
        parts = []
        if self.file:
            parts.append(self.file + (f":{self.line}" if self.line is not None else ""))
        elif self.line is not None:
            parts.append(f"line {self.line}")
        if self.sample_id:
            parts.append(f"sample {self.sample_id!r}")
        if self.row_index is not None:
            parts.append(f"row {self.row_index}")
        if self.field:
            parts.append(f"field {self.field!r}")
        return ", ".join(parts) or "<input>"


class DataError(ValueError):
    """Malformed benchmark input; the message starts with the location."""

    def __init__(self, where: Location, problem: str):
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def _text(value: Any, where: Location, *, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise DataError(where, f"expected a string, got {_describe(value)}")
    return value


def _optional_label(value: Any, where: Location) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise DataError(where, f"expected a string label, \"\" or null, got {_describe(value)}")
    return value.strip()


def _names(value: Any, where: Location) -> tuple[str, ...]:
    """A list of names; null reads as empty, a bare string is an error (it is ambiguous)."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DataError(where, f"expected a list of names, got {_describe(value)}")
    return tuple(v.strip() for v in value if v.strip())


def _items(value: Any, where: Location) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise DataError(where, f"expected a list, got {_describe(value)}")
    return value


def _obj(value: Any, where: Location) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise DataError(where, f"expected an object, got {_describe(value)}")
    return value


def _int_list(value: Any, where: Location) -> tuple[int, ...]:
    items = _items(value, where)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise DataError(where, f"expected a list of row numbers, got {_describe(value)}")
    return tuple(items)


def _number(value: Any, where: Location) -> float | None:
    """A number, a numeric string, or null. Anything else is malformed."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise DataError(where, f"expected a number, got {_describe(value)}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise DataError(where, f"expected a number, got {_describe(value)}") from None
        return number if math.isfinite(number) else None
    raise DataError(where, f"expected a number, got {_describe(value)}")


@dataclass(frozen=True)
class PersonCue:
    person: str
    description: str


@dataclass(frozen=True)
class Interaction:
    initiator: str
    target: tuple[str, ...]
    description: str


@dataclass(frozen=True)
class BackgroundUtterance:
    speaker: str
    target: tuple[str, ...]
    content: str


@dataclass(frozen=True)
class Emotion:
    person: str
    description: str
    intensity: float | None

    @property
    def intensity_0_10(self) -> int | None:
        """The intensity as the benchmark scores it: rounded to an integer, valid only within 0..10."""
        if self.intensity is None:
            return None
        value = int(round(self.intensity))
        return value if 0 <= value <= 10 else None


@dataclass(frozen=True)
class Viewpoint:
    source: str
    target: str
    viewpoint: str
    attitude: str


@dataclass(frozen=True)
class Strategy:
    provider: str
    target: tuple[str, ...]
    strategy_type: str
    content: str


@dataclass(frozen=True)
class Row:
    row_index: int
    start_time: float | None
    end_time: float | None
    speaker: str
    target: tuple[str, ...]
    dialogue: str
    utterance_type: str
    background: tuple[BackgroundUtterance, ...]
    tone_of_voice: str
    body_posture: tuple[PersonCue, ...]
    facial_expressions: tuple[PersonCue, ...]
    self_directed_behavior: tuple[PersonCue, ...]
    interaction_behavior: tuple[Interaction, ...]
    internal_emotion: tuple[Emotion, ...]
    viewpoints: tuple[Viewpoint, ...]
    support_strategy: tuple[Strategy, ...]
    # None = key absent or null (not annotated); "" = annotators saw no clear pattern.
    relation_cycle_state: str | None
    relation_pattern: str | None

    @property
    def is_therapist(self) -> bool:
        return self.speaker == THERAPIST

    @property
    def is_client(self) -> bool:
        """A single client speaking: not the therapist and not a group speaking together."""
        return bool(self.speaker) and self.speaker != THERAPIST and self.speaker not in GROUP_SPEAKERS


@dataclass(frozen=True)
class Sample:
    sample_id: str
    scenario: str
    participants: tuple[str, ...]
    rows: tuple[Row, ...]
    source: str = field(default="", compare=False)

    @property
    def folder(self) -> str:
        """The first path component of the sample id: the couple (or ``family_therapy``)."""
        return self.sample_id.split("/", 1)[0]

    @property
    def group_label(self) -> str:
        return "Couple" if self.scenario == "couple" else "Family"

    def row(self, row_index: int) -> Row:
        return self.rows[row_index - 1]


def _cues(value: Any, where: Location) -> tuple[PersonCue, ...]:
    cues = []
    for i, item in enumerate(_items(value, where)):
        if isinstance(item, str):  # other exports store a bare description; keep it, unattributed
            cues.append(PersonCue("", item))
            continue
        item = _obj(item, where.at(field=f"{where.field}[{i}]"))
        cues.append(
            PersonCue(
                _text(item.get("person"), where.at(field=f"{where.field}[{i}].person")),
                _text(item.get("description"), where.at(field=f"{where.field}[{i}].description")),
            )
        )
    return tuple(cues)


def _parse_list(value: Any, where: Location, parse_item) -> tuple:
    out = []
    for i, item in enumerate(_items(value, where)):
        item_where = where.at(field=f"{where.field}[{i}]")
        out.append(parse_item(_obj(item, item_where), item_where))
    return tuple(out)


def _sub(where: Location, name: str) -> Location:
    return where.at(field=f"{where.field}.{name}")


def _interaction(item: Mapping[str, Any], where: Location) -> Interaction:
    return Interaction(
        _text(item.get("initiator"), _sub(where, "initiator")),
        _names(item.get("target"), _sub(where, "target")),
        _text(item.get("description"), _sub(where, "description")),
    )


def _background(item: Mapping[str, Any], where: Location) -> BackgroundUtterance:
    return BackgroundUtterance(
        _text(item.get("speaker"), _sub(where, "speaker")),
        _names(item.get("target"), _sub(where, "target")),
        _text(item.get("content"), _sub(where, "content")),
    )


def _emotion(item: Mapping[str, Any], where: Location) -> Emotion:
    return Emotion(
        _text(item.get("person"), _sub(where, "person")).strip(),
        _text(item.get("emotion_description"), _sub(where, "emotion_description")).strip(),
        _number(item.get("intensity"), _sub(where, "intensity")),
    )


def _viewpoint(item: Mapping[str, Any], where: Location) -> Viewpoint:
    return Viewpoint(
        _text(item.get("source"), _sub(where, "source")).strip(),
        _text(item.get("target"), _sub(where, "target")).strip(),
        _text(item.get("viewpoint"), _sub(where, "viewpoint")).strip(),
        _text(item.get("attitude"), _sub(where, "attitude")).strip(),
    )


def _strategy(item: Mapping[str, Any], where: Location) -> Strategy:
    return Strategy(
        _text(item.get("provider"), _sub(where, "provider")),
        _names(item.get("target"), _sub(where, "target")),
        _text(item.get("strategy_type"), _sub(where, "strategy_type")).strip(),
        _text(item.get("strategy_content"), _sub(where, "strategy_content")),
    )


def parse_row(raw: Any, position: int, where: Location) -> Row:
    """Parse the row at 1-based ``position``; an explicit ``row_index`` must agree with it."""
    where = where.at(row_index=position, field=None)
    raw = _obj(raw, where)
    index = raw.get("row_index", position)
    if isinstance(index, bool) or not isinstance(index, int) or index != position:
        raise DataError(
            where.at(field="row_index"),
            f"expected {position} (rows are numbered 1, 2, ... in order), got {_describe(index)}",
        )
    speaker = raw.get("primary_speaker")
    if not isinstance(speaker, str) or not speaker.strip():
        raise DataError(where.at(field="primary_speaker"), f"expected a speaker name, got {_describe(speaker)}")

    def f(name: str) -> Location:
        return where.at(field=name)

    return Row(
        row_index=position,
        start_time=_number(raw.get("start_time"), f("start_time")),
        end_time=_number(raw.get("end_time"), f("end_time")),
        speaker=speaker.strip(),
        target=_names(raw.get("target"), f("target")),
        dialogue=_text(raw.get("dialogue_cleaned"), f("dialogue_cleaned")),
        utterance_type=_text(raw.get("utterance_type"), f("utterance_type")),
        background=_parse_list(raw.get("background_dialogue"), f("background_dialogue"), _background),
        tone_of_voice=_text(raw.get("tone_of_voice"), f("tone_of_voice")),
        body_posture=_cues(raw.get("body_posture"), f("body_posture")),
        facial_expressions=_cues(raw.get("facial_expressions"), f("facial_expressions")),
        self_directed_behavior=_cues(raw.get("self_directed_behavior"), f("self_directed_behavior")),
        interaction_behavior=_parse_list(raw.get("interaction_behavior"), f("interaction_behavior"), _interaction),
        internal_emotion=_parse_list(raw.get("internal_emotion"), f("internal_emotion"), _emotion),
        viewpoints=_parse_list(raw.get("viewpoints_attitudes"), f("viewpoints_attitudes"), _viewpoint),
        support_strategy=_parse_list(raw.get("support_strategy"), f("support_strategy"), _strategy),
        relation_cycle_state=_optional_label(raw.get("relation_cycle_state"), f("relation_cycle_state")),
        relation_pattern=_optional_label(raw.get("relation_pattern"), f("relation_pattern")),
    )


def infer_scenario(rows: list[Any]) -> str:
    """For the per-sample file layout, which has no ``scenario`` key: family when the literal group label
    ``Family`` appears as a speaker, an addressee or a support target (as DATA_FORMAT.md prescribes)."""
    for row in rows:
        if not isinstance(row, Mapping):
            continue
        names = [row.get("primary_speaker")] + list(row.get("target") or [])
        for item in row.get("support_strategy") or []:
            if isinstance(item, Mapping):
                names += list(item.get("target") or [])
        if "Family" in names:
            return "family"
    return "couple"


def participants_from_rows(rows: tuple[Row, ...]) -> tuple[str, ...]:
    """Clients in order of first appearance as speaker, addressee or support target."""
    seen: dict[str, None] = {}
    for row in rows:
        for name in (row.speaker, *row.target, *(n for s in row.support_strategy for n in s.target)):
            if name and name != THERAPIST and name not in GROUP_SPEAKERS:
                seen.setdefault(name, None)
    return tuple(seen)


def parse_sample(raw: Any, where: Location, *, sample_id: str | None = None) -> Sample:
    """Parse one sample object. ``sample_id`` overrides the object's own (the per-file layout)."""
    raw = _obj(raw, where)
    if sample_id is None:
        sample_id = raw.get("sample_id")
        if not isinstance(sample_id, str) or not sample_id.strip():
            raise DataError(where.at(field="sample_id"), f"expected a non-empty string, got {_describe(sample_id)}")
    sample_id = sample_id.strip()
    where = where.at(sample_id=sample_id)
    rows_raw = raw.get("rows")
    if not isinstance(rows_raw, list):
        raise DataError(where.at(field="rows"), f"expected a list of rows, got {_describe(rows_raw)}")
    scenario = raw.get("scenario")
    if scenario is None:
        scenario = infer_scenario(rows_raw)
    if scenario not in SCENARIOS:
        raise DataError(where.at(field="scenario"), f"expected one of {SCENARIOS}, got {_describe(scenario)}")
    rows = tuple(parse_row(r, i, where) for i, r in enumerate(rows_raw, start=1))
    participants = raw.get("participants")
    if participants is None:
        names = participants_from_rows(rows)
    else:
        names = _names(participants, where.at(field="participants"))
    return Sample(sample_id, scenario, names, rows, source=str(where.file or ""))
