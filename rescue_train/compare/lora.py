"""One LoRA run of a comparison: train through the ordinary training path, rank the test fold, record it.

The run is one :class:`~rescue_train.executor.Job` of two steps, each a subprocess and a public entry point
(the executor runs it on this machine or as a SLURM job, see ``launch.*``):

1. ``python -m rescue_train launch [--config_file F] --gpu_ids all --main_process_port 0 [launch.args] -m
   rescue_train train recipe=R <training overrides> seed=S data.test_fold=F balance.strategy=S output_dir=RUN``
   (``accelerate launch`` through ``rescue-train launch``, so whatever accelerate config the user gives applies
   and a failure ends with the training's own status; ``resume=auto`` continues an interrupted run from its
   last checkpoint, and a finished run is left as it is);
2. ``python -m rescue_train eval run=RUN protocol=rank tasks=[task] ...``: the run's adapter, base model and
   whole data configuration (so the prompts are the training prompts and the test fold is the run's);
   every candidate of every test-fold instance scored by its log-likelihood, so each prediction is a full
   ranking (a separate process, so a vLLM engine's GPU memory is freed between runs).

Logs go beside the run folder (``RUN.train.log``, ``RUN.rank_eval.log``: the run folder is the training's own,
which it marks and locks). A finished training (``provenance.json`` says so) is not repeated when the job runs
again. Once the job is done, :func:`lora_record` reads what it left into the record, which holds the ranked
predictions in the classifier runs' format, so the same statistics, tables and plots apply. :func:`lora_job` and
:func:`lora_record` are the two halves any experiment of LoRA runs uses.
"""

from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path
from typing import Any

from ..classifiers.classifier import LabelSpace
from ..executor import Job, Outcome, Step
from ..io import read_json
from ..jobs import rescue_train_command
from ..jobs import training_command as launched_training
from .config import CompareConfig

# What a run's record reads from the training's provenance and the rank evaluation's results.
RUN_PROVENANCE = {"adapter": str, "manifest_hash": str, "data": dict}
RANK_RESULTS = {"records": list, "prediction_hash": str, "backend": dict}


def balance_overrides(strategy_name: str) -> list[str]:
    """The training override that makes the recipe train under ``strategy_name`` (the same name train takes)."""
    return [f"balance.strategy={strategy_name}"]


def training_command(config: CompareConfig, strategy: str, fold: int, seed: int, run_dir: Path) -> list[str]:
    """The run's training command line: :func:`rescue_train.jobs.training_command`, the one cv uses too."""
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


def problems(config: CompareConfig) -> list[str]:
    """What would stop the runs, found before the first one starts: the executor's settings (sbatch, GPUs) and vLLM
    for ``rank.backend=vllm`` (imported by a fresh interpreter, as each rank evaluation will)."""
    from ..jobs import problems as executor_problems
    from ..inference.factory import backend_problems

    return executor_problems(config.launch) + backend_problems(config.rank.backend, prefix="rank.",
                                                               separate_process=True)


def training_finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a finished training run (its provenance says so; a killed one says running)."""
    try:
        return read_json(run_dir / "provenance.json", {}, "a training run's provenance").get("status") == "finished"
    except (OSError, ValueError):
        return False


def run_folder(work_dir: Path, strategy: str, fold: int, seed: int) -> Path:
    return (work_dir / strategy / f"fold{fold}_seed{seed}").resolve()


def log_of(run_dir: Path, step: str) -> Path:
    """Where a run's step logs: beside the run folder, which the training command makes and owns."""
    return run_dir.with_name(f"{run_dir.name}.{step}.log")


def lora_job(config: CompareConfig, strategy: str, fold: int, seed: int, work_dir: Path, record: Path) -> Job:
    """The job of one (strategy, fold, seed): train, then rank the test fold; done once ``record`` exists."""
    run_dir = run_folder(work_dir, strategy, fold, seed)
    return Job(f"{strategy}/fold{fold}_seed{seed}", [
        Step(training_command(config, strategy, fold, seed, run_dir), log_of(run_dir, "train"),
             done=partial(training_finished, run_dir)),
        Step(rank_command(config, run_dir, run_dir / "rank_eval"), log_of(run_dir, "rank_eval")),
    ], done=record.exists)


def _check_test_fold(records: list[dict], splits: dict, run_dir: Path) -> None:
    """The ranked instances must be exactly the comparison's test-fold instances (same data, same options)."""
    ranked = {r["id"] for r in records}
    expected = {row["id"] for row in splits["test"].rows}
    if ranked != expected:
        raise ValueError(f"{run_dir}: the rank evaluation covered {len(ranked)} test instances, the comparison's "
                         f"test fold holds {len(expected)} (only ranked: {sorted(ranked - expected)[:3]}, only "
                         f"expected: {sorted(expected - ranked)[:3]}); were the data settings changed?")


