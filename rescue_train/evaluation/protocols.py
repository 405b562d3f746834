"""The three ways of asking a model, and how its answers become prediction records.

* ``sft``: the converter's prompts and answers in ``data.answer_format`` (bare labels or the paper's JSON):
  byte for byte what a run with the same data configuration trained on (``eval run=RUN_DIR``).
* ``paper``: the authors' zero-shot structure: one user message (no system turn) asking for JSON answers,
  top-3 lists for RPP/STP/SSP, with nothing that reveals the gold (the reference ITP prompt did).
* ``rank``: for the closed-set tasks, every candidate's answer text (in ``data.answer_format``) is scored by
  its log-likelihood after the sft prompt: a full ranking, no parse failures, no generated tokens. The
  generation tasks (ER, VP, RSG), which have no candidates, are generated with the sft prompts.

Generated answers are decoded greedily, constrained (``constrained=true``, the default) to the candidate labels or
the answer's JSON schema by the same grammar engine on both local backends (xgrammar, inside vLLM and through a
logits processor on hf), so that a protocol name means one decoding whatever runs it; :func:`decoding` says
which decoding a result had, and its row says so when it was not constrained.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Sequence

from ..inference import Arrivals, Backend, BackendError, Completion, Messages, as_completion
from ..scoring.calibration import CONTENT_FREE
from ..scoring.metrics import instance_scores
from ..tasks import TASKS, Instance, Parsed, render, render_without_dialogue
from ..tasks.answers import answer_text, unfinished_reasoning


def answer_format(protocol: str, trained: str = "label") -> str:
    """The paper protocol asks for JSON; sft and rank use the data configuration's answer format."""
    return "json" if protocol == "paper" else trained


def messages(inst: Instance, protocol: str, mode: str, fmt: str = "label") -> Messages:
    rendered = render(inst, mode, answer_format(protocol, fmt))
    if protocol == "paper":
        return [{"role": "user", "content": "\n\n".join(m["content"] for m in rendered)}]
    return rendered


def prompt_hash(prompt: Messages) -> str:
    return hashlib.sha256(json.dumps(prompt, ensure_ascii=False).encode()).hexdigest()[:16]


def is_ranked(inst: Instance, protocol: str) -> bool:
    return protocol == "rank" and TASKS[inst.task].closed_set


def max_new_tokens(inst: Instance, protocol: str, override: int | dict[str, int] | None, fmt: str = "label") -> int:
    """The answer budget: ``override`` (one number, or per task), else the default for the answer format."""
    if isinstance(override, dict):
        override = override.get(inst.task)
    if override:
        return override
    return TASKS[inst.task].max_new_tokens[answer_format(protocol, fmt)]


def constraint(inst: Instance, protocol: str, fmt: str = "label") -> dict[str, Any] | None:
    """Structured-output constraint for the answer: the candidate labels, the answer's JSON schema, or
    None for free text."""
    return TASKS[inst.task].answer_schema(inst, answer_format(protocol, fmt))


def decoding(protocol: str, constrained: bool, backend: dict[str, Any], fmt: str = "label") -> str:
    """How a result's generated answers were decoded: ``constrained`` (labels and JSON held to their constraint),
    ``free``, or on an API backend, which constrains JSON answers (its ``structured`` mode) but never labels, ``free
    labels`` where the protocol asks for labels. ``backend`` is the backend's description (``Backend.info``)."""
    if not constrained:
        return "free"
    if backend.get("structured_outputs"):
        return "constrained"
    if backend.get("structured", "none") != "none":
        return "constrained" if answer_format(protocol, fmt) == "json" else "free labels"
    return "free"


def base_record(inst: Instance, protocol: str, prompt: Messages) -> dict[str, Any]:
    return {"id": inst.id, "task": inst.task, "scenario": inst.scenario, "unit": inst.unit,
            "sample_id": inst.sample_id, "row_index": inst.row_index, "protocol": protocol,
            "prompt_hash": prompt_hash(prompt), "gold": inst.gold}


def failure_reason(completion: Completion, protocol: str) -> str | None:
    """Why an answer counts as failed whatever it says: refused by a content policy, ``empty`` (a server answered
    nothing, however often asked), or cut short (``truncated``: a paper-protocol answer that hit its budget, or
    reasoning that never closed). Short label answers (sft) are read up to the budget: the label comes first."""
    if completion.refusal:
        return f"refused: {completion.refusal}"
    if completion.empty:
        return "empty"
    if (completion.finish_reason == "length" and protocol == "paper") or unfinished_reasoning(completion.text):
        return "truncated"
    return None


def generated_record(inst: Instance, protocol: str, prompt: Messages, raw: str | Completion,
                     fmt: str = "label") -> dict[str, Any]:
    completion, task, fmt = as_completion(raw), TASKS[inst.task], answer_format(protocol, fmt)
    failure = failure_reason(completion, protocol)
    empty = task.parse(inst, "", fmt).value  # what a failed answer is scored as, whatever part of it parsed
    parsed = Parsed("failed", empty, failure) if failure else task.parse(inst, answer_text(completion.text), fmt)
    value = list(parsed.value) if task.closed_set else parsed.value
    return {**base_record(inst, protocol, prompt), "prediction": value, "parse_status": parsed.status,
            "parse_error": parsed.error or None, "raw": completion.text, "finish_reason": completion.finish_reason,
            "usage": completion.usage, "scores": instance_scores(inst.task, inst.gold, value if parsed.ok else empty)}


