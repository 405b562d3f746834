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

import unicodedata
from dataclasses import dataclass, field
from typing import Any, Mapping, NamedTuple

from .fields import (DataError, Location, bad_field, describe, label_field, names_field, number_field, stripped_field,
                     text_field)

# The one home of the speaker names the release uses for the therapist and for a whole group.
THERAPIST = "Therapist"
SCENARIOS = ("couple", "family")
GROUP_LABEL = {"couple": "Couple", "family": "Family"}  # the whole couple / family speaking or addressed
GROUP_SPEAKERS = tuple(GROUP_LABEL.values())


class PersonCue(NamedTuple):
    person: str
    description: str


class Interaction(NamedTuple):
    initiator: str
    target: tuple[str, ...]
    description: str


class BackgroundUtterance(NamedTuple):
    speaker: str
    target: tuple[str, ...]
    content: str


class Emotion(NamedTuple):
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


class Viewpoint(NamedTuple):
    source: str
    target: str
    viewpoint: str
    attitude: str


class SupportStrategy(NamedTuple):
    """One entry of a row's support_strategy field: who offered which kind of support to whom, and its text."""

    provider: str
    target: tuple[str, ...]
    strategy_type: str
    content: str


# (item type, ((json key, reader), ...)) for each list-of-objects field of a row
_ITEM_SPECS = {
    "background_dialogue": (BackgroundUtterance, (("speaker", stripped_field), ("target", names_field), ("content", text_field))),
    "body_posture": (PersonCue, (("person", stripped_field), ("description", text_field))),
    "facial_expressions": (PersonCue, (("person", stripped_field), ("description", text_field))),
    "self_directed_behavior": (PersonCue, (("person", stripped_field), ("description", text_field))),
    "interaction_behavior": (Interaction, (("initiator", stripped_field), ("target", names_field), ("description", text_field))),
    "internal_emotion": (Emotion, (("person", stripped_field), ("emotion_description", stripped_field),
                                   ("intensity", number_field))),
    "viewpoints_attitudes": (Viewpoint, (("source", stripped_field), ("target", stripped_field), ("viewpoint", stripped_field),
                                         ("attitude", stripped_field))),
    "support_strategy": (SupportStrategy, (("provider", stripped_field), ("target", names_field), ("strategy_type", stripped_field),
                                    ("strategy_content", text_field))),
}
_CUE_FIELDS = ("body_posture", "facial_expressions", "self_directed_behavior")


def _items(value: Any, name: str, where: Location) -> tuple:
    if value is None or value == []:
        return ()
    if type(value) is not list:
        raise bad_field(where, name, "a list", value)
    make, spec = _ITEM_SPECS[name]
    out = []
    for i, item in enumerate(value):
        if type(item) is not dict:
            if type(item) is str and name in _CUE_FIELDS:  # other exports store a bare description: keep it
                out.append(PersonCue("", item))
                continue
            raise bad_field(where, f"{name}[{i}]", "an object", item)
        out.append(make(*[read(item.get(key), where, (name, i, key)) for key, read in spec]))
    return tuple(out)


class Row(NamedTuple):
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
    support_strategy: tuple[SupportStrategy, ...]
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
        return GROUP_LABEL[self.scenario]

    def row(self, row_index: int) -> Row:
        return self.rows[row_index - 1]


