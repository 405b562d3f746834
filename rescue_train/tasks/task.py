"""The :class:`Task` interface and its closed-set base, with the helpers builders share.

A task module owns everything task-specific: which rows become instances (``build``), the question and
candidates it asks (``instruction``), the gold answer text (``answer``) and how a model's text is read back
(``parse``). The converter, the trainers and the evaluator all go through these, so a fine-tuned model is
evaluated on exactly the prompts it learnt from.

It owns its settings and scoring too, so that no other module needs to know a task by name: its build options
(``options``: its ``data.<option>`` keys), how its records are aggregated (``metric``, one of ``METRICS``), its
fixed label set (``label_space``), the structured-output schema of its answers (``answer_schema``), its
generation budgets (``max_new_tokens``, ``reasoning_max_new_tokens``), the texts BERTScore compares
(``bertscore_texts``), what an LLM judge is asked (``judge_checks``), its report columns (``report_columns``),
the class it balances under in training (``class_key``) and the label ``stats`` counts (``stats_label``).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any, Sequence

from ..data import taxonomy
from ..data.schema import Sample
from .answers import find_json, labels_in_text, match_labels
from .options import Options
from .types import BuildResult, Instance, JudgeCheck, Parsed, ReportColumn, Rubric


class Task:
    """Base class of the tasks; subclasses set the class attributes and implement the methods."""

    name: str = ""
    default_context: int = 3
    closed_set: bool = True
    metric: str = "ranking"
    # Default generation budget (tokens) per answer format.
    max_new_tokens: dict[str, int] = {"label": 16, "json": 64}
    # The budget of a model that reasons before answering (its reasoning counts against it): large enough not to
    # cut it short, still a bound on runaway answers.
    reasoning_max_new_tokens: int = 8192
    # The settings ``build`` reads beyond ``context`` (a frozen dataclass of ``option(...)`` fields): each one a
    # ``data.<name>`` key of every command, its help and checks, unless declared ``key=False``.
    options: type | None = None
    report_columns: tuple[ReportColumn, ...] = ()
    # The report column that ranks models on the task (larger is better): not ITP recall, which answering
    # "yes" always maximises, nor RSG's length.
    headline: str = ""
    report_note: str = ""  # what the columns mean, printed above a task's own tables
    # Compared with BERTScore (``bertscore_texts``) and asked of a judge (``judge_checks``).
    bertscore: bool = False
    judged: bool = False

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        raise NotImplementedError

    def instruction(self, inst: Instance, fmt: str) -> str:
        """The task question, candidates and answer format: the end of the user message."""
        raise NotImplementedError

    def answer(self, inst: Instance, fmt: str, value: Any = None) -> str:
        """The answer text for ``value`` (the gold when None) in answer format ``fmt``."""
        raise NotImplementedError

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        raise NotImplementedError

    def context_size(self, options: Options) -> int:
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



def window(current: int, k: int) -> range:
    """Row indices strictly before ``current``: none (k=0), all (k=-1) or the last k. A range, not a tuple:
    with all prior rows as context a tuple per instance would grow with the square of a sample's length."""
    if k == 0:
        return range(current, current)
    start = 1 if k < 0 else max(1, current - k)
    return range(start, current)



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
        """The question a language model reads: the instance's own question, then the label definitions."""
        guide = self.label_guide(inst)
        return self.ask(inst) + (f"\n\n{guide}" if guide else "")

    def ask(self, inst: Instance) -> str:
        """What identifies the instance's question (a classifier reads this, not the definitions)."""
        return self.question

    def label_guide(self, inst: Instance) -> str:
        """The candidate labels' definitions for a language model; a classifier learns labels from data."""
        return ""

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
