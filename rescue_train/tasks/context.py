"""Render what a model sees: the dialogue context first, then the task question.

The shared part of a prompt (system text, scenario, participants, the conversation) comes first and the
task instruction last, so an inference engine's prefix cache serves all tasks and all candidates of one
dialogue from one prefill. The input mode selects the cue fields shown for each row:

* ``dialogue``: speaker, addressees, the words and overlapping background speech;
* ``audio``: plus the tone of voice;
* ``visual``: plus posture, facial expression, self-directed behaviour and directed interaction;
* ``audiovisual``: all of them.
"""

from __future__ import annotations

from ..data.config import MODES
from ..data.schema import THERAPIST, PersonCue, Row, Sample
from .types import Instance

SYSTEM_PROMPT = (
    "You are an expert in couple and family therapy process research. You read transcripts of real "
    "therapy sessions, annotated row by row, and answer one analysis question about them. Use only the "
    "rows you are shown; never assume what is said later. Answer exactly in the requested format."
)


def _cues(name: str, cues: tuple[PersonCue, ...]) -> str | None:
    items = [f"{c.person}: {c.description}" if c.person else c.description for c in cues if c.description]
    return f"{name}: " + "; ".join(items) if items else None


def render_row(row: Row, mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    addressees = ", ".join(row.target) or "?"
    lines = [f"[{row.row_index}] {row.speaker} -> {addressees}: {row.dialogue}"]
    for bg in row.background:
        if bg.speaker and bg.content:
            lines.append(f"    (overlapping) {bg.speaker} -> {', '.join(bg.target) or '?'}: {bg.content}")
    if mode in ("audio", "audiovisual") and row.tone_of_voice:
        lines.append(f"    tone: {row.tone_of_voice}")
    if mode in ("visual", "audiovisual"):
        for cue_line in (
            _cues("posture", row.body_posture),
            _cues("face", row.facial_expressions),
            _cues("self-directed", row.self_directed_behavior),
            _cues(
                "interaction",
                tuple(PersonCue(f"{i.initiator} -> {', '.join(i.target)}", i.description)
                      for i in row.interaction_behavior),
            ),
        ):
            if cue_line:
                lines.append("    " + cue_line)
    return "\n".join(lines)


def _context_parts(inst: Instance, mode: str, rows: str) -> list[str]:
    """The pieces of the context text around ``rows``, the prior rows already rendered and joined."""
    sample: Sample = inst.sample
    scenario = "a couple therapy session" if inst.scenario == "couple" else "a family therapy session"
    parts = [
        f"Setting: {scenario}. Participants: {', '.join(sample.participants)}; the therapist speaks as "
        f"'{THERAPIST}'; '{sample.group_label}' stands for the whole {inst.scenario} speaking or addressed together.",
    ]
    if inst.context:
        parts.append(f"Conversation so far (rows {inst.context[0]}-{inst.context[-1]}):\n{rows}")
    else:
        parts.append("Conversation so far: (no earlier rows shown)")
    if inst.current is not None:
        parts.append(f"Current turn:\n{render_row(sample.row(inst.current), mode)}")
    return parts


def render_context(inst: Instance, mode: str) -> str:
    """Scenario, participants, the prior rows and (when shown) the current turn."""
    rows = "\n".join(render_row(inst.sample.row(i), mode) for i in inst.context)
    return "\n\n".join(_context_parts(inst, mode, rows))


class PromptSizer:
    """``len(render_context(inst, mode))`` without building the text. With all prior rows as context the
    texts of one sample's instances add up to the square of its length; their sizes, from running sums of
    each row's rendered length, cost one pass over the rows."""

    def __init__(self, mode: str):
        self.mode = mode
        self.sums: dict[str, list[int]] = {}  # sample id -> [0, len(row 1) + 1, ... + len(row k) + 1, ...]

    def context_chars(self, inst: Instance) -> int:
        sums = self.sums.get(inst.sample_id)
        if sums is None:
            sums = self.sums[inst.sample_id] = [0]
            for row in inst.sample.rows:
                sums.append(sums[-1] + len(render_row(row, self.mode)) + 1)
        rows = sums[inst.context[-1]] - sums[inst.context[0] - 1] - 1 if inst.context else 0
        parts = _context_parts(inst, self.mode, "")
        return sum(map(len, parts)) + 2 * (len(parts) - 1) + rows


def classifier_input(inst: Instance, question: str, mode: str) -> tuple[str, str]:
    """What a sequence classifier reads, as (query, conversation). The query identifies the instance (its
    question, with the row and the target, then the setting) and the conversation holds the prior rows, oldest
    first, and the current turn: an encoder keeps the query whole and cuts the conversation from the left, so
    a long input loses its oldest rows, never the question nor the latest turns. No label definitions: a
    classifier learns its labels from the data (the language model's prompt keeps them)."""
    rows = "\n".join(render_row(inst.sample.row(i), mode) for i in inst.context)
    setting, *conversation = _context_parts(inst, mode, rows)
    return f"{question}\n\n{setting}", "\n\n".join(conversation)


def build_messages(inst: Instance, instruction: str, mode: str) -> list[dict[str, str]]:
    """System and user messages: the context first, the task instruction last."""
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": render_context(inst, mode) + "\n\n" + instruction},
    ]


def without_dialogue(inst: Instance, instruction: str, filler: str | None) -> list[dict[str, str]]:
    """The messages of ``inst`` with no dialogue content: its setting and participants, the conversation given
    as ``filler`` (a content-free input: ``"N/A"``, or ``""`` for no rows at all) and the same instruction; or,
    with ``filler`` None, the instruction alone (a domain premise: the task question and its candidates)."""
    if filler is None:
        user = instruction
    else:
        setting = _context_parts(inst._replace(context=range(0), current=None), "dialogue", "")[0]
        rows = f"Conversation so far:\n{filler}" if filler else "Conversation so far: (no earlier rows shown)"
        user = f"{setting}\n\n{rows}\n\n{instruction}"
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}]
