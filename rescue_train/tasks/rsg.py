"""RSG, relation-aware support generation: say the therapist's next turn.

Instances are therapist rows whose utterance has at least ``rsg_min_words`` words (default 5) and at least
one row before them; rows left out are counted per reason. The model sees the prior rows (default the last
5; any context size and input mode as in the other tasks), the participants and, by ``rsg_condition``:

* ``none`` (default): nothing more;
* ``target``: whom the turn addresses: the targets of the row's first ``support_strategy`` item (else the
  row's addressees), the therapist left out;
* ``target_strategy``: also that item's strategy, with its definition from the taxonomy.

The conditions that give a target or a strategy leave out rows without a strategy item (or with a strategy
outside the scenario's taxonomy). The gold is the therapist's utterance exactly as stored; the turn itself
is never shown. ``rsg_per_sample`` > 0 keeps at most that many evenly spaced turns per sample.

Scoring (``rescue_train.evaluation``): BERTScore against the real turn, an LLM judge's 1-5 rubric for
relation-aware support, under ``target_strategy`` a judge check that the turn enacts the given strategy
toward the given target, length in words and distinct-1/2. The real turns are judged with the same rubric,
so every report carries the real therapists' scores beside the model's. The judge has no reference answer
(its own system message says so) and reads every row before the turn, whatever context the model was
given: a turn that draws on earlier material is not taken for one that invents it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Sequence

from ..data import taxonomy
from ..data.schema import THERAPIST, Row, Sample
from .answers import clean_text, find_json, shown, word_count
from .context import render_context
from .options import Options, option
from .targets import raw_target
from .task import Task, count, evenly_spaced, json_object, window
from .types import BuildResult, Instance, JudgeCheck, Parsed, ReportColumn, Rubric, instance_id

JSON_KEY = "response"

# The judge's system message for RSG: the shared one grades against an annotator's reference, RSG has none.
JUDGE_SYSTEM = ("You grade turns of a therapist in couple and family therapy sessions, each on its own merits: "
                "there is no reference answer to compare with. Judge what the turn does, not its wording. Reply "
                "with JSON only.")

SUPPORT_RUBRIC = Rubric(
    "There is no reference answer: grade the candidate on its own merits as the therapist's next turn in this "
    "session, for relation-aware support. Weigh four things: (a) it speaks to the right person or people at "
    "this point; (b) it fits the moment of the relational cycle the participants are in (for example, it "
    "slows an escalating exchange, draws out a partner who withdraws, or stays with what was just disclosed); "
    "(c) it is grounded in what was actually said, inventing no facts; (d) it stays even-handed: it takes no "
    "side and blames no one.\n"
    "5 = strong on all four: a skilled couple and family therapist could have said it here\n"
    "4 = sound on all four, with a minor weakness in one\n"
    "3 = acceptable but generic, or clearly weak in one of the four\n"
    "2 = weak in several, or misdirected (the wrong person, or off the moment)\n"
    "1 = unhelpful or harmful, takes a side or blames, or not a therapist's turn at all\n"
    'Reply as {"score": <1-5>, "reason": "<one sentence>"}.'
)

ADHERENCE_RUBRIC = Rubric(
    "Does the candidate turn carry out the given strategy toward the given target? 1 = yes: its main move is "
    "that strategy and it is directed at that target; 0 = no: another strategy, another person, or neither.\n"
    'Reply as {"adheres": <0 or 1>, "reason": "<one sentence>"}.',
    (("adheres", 0, 1),),
)

_SPEAKER_TAG = re.compile(rf"^\s*{THERAPIST}\s*:\s*", re.IGNORECASE)


def addressed(names: Sequence[str], sample: Sample) -> str:
    """Target names as prose: the group label reads as the whole couple or family."""
    shown = [f"the whole {sample.scenario} ({n})" if n == sample.group_label else n for n in names]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


@dataclass(frozen=True)
class RsgOptions:
    rsg_condition: str = option("none", "what RSG gives beyond the conversation: none, target (whom the turn "
                                "addresses) or target_strategy", choices=("none", "target", "target_strategy"),
                                prompt=True)
    rsg_min_words: int = option(5, "RSG keeps therapist turns of at least this many words", low=0)
    rsg_per_sample: int = option(0, "RSG keeps at most this many evenly spaced turns per sample (0: all)", low=0)


class SupportGeneration(Task):
    name = "rsg"
    headline = "rsg_llm"
    options = RsgOptions
    default_context = 5
    closed_set = False
    metric = "support"
    bertscore = True
    judged = True
    max_new_tokens = {"label": 128, "json": 160}
    report_columns = (
        ReportColumn("rsg_llm", "judge", "RSG LLM"),
        ReportColumn("rsg_bert", "bertscore_f1", "RSG BERT", digits=4),
        ReportColumn("rsg_adherence", "adherence", "RSG Adh %", 100),
        ReportColumn("rsg_words", "length_words", "RSG words", digits=1),
        ReportColumn("rsg_unanswered", "parse_failures", "RSG unanswered", digits=0),
        ReportColumn("rsg_distinct1", "distinct_1", "RSG D-1", digits=3),
        ReportColumn("rsg_distinct2", "distinct_2", "RSG D-2", digits=3),
    )
    report_note = ("RSG: LLM = the judge's 1-5 relation-aware support score; BERT = BERTScore F1 against the real "
                   "turn; Adh % = turns the judge finds enacting the given strategy toward the given target "
                   "(condition target_strategy only); words = mean length of the answered turns, beside the count "
                   "of unanswered ones (parse failures); D-1/D-2 = distinct uni-/bigrams across the answered turns. "
                   "The real therapists' turns are scored the same way, length and distinct-n at the same rows "
                   "(BERTScore 1 by definition).")

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        result = BuildResult([])
        k = self.context_size(options)
        for sample in samples:
            turns = []
            for position, row in enumerate(sample.rows):
                if not row.is_therapist:
                    continue
                given = self._given(row, position, sample, options, result)
                if given is not None:
                    turns.append((row, given))
            picked = evenly_spaced(turns, options.rsg_per_sample, single="first")
            count(result.excluded, sample.scenario, "not among the evenly spaced turns", len(turns) - len(picked))
            for row, given in picked:
                result.instances.append(Instance(
                    id=instance_id(sample.sample_id, self.name, row.row_index), task=self.name,
                    sample_id=sample.sample_id, unit=units[sample.sample_id], scenario=sample.scenario,
                    row_index=row.row_index, context=window(row.row_index, k), current=None, candidates=(),
                    gold=row.dialogue, given=given, sample=sample,
                ))
        return result

    def _given(self, row: Row, position: int, sample: Sample, options: Options, result: BuildResult):
        """The task inputs for a therapist row, or None (counted) when the row is left out."""
        scenario = sample.scenario
        if position == 0:
            count(result.excluded, scenario, "no row before the therapist turn")
            return None
        if word_count(row.dialogue) < options.rsg_min_words:
            count(result.excluded, scenario, f"fewer than {options.rsg_min_words} words")
            return None
        given: list[tuple[str, Any]] = [("condition", options.rsg_condition)]
        if options.rsg_condition == "none":
            return tuple(given)
        if not row.support_strategy:
            count(result.excluded, scenario, "therapist row without a support_strategy item")
            return None
        names, _ = raw_target(row)
        if not names:
            count(result.excluded, scenario, "no target in the strategy item or the row")
            return None
        given.append(("targets", names))
        if options.rsg_condition == "target_strategy":
            strategy = row.support_strategy[0].strategy_type
            if strategy not in taxonomy.label_names("strategy", scenario):
                count(result.excluded, scenario, f"strategy outside the {scenario} taxonomy: {strategy or '(empty)'}")
                return None
            given += [("strategy", strategy),
                      ("strategy_definition", taxonomy.get_label("strategy", scenario, strategy).definition)]
        return tuple(given)

    def conditions_text(self, inst: Instance) -> str:
        """What the prompt (and the judge) is told about the turn beyond the conversation."""
        lines = []
        targets = inst.given_value("targets")
        if targets:
            lines.append(f"The turn addresses {addressed(targets, inst.sample)}.")
        strategy = inst.given_value("strategy")
        if strategy:
            lines.append(f"Its main strategy is {strategy}: {inst.given_value('strategy_definition')}")
        return "\n".join(lines)

    def instruction(self, inst: Instance, fmt: str) -> str:
        text = (f"Task: the therapist speaks next (row {inst.row_index}). Write that turn as the therapist would "
                f"say it in the session: speak to the people present, respond to what was just said, and keep "
                f"the relationship in view without taking sides.")
        given = self.conditions_text(inst)
        if given:
            text += "\n" + given
        tail = ("Answer with the therapist's words only: no speaker name, no quotation marks, no explanation."
                if fmt == "label" else f'Answer with JSON only: {{"{JSON_KEY}": "<the therapist\'s words>"}}')
        return f"{text}\n\n{tail}"

    def answer(self, inst: Instance, fmt: str, value: Any = None) -> str:
        turn = inst.gold if value is None else value
        return turn if fmt == "label" else json.dumps({JSON_KEY: turn}, ensure_ascii=False)

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        if fmt == "json":
            payload = find_json(text)
            value = payload.get(JSON_KEY) if isinstance(payload, dict) else None
            if not isinstance(value, str) or not value.strip():
                return Parsed("failed", "", f'no JSON object with a non-empty "{JSON_KEY}" string')
            return Parsed("ok", clean_text(value).strip())
        turn = _SPEAKER_TAG.sub("", clean_text(text).strip(), count=1).strip()
        if not turn:
            return Parsed("failed", "", "empty answer")
        return Parsed("ok", turn)

    def answer_schema(self, inst: Instance, fmt: str) -> dict[str, Any] | None:
        return None if fmt == "label" else {"json": json_object({JSON_KEY: {"type": "string"}})}

    def bertscore_texts(self, gold: Any, prediction: Any) -> tuple[str, str]:
        return clean_text(prediction).strip() if isinstance(prediction, str) else "", clean_text(str(gold)).strip()

    def judge_rubric(self, vp_scale: str) -> Rubric:
        return SUPPORT_RUBRIC

    def judge_checks(self, record: dict[str, Any], inst: Instance | None, vp_scale: str) -> list[JudgeCheck]:
        """Support (1-5) of the generated and of the real turn, judged blind with the same material (every
        row before the turn); under target_strategy also whether each enacts the given strategy toward the
        given target (0/1)."""
        context = (render_context(inst._replace(context=window(inst.row_index, -1)), "dialogue")
                   if inst is not None and inst.sample is not None else "")
        given = self.conditions_text(inst) if inst is not None else ""
        material = context + (f"\n\nGiven for the therapist's next turn:\n{given}" if given else "")
        checks = []
        for prefix, of_prediction, turn in (("", True, record["prediction"]), ("human_", False, record["gold"])):
            candidate = f"{material}\n\nCandidate next therapist turn: \"{shown(turn or '')}\""
            checks.append(JudgeCheck(f"{prefix}judge_", SUPPORT_RUBRIC, candidate, of_prediction, JUDGE_SYSTEM))
            if inst is not None and inst.given_value("strategy"):
                checks.append(JudgeCheck(f"{prefix}adherence_", ADHERENCE_RUBRIC, candidate, of_prediction,
                                         JUDGE_SYSTEM))
        return checks
