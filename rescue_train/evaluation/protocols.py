"""The three ways of asking a model, and how its answers become prediction records.

* ``sft``: the converter's prompts and bare-label answers (``fmt="label"``): what the recipes train on.
* ``paper``: the authors' zero-shot structure: one user message (no system turn) asking for JSON answers,
  top-3 lists for RPP/STP/SSP, with nothing that reveals the gold (the reference ITP prompt did).
* ``rank``: for the closed-set tasks, every candidate's answer text is scored by its log-likelihood after
  the sft prompt: a full ranking, no parse failures, no generated tokens. The generation tasks (ER, VP,
  RSG), which have no candidates, are generated with the sft prompts.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Sequence

from ..tasks import TASKS, Instance, render
from .backends import Backend, Messages
from .metrics import instance_scores

def answer_format(protocol: str) -> str:
    return "json" if protocol == "paper" else "label"


def messages(inst: Instance, protocol: str, mode: str) -> Messages:
    rendered = render(inst, mode, answer_format(protocol))
    if protocol == "paper":
        return [{"role": "user", "content": "\n\n".join(m["content"] for m in rendered)}]
    return rendered


def prompt_hash(prompt: Messages) -> str:
    return hashlib.sha256(json.dumps(prompt, ensure_ascii=False).encode()).hexdigest()[:16]


def is_ranked(inst: Instance, protocol: str) -> bool:
    return protocol == "rank" and TASKS[inst.task].closed_set


def max_new_tokens(inst: Instance, protocol: str, override: int | None) -> int:
    if override:
        return override
    return TASKS[inst.task].max_new_tokens[answer_format(protocol)]


def constraint(inst: Instance, protocol: str) -> dict[str, Any] | None:
    """Structured-output constraint for the answer: the candidate labels, the answer's JSON schema, or
    None for free text."""
    return TASKS[inst.task].answer_schema(inst, answer_format(protocol))


def base_record(inst: Instance, protocol: str, prompt: Messages) -> dict[str, Any]:
    return {"id": inst.id, "task": inst.task, "scenario": inst.scenario, "unit": inst.unit,
            "sample_id": inst.sample_id, "row_index": inst.row_index, "protocol": protocol,
            "prompt_hash": prompt_hash(prompt), "gold": inst.gold}


def generated_record(inst: Instance, protocol: str, prompt: Messages, raw: str) -> dict[str, Any]:
    parsed = TASKS[inst.task].parse(inst, raw, answer_format(protocol))
    value = list(parsed.value) if TASKS[inst.task].closed_set else parsed.value
    return {**base_record(inst, protocol, prompt), "prediction": value, "parse_status": parsed.status,
            "parse_error": parsed.error or None, "raw": raw, "scores": instance_scores(inst.task, inst.gold, value)}


def ranked_record(inst: Instance, prompt: Messages, scored, rank_score: str) -> dict[str, Any]:
    values = {label: (s.logprob / max(1, s.tokens) if rank_score == "mean" else s.logprob)
              for label, s in zip(inst.candidates, scored)}
    ranking = sorted(inst.candidates, key=lambda label: -values[label])  # stable: ties keep candidate order
    return {**base_record(inst, "rank", prompt), "prediction": ranking, "parse_status": "ok", "parse_error": None,
            "raw": None, "loglik": {label: s.logprob for label, s in zip(inst.candidates, scored)},
            "answer_tokens": {label: s.tokens for label, s in zip(inst.candidates, scored)},
            "scores": instance_scores(inst.task, inst.gold, ranking)}


def predict(backend: Backend, instances: Sequence[Instance], *, protocol: str, mode: str, adapter: str | None,
            max_tokens: int | None = None, constrained: bool = True, rank_score: str = "sum") -> list[dict]:
    """Prediction records for ``instances``, in order: ranked ones in one scoring call, the rest in one
    generation call (the backend batches)."""
    prompts = [messages(inst, "sft" if is_ranked(inst, protocol) else protocol, mode) for inst in instances]
    records: list[dict | None] = [None] * len(instances)
    ranked = [i for i, inst in enumerate(instances) if is_ranked(inst, protocol)]
    if ranked:
        requests = [(prompts[i], [TASKS[instances[i].task].answer(instances[i], "label", value=c)
                                  for c in instances[i].candidates]) for i in ranked]
        for i, scored in zip(ranked, backend.loglikelihood(requests, adapter=adapter)):
            records[i] = ranked_record(instances[i], prompts[i], scored, rank_score)
    generated = [i for i in range(len(instances)) if records[i] is None]
    if generated:
        # ER/VP under the rank protocol are asked with the sft prompts.
        asked = {i: "sft" if protocol == "rank" else protocol for i in generated}
        texts = backend.generate(
            [prompts[i] for i in generated],
            max_new_tokens=[max_new_tokens(instances[i], asked[i], max_tokens) for i in generated],
            constraints=[constraint(instances[i], asked[i]) if constrained else None for i in generated],
            adapter=adapter)
        for i, text in zip(generated, texts):
            records[i] = generated_record(instances[i], asked[i], prompts[i], text)
    return records  # type: ignore[return-value]
