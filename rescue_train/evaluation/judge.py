"""LLM-as-judge for ER and VP: rubric prompts (our own wording), any backend, raw judge output kept.

* ER: S_emo, how well the predicted emotion phrase matches the annotated one, 1-5 (intensity is scored
  separately by formula, so the judge ignores it).
* VP: the paper's 1-5 Likert score for the whole predicted set against the gold set (``likert5``), or the
  reference scripts' scheme (``ref0to6``): pairings 0-2 plus viewpoint 0-4, summed by us, not the judge.

A prediction that failed to parse is not sent to the judge: it gets the bottom of the scale. A judge answer
that cannot be read leaves the score empty (``judge_status`` failed) with the raw text kept.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tasks import Instance
from ..tasks.base import find_json
from .backends import Backend, Messages

SYSTEM = ("You grade the answers of a model that analyses couple and family therapy transcripts, against an "
          "expert annotator's reference. Judge meaning, not wording. Reply with JSON only.")

ER_RUBRIC = (
    "How well does the predicted emotion capture the speaker's emotion in the reference? Ignore intensity "
    "(it is scored separately).\n"
    "5 = the same emotion, with the same nuance\n"
    "4 = the same core emotion; a nuance is missing or added\n"
    "3 = partly the same: overlapping or closely related emotions\n"
    "2 = a different emotion with only a faint link to the reference\n"
    "1 = unrelated or opposite, or no emotion given\n"
    'Reply as {"score": <1-5>, "reason": "<one sentence>"}.'
)

VP_LIKERT = (
    "How well does the predicted set recover the reference viewpoints: whom each view is about, and what it "
    "says? Accept paraphrases.\n"
    "5 = every reference viewpoint is recovered with its target, and nothing contradicts them\n"
    "4 = the main viewpoints are recovered; minor omissions or extra views\n"
    "3 = partly recovered: a right target with a vaguer view, or only some of the viewpoints\n"
    "2 = only weakly related to the reference\n"
    "1 = wrong targets or views, or none given\n"
    'Reply as {"score": <1-5>, "reason": "<one sentence>"}.'
)

VP_REF06 = (
    "Grade two parts. Pairings (who holds a view about whom), 0-2: 0 = mostly wrong or missing, 1 = partly "
    "recovered, 2 = all reference pairings essentially recovered. Viewpoint content, 0-4: 0 = wrong, 1 = weakly "
    "related, 2 = close, 3 = essentially the same, 4 = almost exact. Accept paraphrases.\n"
    'Reply as {"source_target_score": <0-2>, "viewpoint_score": <0-4>, "reason": "<one sentence>"}.'
)

SCALES = {("er", "likert5"): (1, 5), ("er", "ref0to6"): (1, 5), ("vp", "likert5"): (1, 5), ("vp", "ref0to6"): (0, 6)}


def _viewpoints(items: Sequence[dict[str, Any]] | None) -> str:
    lines = [f"- {v.get('source', '?')} about {v.get('target', '?')}: {v.get('viewpoint', '')}"
             + (f" (attitude: {v['attitude']})" if v.get("attitude") else "") for v in items or ()]
    return "\n".join(lines) or "(none)"


def _turn(inst: Instance | None) -> str:
    if inst is None or inst.sample is None or inst.current is None:
        return ""
    row = inst.sample.row(inst.current)
    return f"The speaker's turn: {row.speaker}: \"{row.dialogue}\"\n"


def prompt(record: dict[str, Any], inst: Instance | None, vp_scale: str) -> Messages:
    if record["task"] == "er":
        predicted = (record["prediction"] or {}).get("emotion") or "(none)"
        body = (f"{_turn(inst)}Reference emotion: {record['gold']['emotion']}\nPredicted emotion: {predicted}\n\n"
                + ER_RUBRIC)
    else:
        body = (f"{_turn(inst)}Reference viewpoints:\n{_viewpoints(record['gold'])}\n"
                f"Predicted viewpoints:\n{_viewpoints(record['prediction'])}\n\n"
                + (VP_LIKERT if vp_scale == "likert5" else VP_REF06))
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def schema(task: str, vp_scale: str) -> dict[str, Any]:
    if task == "vp" and vp_scale == "ref0to6":
        fields = {"source_target_score": {"type": "integer", "minimum": 0, "maximum": 2},
                  "viewpoint_score": {"type": "integer", "minimum": 0, "maximum": 4}}
    else:
        fields = {"score": {"type": "integer", "minimum": 1, "maximum": 5}}
    fields["reason"] = {"type": "string"}
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


def _integer(value: Any, low: int, high: int) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and low <= number <= high else None


def parse(task: str, text: str, vp_scale: str) -> dict[str, Any]:
    """The judge's score from its raw answer: ``judge_score`` and, for ref0to6, its two parts."""
    payload = find_json(text or "")
    if not isinstance(payload, dict):
        return {"judge_score": None, "judge_status": "failed", "judge_error": "no JSON object in the judge answer"}
    reason = payload.get("reason")
    if task == "vp" and vp_scale == "ref0to6":
        pairs = _integer(payload.get("source_target_score"), 0, 2)
        view = _integer(payload.get("viewpoint_score"), 0, 4)
        if pairs is None or view is None:
            return {"judge_score": None, "judge_status": "failed",
                    "judge_error": "source_target_score 0-2 and viewpoint_score 0-4 are required"}
        return {"judge_score": pairs + view, "judge_status": "ok", "source_target_score": pairs,
                "viewpoint_score": view, "judge_reason": reason}
    score = _integer(payload.get("score"), 1, 5)
    if score is None:
        return {"judge_score": None, "judge_status": "failed", "judge_error": "score must be an integer 1-5"}
    return {"judge_score": score, "judge_status": "ok", "judge_reason": reason}


class Judge:
    def __init__(self, backend: Backend, *, model: str, vp_scale: str = "likert5", max_new_tokens: int = 256):
        self.backend, self.model, self.vp_scale, self.max_new_tokens = backend, model, vp_scale, max_new_tokens

    def judge(self, records: Sequence[dict[str, Any]], instances: dict[str, Instance]) -> list[dict[str, Any]]:
        """Score lines (id, judge_score, judge_status, judge_raw, ...) for ER/VP ``records``, in order."""
        lines: list[dict[str, Any] | None] = [None] * len(records)
        asked = []
        for i, record in enumerate(records):
            low, high = SCALES[(record["task"], self.vp_scale)]
            base = {"id": record["id"], "judge_model": self.model, "judge_scale": f"{low}-{high}"}
            if record["parse_status"] != "ok":
                lines[i] = {**base, "judge_score": low, "judge_status": "not judged: the prediction did not parse",
                            "judge_raw": None}
            else:
                asked.append(i)
        if asked:
            texts = self.backend.generate(
                [prompt(records[i], instances.get(records[i]["id"]), self.vp_scale) for i in asked],
                max_new_tokens=[self.max_new_tokens] * len(asked),
                constraints=[{"json": schema(records[i]["task"], self.vp_scale)} for i in asked])
            for i, text in zip(asked, texts):
                low, high = SCALES[(records[i]["task"], self.vp_scale)]
                lines[i] = {"id": records[i]["id"], "judge_model": self.model, "judge_scale": f"{low}-{high}",
                            **parse(records[i]["task"], text, self.vp_scale), "judge_raw": text}
        return lines  # type: ignore[return-value]
