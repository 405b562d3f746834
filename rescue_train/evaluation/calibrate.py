"""``calibration=``: the rank protocol's records re-ranked after prediction (``scoring.calibration`` holds the
methods). A calibrated run keeps the raw log-likelihoods and the scores without the dialogue, so any method
re-ranks it later without the model (``report --calibration``); ``none`` leaves everything as it was.

``prior`` needs a trained model: the prior is the class distribution of the task and scenario in its run's
training fold, and tau (unless ``calibration_tau`` fixes it) the value of ``TAU_GRID`` whose adjusted ranking has
the best balanced accuracy on the run's validation fold (those instances are ranked once more, and kept in the
results under ``calibration.validation``).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Sequence

from ..scoring.calibration import choose_tau, class_prior, rerank
from ..tasks import TASKS
from .results import label, scored


def training_prior(run, built: dict[str, list]) -> dict[str, dict[str, dict[str, float]]]:
    """task -> scenario -> class -> its smoothed share in ``run``'s training fold (``built``: every instance of
    each task, as the benchmark builds them)."""
    roles = run.manifest.roles(run.data.test_fold if run.data.split == "kfold" else 0)
    prior: dict[str, dict[str, dict[str, float]]] = {}
    for task, instances in built.items():
        if not TASKS[task].closed_set:
            continue
        key = TASKS[task].class_key
        spaces = TASKS[task].label_space() or {}
        for scenario in sorted({i.scenario for i in instances}):
            trained = [key(i.gold) for i in instances if i.scenario == scenario and roles.get(i.unit) == "train"]
            space = [key(c) for c in spaces.get(scenario, ())] or sorted(
                {key(c) for i in instances if i.scenario == scenario for c in i.candidates})
            prior.setdefault(task, {})[scenario] = class_prior(trained, list(dict.fromkeys(space)))
    return prior


def validation_instances(run, built: dict[str, list]) -> list:
    """The closed-set instances of ``run``'s validation fold."""
    roles = run.manifest.roles(run.data.test_fold if run.data.split == "kfold" else 0)
    return [i for instances in built.values() for i in instances
            if TASKS[i.task].closed_set and roles.get(i.unit) == "validation"]


def settings(cfg, prior: dict | None, tau: dict[str, float] | float | None):
    """record -> the keyword settings of :func:`rerank` for it under ``cfg.calibration``."""
    def of(record: dict) -> dict[str, Any]:
        out: dict[str, Any] = {"rank_score": cfg.rank_score}
        if cfg.calibration == "prior":
            out.update(prior=prior[record["task"]][record["scenario"]], class_of=TASKS[record["task"]].class_key,
                       tau=tau[record["task"]] if isinstance(tau, dict) else tau)
        return out
    return of


def chosen_taus(cfg, prior: dict, validation: Sequence[dict]) -> dict[str, dict[str, Any]]:
    """Per task, the tau of the best balanced accuracy on the run's validation records (and every tau's)."""
    found = {}
    for task in sorted({r["task"] for r in validation}):
        records = [r for r in validation if r["task"] == task]
        tau, scores = choose_tau(records, lambda r: prior[r["task"]][r["scenario"]], rank_score=cfg.rank_score,
                                 class_of=TASKS[task].class_key)
        found[task] = {"tau": tau, "validation_balanced_accuracy": {str(t): v for t, v in scores.items()},
                       "validation_instances": len(records)}
    return found


def check(cfg, variant) -> None:
    """Refuse ``prior`` for a model no training run stands behind, before any work."""
    if cfg.calibration == "prior" and variant.run is None:
        raise ValueError(f"calibration=prior adjusts by the class prior of a trained model's training fold: "
                         f"{variant.name} has no training run (give run=RUN_DIR or adapter=RUN_DIR; for a "
                         "zero-shot model use calibration=contextual or pmi)")


def calibrate(cfg, records: list[dict], variant, built: dict[str, list] | None,
              predict_validation: Callable[[list], list[dict]] | None = None) -> dict[str, Any] | None:
    """Re-rank ``records`` (in place) under ``cfg.calibration``; returns what the results say of it (None for
    ``none``). ``built`` and ``predict_validation`` serve ``prior``: the benchmark's instances and a way to rank
    the run's validation instances."""
    if cfg.calibration == "none":
        return None
    about: dict[str, Any] = {"method": cfg.calibration}
    prior = tau = None
    if cfg.calibration == "prior":
        check(cfg, variant)
        prior = training_prior(variant.run, built)
        about.update(prior=prior, training_run=str(variant.run.folder))
        if cfg.calibration_tau is not None:
            tau = cfg.calibration_tau
            about["tau"] = tau
        else:
            validation = validation_instances(variant.run, built)
            asked = [i for task in cfg.tasks for i in [j for j in validation if j.task == task][:cfg.limit]]
            if not asked:
                raise ValueError(f"calibration=prior: {variant.run.folder} has no validation instances of "
                                 f"{', '.join(cfg.tasks)} to choose tau on; give calibration_tau=<number>")
            validation = predict_validation(asked)
            choice = chosen_taus(cfg, prior, validation)
            tau = {task: c["tau"] for task, c in choice.items()}
            about.update(tau=tau, tau_choice=choice, validation=validation)
    of = settings(cfg, prior, tau)
    for i, record in enumerate(records):
        if record.get("loglik"):
            if cfg.calibration == "prior" and isinstance(tau, dict) and record["task"] not in tau:
                raise ValueError(f"calibration=prior: no validation instance of {record['task']} to choose tau on; "
                                 "give calibration_tau=<number>")
            records[i] = rerank(record, cfg.calibration, **of(record))
    return about


def recalibrated(results: dict[str, Any], method: str) -> dict[str, Any]:
    """A saved result's ranked records re-ranked under ``method`` and scored again, without the model (the
    scores it needs are in the records: contextual and pmi need a calibrated run's, prior the training prior and
    tau a prior run saved)."""
    config = results.get("config") or {}
    ranked = [r for r in results["records"] if r.get("loglik")]
    if not ranked:
        raise ValueError(f"{results.get('output_dir')}: no ranked records (protocol=rank) to re-rank under "
                         f"calibration={method}")
    saved = results.get("calibration") or {}
    about: dict[str, Any] = {"method": method, "re_ranked_from": config.get("calibration", "none")}
    if method == "prior":
        if "prior" not in saved:
            raise ValueError(f"{results.get('output_dir')}: re-ranking under calibration=prior needs the training "
                             "fold's prior, which only a calibration=prior evaluation of a trained run saves")
        about.update(prior=saved["prior"], tau=saved["tau"])
    of = settings(SimpleNamespace(calibration=method, rank_score=config.get("rank_score", "sum")),
                  saved.get("prior"), saved.get("tau"))
    records = [rerank(r, method, **of(r)) if r.get("loglik") else r for r in results["records"]]
    tasks = list(results["aggregates"])
    name = results.get("label", "").split(" [")[0]
    named = {"report_name": label(results["report_name"].split(" [")[0], method)} if "report_name" in results else {}
    return {**results, **named, **scored(tasks, records, config.get("judge", {}).get("on_failure", "floor")),
            "label": label(name, method), "config": {**config, "calibration": method},
            "calibration": about, "records": records}
