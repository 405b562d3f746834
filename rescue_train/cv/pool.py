"""Pooling: each fold's test-fold predictions into one results document over the benchmark's instances.

:func:`pool` is the check that makes the pooled row mean what the paper's rows mean: every instance of the
chosen folds is predicted exactly once, by the model of its own unit's fold (a model that never saw the
couple or family, in training or validation). It refuses, naming the instance, a missing one, one predicted
twice, one predicted by a fold whose training saw its unit, and one the benchmark does not have.

:func:`pooled_results` writes the pooled records as an ordinary eval results document (the ``report``,
``card`` and ``agreement`` commands read it): aggregates, Table 5 / Table 11 cells and error bars are computed
over the pooled records by the evaluator's own code (``evaluation.results.scored``), each record names its
``fold`` and ``run`` folder, and the document carries the folds' configuration, versions and split manifest.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Mapping, Sequence

from ..tasks import Instance

# Eval config keys that differ from fold to fold by construction (the rest must agree).
PER_FOLD_EVAL_KEYS = ("run", "adapter", "output_dir", "tokenizer")
PER_FOLD_DATA_KEYS = ("test_fold", "manifest")


class PoolingError(ValueError):
    """The fold predictions do not make one pooled row (a ValueError: the command line says it in one line)."""


def _shown(ids: Sequence[str], limit: int = 3) -> str:
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(map(repr, ids[:limit])) + more


def pool(instances: Sequence[Instance], assignment: Mapping[str, int | str],
         predicted: Mapping[int, Sequence[dict[str, Any]]], runs: Mapping[int, str]) -> list[dict[str, Any]]:
    """One record per instance of ``instances`` (in their order), each from the fold that predicted it, with
    ``fold`` and ``run`` added. ``assignment`` is the split manifest's unit -> fold; ``predicted`` each fold's
    records; ``runs`` each fold's training run folder."""
    expected = {inst.id: inst for inst in instances}
    pooled: dict[str, dict[str, Any]] = {}
    by_fold: dict[str, int] = {}
    for fold in sorted(predicted):
        for record in predicted[fold]:
            rid = record["id"]
            inst = expected.get(rid)
            unit = inst.unit if inst is not None else record.get("unit")
            if inst is not None and record.get("unit") not in (None, inst.unit):
                raise PoolingError(f"instance {rid!r}: fold {fold}'s record names unit {record.get('unit')!r}, the "
                                   f"benchmark's instance is in unit {inst.unit!r} (other data or build options?)")
            if unit is not None and unit in assignment and int(assignment[unit]) != fold:
                raise PoolingError(f"instance {rid!r} (unit {unit!r}, fold {assignment[unit]} in the split manifest) "
                                   f"was predicted by fold {fold}, whose training saw that unit")
            if inst is None:
                where = f"unit {unit!r}" if unit is not None else "no unit"
                raise PoolingError(f"instance {rid!r} ({where}) predicted by fold {fold} is not an instance of the "
                                   f"pooled folds' tasks (other data or build options?)")
            if rid in pooled:
                twice = f"twice by fold {fold}" if by_fold[rid] == fold else f"by folds {by_fold[rid]} and {fold}"
                raise PoolingError(f"instance {rid!r} (unit {unit!r}) was predicted {twice}")
            pooled[rid] = {**record, "fold": fold, "run": runs[fold]}
            by_fold[rid] = fold
    missing = [i for i in expected if i not in pooled]
    if missing:
        first = expected[missing[0]]
        raise PoolingError(f"{len(missing)} instance(s) without a prediction: {_shown(missing)} (the first: unit "
                           f"{first.unit!r}, fold {assignment.get(first.unit)} in the split manifest); was that "
                           f"fold's evaluation cut short or made with other settings?")
    return [pooled[i] for i in expected]


def _common(config: dict[str, Any]) -> dict[str, Any]:
    """A fold evaluation's config without what differs from fold to fold."""
    shared = {k: v for k, v in config.items() if k not in PER_FOLD_EVAL_KEYS}
    shared["data"] = {k: v for k, v in config.get("data", {}).items() if k not in PER_FOLD_DATA_KEYS}
    return shared


