"""``rescue-train eval key=value ...`` and ``python evaluate.py key=value ...``.

Examples::

    rescue-train eval model=tiny tasks=[itp,rpp] protocol=rank output=runs/eval/tiny
    rescue-train eval adapter=runs/ssp_lora backend=vllm protocol=sft tasks=[ssp] output=runs/eval/ssp
    rescue-train eval model=gpt-5.4 backend=openai protocol=paper judge.backend=openai judge.model=gpt-5.4

See docs/evaluation.md for every key.
"""

from __future__ import annotations

import sys
from dataclasses import fields
from typing import Sequence

from ..data.schema import DataError
from ..tasks import TASKS

USAGE = __doc__


def _summary(results: dict) -> str:
    lines = [f"{results['label']}: {results['config']['protocol']} protocol, {results['backend'].get('backend')}"]
    for task, scopes in results["aggregates"].items():
        both = scopes.get("both", {})
        wanted = {"accuracy", "f1", "recall@1", "mrr", "macro_f1", "s_er", "s_emo", "s_int", "judge", "bertscore_f1",
                  *(c.metric for c in getattr(TASKS.get(task), "report_columns", ()))}
        shown = {k: v for k, v in both.items() if isinstance(v, (int, float)) and v is not None and k in wanted}
        metrics = ", ".join(f"{k} {v:.3f}" for k, v in shown.items())
        lines.append(f"  {task}: n={both.get('n', 0)} parse failures={both.get('parse_failures', 0)}  {metrics}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from .config import EvalConfig, load_config

    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        print("keys: " + ", ".join(f.name for f in fields(EvalConfig)) + " (judge.*, bertscore.*: see the docs)")
        return 0
    try:
        cfg = load_config(argv)
        from .runner import run

        for results in run(cfg):
            print(_summary(results))
            print(f"  -> {results['output_dir']}/results.json")
        return 0
    except (DataError, ValueError, OSError) as exc:  # OSError: a model or file that cannot be read
        print(f"rescue-train eval: error: {exc}", file=sys.stderr)
        return 2
