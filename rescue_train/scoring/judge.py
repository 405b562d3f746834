"""LLM-as-judge: each task's rubric prompts (``Task.judge_checks``, our own wording), any backend, raw judge
output kept.

* ER: S_emo, how well the predicted emotion phrase matches the annotated one, 1-5 (intensity is scored
  separately by formula, so the judge ignores it).
* VP: the paper's 1-5 Likert score for the whole predicted set against the gold set (``likert5``), or the
  reference scripts' scheme (``ref0to6``): pairings 0-2 plus viewpoint 0-4, summed by us, not the judge.
* RSG: relation-aware support 1-5 for the generated turn and for the real therapist's turn, and (condition
  target_strategy) whether each turn enacts the given strategy toward the given target, 0/1.

A prediction that failed to parse is not sent to the judge: it gets the bottom of the scale. A judge answer
that cannot be read (or was refused or cut short) is asked again, ``judge.retries`` times within the run; one
that stays unreadable leaves the score empty (``judge_status`` failed) with the raw text kept, and the metrics
floor or exclude it (``judge.on_failure``, docs/evaluation.md).

Readable verdicts are cached by (judge model, judge prompt hash) in ``judge_cache.jsonl``, written as they
arrive, so a resumed run, a rerun with other BERTScore settings or a run stopped by an API error never pays
twice. Unreadable ones are never cached: a rerun asks exactly them again.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ..inference import (
    ApiOptions,
    Arrivals,
    Backend,
    BackendError,
    BackendSpec,
    Completion,
    Messages,
    as_completion,
    make_backend,
)
from ..inference.presets import model_folder
from ..inference.factory import BackendNames, backend_class, reasons
from ..inference.options import pick
from ..io import append_jsonl, read_jsonl
from .metrics import JUDGE_ON_FAILURE
from ..settings import meaning
from ..tasks import TASKS, Instance
from ..tasks.answers import answer_text, find_json, unfinished_reasoning
from ..tasks.types import JudgeCheck, Rubric

VP_SCALES = ("likert5", "ref0to6")
OFF = "none"  # judge.backend=none: no judge
JUDGE_MAX_NEW_TOKENS = {False: 256, True: 4096}  # by whether the judge reasons


@dataclass
class JudgeConfig(ApiOptions):
    backend: str = field(default="none", metadata=meaning(" | ".join(BackendNames(OFF)), choices=BackendNames(OFF)))
    model: Optional[str] = field(default=None, metadata=meaning(
        "the judge model (a local path, a hub name, or the API model name)"))
    vp_scale: str = field(default="likert5", metadata=meaning(
        "the paper's 1-5 Likert; ref0to6 = the reference scripts' 0-2 + 0-4", choices=VP_SCALES))
    max_new_tokens: Optional[int] = field(default=None, metadata=meaning(
        "default 256, 4096 when the judge reasons", low=1))
    batch_size: int = field(default=8, metadata=meaning("prompts per judge batch (hf)", low=1, hashed=False))
    cache: bool = field(default=True, metadata=meaning(
        "readable verdicts kept in OUTPUT/judge_cache.jsonl by (judge model, prompt hash)", hashed=False))
    # retries and on_failure decide neither a verdict nor which are kept (unreadable verdicts are asked again
    # anyway; on_failure only changes the aggregates): a changed one keeps the scores
    retries: Optional[int] = field(default=None, metadata=meaning(
        "asks again per unreadable verdict within a run; default 2 for backend=openai, 0 for a local judge "
        "(greedy: the same prompt gets the same answer)", low=0, hashed=False))
    on_failure: str = field(default="floor", metadata=meaning(
        "an unreadable verdict scores the bottom of the scale (floor) or leaves the means (exclude)",
        hashed=False, choices=JUDGE_ON_FAILURE))

    @property
    def on(self) -> bool:
        """Whether a judge grades the judged tasks (``judge.backend`` names one, not ``none``)."""
        return self.backend != OFF


def judge_budget(judge: JudgeConfig) -> int:
    return judge.max_new_tokens or JUDGE_MAX_NEW_TOKENS[reasons(judge, judge.backend)]


def check_judge(judge: JudgeConfig) -> None:
    """Fail now, not after every prediction, when the judge cannot be reached: an API judge without its key in
    the environment (a local server, ``judge.base_url``, takes any key, as the backend does), a local judge
    model whose configuration cannot be found."""
    if backend_class(judge.backend, "judge.backend").remote:
        if not judge.base_url and not os.environ.get(judge.api_key_env):
            raise ValueError(f"judge.backend={judge.backend}: set the judge's API key in the environment variable "
                             f"{judge.api_key_env} (or name another one with judge.api_key_env=...)")
        return
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(model_folder(judge.model))
    except (OSError, ValueError) as exc:
        raise ValueError(f"judge.model={judge.model!r} could not be found ({str(exc).splitlines()[0]}): a local "
                         "folder, a hub name in the local cache, or 'tiny'") from None


def judge_retries(judge: JudgeConfig) -> int:
    """How many times an unreadable verdict is asked again within a run."""
    if judge.retries is not None:
        return judge.retries
    return backend_class(judge.backend, "judge.backend").judge_retries


def make_judge_backend(judge: JudgeConfig):
    """The judge's backend (its engine defaults; API keys from ``judge``)."""
    return make_backend(BackendSpec(backend=judge.backend, model=judge.model, api=pick(ApiOptions, judge),
                                    batch_size=judge.batch_size, progress=False))


