"""LLM-as-judge: each task's rubric prompts (``Task.judge_checks``, our own wording), any backend, raw judge
output kept.

* ER: S_emo, how well the predicted emotion phrase matches the annotated one, 1-5 (intensity is scored
  separately by formula, so the judge ignores it).
* VP: the paper's 1-5 Likert score for the whole predicted set against the gold set (``likert5``), or the
  reference scripts' scheme (``ref0to6``): pairings 0-2 plus viewpoint 0-4, summed by us, not the judge.
* RSG: relation-aware support 1-5 for the generated turn and for the real therapist's turn, and (condition
  target_strategy) whether each turn enacts the given strategy toward the given target, 0/1.

A prediction that failed to parse is not sent to the judge: it gets the bottom of the scale. A judge answer
that cannot be read leaves the score empty (``judge_status`` failed) with the raw text kept.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..tasks import TASKS, Instance
from ..tasks.base import JudgeCheck, Rubric, find_json
from .backends import Backend, Messages

SYSTEM = ("You grade the answers of a model that analyses couple and family therapy transcripts, against an "
          "expert annotator's reference. Judge meaning, not wording. Reply with JSON only.")


def rubric(task: str, vp_scale: str) -> Rubric:
    """The task's main rubric (the one behind ``judge_score``)."""
    found = TASKS[task].judge_rubric(vp_scale)
    if found is None:
        raise ValueError(f"task {task} is not judged")
    return found


def check_prompt(check: JudgeCheck) -> Messages:
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"{check.material}\n\n{check.rubric.text}"}]


def prompt(record: dict[str, Any], inst: Instance | None, vp_scale: str) -> Messages:
    """The judge prompt of the record's main check."""
    return check_prompt(TASKS[record["task"]].judge_checks(record, inst, vp_scale)[0])


def rubric_schema(chosen: Rubric) -> dict[str, Any]:
    fields: dict[str, Any] = {name: {"type": "integer", "minimum": low, "maximum": high}
                              for name, low, high in chosen.fields}
    fields["reason"] = {"type": "string"}
    return {"type": "object", "properties": fields, "required": list(fields), "additionalProperties": False}


def schema(task: str, vp_scale: str) -> dict[str, Any]:
    return rubric_schema(rubric(task, vp_scale))


def _integer(value: Any, low: int, high: int) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return int(number) if number.is_integer() and low <= number <= high else None


def read_score(chosen: Rubric, text: str) -> dict[str, Any]:
    """The judge's score from its raw answer under ``chosen``: ``judge_score`` (the sum of the rubric's
    fields) and, for a rubric of several fields, each part."""
    payload = find_json(text or "")
    if not isinstance(payload, dict):
        return {"judge_score": None, "judge_status": "failed", "judge_error": "no JSON object in the judge answer"}
    parts = {name: _integer(payload.get(name), low, high) for name, low, high in chosen.fields}
    if any(v is None for v in parts.values()):
        wanted = " and ".join(f"{name} {low}-{high}" for name, low, high in chosen.fields)
        return {"judge_score": None, "judge_status": "failed",
                "judge_error": f"{wanted} {'is' if len(parts) == 1 else 'are'} required (integers)"}
    extra = parts if len(parts) > 1 else {}
    return {"judge_score": sum(parts.values()), "judge_status": "ok", **extra, "judge_reason": payload.get("reason")}


def parse(task: str, text: str, vp_scale: str) -> dict[str, Any]:
    """The judge's score from its raw answer to the task's main rubric."""
    return read_score(rubric(task, vp_scale), text)


def _prefixed(line: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Score keys of one check: ``judge_*`` for the main one, ``<prefix>*`` for the others."""
    if prefix == "judge_":
        return line
    return {(prefix + k[len("judge_"):] if k.startswith("judge_") else prefix + k): v for k, v in line.items()}


class Judge:
    def __init__(self, backend: Backend, *, model: str, vp_scale: str = "likert5", max_new_tokens: int = 256):
        self.backend, self.model, self.vp_scale, self.max_new_tokens = backend, model, vp_scale, max_new_tokens

    def judge(self, records: Sequence[dict[str, Any]], instances: dict[str, Instance]) -> list[dict[str, Any]]:
        """One score line per record, in order: ``id`` plus, for each of its task's judge checks, the
        score, status, raw answer, model and scale under the check's prefix (``judge_score``, ...)."""
        lines: list[dict[str, Any]] = [{"id": record["id"]} for record in records]
        asked: list[tuple[int, JudgeCheck]] = []
        for i, record in enumerate(records):
            for check in TASKS[record["task"]].judge_checks(record, instances.get(record["id"]), self.vp_scale):
                low, high = check.rubric.low, check.rubric.high
                base = {"judge_model": self.model, "judge_scale": f"{low}-{high}"}
                if check.of_prediction and record["parse_status"] != "ok":
                    lines[i].update(_prefixed({**base, "judge_score": low, "judge_raw": None,
                                               "judge_status": "not judged: the prediction did not parse"},
                                              check.prefix))
                else:
                    lines[i].update(_prefixed(base, check.prefix))
                    asked.append((i, check))
        if asked:
            texts = self.backend.generate(
                [check_prompt(check) for _, check in asked],
                max_new_tokens=[self.max_new_tokens] * len(asked),
                constraints=[{"json": rubric_schema(check.rubric)} for _, check in asked])
            for (i, check), text in zip(asked, texts):
                lines[i].update(_prefixed({**read_score(check.rubric, text), "judge_raw": text}, check.prefix))
        return lines
