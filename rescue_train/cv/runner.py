"""The cross-validation from start to end: check the settings, plan, train, evaluate, pool, report.

Resuming is rerunning the same command: a finished training run (its provenance says ``finished``) and a
finished evaluation (its ``results.json`` exists) are skipped; an interrupted training run resumes from its
last checkpoint, an interrupted evaluation from its last finished instance (the ordinary commands' own
resume). Another configuration in the same ``output_dir`` is refused, naming what changed.

Every job goes through :func:`rescue_train.executor.run_jobs` under the ``launch.*`` settings (local slots or SLURM
jobs), in two phases of independent jobs; what those settings and the evaluations need (sbatch, GPUs, vLLM, the
judge's endpoint) is checked before anything is written or trained, the dry run included.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from ..executor import Job, Outcome
from ..settings import ConfigError
from .config import CvConfig, eval_arguments, settings
from .plan import (ZERO_SHOT, Plan, announce, describe, estimate, eval_dir, fold_eval_jobs, prepare, read_timings,
                   recorder, run_dir, settle_baseline, sharing_one_engine, trained, training_jobs,
                   zero_shot_job)


def check_settings(config: CvConfig, plan: Plan) -> str:
    """The settings hash (with the split manifest and the data's fingerprint); refuses an output folder holding a
    cross-validation made with other settings."""
    from ..evaluation.run_folder import differing_keys
    from ..io import write_json_atomic
    from ..provenance import config_hash

    body = {**settings(config), "manifest_hash": plan.manifest.hash, "source_fingerprint": plan.fingerprint}
    body = json.loads(json.dumps(body, default=str))
    digest = config_hash(body)
    stamp = plan.out / "cv_config.json"
    if stamp.exists():
        previous = json.loads(stamp.read_text())
        if previous["settings_hash"] != digest:
            changed = differing_keys(previous["settings"], body)
            shown = "; ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
            raise ValueError(f"{plan.out} holds a cross-validation made with other settings (changed: {shown}); "
                             "use another output_dir")
    else:
        write_json_atomic(stamp, {"settings_hash": digest, "settings": body})
    return digest


def _drop_checkpoints(plan: Plan) -> None:
    if plan.config.launch.keep_checkpoints:
        return
    for fold in plan.folds:
        folder = run_dir(plan.out, fold)
        if trained(folder):  # trainer checkpoints only serve resuming; the adapter stays
            shutil.rmtree(folder / "checkpoints", ignore_errors=True)


def _load(folder: Path) -> dict[str, Any]:
    from ..evaluation.report import load_results

    return load_results(folder)


def write_cards(plan: Plan, pooled: dict[str, Any], fold_results: dict[int, dict[str, Any]]) -> None:
    """Each fold's model card: its own test-fold results, and a link to the pooled row (shown apart)."""
    from ..model_card import write_model_card

    for fold in plan.folds:
        folder = run_dir(plan.out, fold)
        write_model_card(folder, [fold_results[fold]], cross_validation={
            "results": pooled, "fold": fold, "path": os.path.relpath(plan.out / "results.json", folder)})


def write_report(plan: Plan, pooled: dict[str, Any]):
    """``OUT/report.md`` (the pooled row beside the paper's ten LLMs and, with the baseline, the zero-shot row and
    the paired differences pooled − zero-shot), ``comparisons.json`` and the plots."""
    from ..evaluation.report import build, write

    results = [pooled]
    if plan.baseline:
        zero_shot = _load(eval_dir(plan.out, ZERO_SHOT))
        zero_shot["report_name"] = f"{Path(zero_shot['model']['base']).name} zero-shot [{zero_shot['config']['protocol']}]"
        results.append(zero_shot)
    report = build(results, reference=len(results) - 1)
    write(report, results, plan.out, plan.config.plots)
    return report


def problems(config: CvConfig) -> list[str]:
    """What would stop the cross-validation, found before any folder is made or run starts (each one line): the
    executor's settings (``launch.executor``, ``launch.parallel`` x ``launch.gpus_per_run`` GPUs, sbatch and the
    partition for SLURM) and what every evaluation needs (vLLM for ``eval.backend=vllm``, the judge's endpoint)."""
    from ..evaluation.config import load_config as load_eval_config
    from ..evaluation.models import problems_before_work
    from ..jobs import problems as executor_problems

    evaluation = load_eval_config(eval_arguments(config))
    return executor_problems(config.launch) + [f"eval.{p}" for p in problems_before_work(evaluation)]


def run_phase(plan: Plan, jobs: list[Job], title: str) -> list[Outcome]:
    """Hand one phase's jobs (independent of each other) to the executor (``launch.*``), which runs those not done
    yet; each finished job is recorded in jobs.json as it ends. When some fail, the others still run and are
    recorded, then one error names every failed job with its log's tail (exit 2)."""
    from ..executor import run_jobs

    for job in jobs:
        if job.done is None or not job.done():
            announce(job)
    outcomes = run_jobs(jobs, plan.config.launch, plan.out / "executor", title=title, on_done=recorder(plan))
    failed = [o for o in outcomes if o.state == "failed"]
    if failed:
        raise ValueError(f"{len(failed)} of {len(outcomes)} {title} failed ({', '.join(o.job.name for o in failed)}; "
                         "the others are recorded; rerun the same command to retry the failed ones):\n"
                         + "\n".join(o.message for o in failed))
    return outcomes


def first_fold(plan: Plan, training: list, evaluations: list) -> None:
    """The dry run's real run when no timed fold is finished: the first fold's training and evaluation (what of
    them is not done yet), timed and kept: the real command continues after them."""
    print(f"dry run: no training run and evaluation timed yet; running fold {plan.folds[0]}'s to time them",
          flush=True)
    run_phase(plan, training[:1], "cv training runs")
    run_phase(plan, evaluations[:1], "cv evaluations")


def cv(config: CvConfig) -> dict[str, Any]:
    """Run (or resume) the cross-validation of ``config``; returns ``{"results": the pooled results document,
    "report": the evaluation.report.Report of OUT/report.md}``, or with ``dry_run`` ``{"dry_run": the plan}``."""
    from ..io import write_json_atomic
    from .pool import pooled_results

    found = problems(config)
    if found:
        raise ConfigError("; ".join(found))
    out = Path(config.output_dir).resolve()  # every job's paths are absolute: a SLURM job runs elsewhere
    plan = prepare(config, out)
    digest = check_settings(config, plan)
    training, evaluations = training_jobs(plan), fold_eval_jobs(plan)
    if config.dry_run:
        if estimate(plan, read_timings(out)) is None:
            print(describe(plan), flush=True)
            first_fold(plan, training, evaluations)
        text = describe(plan)
        print(text)
        return {"dry_run": text}
    print(describe(plan), flush=True)
    run_phase(plan, training, "cv training runs")  # phase 1: the training runs (independent of each other)
    _drop_checkpoints(plan)
    settle_baseline(plan)
    if plan.baseline:  # its base model and tokenizer are the finished runs'
        evaluations.append(zero_shot_job(plan))
    # phase 2: the evaluations (independent of each other; on one machine, one engine for all)
    run_phase(plan, sharing_one_engine(plan, evaluations), "cv evaluations")
    fold_results = {fold: _load(eval_dir(out, fold)) for fold in plan.folds}
    pooled = pooled_results(plan, fold_results, digest)
    write_json_atomic(out / "results.json", pooled)
    write_cards(plan, pooled, fold_results)
    return {"results": pooled, "report": write_report(plan, pooled)}
