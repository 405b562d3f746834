"""The comparison's runs: data preparation, one (strategy, test fold, seed) run per backend, resuming, and
the ``compare`` entry that ties runs, statistics and report together."""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .. import balance
from ..classifier import LabelSpace, fold_splits, load_cls_rows
from .config import CompareConfig, run_settings
from .report import markdown, plots
from .stats import summarise

STATS_NOTE = {"interval": "percentile bootstrap over units",
              "test": "paired permutation test over units (scipy.stats.permutation_test, permutation_type='samples': "
                      "swap the two strategies' predictions unit by unit), two-sided; exact over all 2^u swap "
                      "patterns when 2^u <= evaluation.permutations, else random patterns with p=(extreme+1)/(R+1)",
              "multiple_testing": "Holm (statsmodels multipletests) over all tests of one metric"}

def prepare_data(config: CompareConfig, out: Path):
    from ...convert import ConvertConfig, convert
    from ...data.config import plain
    from ...data.splits import SplitManifest

    data_dir = Path(config.data.converted) if config.data.converted else out / "data"
    if not config.data.converted and not (data_dir / config.task / "cls").exists():
        convert(ConvertConfig(data=plain(config.data), out=str(data_dir), tasks=[config.task]))
    manifest = SplitManifest.load(data_dir / "split_manifest.json")
    if manifest.scheme != "kfold":
        raise ValueError(f"{data_dir}: classifiers need a k-fold split manifest, found scheme {manifest.scheme!r}")
    meta_path = data_dir / "convert_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return load_cls_rows(data_dir, config.task), manifest, data_dir, meta


def _ranked(row: dict, scores: np.ndarray, space: LabelSpace) -> tuple[list[str], dict[str, float | None]]:
    """The instance's candidates ordered by score (ties keep candidate order) and the scores by label."""
    by_label = {name: float(scores[space.index(row["scenario"], name)]) for name in row["label_names"]}
    ranking = sorted(row["label_names"], key=lambda name: -by_label[name])
    return ranking, {k: (v if np.isfinite(v) else None) for k, v in by_label.items()}


def fold_data(rows, manifest, space: LabelSpace, fold: int) -> dict:
    """train / validation / test splits of test fold ``fold`` (validation = the next fold)."""
    splits = fold_splits(rows, manifest.roles(fold), space)
    if not len(splits["train"]) or not len(splits["test"]):
        raise ValueError(f"test fold {fold}: {len(splits['train'])} training and {len(splits['test'])} test "
                         f"instances; every fold needs both (use fewer folds: data.folds=...)")
    return splits


def run_one(config: CompareConfig, splits: dict, space: LabelSpace, strategy_name: str, fold: int, seed: int,
            work_dir: Path, cache: dict, keep_model: bool = False) -> dict:
    """Train and predict one (strategy, fold, seed); returns the JSON-ready run record. With ``keep_model``
    the record also holds the fitted model under "fitted" (not JSON; for a caller that saves it)."""
    if config.backend == "lora":
        from .lora import run_lora

        return run_lora(config, splits, space, strategy_name, fold, seed, work_dir)
    strategy = balance.STRATEGIES[strategy_name]
    started = time.time()
    if config.backend == "sklearn":
        from ..sklearn_path import fit_predict_sklearn

        out = fit_predict_sklearn(splits, space, strategy, config.sklearn, config.balance, seed, cache, keep_model)
    else:
        from ..classifier import fit_predict_torch

        out = fit_predict_torch(splits, space, strategy, config.torch, config.balance, seed, work_dir, keep_model)
    test_logits, val_logits = out.pop("test"), out.pop("validation")
    fitted = out.pop("fitted", None)
    counts = splits["train"].counts(len(space))
    record: dict[str, Any] = {"strategy": strategy_name, "fold": fold, "seed": seed, "tau": None}
    if strategy.posthoc == "tuned":
        prior = balance.log_prior(counts)
        if len(splits["validation"]):
            tau, scores = balance.choose_tau(val_logits, splits["validation"].y, prior, config.balance.tau_grid)
            record.update(tau=tau, tau_scores=scores)
        else:
            tau = config.balance.tau
            record.update(tau=tau, tau_note="empty validation fold: fixed balance.tau used")
        test_logits = balance.posthoc_adjust(test_logits, prior, tau)
    predictions = []
    for row, scores in zip(splits["test"].rows, test_logits):
        ranking, by_label = _ranked(row, scores, space)
        predictions.append({"id": row["id"], "task": row["task"], "scenario": row["scenario"], "unit": row["unit"],
                            "sample_id": row["sample_id"], "gold": row["label"], "prediction": ranking,
                            "parse_status": "ok", "raw": None, "label_scores": by_label})
    record.update(seconds=round(time.time() - started, 3), train_counts=dict(zip(space.names, counts.tolist())),
                  sizes={role: len(s) for role, s in splits.items()}, backend_info=out, predictions=predictions)
    if keep_model:
        record["fitted"] = fitted
    return record


