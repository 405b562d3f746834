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

run=RUN_DIR takes the model, adapter, tokenizer and chat template, the tasks and the whole data configuration
(test fold and split manifest included) from a training run, so protocol=sft asks exactly the training prompts.
Any trained model (run=, adapter=RUN_DIR, a served adapter=NAME=RUN_DIR, a merged model=) is scored on its own
test fold; data.split=none allow_training_data=true scores it on the whole benchmark, saying so.
recipe=NAME merges an eval block of configs/eval ({', '.join(names_in('configs/eval'))}) or your own YAML;
judge=none and bertscore=none switch those off. docs/evaluation.md explains every key.

Results go to output_dir (default runs/eval/<model>[+<adapter>]/<protocol>; one folder per model inside it when
several are evaluated): results.json (metrics, intervals, per-instance records), predictions.jsonl, scores.jsonl.
See them with: rescue-train report OUTPUT_DIR (tables beside the paper's, plots with --output-dir)."""


def summary(results: dict) -> str:
    """The report's cells of each task (both scenarios: percent for ITP to SSP, judge scores 1-5, BERTScore F1,
    with the 95% interval as [low, high]), its n and failures, and which instances the numbers rest on."""
    from ..evaluation.tables import name_of
    from ..scoring.cells import task_cells
    from ..provenance import describe_split

    lines = [f"{name_of(results)}: {results['backend'].get('backend')} backend, {describe_split(results)}"]
    for task, scopes in results["aggregates"].items():
        both = scopes.get("both", {})
        failed = "".join(f" {k.replace('_', ' ')}={both[k]}" for k in ("truncated", "refused", "empty", "judge_failures")
                         if both.get(k))
        cells = ", ".join(task_cells(results, task)) if task in TASKS else ""
        lines.append(f"  {task}: n={both.get('n', 0)} parse failures={both.get('parse_failures', 0)}{failed}"
                     f"  {cells}")
    return "\n".join(lines)


def run(cfg: EvalConfig) -> None:
    from ..evaluation.runner import run as evaluate

    say(evaluate(cfg))


def together(argvs: str) -> None:
    """The evaluations of a JSON list of ``rescue-train eval`` argument lists, through one engine
    (``evaluation.runner.run_together``): a cross-validation's evaluation job on one machine (``cv.plan``)."""
    import json

    from ..evaluation.runner import run_together

    say(run_together([load_config(argv) for argv in json.loads(argvs)]))


def say(done: list[dict]) -> None:
    for results in done:
        print(summary(results))
        for note in results["split"].get("fold_notes", []):
            print(f"  note: {note}")
        print(f"  -> {results['output_dir']}/results.json; see it: rescue-train report {results['output_dir']}")
    if len(done) > 1:
        shown = " ".join(str(r["output_dir"]) for r in done)
        print(f"compare them: rescue-train report {shown}")


COMMAND = Command("eval", usage, lambda inputs, overrides: load_config(overrides), run, schema=EvalConfig,
                  extra_keys=("recipe",))

