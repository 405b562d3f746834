"""The currency of the toolkit: :class:`Instance`, the :class:`Task` interface and the shared helpers.

A task module owns everything task-specific: which rows become instances (``build``), the question and
candidates it asks (``instruction``), the gold answer text (``answer``) and how a model's text is read back
(``parse``). The converter, the trainers and the evaluator all go through these, so a fine-tuned model is
evaluated on exactly the prompts it learnt from.

It owns its scoring too, so that no other module needs to know a task by name: how its records are
aggregated (``metric``, one of ``METRICS``), its fixed label set (``label_space``), the structured-output
schema of its answers (``answer_schema``), its generation budget (``max_new_tokens``), the texts BERTScore
compares (``bertscore_texts``), what an LLM judge is asked (``judge_checks``), its report columns
(``report_columns``), the class it balances under in training (``class_key``) and the label ``stats``
counts (``stats_label``).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, NamedTuple, Sequence

from ..data import taxonomy
from ..data.schema import Sample

ANSWER_FORMATS = ("label", "json")
MODES = ("dialogue", "audio", "visual", "audiovisual")
# How a task's records are aggregated (rescue_train.evaluation.metrics.AGGREGATORS): yes/no precision and
# recall, top-3 rankings, emotion phrase plus intensity, judged free text, and free-text support turns.
METRICS = ("binary", "ranking", "emotion", "generation", "support")
RSG_CONDITIONS = ("none", "target", "target_strategy")


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


@dataclass(frozen=True)
class BuildOptions:
    """Construction choices. ``context`` None means each task's own default window."""

    context: int | None = None
    rpp_definition: str = "D"
    rpp_include_current: bool = False
    stp_targets: str = "collapse"
    ssp_target_emotion: bool = False
    checkpoints_per_sample: int = 5
    er_min_words: int = 5
    er_discard_fraction: float = 0.3
    itp_cap_per_class: int = 0
    rsg_min_words: int = 5
    rsg_condition: str = "none"
    rsg_per_sample: int = 0

    def __post_init__(self):
        if self.context is not None and self.context < -1:
            raise ValueError(f"context must be -1 (all prior rows), 0 (none) or a positive count, got {self.context}")
        if self.stp_targets not in ("collapse", "set"):
            raise ValueError(f"stp_targets must be 'collapse' or 'set', got {self.stp_targets!r}")
        if self.rsg_condition not in RSG_CONDITIONS:
            raise ValueError(f"rsg_condition must be one of {', '.join(RSG_CONDITIONS)}, got {self.rsg_condition!r}")
        if self.rsg_min_words < 0 or self.rsg_per_sample < 0:
            raise ValueError("rsg_min_words and rsg_per_sample must be >= 0 (rsg_per_sample 0 keeps every turn)")


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
    ``judge_status``, ...); ``of_prediction`` False grades the gold itself (the human reference)."""

    prefix: str
    rubric: Rubric
    material: str
    of_prediction: bool = True


class Task:
    """Base class of the tasks; subclasses set the class attributes and implement the methods."""

    name: str = ""
    default_context: int = 3
    closed_set: bool = True
    metric: str = "ranking"
    # Default generation budget (tokens) per answer format.
    max_new_tokens: dict[str, int] = {"label": 16, "json": 64}
    report_columns: tuple[ReportColumn, ...] = ()
    report_note: str = ""  # what the columns mean, printed above a task's own tables
    # Compared with BERTScore (``bertscore_texts``) and asked of a judge (``judge_checks``).
    bertscore: bool = False
    judged: bool = False

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: BuildOptions) -> BuildResult:
        raise NotImplementedError

    def instruction(self, inst: Instance, fmt: str) -> str:
        """The task question, candidates and answer format: the end of the user message."""
        raise NotImplementedError

    def answer(self, inst: Instance, fmt: str, value: Any = None) -> str:
        """The answer text for ``value`` (the gold when None) in answer format ``fmt``."""
        raise NotImplementedError

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        raise NotImplementedError

    def context_size(self, options: BuildOptions) -> int:
        return self.default_context if options.context is None else options.context

    def label_space(self) -> dict[str, tuple[str, ...]] | None:
        """scenario -> the task's labels in a fixed order; None when candidates differ per instance."""
        return None

    def answer_schema(self, inst: Instance, fmt: str) -> dict[str, Any] | None:
        """Structured-output constraint for the answer (``{"choice": [...]}`` or ``{"json": schema}``);
        None for free text."""
        return None

    def bertscore_texts(self, gold: Any, prediction: Any) -> tuple[str, str]:
        """(candidate, reference) strings BERTScore compares for one record."""
        raise ValueError(f"task {self.name} is not scored with BERTScore")

    def judge_rubric(self, vp_scale: str) -> Rubric | None:
        """The main rubric, behind ``judge_score`` (None: the task is not judged)."""
        return None

    def judge_checks(self, record: dict[str, Any], inst: Instance | None, vp_scale: str) -> list[JudgeCheck]:
        """The judge questions about one prediction record, the main rubric's first (none when not judged)."""
        return []

    def class_key(self, gold: Any) -> str | None:
        """The class an instance counts under for class balancing in training; None: no classes."""
        return str(gold) if self.closed_set else None

    def stats_label(self, inst: Instance) -> str | None:
        """The label ``rescue-train stats`` counts for ``inst``; None counts nothing."""
        return inst.gold if self.closed_set else None