# The system message of checks against a reference (ER, VP); a task whose checks have no reference gives
# its own (JudgeCheck.system).
SYSTEM = ("You grade the answers of a model that analyses couple and family therapy transcripts, against an "
          "expert annotator's reference. Judge meaning, not wording. Reply with JSON only.")


def rubric(task: str, vp_scale: str) -> Rubric:
    """The task's main rubric (the one behind ``judge_score``)."""
    found = TASKS[task].judge_rubric(vp_scale)
    if found is None:
        raise ValueError(f"task {task} is not judged")
    return found


def check_prompt(check: JudgeCheck) -> Messages:
    return [{"role": "system", "content": check.system or SYSTEM},
            {"role": "user", "content": f"{check.material}\n\n{check.rubric.text}"}]


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
    except (TypeError, ValueError, OverflowError):
        return None
    return int(number) if number.is_integer() and low <= number <= high else None


def read_score(chosen: Rubric, text: str) -> dict[str, Any]:
    """The judge's score from its raw answer under ``chosen`` (reasoning and code fences removed):
    ``judge_score`` (the sum of the rubric's fields) and, for a rubric of several fields, each part.
    Never raises."""
    payload = find_json(answer_text(text or ""))
    if not isinstance(payload, dict):
        return {"judge_score": None, "judge_status": "failed", "judge_error": "no JSON object in the judge answer"}
    reason = payload.get("reason") if isinstance(payload.get("reason"), str) else None
    parts = {name: _integer(payload.get(name), low, high) for name, low, high in chosen.fields}
    if any(v is None for v in parts.values()):
        wanted = " and ".join(f"{name} {low}-{high}" for name, low, high in chosen.fields)
        return {"judge_score": None, "judge_status": "failed",
                "judge_error": f"{wanted} {'is' if len(parts) == 1 else 'are'} required (integers)"}
    extra = parts if len(parts) > 1 else {}
    return {"judge_score": sum(parts.values()), "judge_status": "ok", **extra, "judge_reason": reason}


def parse(task: str, text: str, vp_scale: str) -> dict[str, Any]:
    """The judge's score from its raw answer to the task's main rubric. Never raises."""
    return read_score(rubric(task, vp_scale), text)


def rubric_verdict(chosen: Rubric, answer: Completion) -> dict[str, Any]:
    """The parsed verdict of one judge answer; a refused, empty or cut-short answer is a failed verdict."""
    if answer.refusal:
        return {"judge_score": None, "judge_status": "failed", "judge_error": f"refused: {answer.refusal}"}
    if answer.empty:
        return {"judge_score": None, "judge_status": "failed", "judge_error": "empty"}
    parsed = read_score(chosen, answer.text)
    if parsed["judge_status"] != "ok" and (answer.finish_reason == "length" or unfinished_reasoning(answer.text)):
        parsed["judge_error"] = "truncated"
    return parsed


def verdict(task: str, answer: Completion, vp_scale: str) -> dict[str, Any]:
    """The parsed verdict of one judge answer to the task's main rubric."""
    return rubric_verdict(rubric(task, vp_scale), answer)


def readable(chosen: Rubric, answer: Completion) -> bool:
    return rubric_verdict(chosen, answer)["judge_status"] == "ok"


def needs_judging(scores: dict[str, Any]) -> bool:
    """Whether a record's score line still lacks a verdict: never judged, or a check whose verdict stayed
    unreadable (every ``*_status`` key of a score line is a judge check's)."""
    return "judge_status" not in scores or any(
        key.endswith("_status") and value == "failed" for key, value in scores.items())