def ranked_record(inst: Instance, prompt: Messages, scored, rank_score: str,
                  without_dialogue: Sequence | None = None) -> dict[str, Any]:
    """The record of a ranked instance, ranked by the raw scores. ``without_dialogue`` (a calibrated run): the
    candidates' scores under each content-free input, then under the domain premise (:func:`calibration_requests`),
    kept as ``loglik_content_free`` and ``loglik_premise`` for every calibration to re-rank from."""
    values = {label: (s.logprob / max(1, s.tokens) if rank_score == "mean" else s.logprob)
              for label, s in zip(inst.candidates, scored)}
    ranking = sorted(inst.candidates, key=lambda label: -values[label])  # stable: ties keep candidate order
    record = {**base_record(inst, "rank", prompt), "prediction": ranking, "parse_status": "ok", "parse_error": None,
              "raw": None, "loglik": {label: s.logprob for label, s in zip(inst.candidates, scored)},
              "answer_tokens": {label: s.tokens for label, s in zip(inst.candidates, scored)},
              "scores": instance_scores(inst.task, inst.gold, ranking)}
    if without_dialogue is not None:
        *free, premise = [{label: s.logprob for label, s in zip(inst.candidates, one)} for one in without_dialogue]
        record.update(loglik_content_free=free, loglik_premise=premise)
    return record


def calibration_requests(inst: Instance, fmt: str = "label") -> list[tuple[Messages, list[str]]]:
    """The same candidates scored without the dialogue: once per content-free input (contextual calibration),
    then after the task question alone (the domain premise of PMI)."""
    answers = [TASKS[inst.task].answer(inst, fmt, value=c) for c in inst.candidates]
    return [(render_without_dialogue(inst, filler, fmt), answers) for filler in (*CONTENT_FREE, None)]


def rank_request(inst: Instance, mode: str, fmt: str = "label") -> tuple[Messages, list[str]]:
    """What the rank protocol scores for ``inst``: the sft prompt and every candidate's answer text (the
    lm-eval export and the checks build the same requests from here)."""
    return messages(inst, "sft", mode, fmt), [TASKS[inst.task].answer(inst, fmt, value=c) for c in inst.candidates]


def predict(backend: Backend, instances: Sequence[Instance], *, protocol: str, mode: str, adapter: str | None,
            max_tokens: int | None = None, constrained: bool = True, rank_score: str = "sum",
            answer_format: str = "label", on_records: Callable[[list[dict]], None] | None = None,
            calibrate: Callable[[dict], dict] | None = None) -> list[dict]:
    """Prediction records for ``instances``, in order: ranked ones in one scoring call, the rest in one
    generation call (the backend batches). ``answer_format`` is the data configuration's (sft and rank).
    ``calibrate`` (a calibrated run) re-ranks each ranked record, which then also keeps its candidates' scores
    without the dialogue (:func:`calibration_requests`).
    ``on_records`` gets every record once, as soon as it is made: a generated one as its answer arrives, also
    when a stopping error (:class:`BackendError`, raised naming the instance) ends the call."""
    fmt = answer_format
    records: list[dict | None] = [None] * len(instances)
    keep = on_records or (lambda made: None)
    ranked = [i for i, inst in enumerate(instances) if is_ranked(inst, protocol)]
    if ranked:
        requests = [rank_request(instances[i], mode, fmt) for i in ranked]
        extra = [calibration_requests(instances[i], fmt) if calibrate else [] for i in ranked]
        scored = iter(backend.loglikelihood([*requests, *(r for more in extra for r in more)], adapter=adapter))
        first = [next(scored) for _ in ranked]
        for i, (prompt, _), own, more in zip(ranked, requests, first, extra):
            record = ranked_record(instances[i], prompt, own, rank_score, [next(scored) for _ in more] or None)
            records[i] = calibrate(record) if calibrate else record
        keep([records[i] for i in ranked])
    generated = [i for i in range(len(instances)) if records[i] is None]
    if generated:
        # ER/VP under the rank protocol are asked with the sft prompts.
        asked = {i: "sft" if protocol == "rank" else protocol for i in generated}
        prompts = {i: messages(instances[i], asked[i], mode, fmt) for i in generated}

        def arrived(answers) -> None:
            made = []
            for k, answer in answers:
                i = generated[k]
                records[i] = generated_record(instances[i], asked[i], prompts[i], answer, fmt)
                made.append(records[i])
            keep(made)

        arrivals = Arrivals(arrived)
        try:
            texts = backend.generate(
                [prompts[i] for i in generated],
                max_new_tokens=[max_new_tokens(instances[i], asked[i], max_tokens, fmt) for i in generated],
                constraints=[constraint(instances[i], asked[i], fmt) if constrained else None for i in generated],
                adapter=adapter, on_answers=arrivals)
        except BackendError as stop:  # keep what finished; name the instance
            arrivals.rest(stop.partial)
            stop.where = instances[generated[stop.index]].id if stop.index is not None else None
            raise
        arrivals.rest(texts)
    return records  # type: ignore[return-value]