def lora_record(config: CompareConfig, splits: dict, space: LabelSpace, strategy: str, fold: int, seed: int,
                work_dir: Path, outcome: Outcome) -> dict[str, Any]:
    """The JSON-ready record of one finished (strategy, fold, seed) job: what its two steps left in its run folder."""
    run_dir = run_folder(work_dir, strategy, fold, seed)
    provenance = read_json(run_dir / "provenance.json", RUN_PROVENANCE, "a training run's provenance")
    eval_dir = run_dir / "rank_eval"
    results = read_json(eval_dir / "results.json", RANK_RESULTS, "an evaluation's results")
    records = results["records"]
    _check_test_fold(records, splits, run_dir)
    if not config.launch.keep_checkpoints:
        shutil.rmtree(run_dir / "checkpoints", ignore_errors=True)  # the adapter stays
    predictions = [{"id": r["id"], "task": r["task"], "scenario": r["scenario"], "unit": r["unit"],
                    "sample_id": r["sample_id"], "gold": r["gold"], "prediction": r["prediction"],
                    "parse_status": r["parse_status"], "raw": None, "label_scores": r["loglik"]} for r in records]
    counts = splits["train"].counts(len(space))
    return {"strategy": strategy, "fold": fold, "seed": seed, "tau": None,
            "seconds": outcome.seconds, "train_seconds": outcome.step_seconds[0],
            "train_counts": dict(zip(space.names, counts.tolist())),
            "sizes": {role: len(s) for role, s in splits.items()},
            "learner_info": {"run_dir": str(run_dir), "adapter": str(run_dir / provenance["adapter"]),
                             "balance": balance_overrides(strategy), "global_step": provenance.get("global_step"),
                             "train_metrics": provenance.get("metrics"),
                             "dropped_too_long": provenance.get("dropped_too_long"),
                             "manifest_hash": provenance["manifest_hash"],
                             "data_fingerprint": provenance["data"]["data_fingerprint"],
                             "executor": outcome.executor,
                             "rank_eval": {"results": str(eval_dir / "results.json"),
                                           "prediction_hash": results["prediction_hash"],
                                           "backend": results["backend"]}},
            "predictions": predictions}


# Post-hoc strategies of LoRA runs re-rank the saved rank scores of the plain run of the same fold and seed: no
# training of their own. tau = 1 is the adjustment that is Bayes-optimal for the balanced error (Menon et al. 2021);
# the plain run ranks only its test fold, so there are no validation scores to choose another on.
POSTHOC_BASE = "none"
POSTHOC_TAU = 1.0


def reranks(strategy: str) -> bool:
    """Whether a LoRA comparison's ``strategy`` is a post-hoc adjustment of another run's scores (no training)."""
    from ..rebalance import STRATEGIES

    return STRATEGIES[strategy].posthoc != "none"


def posthoc_record(config: CompareConfig, splits: dict, space: LabelSpace, strategy: str, base: dict[str, Any],
                   base_path: Path) -> dict[str, Any]:
    """``base`` (the plain run's record) re-ranked under ``strategy``: each candidate's score becomes
    log p(c | x) - tau log pi_c (``calibration=prior`` of the evaluator, rescue_train.scoring.calibration), pi the
    add-one smoothed class prior of the task and scenario in the fold's training instances."""
    import time

    from ..scoring.calibration import calibrated, class_prior, ranking
    from ..scoring.metrics import instance_scores
    from ..tasks import get_task

    started = time.perf_counter()
    class_of = get_task(config.task).class_key
    trained: dict[str, list[str]] = {}
    for row in splits["train"].rows:
        trained.setdefault(row["scenario"], []).append(class_of(row["label"]))
    predictions = []
    for p in base["predictions"]:
        candidates = list(p["label_scores"])
        prior = class_prior(trained.get(p["scenario"], []), list(dict.fromkeys(class_of(c) for c in candidates)))
        scores = calibrated({"id": p["id"], "loglik": p["label_scores"]}, "prior", prior=prior, tau=POSTHOC_TAU,
                            class_of=class_of)
        order = ranking(scores, candidates)
        instance_scores(config.task, p["gold"], order)  # the ranking must score as a prediction of the task
        predictions.append({**p, "prediction": order, "label_scores": scores})
    return {**{k: base[k] for k in ("fold", "seed", "train_counts", "sizes")}, "strategy": strategy,
            "tau": POSTHOC_TAU, "seconds": time.perf_counter() - started, "train_seconds": 0.0,
            "learner_info": {"reranks": str(base_path), "calibration": "prior", "tau": POSTHOC_TAU,
                             "tau_note": "fixed: the plain run ranks no validation fold",
                             "manifest_hash": base["learner_info"]["manifest_hash"],
                             "rank_eval": base["learner_info"]["rank_eval"]},
            "predictions": predictions}
