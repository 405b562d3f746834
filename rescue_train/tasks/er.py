"""ER, emotion recognition: the current speaker's internal emotion and its intensity (0-10).

Checkpoints are client rows (not the therapist, not a group speaking together) whose speaker has an
emotion item with a description and an intensity that rounds into 0..10 (the first such item is the gold),
with at least five words; rows 1..ceil(0.3*N) of an N-row sample are discarded, then at most five evenly
spaced checkpoints are kept (the first one when only one is kept). Unlike the reference, context -1 does
give all prior rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from ..data.schema import Sample
from .answers import find_json, shown, text_field, word_count
from .generation import GenerationOptions, GenerationTask, first_value, speaker_turn
from .options import Options, option
from .task import count, json_object
from .types import BuildResult, Instance, JudgeCheck, Parsed, ReportColumn, Rubric

# S_emo, the judge's part of the ER score (our own wording); intensity is scored by formula.
ER_RUBRIC = Rubric(
    "How well does the predicted emotion capture the speaker's emotion in the reference? Ignore intensity "
    "(it is scored separately).\n"
    "5 = the same emotion, with the same nuance\n"
    "4 = the same core emotion; a nuance is missing or added\n"
    "3 = partly the same: overlapping or closely related emotions\n"
    "2 = a different emotion with only a faint link to the reference\n"
    "1 = unrelated or opposite, or no emotion given\n"
    'Reply as {"score": <1-5>, "reason": "<one sentence>"}.'
)

def parse_intensity(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = int(round(float(value)))
    except (TypeError, ValueError, OverflowError):
        return None
    return number if 0 <= number <= 10 else None


@dataclass(frozen=True)
class ErOptions(GenerationOptions):
    er_min_words: int = option(5, "ER keeps rows of at least this many words (the paper's)", key=False, low=0)
    er_discard_fraction: float = option(0.3, "ER skips this first share of each sample's rows (the paper's)",
                                        key=False, low=0, below=1)


class EmotionRecognition(GenerationTask):
    name = "er"
    headline = "er_llm"
    options = ErOptions
    reasoning_max_new_tokens = 4096
    metric = "emotion"
    max_new_tokens = {"label": 96, "json": 96}
    report_columns = (ReportColumn("er_llm", "judge", "ER LLM"), ReportColumn("er_bert", "bertscore_f1", "ER BERT", digits=4))

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        result = BuildResult([])
        for sample in samples:
            n = len(sample.rows)
            first_kept_row = min(n - 1, math.ceil(options.er_discard_fraction * n)) + 1 if n > 1 else 1
            candidates = []
            for row in sample.rows:
                if not row.is_client:
                    continue
                own = [e for e in row.internal_emotion if e.person == row.speaker and e.description]
                gold = next((e for e in own if e.intensity_0_10 is not None), None)
                if not own:
                    count(result.excluded, sample.scenario, "no emotion item for the speaker")
                elif gold is None:
                    count(result.excluded, sample.scenario, "speaker's intensity missing or outside 0-10")
                elif word_count(row.dialogue) < options.er_min_words:
                    count(result.excluded, sample.scenario, f"fewer than {options.er_min_words} words")
                elif row.row_index < first_kept_row:
                    count(result.excluded, sample.scenario, f"in the first {options.er_discard_fraction:.0%} of rows")
                else:
                    candidates.append((row, gold))
            self.add_checkpoints(result, sample, units[sample.sample_id], candidates, options,
                                 lambda e: {"emotion": e.description, "intensity": e.intensity_0_10})
        return result

    def instruction(self, inst: Instance, fmt: str) -> str:
        speaker = inst.given_value("speaker")
        keys = ('{"emotion": "<short phrase>", "intensity": <0-10>}' if fmt == "label" else
                '{"predicted_internal_emotion": "<short phrase>", "predicted_intensity_score": <0-10>}')
        return (f"Question: as {speaker} speaks the current turn, what does {speaker} feel inside, and how "
                f"strongly? Describe only {speaker}'s own emotion (not the partner's, the therapist's or the "
                f"group's) in a short concrete phrase such as \"feels dismissed and frustrated\", and rate its "
                f"intensity as an integer from 0 (none) to 10 (overwhelming).\n\nAnswer with JSON only: {keys}")

    def answer_payload(self, value: dict[str, Any], fmt: str) -> dict[str, Any]:
        if fmt == "label":
            return {"emotion": value["emotion"], "intensity": value["intensity"]}
        return {"predicted_internal_emotion": value["emotion"], "predicted_intensity_score": value["intensity"]}

    def answer_schema(self, inst: Instance, fmt: str) -> dict[str, Any]:
        emotion, intensity = self.answer_payload({"emotion": "", "intensity": 0}, fmt)
        return {"json": json_object({emotion: {"type": "string"},
                                     intensity: {"type": "integer", "minimum": 0, "maximum": 10}})}

    def bertscore_texts(self, gold: Any, prediction: Any) -> tuple[str, str]:
        """The predicted emotion phrase against the annotated emotion description."""
        return text_field(prediction, "emotion"), text_field(gold, "emotion")

    def judge_checks(self, record: dict[str, Any], inst: Instance | None, vp_scale: str) -> list[JudgeCheck]:
        predicted = shown((record["prediction"] or {}).get("emotion") or "(none)")
        material = (f"{speaker_turn(inst)}Reference emotion: {record['gold']['emotion']}\n"
                    f"Predicted emotion: {predicted}")
        return [JudgeCheck("judge_", self.judge_rubric(vp_scale), material)]

    def judge_rubric(self, vp_scale: str) -> Rubric:
        return ER_RUBRIC

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        payload = find_json(text)
        if isinstance(payload, list) and payload and isinstance(payload[0], dict):
            payload = payload[0]
        if not isinstance(payload, dict):
            return Parsed("failed", {"emotion": "", "intensity": None}, "no JSON object in the answer")
        emotion = first_value(payload, ("emotion", "predicted_internal_emotion", "internal_emotion"))
        intensity = parse_intensity(first_value(payload, ("intensity", "predicted_intensity_score",
                                                          "intensity_score")))
        value = {"emotion": emotion.strip() if isinstance(emotion, str) else "", "intensity": intensity}
        if not value["emotion"] or intensity is None:
            return Parsed("failed", value, "missing emotion phrase or an intensity within 0-10")
        return Parsed("ok", value)
