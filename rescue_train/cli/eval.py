"""``rescue-train eval key=value ...`` and ``python evaluate.py key=value ...``.

usage: rescue-train eval [run=RUN_DIR ...] [recipe=NAME|FILE.yaml] [key=value ...] [--cfg]

Examples::

    rescue-train eval model=tiny tasks=[itp,rpp] protocol=rank
    rescue-train eval run=runs/ssp_lora/tiny/fold0 backend=vllm tasks=[ssp]
    rescue-train eval recipe=vllm_gpu run=runs/ssp_lora/qwen2.5-7b-instruct/fold0 tasks=[ssp]
    rescue-train eval model=gpt-5.4 backend=openai protocol=paper judge.backend=openai judge.model=gpt-5.4

run=RUN_DIR takes the model, adapter, tokenizer and chat template and the whole data configuration (test fold
and split manifest included) from a training run, so protocol=sft asks exactly the training prompts.
--cfg prints the resolved config and exits. docs/evaluation.md explains every key.
"""

from __future__ import annotations

import sys
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
        failed = "".join(f" {k.replace('_', ' ')}={both[k]}" for k in ("truncated", "refused", "judge_failures")
                         if both.get(k))
        lines.append(f"  {task}: n={both.get('n', 0)} parse failures={both.get('parse_failures', 0)}{failed}"
                     f"  {metrics}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from ..evaluation.config import EvalConfig, load_config
    from ..settings import describe, plain_warnings, recipe_names, to_yaml

    plain_warnings()
    argv = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        print(f"shipped recipes (recipe=NAME): {', '.join(recipe_names('eval'))}\n")
        print("keys (key  type = default  meaning):\n" + "\n".join(describe(EvalConfig)))
        return 0
    from ..inference import BackendError

    try:
        cfg = load_config([a for a in argv if a != "--cfg"])
        if "--cfg" in argv:
            print(to_yaml(cfg))
            return 0
        from ..evaluation.runner import run

        for results in run(cfg):
            print(_summary(results))
            print(f"  -> {results['output_dir']}/results.json")
        return 0
    except (DataError, ValueError, OSError, BackendError) as exc:  # OSError: a model or file that cannot be read
        print(f"rescue-train eval: error: {exc}", file=sys.stderr)
        return 2