def evenly_spaced(items: Sequence[Any], limit: int, *, single: str) -> list[Any]:
    """Keep at most ``limit`` items at evenly spaced positions, in their original order.

    The reference picks indices ``round(i*(n-1)/(limit-1))`` with Python's half-to-even ``round``;
    with ``limit == 1`` ITP keeps the middle item (``single="middle"``) and ER/VP the first
    (``single="first"``). With n > limit the step exceeds 1, so the picks never collide and the
    reference's de-duplication and top-up never act.
    """
    n = len(items)
    if limit <= 0 or n <= limit:
        return list(items)
    if limit == 1:
        return [items[n // 2] if single == "middle" else items[0]]
    picked = [round(i * (n - 1) / (limit - 1)) for i in range(limit)]
    return [items[p] for p in picked]


WORD = re.compile(r"[A-Za-z0-9']+")


PREDICTION_CHARS = 2000  # a predicted field longer than this is cut in a judge prompt (cost bound)


def shown(value: Any) -> str:
    """A predicted value as a judge prompt shows it: encodable, and cut at ``PREDICTION_CHARS``."""
    text = clean_text(str(value))
    return text if len(text) <= PREDICTION_CHARS else text[:PREDICTION_CHARS] + " [...]"


def text_field(item: Any, key: str) -> str:
    """A string field of a parsed answer ('' for anything else), safe for a tokenizer."""
    value = item.get(key) if isinstance(item, dict) else None
    return clean_text(value).strip() if isinstance(value, str) else ""


def word_count(text: str) -> int:
    return len(WORD.findall(text))


def window(current: int, k: int) -> range:
    """Row indices strictly before ``current``: none (k=0), all (k=-1) or the last k. A range, not a tuple:
    with all prior rows as context a tuple per instance would grow with the square of a sample's length."""
    if k == 0:
        return range(current, current)
    start = 1 if k < 0 else max(1, current - k)
    return range(start, current)


_JSON_START = re.compile(r"[\[{]")
_JSON_ATTEMPTS = 256  # start positions tried: bounds the time on megabytes of brackets
_MAX_INT_DIGITS = 64


def _number(text: str, convert) -> Any:
    """JSON numbers a parser can use: NaN, +-Infinity and integers of more than 64 digits read as null."""
    if convert is int and len(text.lstrip("-")) > _MAX_INT_DIGITS:
        return None
    value = convert(text)
    return value if convert is int or math.isfinite(value) else None


_DECODER = json.JSONDecoder(parse_int=lambda t: _number(t, int), parse_float=lambda t: _number(t, float),
                            parse_constant=lambda _: None)


def find_json(text: str) -> Any:
    """The first JSON object or list inside ``text`` (code fences and chatter around it allowed). Never
    raises: nesting too deep to decode ends the search, non-finite or huge numbers are null."""
    for attempt, match in enumerate(_JSON_START.finditer(text)):
        if attempt == _JSON_ATTEMPTS:
            break
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except ValueError:  # JSONDecodeError is one
            continue
        except RecursionError:  # nested deeper than any answer: the brackets after it are no better
            return None
        return value
    return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_THINK_TAG = re.compile(r"<(/?)think(?:ing)?>", re.I)


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (from escaped JSON such as "\\ud800") replaced by U+FFFD, so it can be
    encoded as UTF-8 for a request, a tokenizer or a file."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _reasoning_end(text: str) -> tuple[int, bool]:
    """The end of the last ``</think>`` (0 when absent) and whether a ``<think>`` opened after it never closes."""
    end, unfinished = 0, False
    for match in _THINK_TAG.finditer(text):
        unfinished = not match.group(1)
        end = match.end() if match.group(1) else end
    return end, unfinished


def unfinished_reasoning(text: str) -> bool:
    """True when a ``<think>`` block is opened and never closed: the answer was cut while reasoning."""
    return _reasoning_end(text)[1]


def answer_text(text: str) -> str:
    """What a model answered, for the parsers: the text after its reasoning (after the last ``</think>``;
    nothing when a ``<think>`` never closes) and inside the first markdown code fence, if there is one."""
    end, unfinished = _reasoning_end(text)
    if unfinished:
        return ""
    text = text[end:]
    start = text.find("```")
    if start >= 0:
        line_end, close = text.find("\n", start), text.find("```", start + 3)
        if close >= 0 and (line_end < 0 or close < line_end):  # ```label``` on one line
            text = text[start + 3:close]
        else:  # the body starts after the fence line (```json)
            body = len(text) if line_end < 0 else line_end + 1
            close = text.find("```", body)
            text = text[body:close if close >= 0 else len(text)]
    return text.strip()


def _norm(label: str) -> str:
    return re.sub(r"[\s\-]+", "_", label.strip().strip("\"'`.,;:*").lower())


def match_labels(values: Iterable[Any], candidates: Sequence[str]) -> list[str]:
    """Map answer strings onto candidate labels (case, quotes and '-'/' ' vs '_' ignored), keeping first
    occurrences in order; strings that name no candidate are dropped (the raw answer stays in the record)."""
    index = {_norm(c): c for c in candidates}
    ranking: list[str] = []
    for value in values:
        if not isinstance(value, str):
            continue
        label = index.get(_norm(value))
        if label is not None and label not in ranking:
            ranking.append(label)
    return ranking


def labels_in_text(text: str, candidates: Sequence[str]) -> list[str]:
    """Candidate labels named in free text, in order of first mention (longest label wins on overlap)."""
    found: list[tuple[int, str]] = []
    lowered = text.lower()
    for label in sorted(candidates, key=len, reverse=True):
        pattern = r"(?<![\w])" + re.escape(label.lower()).replace(r"_", r"[_\s\-]") + r"(?![\w])"
        match = re.search(pattern, lowered)
        if match and not any(s <= match.start() < s + len(lbl) for s, lbl in found):
            found.append((match.start(), label))
    return [label for _, label in sorted(found)]


def count(excluded: Counter, scenario: str, reason: str, n: int = 1) -> None:
    if n:
        excluded[(scenario, reason)] += n


class ClosedSetTask(Task):
    """A task whose answer is one of ``inst.candidates``: answered as a bare label, or as the paper's
    JSON with a ranked list under ``json_key`` (``json_top`` labels asked for, 1 for ITP)."""

    json_key: str = ""
    json_top: int = 3
    question: str = ""
    # The fixed label set: a taxonomy kind ("relation", "strategy"), or None for per-sample candidates.
    taxonomy_kind: str | None = None

    def label_space(self) -> dict[str, tuple[str, ...]] | None:
        if self.taxonomy_kind is None:
            return None
        return {sc: taxonomy.label_names(self.taxonomy_kind, sc) for sc in taxonomy.SCENARIOS}

    def answer_schema(self, inst: Instance, fmt: str) -> dict[str, Any]:
        if fmt == "label":
            return {"choice": list(inst.candidates)}
        label = {"type": "string", "enum": list(inst.candidates)}
        value = label if self.json_top == 1 else {"type": "array", "items": label, "minItems": 1,
                                                  "maxItems": self.json_top}
        return {"json": json_object({self.json_key: value})}

    def options_text(self, inst: Instance) -> str:
        return "Candidates: " + ", ".join(inst.candidates)

    def instruction(self, inst: Instance, fmt: str) -> str:
        question = self.question_for(inst)
        if fmt == "label":
            tail = "Answer with exactly one label from the candidates and nothing else."
        elif self.json_top == 1:
            tail = f'Answer with JSON only: {{"{self.json_key}": "<label>"}}.'
        else:
            tail = (f"Rank the {self.json_top} most likely labels from the candidates, most likely first, and answer "
                    f'with JSON only: {{"{self.json_key}": ["<label 1>", "<label 2>", "<label 3>"]}}.')
        return f"{question}\n\n{self.options_text(inst)}\n\n{tail}"

    def question_for(self, inst: Instance) -> str:
        return self.question

    def answer(self, inst: Instance, fmt: str, value: Any = None) -> str:
        label = inst.gold if value is None else value
        if fmt == "label":
            return label
        # Training targets carry the one gold label; the paper's top-3 lists are asked for at evaluation.
        return json.dumps({self.json_key: label if self.json_top == 1 else [label]}, ensure_ascii=False)

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        payload = find_json(text)
        if isinstance(payload, dict) and self.json_key in payload:
            value = payload[self.json_key]
            ranking = match_labels(value if isinstance(value, list) else [value], inst.candidates)
        elif isinstance(payload, list):
            ranking = match_labels(payload, inst.candidates)
        else:
            ranking = match_labels([text], inst.candidates) or labels_in_text(text, inst.candidates)
        if not ranking:
            return Parsed("failed", (), f"no candidate label found in {text[:80]!r}")
        return Parsed("ok", tuple(ranking))


def json_object(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON schema for an object with exactly ``properties``, all required."""
    return {"type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}