def _estimate(records: list[dict], total: int, todo: int) -> dict[str, Any]:
    """The dry run's answer: how many runs, and the time left at the finished runs' mean duration."""
    mean = float(np.mean([r["seconds"] for r in records])) if records else None
    return {"runs": total, "finished": total - todo, "to_run": todo, "seconds_per_run": mean,
            "seconds_left": None if mean is None else mean * todo}


def run_all(config: CompareConfig, out: Path, rows, manifest, space: LabelSpace, run_hash: str) -> list[dict] | dict:
    """Every run's record (trained now or read back); with ``config.dry_run``, the estimate instead (after
    training the first run when none is finished, so the estimate comes from a real run)."""
    from tqdm.auto import tqdm

    from ...provenance import write_json_atomic

    folds = config.test_folds if config.test_folds is not None else list(range(manifest.k))
    jobs = [(s, f, seed) for s in config.strategies for f in folds for seed in config.seeds]
    path_of = {job: out / "runs" / job[0] / f"fold{job[1]}_seed{job[2]}.json" for job in jobs}
    todo = [job for job in jobs if not path_of[job].exists()]
    if config.dry_run:
        jobs = [job for job in jobs if job not in todo] or todo[:1]
    records, cache = [], {}
    for job in tqdm(jobs, desc=f"compare {config.task} ({config.backend})", unit="run"):
        strategy, fold, seed = job
        path = path_of[job]
        if path.exists():
            record = json.loads(path.read_text())
            if record.get("run_hash") != run_hash:
                raise ValueError(f"{path} was made with other settings (hash {record.get('run_hash')}, now "
                                 f"{run_hash}); use another output_dir")
        else:
            splits = fold_data(rows, manifest, space, fold)
            record = {"run_hash": run_hash, **run_one(config, splits, space, strategy, fold, seed, out / "work", cache)}
            trained_on = record["backend_info"].get("manifest_hash", manifest.hash)
            if trained_on != manifest.hash:  # a LoRA run converts its own data: it must split it the same way
                raise ValueError(f"run {strategy} fold {fold} seed {seed} was trained on split manifest {trained_on}, "
                                 f"the comparison uses {manifest.hash}")
            write_json_atomic(path, record)
        records.append(record)
    if config.dry_run:
        return _estimate(records, len(path_of), sum(not path_of[job].exists() for job in path_of))
    return records


def check_settings(config: CompareConfig, out: Path) -> str:
    """The run hash; refuses a folder holding a comparison made with other settings."""
    from ...provenance import config_hash, write_json_atomic

    settings = run_settings(config)
    run_hash = config_hash(settings)
    stamp = out / "compare_config.json"
    if stamp.exists():
        previous = json.loads(stamp.read_text())
        if previous["run_hash"] != run_hash:
            changed = sorted(k for k in settings if previous["settings"].get(k) != json.loads(
                json.dumps(settings[k], default=str)))
            raise ValueError(f"{out} holds a comparison made with other settings (changed: {changed}); "
                             f"use another output_dir or remove that folder")
    else:
        write_json_atomic(stamp, {"run_hash": run_hash, "settings": settings})
    return run_hash


def write_report(out: Path, results: dict, space: LabelSpace, confusions: dict, with_plots: bool) -> None:
    from ...provenance import write_json_atomic

    if with_plots:
        results["plots"] = plots(results, space, confusions, out)
    write_json_atomic(out / "results.json", results)
    (out / "results.md").write_text(markdown(results), encoding="utf-8")


def compare(config: CompareConfig) -> dict:
    """Run (or read back) every run of the comparison and write results.json, results.md and the plots;
    with ``config.dry_run``, only the number of runs and the time estimate."""
    from ...provenance import git_commit, versions

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_hash = check_settings(config, out)
    rows, manifest, data_dir, meta = prepare_data(config, out)
    space = LabelSpace.from_rows(rows)
    records = run_all(config, out, rows, manifest, space, run_hash)
    if config.dry_run:
        return {"dry_run": records}
    results, confusions = summarise(config, records, space)
    results["provenance"] = {
        "config": asdict(config), "run_hash": run_hash, "versions": versions(), "git_commit": git_commit(),
        "manifest_hash": manifest.hash, "manifest_notes": manifest.notes, "data_dir": str(data_dir),
        "source": meta.get("source"), "source_fingerprint": meta.get("source_fingerprint"),
        "stats": STATS_NOTE}
    write_report(out, results, space, confusions, config.plots)
    return results