def check_folds(fold_results: Mapping[int, dict[str, Any]], manifest_hash: str, fingerprint: str,
                adapter_weights: Mapping[int, str]) -> None:
    """The fold evaluations belong together: one configuration and scoring, this split manifest and data, and
    each one evaluated the adapter its run folder holds now."""
    from ..evaluation.run_folder import differing_keys

    first = min(fold_results)
    for fold, results in fold_results.items():
        where = results.get("output_dir", f"fold {fold}")
        if results["split"]["manifest_hash"] != manifest_hash:
            raise PoolingError(f"{where}: evaluated with split manifest {results['split']['manifest_hash']}, the "
                               f"cross-validation uses {manifest_hash}")
        if results["split"].get("test_fold") != fold:
            raise PoolingError(f"{where}: evaluated test fold {results['split'].get('test_fold')}, not fold {fold}")
        if results["data"]["fingerprint"] != fingerprint:
            raise PoolingError(f"{where}: evaluated on data {results['data']['fingerprint']}, the benchmark now has "
                               f"fingerprint {fingerprint} (the source changed)")
        if results["model"].get("adapter_weights") != adapter_weights[fold]:
            raise PoolingError(f"{where}: evaluated other adapter weights than its run folder holds now (was the run "
                               f"trained again?); remove {where} so that it is evaluated again")
        differ = differing_keys(_common(fold_results[first]["config"]), _common(results["config"]))
        if differ:
            raise PoolingError(f"{where}: evaluated with other settings than fold {first} ({', '.join(differ[:3])})")
        if results["scoring_hash"] != fold_results[first]["scoring_hash"]:
            raise PoolingError(f"{where}: scored with other judge/BERTScore settings than fold {first}")


def pooled_results(plan, fold_results: Mapping[int, dict[str, Any]], settings_hash: str) -> dict[str, Any]:
    """The pooled results document of ``plan`` (a rescue_train.cv.plan.Plan) from its folds' results."""
    from ..evaluation.results import scored
    from ..evaluation.run_folder import RESULTS_FORMAT
    from ..provenance import weights_digest
    from ..provenance import config_hash, git_commit, versions
    from .plan import eval_dir, run_dir

    out, config, folds = plan.out, plan.config, plan.folds
    runs = {fold: str(run_dir(out, fold)) for fold in folds}
    weights = {fold: weights_digest(run_dir(out, fold) / "adapter") for fold in folds}
    check_folds(fold_results, plan.manifest.hash, plan.fingerprint, weights)
    records = pool(plan.pooled(), plan.manifest.assignment,
                   {fold: fold_results[fold]["records"] for fold in folds}, runs)
    first = fold_results[folds[0]]
    shared = _common(first["config"])
    eval_config = {**first["config"], **{k: None for k in PER_FOLD_EVAL_KEYS}, "run": list(runs.values()),
                   "output_dir": str(out), "data": {**first["config"]["data"], "test_fold": None,
                                                    "manifest": str((out / "split_manifest.json").resolve())}}
    model = config.training_config["model"]["name"]
    which = f"{len(folds)}-fold cv" if folds == list(range(plan.manifest.k)) else \
        f"cv folds {', '.join(map(str, folds))} of {plan.manifest.k}"
    return {
        "format": RESULTS_FORMAT,
        "label": f"{config.training_config['name']} {model}, {which}",
        "output_dir": str(out),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": eval_config,
        "prediction_hash": config_hash({f: fold_results[f]["prediction_hash"] for f in folds}),
        "scoring_hash": first["scoring_hash"],
        "model": {"base": first["model"]["base"], "tokenizer": None, "adapter": None, "adapter_weights": None,
                  "adapters": {str(f): fold_results[f]["model"]["adapter"] for f in folds},
                  "fold_adapter_weights": {str(f): weights[f] for f in folds},
                  "training_provenance": {str(f): fold_results[f]["model"]["training_provenance"] for f in folds}},
        "backend": first["backend"],
        "versions": versions(),
        "git_commit": git_commit(),
        "seed": shared.get("seed"),
        "data": {"source": plan.source, "fingerprint": plan.fingerprint, "notes": plan.load_notes},
        "split": {"scheme": "kfold", "manifest_hash": plan.manifest.hash, "seed": plan.manifest.seed,
                  "k": plan.manifest.k, "test_fold": None, "folds": folds, "manifest": "split_manifest.json",
                  "manifest_notes": plan.manifest.notes},
        "cv": {"recipe": config.recipe, "training": config.training, "eval": config.eval,
               "settings_hash": settings_hash, "launch": {"config_file": config.launch.config_file,
                                                          "args": config.launch.args},
               "folds": {str(f): {"run": runs[f], "eval": str(eval_dir(out, f)),
                                  "prediction_hash": fold_results[f]["prediction_hash"],
                                  "instances": len(fold_results[f]["records"])} for f in folds}},
        "notes": plan.notes,
        **scored(config.tasks, records, shared["judge"]["on_failure"]),
        "records": records,
    }
