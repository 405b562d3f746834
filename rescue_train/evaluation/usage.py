"""What a run costs: the call and token estimate printed before API calls start, and the token totals the
servers reported, kept in results.json (``usage``).

The estimate counts a prompt token per four characters (no tokenizer of the API model is at hand); the
completion figure is the budget, an upper bound: reasoning models bill their reasoning tokens within it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

from ..console import shown
from ..inference.factory import backend_class
from ..scoring.judge import judge_budget, needs_judging
from ..tasks import TASKS, Instance
from .config import EvalConfig, budget_override
from .protocols import is_ranked, max_new_tokens, messages

CHARS_PER_TOKEN = 4
USAGE_KEYS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")


def _tokens(prompt: Sequence[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in prompt) // CHARS_PER_TOKEN


def estimate(cfg: EvalConfig, todo: Sequence[Instance], instances: Iterable[Instance], predictions: dict[str, dict],
             judged: set[str], cache_path: Path | None) -> dict[str, dict[str, int]]:
    """Calls and tokens still to be paid: the model's (backend=openai) for ``todo``, and the judge's for the
    judged tasks' instances not yet ``judged`` (an unpredicted answer is estimated as long as its gold)."""
    from ..scoring.judge import JudgeCache, check_prompt, prompt_key

    out: dict[str, dict[str, int]] = {}
    if backend_class(cfg.backend).remote:
        asked = [i for i in todo if not is_ranked(i, cfg.protocol)]
        out["model"] = {"calls": len(asked),
                        "prompt_tokens": sum(_tokens(messages(i, cfg.protocol, cfg.data.mode, cfg.data.answer_format)) for i in asked),
                        "max_completion_tokens": sum(max_new_tokens(i, cfg.protocol, budget_override(cfg))
                                                     for i in asked)}
    if cfg.judge.on:
        cache = JudgeCache(cache_path if cfg.judge.cache else None)
        calls = cached = tokens = 0
        for inst in instances:
            if not TASKS[inst.task].judged or inst.id in judged:
                continue
            record = predictions.get(inst.id) or {"id": inst.id, "task": inst.task, "gold": inst.gold,
                                                  "prediction": inst.gold, "parse_status": "ok"}
            for check in TASKS[inst.task].judge_checks(record, inst, cfg.judge.vp_scale):
                if check.of_prediction and record["parse_status"] != "ok":
                    continue  # not sent to the judge
                judge_prompt = check_prompt(check)
                if cache.verdict(prompt_key(cfg.judge.model, judge_prompt), check.rubric) is not None:
                    cached += 1
                    continue
                calls += 1
                tokens += _tokens(judge_prompt)
        out["judge"] = {"calls": calls, "cached": cached, "prompt_tokens": tokens,
                        "max_completion_tokens": calls * judge_budget(cfg.judge)}
    return out


def describe_estimate(numbers: dict[str, dict[str, int]]) -> str:
    parts = []
    for who, n in numbers.items():
        cached = f" ({n['cached']} more answered from the cache)" if n.get("cached") else ""
        parts.append(f"{who}: {n['calls']} calls{cached}, ~{n['prompt_tokens']:,} prompt tokens, "
                     f"at most {n['max_completion_tokens']:,} completion tokens")
    return "estimate before calling the API: " + "; ".join(parts) + f" (tokens = characters / {CHARS_PER_TOKEN})"


def usage_totals(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Token counts summed over the records, for the model (``usage``) and the judge (``judge_usage``):
    ``calls`` counts the answers whose server reported usage."""
    totals = {who: {"calls": 0, **{k: 0 for k in USAGE_KEYS}} for who in ("model", "judge")}
    for record in records:
        for who, usage in (("model", record.get("usage")), ("judge", (record.get("scores") or {}).get("judge_usage"))):
            if usage:
                totals[who]["calls"] += 1
                for key in USAGE_KEYS:
                    totals[who][key] += usage.get(key) or 0
    return totals


def print_estimate(cfg: EvalConfig, todo: Sequence[Instance], instances: Iterable[Instance],
                   predictions: dict[str, dict], folder) -> None:
    """Print the estimate before a run that calls an API model or a judge."""
    if not backend_class(cfg.backend).remote and not cfg.judge.on:
        return
    judged = {i for i, s in folder.done_scores().items() if not needs_judging(s)}
    numbers = estimate(cfg, todo, instances, predictions, judged, folder.path / "judge_cache.jsonl")
    if any(n["calls"] or n.get("cached") for n in numbers.values()):
        print(describe_estimate(numbers), file=shown(), flush=True)

