"""LLM-as-judge for ER and VP: rubric prompts (our own wording), any backend, raw judge output kept.

* ER: S_emo, how well the predicted emotion phrase matches the annotated one, 1-5 (intensity is scored
  separately by formula, so the judge ignores it).
* VP: the paper's 1-5 Likert score for the whole predicted set against the gold set (``likert5``), or the
  reference scripts' scheme (``ref0to6``): pairings 0-2 plus viewpoint 0-4, summed by us, not the judge.

A prediction that failed to parse is not sent to the judge: it gets the bottom of the scale. A judge answer
that cannot be read (or was refused or cut short) leaves the score empty (``judge_status`` failed) with the
raw text kept; the metrics then score the instance at the bottom of the scale (docs/evaluation.md).

Verdicts are cached by (judge model, judge prompt hash) in ``judge_cache.jsonl``, written as they arrive,
so a resumed run, a rerun with other BERTScore settings or a run stopped by an API error never pays twice.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

from ..tasks import Instance
from ..tasks.base import answer_text, clean_text, find_json, unfinished_reasoning
from .backends import Backend, BackendError, Completion, Messages, as_completion

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


PREDICTION_CHARS = 2000  # a predicted field longer than this is cut in the judge prompt (cost bound)


def _shown(value: Any) -> str:
    text = clean_text(str(value))
    return text if len(text) <= PREDICTION_CHARS else text[:PREDICTION_CHARS] + " [...]"


def _viewpoints(items: Sequence[dict[str, Any]] | None) -> str:
    lines = [f"- {_shown(v.get('source', '?'))} about {_shown(v.get('target', '?'))}: {_shown(v.get('viewpoint', ''))}"
             + (f" (attitude: {v['attitude']})" if v.get("attitude") else "") for v in items or ()]
    return "\n".join(lines) or "(none)"


def _turn(inst: Instance | None) -> str:
    if inst is None or inst.sample is None or inst.current is None:
        return ""
    row = inst.sample.row(inst.current)
    return f"The speaker's turn: {row.speaker}: \"{row.dialogue}\"\n"


def prompt(record: dict[str, Any], inst: Instance | None, vp_scale: str) -> Messages:
    if record["task"] == "er":
        predicted = _shown((record["prediction"] or {}).get("emotion") or "(none)")
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
    except (TypeError, ValueError, OverflowError):
        return None
    return int(number) if number.is_integer() and low <= number <= high else None


def parse(task: str, text: str, vp_scale: str) -> dict[str, Any]:
    """The judge's score from its raw answer (reasoning and code fences removed): ``judge_score`` and, for
    ref0to6, its two parts. Never raises."""
    payload = find_json(answer_text(text or ""))
    if not isinstance(payload, dict):
        return {"judge_score": None, "judge_status": "failed", "judge_error": "no JSON object in the judge answer"}
    reason = payload.get("reason") if isinstance(payload.get("reason"), str) else None
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


def verdict(task: str, answer: Completion, vp_scale: str) -> dict[str, Any]:
    """The parsed verdict of one judge answer; a refused or cut-short answer is a failed verdict."""
    if answer.refusal:
        return {"judge_score": None, "judge_status": "failed", "judge_error": f"refused: {answer.refusal}"}
    parsed = parse(task, answer.text, vp_scale)
    if parsed["judge_status"] != "ok" and (answer.finish_reason == "length" or unfinished_reasoning(answer.text)):
        parsed["judge_error"] = "truncated"
    return parsed


def prompt_key(model: str, messages: Messages) -> str:
    return hashlib.sha256(json.dumps([model, messages], ensure_ascii=True).encode()).hexdigest()


class JudgeCache:
    """Judge answers by (judge model, prompt hash), appended to a jsonl file as they arrive. Answers cut
    short by the budget are not kept (a larger budget should ask again)."""

    def __init__(self, path: Path | None):
        from .runner import read_jsonl

        self.path = path
        self.entries = {e["key"]: e for e in read_jsonl(path)} if path is not None else {}

    def get(self, key: str) -> Completion | None:
        entry = self.entries.get(key)
        return None if entry is None else Completion(entry["raw"], entry.get("finish_reason"), entry.get("usage"),
                                                     entry.get("refusal"))

    def put(self, model: str, answers: Sequence[tuple[str, Completion]]) -> None:
        from .runner import append_jsonl

        new = [{"key": key, "judge_model": model, "raw": a.text, "finish_reason": a.finish_reason,
                "usage": a.usage, "refusal": a.refusal}
               for key, a in answers if a.finish_reason != "length" and key not in self.entries]
        self.entries.update((e["key"], e) for e in new)
        if new and self.path is not None:
            append_jsonl(self.path, new)


class Judge:
    def __init__(self, backend: Backend, *, model: str, vp_scale: str = "likert5", max_new_tokens: int = 256,
                 cache: JudgeCache | None = None):
        self.backend, self.model, self.vp_scale, self.max_new_tokens = backend, model, vp_scale, max_new_tokens
        self.cache = cache or JudgeCache(None)

    def judge(self, records: Sequence[dict[str, Any]], instances: dict[str, Instance]) -> list[dict[str, Any]]:
        """Score lines (id, judge_score, judge_status, judge_raw, judge_usage, ...) for ER/VP ``records``, in
        order. Cached verdicts are reused; a stopping API error keeps the verdicts that finished."""
        lines: list[dict[str, Any] | None] = [None] * len(records)
        prompts: dict[int, Messages] = {}
        for i, record in enumerate(records):
            low, high = SCALES[(record["task"], self.vp_scale)]
            base = {"id": record["id"], "judge_model": self.model, "judge_scale": f"{low}-{high}"}
            if record["parse_status"] != "ok":
                lines[i] = {**base, "judge_score": low, "judge_status": "not judged: the prediction did not parse",
                            "judge_raw": None}
            else:
                prompts[i] = prompt(record, instances.get(record["id"]), self.vp_scale)
        keys = {i: prompt_key(self.model, p) for i, p in prompts.items()}
        answers = {i: self.cache.get(k) for i, k in keys.items()}
        cached = {i for i, a in answers.items() if a is not None}
        asked = [i for i in prompts if i not in cached]
        if asked:
            try:
                texts = self.backend.generate(
                    [prompts[i] for i in asked], max_new_tokens=[self.max_new_tokens] * len(asked),
                    constraints=[{"json": schema(records[i]["task"], self.vp_scale)} for i in asked])
            except BackendError as stop:
                self.cache.put(self.model, [(keys[i], a) for i, a in zip(asked, stop.partial) if a is not None])
                stop.where = f"judging {records[asked[stop.index]]['id']}" if stop.index is not None else "judge"
                raise
            answers.update((i, as_completion(t)) for i, t in zip(asked, texts))
            self.cache.put(self.model, [(keys[i], answers[i]) for i in asked])
        for i, answer in answers.items():
            low, high = SCALES[(records[i]["task"], self.vp_scale)]
            lines[i] = {"id": records[i]["id"], "judge_model": self.model, "judge_scale": f"{low}-{high}",
                        **verdict(records[i]["task"], answer, self.vp_scale), "judge_raw": answer.text,
                        "judge_finish_reason": answer.finish_reason, "judge_usage": answer.usage,
                        "judge_cached": i in cached}
        return lines  # type: ignore[return-value]
