"""``rescue-train cv recipe=NAME ...``: one run per test fold, each scored on its own fold, pooled into one row over
the benchmark (rescue_train.cv)."""

from __future__ import annotations

from ..cv.config import CvConfig, load_config
from .base import Command


def usage() -> str:
    from ..settings import recipe_names

    return f"""usage: rescue-train cv recipe=NAME|PATH.yaml [training overrides] [eval.KEY=VALUE ...] [output_dir=OUT]
                       [folds=[0,2]] [baseline=auto|zero_shot|none] [dry_run=true] [--cfg]

A fine-tuned model's row over the whole benchmark, like the paper's rows: one training run per test fold of the
recipe's grouped k-fold split (data.folds; `accelerate launch ... train`, resumable) in OUT/runs/fold<F>, each
evaluated on its own test fold with `rescue-train eval run=` (its training prompts) in OUT/eval/fold<F>, pooled
into OUT/results.json (every instance once, by the model that never saw its couple or family; `rescue-train
report OUT` reads it), and the base model zero-shot on the same instances (OUT/eval/zero_shot) with the paired
difference per cell in OUT/report.md. Rerun the same command to resume.

  recipe=all_lora|ssp_lora|...           a LoRA recipe ({', '.join(recipe_names('lora'))}) or your own YAML
  model=... data=... train.max_steps=... any training override, for every run (rescue-train train --help)
  eval.protocol=rank|sft                 closed-set tasks ranked (default) or generated; ER, VP, RSG generated
  eval.backend=vllm eval.judge.backend=openai eval.judge.model=gpt-5.4 eval.bertscore=none
                                         any rescue-train eval setting, for every evaluation
  launch.config_file=single_gpu 'launch.args=--num_processes 2'   how each run is launched (as compare):
                                         rescue-train launch [--config_file F] --gpu_ids all --main_process_port 0
                                         [launch.args] -m rescue_train train ...; launch.keep_checkpoints=true
  launch.executor=local|slurm            where the runs and evaluations execute (rescue_train.executor):
  launch.parallel=N launch.gpus_per_run=G  local: N jobs at once, G GPUs each (CUDA_VISIBLE_DEVICES; 0: CPU, the
                                         threads divided); slurm: at most N jobs in the queue at once
  launch.slurm.partition=gpu launch.slurm.gpus_per_node=1 launch.slurm.cpus_per_task=8 launch.slurm.mem_gb=64
  launch.slurm.timeout_min=240 launch.slurm.account=... launch.slurm.qos=... launch.slurm.constraint=a100
  'launch.slurm.additional_parameters={{exclude: node7}}'   one SLURM job per run and evaluation (submitit)
  folds=[0,2]                            some test folds only (the pooled row then covers their instances)
  baseline=auto|zero_shot|none           the base model zero-shot on the same instances (auto: once it is here)
  dry_run=true                           print the plan (runs, evaluations, judge calls) and a time estimate;
                                         with no fold finished, it trains and evaluates the first one to time it
Examples:
  rescue-train cv recipe=ssp_lora model=tiny train.max_steps=2 data.folds=3 launch.config_file=cpu \\
      eval.bertscore=none output_dir=runs/cv/smoke
  rescue-train cv recipe=all_lora model=qwen2.5-7b-instruct data.source=/data/benchmark_191.jsonl \\
      launch.config_file=single_gpu eval.judge.backend=openai eval.judge.model=gpt-5.4 output_dir=runs/cv/qwen7b
More in docs/cv.md."""


def run(config: CvConfig) -> None:
    from ..cv.runner import cv

    outcome = cv(config)
    if config.dry_run:
        return
    print(outcome["report"].text)
    for note in outcome["results"]["notes"]:
        print(f"note: {note}")
    print(f"wrote {config.output_dir}/results.json (the pooled row: rescue-train report {config.output_dir}), "
          f"report.md, comparisons.json; the fold runs' model cards link it")


COMMAND = Command("cv", usage, lambda inputs, overrides: load_config(overrides), run, schema=CvConfig,
                  extra_keys=("recipe", "model", "data"))