def _prefixed(line: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Score keys of one check: ``judge_*`` for the main one, ``<prefix>*`` for the others."""
    if prefix == "judge_":
        return line
    return {(prefix + k[len("judge_"):] if k.startswith("judge_") else prefix + k): v for k, v in line.items()}


def prompt_key(model: str, messages: Messages) -> str:
    return hashlib.sha256(json.dumps([model, messages], ensure_ascii=True).encode()).hexdigest()


class JudgeCache:
    """Readable judge answers (the judge puts no other) by (judge model, prompt hash), appended to a jsonl file
    as they arrive. Answers cut short by the budget are not kept either (a larger budget should ask again)."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries = {e["key"]: e for e in read_jsonl(path)} if path is not None else {}

    def get(self, key: str) -> Completion | None:
        entry = self.entries.get(key)
        return None if entry is None else Completion(entry["raw"], entry.get("finish_reason"), entry.get("usage"),
                                                     entry.get("refusal"), bool(entry.get("empty")))

    def verdict(self, key: str, chosen: Rubric) -> Completion | None:
        """The cached answer when it reads as a verdict under ``chosen`` (a cache written before unreadable
        answers were left out may hold some: they are asked again)."""
        answer = self.get(key)
        return answer if answer is not None and readable(chosen, answer) else None

    def put(self, model: str, answers: Sequence[tuple[str, Completion]]) -> None:
        # A key already present holds an answer that did not read (the caller asks only for those): the new
        # line replaces it, here and when the file is read back (the last line of a key wins).
        new = list({key: {"key": key, "judge_model": model, "raw": a.text, "finish_reason": a.finish_reason,
                          "usage": a.usage, "refusal": a.refusal, "empty": a.empty}
                    for key, a in answers if a.finish_reason != "length"}.values())
        self.entries.update((e["key"], e) for e in new)
        if new and self.path is not None:
            append_jsonl(self.path, new)


class Judge:
    def __init__(self, backend: Backend, *, model: str, vp_scale: str = "likert5", max_new_tokens: int = 256,
                 cache: JudgeCache | None = None, retries: int = 0):
        self.backend, self.model, self.vp_scale, self.max_new_tokens = backend, model, vp_scale, max_new_tokens
        self.cache = cache or JudgeCache(None)
        self.retries = retries

    def judge(self, records: Sequence[dict[str, Any]], instances: dict[str, Instance]) -> list[dict[str, Any]]:
        """One score line per record, in order: ``id`` plus, for each of its task's judge checks, the score,
        status, raw answer, usage, ... under the check's prefix (``judge_score``, ``human_judge_score``, ...).
        Cached verdicts are reused; a stopping API error keeps the verdicts that finished."""
        lines: list[dict[str, Any]] = [{"id": record["id"]} for record in records]
        checks: dict[tuple[int, int], JudgeCheck] = {}
        prompts: dict[tuple[int, int], Messages] = {}
        for i, record in enumerate(records):
            for k, check in enumerate(TASKS[record["task"]].judge_checks(record, instances.get(record["id"]),
                                                                         self.vp_scale)):
                base = {"judge_model": self.model, "judge_scale": f"{check.rubric.low}-{check.rubric.high}"}
                if check.of_prediction and record["parse_status"] != "ok":
                    lines[i].update(_prefixed({**base, "judge_score": check.rubric.low, "judge_raw": None,
                                               "judge_status": "not judged: the prediction did not parse"},
                                              check.prefix))
                else:
                    lines[i].update(_prefixed(base, check.prefix))
                    checks[(i, k)], prompts[(i, k)] = check, check_prompt(check)
        keys = {ik: prompt_key(self.model, p) for ik, p in prompts.items()}
        answers = {ik: self.cache.verdict(key, checks[ik].rubric) for ik, key in keys.items()}
        cached = {ik for ik, a in answers.items() if a is not None}
        asked = [ik for ik in prompts if ik not in cached]
        attempts = dict.fromkeys(asked, 0)
        for _ in range(1 + self.retries):  # the first ask, then the retries of what stayed unreadable
            if not asked:
                break
            for ik, answer in zip(asked, self._ask(asked, prompts, checks, keys, records)):
                answers[ik] = answer
                attempts[ik] += 1
            asked = [ik for ik in asked if not readable(checks[ik].rubric, answers[ik])]
        for (i, k), answer in answers.items():
            check = checks[(i, k)]
            lines[i].update(_prefixed({**rubric_verdict(check.rubric, answer), "judge_raw": answer.text,
                                       "judge_finish_reason": answer.finish_reason, "judge_usage": answer.usage,
                                       "judge_cached": (i, k) in cached, "judge_attempts": attempts.get((i, k), 0)},
                                      check.prefix))
        return lines

    def _ask(self, asked: list[tuple[int, int]], prompts: dict, checks: dict, keys: dict,
             records: Sequence[dict[str, Any]]) -> list[Completion]:
        """One round of judge calls; the readable answers go to the cache as they arrive, so that a kill pays
        for none of them again (on a stopping API error too, which is raised again naming the record)."""

        def keep(arrived) -> None:
            now = [(asked[k], as_completion(text)) for k, text in arrived]
            self.cache.put(self.model, [(keys[ik], a) for ik, a in now if readable(checks[ik].rubric, a)])

        arrivals = Arrivals(keep)
        try:
            texts = self.backend.generate(
                [prompts[ik] for ik in asked], max_new_tokens=[self.max_new_tokens] * len(asked),
                constraints=[{"json": rubric_schema(checks[ik].rubric)} for ik in asked], on_answers=arrivals)
        except BackendError as stop:
            arrivals.rest(stop.partial)
            stop.where = f"judging {records[asked[stop.index][0]]['id']}" if stop.index is not None else "judge"
            raise
        arrivals.rest(texts)
        return [as_completion(t) for t in texts]
