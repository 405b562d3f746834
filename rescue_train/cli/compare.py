"""``rescue-train compare``: rebalancing strategies x test folds x seeds (rescue_train.compare)."""

from __future__ import annotations

from pathlib import Path

from .. import rebalance
from ..classifiers import balance  # noqa: F401  (registers the classifiers as learners)
from ..compare.config import CompareConfig, load_config, lora_strategies
from .base import Command


def usage() -> str:
    return f"""usage: rescue-train compare recipe=NAME|PATH.yaml [key=value ...] [--cfg]
       rescue-train compare merge=[DIR,DIR,...] output_dir=DIR  one table from finished comparisons of a task

  recipe=rpp_cls|ssp_cls|stp_cls|itp_cls       a classifier recipe (kind: classifier; or a path to your own YAML)
  recipe=rpp_lora|ssp_lora|stp_lora|itp_lora   fine-tuned LLMs (kind: lora): every run is `accelerate launch ... train`
  learner=sklearn|torch                        classifiers: TF-IDF + logistic regression, or a transformer
  strategies=[none,inverse_freq,...]|all       rebalancing strategies (`none` is always added)
  seeds=[0,1]  test_folds=[0,1]                training seeds; test folds (default: all data.folds)
  output_dir=runs/compare/x                    results.json, results.md, PNG plots, runs/ (resumable)
  dry_run=true                                 print the number of runs and a time estimate (from a first run)
  evaluation.permutations=1000 evaluation.bootstrap=1000   resamples of the tests and intervals
  classifiers: torch.model=tiny-bert|tiny|PATH|HUB_ID torch.steps=200 torch.lora=true balance.beta=0.999 ...
  LLMs: any training override for every run (model=qwen2.5-7b-instruct train.max_steps=300
        train.max_length=4096 data.source=... data.context=40), launch.config_file=single_gpu (configs/accelerate)
        'launch.args=--num_processes 2' rank.backend=hf|vllm rank.batch_size=8 rank.args=[max_model_len=8192]
  LLMs, where the runs execute: launch.parallel=8 (8 at once, a GPU each) launch.gpus_per_run=2,
        or launch.executor=slurm launch.slurm.partition=gpu launch.slurm.gpus_per_node=1 (a SLURM job each)

strategies (sklearn): {', '.join(rebalance.strategies_for('sklearn'))}
strategies (torch): {', '.join(rebalance.strategies_for('torch'))}
strategies (lora, the training recipe's balance.strategy): {', '.join(lora_strategies())}
(a LoRA recipe's training keys: rescue-train train recipe=NAME --help)"""


def load(inputs: list[str], overrides: list[str]):
    if any(a.split("=", 1)[0] == "merge" for a in overrides):
        from ..compare.merge import load_merge_config

        return load_merge_config(overrides)
    return load_config(overrides)


def counted(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def run(config) -> None:
    from ..compare.merge import MergeConfig, merge
    from ..compare.runner import compare

    if isinstance(config, MergeConfig):
        out = Path(config.output_dir)
        results = merge([Path(f) for f in config.merge], out, config.evaluation, config.plots)
    else:
        out = Path(config.output_dir)
        results = compare(config)
        if config.dry_run:
            estimate = results["dry_run"]
            left = estimate["seconds_left"]
            print(f"{estimate['runs']} runs ({counted(len(config.strategies), 'strategy', 'strategies')} x "
                  f"{counted(estimate['folds'], 'fold')} x {counted(len(config.seeds), 'seed')}): "
                  f"{estimate['finished']} finished, {estimate['to_run']} to run"
                  + ("" if left is None else f"; about {estimate['seconds_per_run']:.0f} s per run (mean of the "
                     f"finished runs), so about {left / 3600:.2f} h left"))
            return
    print((out / "results.md").read_text())
    print(f"wrote {out}/results.json, results.md" + "".join(f", {p}" for p in results.get("plots", [])))


COMMAND = Command("compare", usage, load, run, schema=CompareConfig, extra_keys=("recipe", "merge", "model", "data"))
