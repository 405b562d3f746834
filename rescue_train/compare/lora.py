"""One LoRA run of a comparison: train through the ordinary training path, rank the test fold, record it.

The run is two subprocesses, each a public entry point:

1. ``python -m accelerate.commands.launch [--config_file F] [launch.args] -m rescue_train train recipe=R
   <training overrides> seed=S data.test_fold=F balance.strategy=S output_dir=RUN``
   (``accelerate launch``, so whatever accelerate config the user gives applies; ``resume=auto`` continues
   an interrupted run from its last checkpoint);
2. ``python -m rescue_train eval run=RUN protocol=rank tasks=[task] ...``: the run's adapter, base model and
   whole data configuration (so the prompts are the training prompts and the test fold is the run's);
   every candidate of every test-fold instance scored by its log-likelihood, so each prediction is a full
   ranking (a separate process, so a vLLM engine's GPU memory is freed between runs).

Logs go to ``RUN/train.log`` and ``RUN/rank_eval.log``. The record holds the ranked predictions in the
classifier runs' format, so the same statistics, tables and plots apply.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from ..classifiers.classifier import LabelSpace
from ..jobs import call, rescue_train_command
from ..jobs import training_command as launched_training
from .config import CompareConfig


def balance_overrides(strategy_name: str) -> list[str]:
    """The training override that makes the recipe train under ``strategy_name`` (the same name train takes)."""
    return [f"balance.strategy={strategy_name}"]


def training_command(config: CompareConfig, strategy: str, fold: int, seed: int, run_dir: Path) -> list[str]:
    overrides = list(config.training)
    if not any(o.split("=", 1)[0] == "train.eval_steps" for o in overrides):
        # Only the test fold's ranking is used; the validation loss would cost time and nothing else.
        overrides.append("train.eval_steps=0")
    return launched_training(config.launch, config.recipe,
                             [*overrides, f"seed={seed}", f"data.test_fold={fold}", *balance_overrides(strategy)],
                             run_dir)


def rank_command(config: CompareConfig, run_dir: Path, eval_dir: Path) -> list[str]:
    """``rescue-train eval`` of the run on its own test fold; ``run=`` gives it the run's data configuration, so
    the prompts are those it trained on."""
    return rescue_train_command("eval", f"run={run_dir}", "protocol=rank", f"tasks=[{config.task}]",
                                f"backend={config.rank.backend}", f"batch_size={config.rank.batch_size}",
                                f"rank_score={config.rank.rank_score}", "bertscore=none", "judge=none",
                                "progress=false", f"output_dir={eval_dir}", *map(str, config.rank.args))


def _check_test_fold(records: list[dict], splits: dict, run_dir: Path) -> None:
    """The ranked instances must be exactly the comparison's test-fold instances (same data, same options)."""
    ranked = {r["id"] for r in records}
    expected = {row["id"] for row in splits["test"].rows}
    if ranked != expected:
        raise ValueError(f"{run_dir}: the rank evaluation covered {len(ranked)} test instances, the comparison's "
                         f"test fold holds {len(expected)} (only ranked: {sorted(ranked - expected)[:3]}, only "
                         f"expected: {sorted(expected - ranked)[:3]}); were the data settings changed?")


def run_lora(config: CompareConfig, splits: dict, space: LabelSpace, strategy: str, fold: int, seed: int,
             work_dir: Path) -> dict[str, Any]:
    """Train and rank one (strategy, fold, seed) of a LoRA comparison; returns the JSON-ready run record."""
    run_dir = (work_dir / strategy / f"fold{fold}_seed{seed}").resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.time()
    call(training_command(config, strategy, fold, seed, run_dir), run_dir / "train.log",
         f"training run {strategy} fold {fold} seed {seed}")
    trained = time.time()
    provenance = json.loads((run_dir / "provenance.json").read_text())
    eval_dir = run_dir / "rank_eval"
    call(rank_command(config, run_dir, eval_dir), run_dir / "rank_eval.log",
         f"rank evaluation of {strategy} fold {fold} seed {seed}")
    results = json.loads((eval_dir / "results.json").read_text())
    records = results["records"]
    _check_test_fold(records, splits, run_dir)
    if not config.launch.keep_checkpoints:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # the adapter stays
    predictions = [{"id": r["id"], "task": r["task"], "scenario": r["scenario"], "unit": r["unit"],
                    "sample_id": r["sample_id"], "gold": r["gold"], "prediction": r["prediction"],
                    "parse_status": r["parse_status"], "raw": None, "label_scores": r["loglik"]} for r in records]
    counts = splits["train"].counts(len(space))
    return {"strategy": strategy, "fold": fold, "seed": seed, "tau": None,
            "seconds": round(time.time() - started, 3), "train_seconds": round(trained - started, 3),
            "train_counts": dict(zip(space.names, counts.tolist())),
            "sizes": {role: len(s) for role, s in splits.items()},
            "learner_info": {"run_dir": str(run_dir), "adapter": str(run_dir / provenance["adapter"]),
                             "balance": balance_overrides(strategy), "global_step": provenance.get("global_step"),
                             "train_metrics": provenance.get("metrics"),
                             "dropped_too_long": provenance.get("dropped_too_long"),
                             "manifest_hash": provenance["manifest_hash"],
                             "data_fingerprint": provenance["data"]["data_fingerprint"],
                             "rank_eval": {"results": str(eval_dir / "results.json"),
                                           "prediction_hash": results["prediction_hash"],
                                           "backend": results["backend"]}},
            "predictions": predictions}