def parse_row(raw: Any, position: int, where: Location) -> Row:
    """Parse the row at 1-based ``position``; an explicit ``row_index`` must agree with it."""
    where = Location(where.file, where.line, where.sample_id, position)  # not .at(): this runs for every row
    if type(raw) is not dict:
        raise DataError(where, f"expected an object, got {describe(raw)}")
    index = raw.get("row_index", position)
    if type(index) is not int or index != position:
        raise bad_field(where, "row_index", f"{position} (rows are numbered 1, 2, ... in order)", index)
    speaker = raw.get("primary_speaker")
    if type(speaker) is not str or not speaker.strip():
        raise bad_field(where, "primary_speaker", "a speaker name", speaker)
    get = raw.get
    return Row(
        position,
        number_field(get("start_time"), where, "start_time"),
        number_field(get("end_time"), where, "end_time"),
        speaker.strip(),
        names_field(get("target"), where, "target"),
        text_field(get("dialogue_cleaned"), where, "dialogue_cleaned"),
        text_field(get("utterance_type"), where, "utterance_type"),
        _items(get("background_dialogue"), "background_dialogue", where),
        text_field(get("tone_of_voice"), where, "tone_of_voice"),
        _items(get("body_posture"), "body_posture", where),
        _items(get("facial_expressions"), "facial_expressions", where),
        _items(get("self_directed_behavior"), "self_directed_behavior", where),
        _items(get("interaction_behavior"), "interaction_behavior", where),
        _items(get("internal_emotion"), "internal_emotion", where),
        _items(get("viewpoints_attitudes"), "viewpoints_attitudes", where),
        _items(get("support_strategy"), "support_strategy", where),
        label_field(get("relation_cycle_state"), where, "relation_cycle_state"),
        label_field(get("relation_pattern"), where, "relation_pattern"),
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
        if GROUP_LABEL["family"] in names:
            return "family"
    return "couple"


def participants_from_rows(rows: tuple[Row, ...]) -> tuple[str, ...]:
    """Clients in order of first appearance as speaker, addressee or support target."""
    seen: dict[str, None] = {}
    for row in rows:
        for name in (row.speaker, *row.target, *(n for s in row.support_strategy for n in s.target)):
            if name and name not in seen and name_key(name) not in ROLE_WORDS:
                seen[name] = None
    return tuple(seen)


def name_key(name: str) -> str:
    """What two spellings of one name share: the same letters up to case and Unicode normalisation."""
    return unicodedata.normalize("NFC", name).casefold()


ROLE_WORDS = {name_key(n): n for n in (THERAPIST, *GROUP_SPEAKERS)}


def clean_participants(names: tuple[str, ...], where: Location, notes: list[str] | None) -> tuple[str, ...]:
    """The clients of a ``participants`` list: the therapist and the group words (any case) and exact
    repeats are removed with a note; two spellings of one name (case, Unicode form) are an error, since
    names are matched exactly and it cannot be told which spelling the rows mean."""
    kept: dict[str, str] = {}
    where = where.at(field="participants")
    for name in names:
        key = name_key(name)
        if key in ROLE_WORDS:
            _note(notes, where, f"removed {name!r} (participants are the clients; the therapist and the group "
                                f"words Couple/Family are not)")
        elif kept.get(key) == name:
            _note(notes, where, f"removed a repeated {name!r}")
        elif key in kept:
            raise DataError(where, f"{kept[key]!r} and {name!r} differ only in letter case or Unicode "
                                   f"normalisation; names are matched exactly, so spell each person one way")
        else:
            kept[key] = name
    return tuple(kept.values())


def _note(notes: list[str] | None, where: Location, text: str) -> None:
    if notes is not None:
        notes.append(f"{where}: {text}")


def _row_names(row: Row):
    """(field, name) for every name field whose spelling decides a task: speaker and addressees, support
    targets, the people whose emotions and viewpoints are annotated."""
    yield "primary_speaker", row.speaker
    for name in row.target:
        yield "target", name
    for i, item in enumerate(row.support_strategy):
        for name in item.target:
            yield f"support_strategy[{i}].target", name
    for i, item in enumerate(row.internal_emotion):
        yield f"internal_emotion[{i}].person", item.person
    for i, item in enumerate(row.viewpoints):
        yield f"viewpoints_attitudes[{i}].source", item.source
        yield f"viewpoints_attitudes[{i}].target", item.target


def check_name_spellings(rows: tuple[Row, ...], participants: tuple[str, ...], where: Location) -> None:
    """Every name in the rows is spelt like the participant, role word or earlier name it matches up to case
    and Unicode form: ``therapist`` would silently turn a therapist row into a client's."""
    first: dict[str, str] = {name_key(n): n for n in (THERAPIST, *GROUP_SPEAKERS, *participants)}
    spelt = set(first.values())
    # A quick pass over the distinct names; only a clash needs the row-by-row pass that locates it.
    distinct: set[str] = set()
    for row in rows:  # the names _row_names lists, without their fields
        distinct.add(row.speaker)
        distinct.update(row.target)
        for item in row.support_strategy:
            distinct.update(item.target)
        distinct.update([item.person for item in row.internal_emotion])
        distinct.update([name for item in row.viewpoints for name in (item.source, item.target)])
    distinct -= spelt
    if len({name_key(n) for n in distinct} | first.keys()) == len(distinct) + len(first):
        return
    for row in rows:
        for name_field, name in _row_names(row):
            if name in spelt or not name:
                continue
            known = first.setdefault(name_key(name), name)
            if known != name:
                raise DataError(where.at(row_index=row.row_index, field=name_field),
                                f"{name!r} differs from {known!r} only in letter case or Unicode normalisation; "
                                f"names are matched exactly, so spell each person one way")
            spelt.add(name)


def parse_sample(raw: Any, where: Location, *, sample_id: str | None = None,
                 notes: list[str] | None = None) -> Sample:
    """Parse one sample object. ``sample_id`` overrides the object's own (the per-file layout); changes made
    to the participants list are appended to ``notes``."""
    if not isinstance(raw, Mapping):
        raise DataError(where, f"expected an object, got {describe(raw)}")
    if sample_id is None:
        sample_id = raw.get("sample_id")
        if not isinstance(sample_id, str) or not sample_id.strip():
            raise DataError(where.at(field="sample_id"), f"expected a non-empty string, got {describe(sample_id)}")
    sample_id = sample_id.strip()
    where = where.at(sample_id=sample_id)
    rows_raw = raw.get("rows")
    if not isinstance(rows_raw, list):
        raise DataError(where.at(field="rows"), f"expected a list of rows, got {describe(rows_raw)}")
    scenario = raw.get("scenario")
    if scenario is None:
        scenario = infer_scenario(rows_raw)
    if scenario not in SCENARIOS:
        raise DataError(where.at(field="scenario"), f"expected one of {SCENARIOS}, got {describe(scenario)}")
    rows = tuple(parse_row(r, i, where) for i, r in enumerate(rows_raw, start=1))
    participants = raw.get("participants")
    if participants is None:  # the rows' first spelling of each name is the one the others must match
        check_name_spellings(rows, (), where)
        names = participants_from_rows(rows)
    else:
        names = clean_participants(names_field(participants, where, "participants"), where, notes)
        check_name_spellings(rows, names, where)
        unlisted: dict[str, int] = {}
        for row in rows:
            if row.is_client and row.speaker not in names:
                unlisted.setdefault(row.speaker, row.row_index)
        for speaker, first in unlisted.items():
            _note(notes, where.at(field="participants"),
                  f"{speaker!r} speaks (first in row {first}) but is not listed; therapist rows that target "
                  f"{speaker!r} are left out of STP (target is not a participant of the sample)")
    return Sample(sample_id, scenario, names, rows, source=str(where.file or ""))
