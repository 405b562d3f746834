"""VP, viewpoint prediction: what does the current speaker think of whom?

Checkpoints are client rows with at least one viewpoint item whose source is the speaker and which has a
target and a viewpoint text; the gold is every such item. At most five evenly spaced checkpoints per
sample (the first one when only one is kept); no early-row discard and no word minimum.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..data.schema import Sample
from .answers import find_json, shown, text_field
from .generation import GenerationTask, first_value, speaker_turn
from .options import Options
from .task import count, json_object
from .types import BuildResult, Instance, JudgeCheck, Parsed, ReportColumn, Rubric

# The judge's grading (our own wording): the paper's 1-5 Likert score for the whole predicted set against
# the gold set (``likert5``), or the reference scripts' scheme (``ref0to6``): pairings 0-2 plus viewpoint 0-4.
VP_RUBRICS = {
    "likert5": Rubric(
        "How well does the predicted set recover the reference viewpoints: whom each view is about, and what it "
        "says? Accept paraphrases.\n"
        "5 = every reference viewpoint is recovered with its target, and nothing contradicts them\n"
        "4 = the main viewpoints are recovered; minor omissions or extra views\n"
        "3 = partly recovered: a right target with a vaguer view, or only some of the viewpoints\n"
        "2 = only weakly related to the reference\n"
        "1 = wrong targets or views, or none given\n"
        'Reply as {"score": <1-5>, "reason": "<one sentence>"}.'),
    "ref0to6": Rubric(
        "Grade two parts. Pairings (who holds a view about whom), 0-2: 0 = mostly wrong or missing, 1 = partly "
        "recovered, 2 = all reference pairings essentially recovered. Viewpoint content, 0-4: 0 = wrong, 1 = weakly "
        "related, 2 = close, 3 = essentially the same, 4 = almost exact. Accept paraphrases.\n"
        'Reply as {"source_target_score": <0-2>, "viewpoint_score": <0-4>, "reason": "<one sentence>"}.',
        (("source_target_score", 0, 2), ("viewpoint_score", 0, 4))),
}
JOIN = "; "


def join_viewpoints(items: Sequence[dict[str, Any]] | None) -> str:
    values = [text_field(v, "viewpoint") for v in (items if isinstance(items, (list, tuple)) else ())]
    return JOIN.join(v for v in values if v)


def list_viewpoints(items: Sequence[dict[str, Any]] | None) -> str:
    lines = [f"- {shown(v.get('source', '?'))} about {shown(v.get('target', '?'))}: {shown(v.get('viewpoint', ''))}"
             + (f" (attitude: {v['attitude']})" if v.get("attitude") else "") for v in items or ()]
    return "\n".join(lines) or "(none)"


class ViewpointPrediction(GenerationTask):
    name = "vp"
    headline = "vp_llm"
    max_new_tokens = {"label": 256, "json": 256}
    report_columns = (ReportColumn("vp_llm", "judge", "VP LLM"), ReportColumn("vp_bert", "bertscore_f1", "VP BERT", digits=4))

    def build(self, samples: Sequence[Sample], units: dict[str, str], options: Options) -> BuildResult:
        result = BuildResult([])
        for sample in samples:
            candidates = []
            for row in sample.rows:
                if not row.is_client:
                    continue
                gold = [v for v in row.viewpoints if v.source == row.speaker and v.target and v.viewpoint]
                if gold:
                    candidates.append((row, gold))
                elif row.viewpoints:
                    count(result.excluded, sample.scenario, "no speaker-matched viewpoint with target and text")
            self.add_checkpoints(result, sample, units[sample.sample_id], candidates, options, lambda items: [
                {"source": v.source, "target": v.target, "viewpoint": v.viewpoint, "attitude": v.attitude}
                for v in items])
        return result

    def instruction(self, inst: Instance, fmt: str) -> str:
        speaker = inst.given_value("speaker")
        key = "viewpoints" if fmt == "label" else "predicted_viewpoints"
        return (f"Question: in the current turn, what viewpoint does {speaker} express about another person "
                f"present (the partner, a family member or the therapist)? Give the person the view is about "
                f"and the view as a short concrete phrase, e.g. \"she is never satisfied with anything I do\". "
                f"If {speaker} expresses distinct views about several people, list each.\n\n"
                f'Answer with JSON only: {{"{key}": [{{"source": "{speaker}", "target": "<person>", '
                f'"viewpoint": "<short phrase>"}}]}}')

    def answer_payload(self, value: list[dict[str, Any]], fmt: str) -> dict[str, Any]:
        key = "viewpoints" if fmt == "label" else "predicted_viewpoints"
        return {key: [{"source": v["source"], "target": v["target"], "viewpoint": v["viewpoint"]} for v in value]}

    def answer_schema(self, inst: Instance, fmt: str) -> dict[str, Any]:
        (key,) = self.answer_payload([], fmt)
        item = json_object({"source": {"type": "string"}, "target": {"type": "string"}, "viewpoint": {"type": "string"}})
        return {"json": json_object({key: {"type": "array", "items": item, "minItems": 1}})}

    def bertscore_texts(self, gold: Any, prediction: Any) -> tuple[str, str]:
        """Our protocol (the authors never implemented one): the predicted viewpoint strings joined with
        ``"; "`` in the model's order, against the gold ones joined the same way in annotation order."""
        return join_viewpoints(prediction), join_viewpoints(gold)

    def judge_checks(self, record: dict[str, Any], inst: Instance | None, vp_scale: str) -> list[JudgeCheck]:
        material = (f"{speaker_turn(inst)}Reference viewpoints:\n{list_viewpoints(record['gold'])}\n"
                    f"Predicted viewpoints:\n{list_viewpoints(record['prediction'])}")
        return [JudgeCheck("judge_", self.judge_rubric(vp_scale), material)]

    def judge_rubric(self, vp_scale: str) -> Rubric:
        return VP_RUBRICS[vp_scale]

    def parse(self, inst: Instance, text: str, fmt: str) -> Parsed:
        payload = find_json(text)
        items = first_value(payload, ("viewpoints", "predicted_viewpoints")) if isinstance(payload, dict) else payload
        if not isinstance(items, list):
            return Parsed("failed", [], "no viewpoint list in the answer")
        speaker = inst.given_value("speaker")
        viewpoints = [
            {"source": _text(item.get("source")) or str(speaker), "target": _text(item.get("target")),
             "viewpoint": _text(item.get("viewpoint"))}
            for item in items if isinstance(item, dict) and _text(item.get("target")) and _text(item.get("viewpoint"))
        ]
        if not viewpoints:
            return Parsed("failed", [], "no viewpoint with a target and a text")
        return Parsed("ok", viewpoints)


def _text(value: Any) -> str:
    """A field's text: strings and numbers only (a nested value is no viewpoint field)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ""
    return str(value).strip()
