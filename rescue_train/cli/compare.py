"""``rescue-train compare``: rebalancing strategies x test folds x seeds (rescue_train.compare)."""

from __future__ import annotations

from ..classifiers import balance
from ..compare.config import BACKENDS, CompareConfig, load_config
from ..compare.runner import compare

USAGE = """usage: rescue-train compare recipe=NAME|PATH.yaml [key=value ...] [--cfg]
       rescue-train compare merge=[DIR,DIR,...] output_dir=DIR  one table from finished comparisons of a task

  recipe=rpp_cls|ssp_cls|stp_cls|itp_cls   a shipped classifier recipe (or a path to your own YAML)
  recipe=rpp_lora|ssp_lora|stp_lora|itp_lora   fine-tuned LLMs: every run is `accelerate launch ... train`
  backend=sklearn|torch                     classifiers: TF-IDF + logistic regression, or a transformer
  strategies=[none,inverse_freq,...]|all    rebalancing strategies (`none` is always added)
  seeds=[0,1]  test_folds=[0,1]             training seeds; test folds (default: all data.folds)
  output_dir=runs/compare/x                 results.json, results.md, PNG plots, runs/ (resumable)
  dry_run=true                              print the number of runs and a time estimate (from a first run)
  evaluation.permutations=1000 evaluation.bootstrap=1000   resamples of the tests and intervals
  classifiers: torch.model=tiny-bert|tiny|PATH|HUB_ID torch.steps=200 torch.lora=true balance.beta=0.999 ...
  LLMs: any training override for every run (model=qwen2.5-7b-instruct train.max_steps=300
        train.max_length=4096 data.source=... data.context=40), launch.config_file=configs/accelerate/single_gpu.yaml
        'launch.args=--num_processes 2' rank.backend=hf|vllm rank.batch_size=8 rank.args=[max_model_len=8192]
"""


def _strategy_lines() -> str:
    return "\n".join(f"strategies ({backend}): " + ", ".join(balance.strategies_for(backend)) for backend in BACKENDS)


def main(argv: list[str]) -> int:
    from pathlib import Path

    from ..settings import describe, plain_warnings, to_yaml

    plain_warnings()
    if not argv or any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE + _strategy_lines())
        print("\nkeys (key  type = default  meaning; a LoRA recipe's training keys: rescue-train train --help):\n"
              + "\n".join(describe(CompareConfig, skip=("training", "training_config"))))
        return 0
    if any(a.lstrip("+").startswith("merge=") for a in argv):
        from ..compare.merge import merge_main

        return merge_main(argv)
    config = load_config([a for a in argv if a != "--cfg"])
    if "--cfg" in argv:
        print(to_yaml(config))
        return 0
    results = compare(config)
    out = Path(config.output_dir)
    if config.dry_run:
        estimate = results["dry_run"]
        left = estimate["seconds_left"]
        print(f"{estimate['runs']} runs ({len(config.strategies)} strategies x folds x {len(config.seeds)} seeds): "
              f"{estimate['finished']} finished, {estimate['to_run']} to run"
              + ("" if left is None else f"; about {estimate['seconds_per_run']:.0f} s per run (mean of the "
                 f"finished runs), so about {left / 3600:.2f} h left"))
        return 0
    print((out / "results.md").read_text())
    print(f"wrote {out}/results.json, results.md" + "".join(f", {p}" for p in results.get("plots", [])))
    return 0
