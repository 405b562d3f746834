"""``rescue-train eval key=value ...`` and ``python evaluate.py key=value ...``: evaluate a model or a training run."""

from __future__ import annotations

from ..evaluation.config import EvalConfig, load_config
from ..settings import names_in
from ..tasks import TASKS
from .base import Command


def usage() -> str:
    return f"""usage: rescue-train eval [run=RUN_DIR ...] [recipe=NAME|FILE.yaml] [key=value ...] [--cfg]

Examples:
  rescue-train eval model=tiny tasks=[itp,rpp] protocol=rank
  rescue-train eval run=runs/ssp_lora/tiny/fold0 backend=vllm tasks=[ssp]
  rescue-train eval recipe=vllm_gpu run=runs/ssp_lora/qwen2.5-7b-instruct/fold0 tasks=[ssp]
  rescue-train eval model=gpt-5.4 backend=openai protocol=paper judge.backend=openai judge.model=gpt-5.4

run=RUN_DIR takes the model, adapter, tokenizer and chat template and the whole data configuration (test fold
and split manifest included) from a training run, so protocol=sft asks exactly the training prompts.
recipe=NAME merges an eval block of configs/eval ({', '.join(names_in('configs/eval'))}) or your own YAML;
judge=none and bertscore=none switch those off. docs/evaluation.md explains every key."""


def summary(results: dict) -> str:
    lines = [f"{results['label']}: {results['config']['protocol']} protocol, {results['backend'].get('backend')}"]
    for task, scopes in results["aggregates"].items():
        both = scopes.get("both", {})
        wanted = {"accuracy", "f1", "recall@1", "mrr", "macro_f1", "s_er", "s_emo", "s_int", "judge", "bertscore_f1",
                  *(c.metric for c in getattr(TASKS.get(task), "report_columns", ()))}
        shown = {k: v for k, v in both.items() if isinstance(v, (int, float)) and v is not None and k in wanted}
        metrics = ", ".join(f"{k} {v:.3f}" for k, v in shown.items())
        failed = "".join(f" {k.replace('_', ' ')}={both[k]}" for k in ("truncated", "refused", "empty", "judge_failures")
                         if both.get(k))
        lines.append(f"  {task}: n={both.get('n', 0)} parse failures={both.get('parse_failures', 0)}{failed}"
                     f"  {metrics}")
    return "\n".join(lines)


def run(cfg: EvalConfig) -> None:
    from ..evaluation.runner import run as evaluate

    for results in evaluate(cfg):
        print(summary(results))
        print(f"  -> {results['output_dir']}/results.json")


COMMAND = Command("eval", usage, lambda inputs, overrides: load_config(overrides), run, schema=EvalConfig,
                  extra_keys=("recipe",))

