"""``rescue-train cv`` on the local one-node SLURM cluster (tests/slurm_helpers.py; skipped, saying why, where there
is none): a two-fold cv (folds 0 and 1 of a 3-fold split: with 2 folds no run would keep training data) on the
tiny model whose training runs and evaluations are SLURM jobs pools exactly the
predictions of the same cv run one job after another on this machine (issue 27: results never depend on the
executor)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rescue_train.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIG = ROOT / "configs" / "accelerate" / "cpu.yaml"
ARGV = ["recipe=ssp_lora", "model=tiny", "train.max_steps=1", "train.batch_size=2", "train.grad_accum=1",
        "train.eval_steps=0", "train.report_to=[none]", "data.folds=3", "folds=[0,1]", "data.context=2",
        "baseline=none",
        "eval.bertscore=none", f"launch.config_file={CPU_CONFIG}", "plots=false"]
JOBS = ["train fold 0", "train fold 1", "eval fold 0", "eval fold 1"]

pytestmark = pytest.mark.slow


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_a_two_fold_cv_on_slurm_pools_the_predictions_of_the_local_sequential_cv(tmp_path, slurm):
    out = tmp_path / "cv"
    # 1. One job after another on this machine.
    assert cli(["cv", *ARGV, f"output_dir={out}"]) == 0
    local = {"pooled": _read(out / "results.json"), "jobs": _read(out / "jobs.json"),
             "manifest": _read(out / "split_manifest.json")["hash"],
             "folds": {f: _read(out / "eval" / f"fold{f}" / "results.json") for f in (0, 1)},
             "adapters": {f: (out / "runs" / f"fold{f}" / "adapter" / "adapter_model.safetensors").read_bytes()
                          for f in (0, 1)}}
    assert all(job["executor"]["kind"] == "local" for job in local["jobs"].values())
    # 2. The same cv from scratch in the same folder (every path the same), each job a SLURM job.
    shutil.rmtree(out)
    assert cli(["cv", *ARGV, *slurm, f"output_dir={out}"]) == 0
    jobs = _read(out / "jobs.json")
    assert sorted(jobs) == sorted(local["jobs"]) == sorted(JOBS)
    ids = [jobs[name]["executor"]["job_id"] for name in JOBS]
    assert all(jobs[name]["executor"]["kind"] == "slurm" and jobs[name]["executor"]["threads"] == "1"
               for name in JOBS)
    assert all(ids) and len(set(ids)) == 4  # four SLURM jobs
    for name, job_id in zip(JOBS, ids):  # the executor kept each job's id beside its script
        assert (out / "executor" / "slurm" / name.replace(" ", "_") / "job_id").read_text().strip() == job_id
    for fold in (0, 1):
        run = out / "runs" / f"fold{fold}"
        assert _read(run / "provenance.json")["executor"]["job_id"] == jobs[f"train fold {fold}"]["executor"]["job_id"]
        assert (run / "adapter" / "adapter_model.safetensors").read_bytes() == local["adapters"][fold]
        # The prediction hash covers the adapter's weights byte for byte and every setting.
        mine = _read(out / "eval" / f"fold{fold}" / "results.json")
        assert mine["executor"]["kind"] == "slurm"
        assert mine["prediction_hash"] == local["folds"][fold]["prediction_hash"]
        assert mine["records"] == local["folds"][fold]["records"]
    pooled = _read(out / "results.json")
    assert _read(out / "split_manifest.json")["hash"] == local["manifest"]
    assert pooled["records"] == local["pooled"]["records"]
    assert pooled["aggregates"] == local["pooled"]["aggregates"]
    assert pooled["cv"] == local["pooled"]["cv"]
    assert sorted({r["fold"] for r in pooled["records"]}) == [0, 1]
