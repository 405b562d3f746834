"""The comparison's runs: data preparation, one (strategy, test fold, seed) run per learner, resuming, and
the ``compare`` entry that ties runs, statistics and report together."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from ..classifiers.classifier import LabelSpace
from ..classifiers.classify_run import fold_data, prepare_data, run_classifier
from ..data.splits import fold_notes
from .config import CompareConfig, run_settings
from .report import markdown, plots
from .stats import summarise

# What a run's record (OUT/runs/<strategy>/fold<F>_seed<S>.json) must hold to be read back.
RUN_RECORD_FIELDS = {"run_hash": str, "strategy": str, "fold": int, "seed": int, "seconds": (int, float),
                     "train_counts": dict, "predictions": list}
STATS_NOTE = {"interval": "percentile bootstrap over units",
              "test": "paired permutation test over units (scipy.stats.permutation_test, permutation_type='samples': "
                      "swap the two strategies' predictions unit by unit), two-sided; exact over all 2^u swap "
                      "patterns when 2^u <= evaluation.permutations, else random patterns with p=(extreme+1)/(R+1)",
              "multiple_testing": "Holm (statsmodels multipletests) over all tests of one metric"}

def run_one(config: CompareConfig, splits: dict, space: LabelSpace, strategy_name: str, fold: int, seed: int,
            work_dir: Path, cache: dict) -> dict:
    """Train and predict one (strategy, fold, seed) of a classifier comparison; returns the JSON-ready run record."""
    return run_classifier(config, splits, space, strategy_name, fold, seed, work_dir, cache)


def _store(record: dict, path: Path, manifest, run_hash: str) -> None:
    from ..io import write_json_atomic

    trained_on = record["learner_info"].get("manifest_hash", manifest.hash)
    if trained_on != manifest.hash:  # a LoRA run converts its own data: it must split it the same way
        raise ValueError(f"run {record['strategy']} fold {record['fold']} seed {record['seed']} was trained on split "
                         f"manifest {trained_on}, the comparison uses {manifest.hash}")
    write_json_atomic(path, {"run_hash": run_hash, **record})


def run_lora_jobs(config: CompareConfig, out: Path, rows, manifest, space: LabelSpace, run_hash: str,
                  todo: list[tuple], path_of: dict) -> None:
    """The LoRA runs ``todo`` through the executor (``launch.*``): each finished run's record is written as soon as
    it is done; when some fail, the others still finish and are recorded, then one error names the failed ones."""
    from ..executor import run_jobs
    from .lora import lora_job, lora_record

    work = out / "work"
    jobs = [lora_job(config, *key, work, path_of[key]) for key in todo]
    key_of = {job.name: key for job, key in zip(jobs, todo)}

    def record(outcome) -> None:
        key = key_of[outcome.job.name]
        splits = fold_data(rows, manifest, space, key[1])
        _store(lora_record(config, splits, space, *key, work, outcome), path_of[key], manifest, run_hash)

    outcomes = run_jobs(jobs, config.launch, work, title=f"compare {config.task} (lora)", on_done=record)
    failed = [o for o in outcomes if o.state == "failed"]
    if failed:
        lines = "\n".join(o.message.splitlines()[0] + "\n" + "\n".join(o.message.splitlines()[-3:]) for o in failed)
        raise ValueError(f"{len(failed)} of {len(outcomes)} runs failed (the others are recorded; rerun the same "
                         f"command to retry the failed ones):\n{lines}")


def _estimate(records: list[dict], total: int, todo: int, folds: int) -> dict[str, Any]:
    """The dry run's answer: how many runs, and the time left at the finished runs' mean duration."""
    mean = float(np.mean([r["seconds"] for r in records])) if records else None
    return {"runs": total, "folds": folds, "finished": total - todo, "to_run": todo, "seconds_per_run": mean,
            "seconds_left": None if mean is None else mean * todo}


def run_all(config: CompareConfig, out: Path, rows, manifest, space: LabelSpace, run_hash: str) -> list[dict] | dict:
    """Every run's record (trained now or read back); with ``config.dry_run``, the estimate instead (after
    training the first run when none is finished, so the estimate comes from a real run)."""
    from tqdm.auto import tqdm

    from ..io import read_json

    folds = config.test_folds if config.test_folds is not None else list(range(manifest.k))
    jobs = [(s, f, seed) for s in config.strategies for f in folds for seed in config.seeds]
    path_of = {job: out / "runs" / job[0] / f"fold{job[1]}_seed{job[2]}.json" for job in jobs}
    todo = [job for job in jobs if not path_of[job].exists()]
    if config.dry_run:
        jobs = [job for job in jobs if job not in todo] or todo[:1]
    if config.learner == "lora":
        run_lora_jobs(config, out, rows, manifest, space, run_hash, [job for job in jobs if job in todo], path_of)
    records, cache = [], {}
    for job in tqdm(jobs, desc=f"compare {config.task} ({config.learner})", unit="run"):
        strategy, fold, seed = job
        path = path_of[job]
        if path.exists():
            record = read_json(path, RUN_RECORD_FIELDS, "a comparison run's record")
            if record.get("run_hash") != run_hash:
                raise ValueError(f"{path} was made with other settings (hash {record.get('run_hash')}, now "
                                 f"{run_hash}); use another output_dir")
        else:
            splits = fold_data(rows, manifest, space, fold)
            _store(run_one(config, splits, space, strategy, fold, seed, out / "work", cache), path, manifest, run_hash)
            record = read_json(path, RUN_RECORD_FIELDS, "a comparison run's record")
        records.append(record)
    if config.dry_run:
        return _estimate(records, len(path_of), sum(not path_of[job].exists() for job in path_of), len(folds))
    return records


def check_settings(config: CompareConfig, out: Path) -> str:
    """The run hash; refuses a folder holding a comparison made with other settings."""
    from ..io import read_json, write_json_atomic
    from ..provenance import config_hash

    settings = run_settings(config)
    run_hash = config_hash(settings)
    stamp = out / "compare_config.json"
    if stamp.exists():
        previous = read_json(stamp, {"run_hash": str, "settings": dict}, "a comparison's settings")
        if previous["run_hash"] != run_hash:
            changed = sorted(k for k in settings if previous["settings"].get(k) != json.loads(
                json.dumps(settings[k], default=str)))
            raise ValueError(f"{out} holds a comparison made with other settings (changed: {changed}); "
                             f"use another output_dir or remove that folder")
    else:
        write_json_atomic(stamp, {"run_hash": run_hash, "settings": settings})
    return run_hash


def write_report(out: Path, results: dict, space: LabelSpace, confusions: dict, with_plots: bool) -> None:
    from ..io import write_json_atomic

    if with_plots:
        results["plots"] = plots(results, space, confusions, out)
    write_json_atomic(out / "results.json", results)
    (out / "results.md").write_text(markdown(results), encoding="utf-8")


def compare(config: CompareConfig) -> dict:
    """Run (or read back) every run of the comparison and write results.json, results.md and the plots;
    with ``config.dry_run``, only the number of runs and the time estimate."""
    from ..provenance import git_commit, versions

    if config.learner == "lora":
        from .lora import problems

        found = problems(config)
        if found:
            raise ValueError("; ".join(found))
    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    run_hash = check_settings(config, out)
    rows, manifest, data_dir, meta = prepare_data(config, out)
    space = LabelSpace.from_rows(rows)
    records = run_all(config, out, rows, manifest, space, run_hash)
    if config.dry_run:
        return {"dry_run": records}
    results, confusions = summarise(config, records, space)
    results["fold_notes"] = fold_notes(manifest, sorted({r["fold"] for r in records}), Counter(r["unit"] for r in rows))
    results["provenance"] = {
        "config": asdict(config), "run_hash": run_hash, "versions": versions(), "git_commit": git_commit(),
        "manifest_hash": manifest.hash, "manifest_notes": manifest.notes, "data_dir": str(data_dir),
        "source": meta.get("source"), "source_fingerprint": meta.get("source_fingerprint"),
        "stats": STATS_NOTE}
    write_report(out, results, space, confusions, config.plots)
    return results
