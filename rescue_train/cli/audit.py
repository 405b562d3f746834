"""``rescue-train audit INPUT... key=value ... [--dry-run]``: the relational-orientation audit (RELATE).

usage: rescue-train audit INPUT... [recipe=NAME|FILE.yaml] [key=value ...] [--dry-run] [--cfg]

INPUT is an eval results folder of a next-turn generation task, a .jsonl of dialogues (``messages`` with user
and assistant roles), or ``reference`` (the benchmark's real therapist turns; ``data.source=`` picks the
benchmark). Several INPUTs are audited together and compared.

Examples::

    rescue-train audit dialogues.jsonl model=Qwen/Qwen2.5-7B-Instruct backend=vllm --dry-run
    rescue-train audit reference runs/eval/rsg model=my-judge backend=openai base_url=http://127.0.0.1:8000/v1
    rescue-train audit reference model=tiny limit=3 splitter=relate criteria=relate output_dir=runs/audit/smoke

--dry-run counts and estimates without sending anything; --cfg prints the resolved config and exits.
See docs/audit.md for every key, the instrument and its caveats.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..audit.config import AuditConfig, load_config
from .base import Command

USAGE = __doc__


def dry_run_text(plan: dict[str, Any]) -> str:
    lines = [f"{s['system']} | {s['dialogue_id']} | turn {s['turn_id']} sentence {s['sentence_id']} | {s['text']}"
             for s in plan["sentences"]]
    lines.append("")
    for system, counts in plan["systems"].items():
        lines.append(f"{system}: {counts['turns']} turns, {counts['sentences']} sentences, "
                     f"{counts['requests']} judge requests")
    lines.append(f"total: {plan['requests']} requests, {plan['cached']} already answered in the output folder, "
                 f"{plan['to_send']} to send")
    lines.append(f"estimated prompt tokens: {plan['prompt_tokens']:,} ({plan['prompt_tokens_after_prefix_cache']:,} "
                 f"not shared with the previous request, i.e. with a prefix cache); output at most "
                 f"{plan['max_output_tokens']:,} tokens (about 4 characters a token)")
    if plan["skipped"]:
        lines.append(f"not audited: {len(plan['skipped'])} records (predictions that did not parse or are empty)")
    return "\n".join(lines)


def summary(results: dict[str, Any]) -> str:
    from ..audit.report import ordered_systems

    analysis = results["analysis"]
    lines = []
    for system in ordered_systems(analysis):
        p = analysis["per_system"][system]
        rates = ", ".join(f"{m} {100 * p['rates'][m]['rate']:.1f}%" for m in ("IF", "IF_gated", "OS")
                          if p["rates"][m]["rate"] is not None)
        lines.append(f"{system}: {p['sentences']} sentences, parse failures {p['labels']['PARSE_FAIL']}  {rates}")
    return "\n".join(lines)


def load(inputs: list[str], overrides: list[str]) -> AuditConfig:
    return load_config(overrides, inputs)


def run(config: AuditConfig) -> None:
    from ..audit.report import write_report
    from ..audit.runner import run as audit

    if not config.inputs:
        raise ValueError("name at least one INPUT: an eval results folder, a .jsonl of dialogues, or reference")
    if config.dry_run:
        print(dry_run_text(audit(config.inputs, config)))
        return
    written: list = []
    results = audit(config.inputs, config,  # the report is written while the audit still holds its folder
                    on_results=lambda done: written.extend(write_report(done, Path(config.output_dir), config.plots)))
    print(summary(results))
    print(f"  -> {config.output_dir}/results.json, " + ", ".join(str(p) for p in written))


COMMAND = Command("audit", USAGE, load, run, schema=AuditConfig, inputs=True, extra_keys=("recipe", "data"),
                  flags={"--dry-run": "dry_run=true"})
