"""``rescue-train cv`` end to end on the tiny model and the bundled data (three folds, two training steps per run,
SSP ranked and ER generated): a cv killed during its second training run, a dry run, the resumed cv, and then
assertions on the one finished output: the pooled records are the benchmark's instances once each, each from
the fold of its unit; the pooled metrics are the per-fold results' recomputed; the resume retrained nothing
finished; the report, the model cards and the zero-shot comparison read the pooled file; the same cv as SLURM
jobs predicts the same."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rescue_train.cli import main as cli

ROOT = Path(__file__).resolve().parents[2]
CPU_CONFIG = ROOT / "configs" / "accelerate" / "cpu.yaml"
TASKS = ["ssp", "er"]
ARGV = ["recipe=ssp_lora", "tasks.er=1.0", "model=tiny", "train.max_steps=2", "train.batch_size=2",
        "train.grad_accum=1", "train.eval_steps=0", "train.report_to=[none]", "data.folds=3", "eval.bertscore=none",
        "eval.max_new_tokens={er: 8}", f"launch.config_file={CPU_CONFIG}", "plots=false"]

pytestmark = pytest.mark.slow


def _commands(log: Path) -> int:
    """How many commands a job log holds (each run appends its command line)."""
    return sum(line.startswith("$ ") for line in log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One cv output, made the hard way: killed mid-way, dry-run, resumed. Returns (out, what was seen)."""
    from rescue_train.cv.plan import run_dir, trained

    out = tmp_path_factory.mktemp("cv") / "out"
    seen = {}
    # 1. Killed: the whole process group (cv and the training it launched), once fold 1's training has started.
    with open(tmp_path_factory.mktemp("log") / "killed.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rescue_train", "cv", *ARGV, f"output_dir={out}"], cwd=ROOT,
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ))
        deadline = time.time() + 900
        try:
            while not (out / "logs" / "train_fold1.log").exists():
                assert proc.poll() is None and time.time() < deadline, "cv ended before fold 1's training started"
                time.sleep(0.5)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert trained(run_dir(out, 0)) and not trained(run_dir(out, 1))
    provenance = run_dir(out, 0) / "provenance.json"
    seen["fold0_provenance"] = (provenance.stat().st_mtime_ns, provenance.read_text())
    # 2. Dry run: a fold trained but none evaluated, so it evaluates fold 0 to time it, then prints the plan.
    done = subprocess.run([sys.executable, "-m", "rescue_train", "cv", *ARGV, f"output_dir={out}", "dry_run=true"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen["dry_run"] = done.stdout
    # 3. Resumed to the end.
    done = subprocess.run([sys.executable, "-m", "rescue_train", "cv", *ARGV, f"output_dir={out}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    seen["resumed"] = done.stdout
    return out, seen


def _results(path: Path) -> dict:
    return json.loads((path / "results.json").read_text())


def test_the_pooled_records_are_the_benchmarks_instances_once_each(finished):
    from rescue_train.data import load_benchmark
    from rescue_train.tasks import build

    out, _ = finished
    pooled = _results(out)
    samples = load_benchmark("bundled").samples
    expected = [i.id for task in TASKS for i in build(task, samples).instances]
    ids = [r["id"] for r in pooled["records"]]
    assert ids == expected and len(set(ids)) == len(ids)
    assert {task: pooled["aggregates"][task]["both"]["n"] for task in TASKS} == \
        {task: len(build(task, samples).instances) for task in TASKS}


def test_every_record_comes_from_its_units_fold_and_names_that_run(finished):
    from rescue_train.data.splits import SplitManifest

    out, _ = finished
    manifest = SplitManifest.load(out / "split_manifest.json")
    pooled = _results(out)
    for record in pooled["records"]:
        assert record["fold"] == manifest.assignment[record["unit"]], record["id"]
        assert record["run"] == str((out / "runs" / f"fold{record['fold']}").resolve())
    assert sorted({r["fold"] for r in pooled["records"]}) == [0, 1, 2]
    for fold in range(3):  # every run trained with the cross-validation's manifest, and held out its own fold
        run = out / "runs" / f"fold{fold}"
        assert SplitManifest.load(run / "data" / "split_manifest.json").hash == manifest.hash
        assert json.loads((run / "provenance.json").read_text())["data"]["test_fold"] == fold
    assert pooled["split"]["manifest_hash"] == manifest.hash and pooled["split"]["folds"] == [0, 1, 2]


def test_pooled_metrics_are_the_per_fold_results_recomputed(finished):
    from rescue_train.scoring.metrics import aggregate, task_labels

    out, _ = finished
    pooled = _results(out)
    folds = {f: _results(out / "eval" / f"fold{f}") for f in range(3)}
    for task in TASKS:
        by_id = {r["id"]: r for f in range(3) for r in folds[f]["records"] if r["task"] == task}
        order = [r["id"] for r in pooled["records"] if r["task"] == task]
        assert sorted(order) == sorted(by_id)
        # In the pooled (benchmark) order: float sums such as expected_accuracy depend on the order of the terms.
        records = [by_id[i] for i in order]
        assert aggregate(task, records, task_labels(task)) == pooled["aggregates"][task]
        for scope in ("couple", "both"):  # a mean over instances is the folds' means weighted by their counts
            mine = [folds[f]["aggregates"][task][scope] for f in range(3) if scope in folds[f]["aggregates"][task]]
            metric = "recall@1" if task == "ssp" else "s_int"
            weighted = sum(a[metric] * a["n"] for a in mine) / sum(a["n"] for a in mine)
            assert pooled["aggregates"][task][scope][metric] == pytest.approx(weighted, rel=1e-12)
            assert pooled["aggregates"][task][scope]["n"] == sum(a["n"] for a in mine)
    # The error bars are over the pooled records, units as clusters (5 couples here).
    entry = pooled["uncertainty"]["ssp"]["couple"]["recall@1"]
    assert entry["estimate"] == pooled["aggregates"]["ssp"]["couple"]["recall@1"] and entry["clusters"] == 5
    assert pooled["table5"]["both"]["ssp_recall"] == pytest.approx(100 * pooled["aggregates"]["ssp"]["both"]["recall@1"])


def test_a_killed_cv_resumes_without_retraining_finished_folds(finished):
    out, seen = finished
    provenance = out / "runs" / "fold0" / "provenance.json"
    assert (provenance.stat().st_mtime_ns, provenance.read_text()) == seen["fold0_provenance"]
    assert _commands(out / "logs" / "train_fold0.log") == 1  # trained once
    assert _commands(out / "logs" / "train_fold1.log") == 2  # killed, then run again (resume=auto)
    assert _commands(out / "logs" / "train_fold2.log") == 1
    assert _commands(out / "logs" / "eval_fold0.log") == 1  # evaluated by the dry run, not again
    resumed = seen["resumed"]
    assert "train fold 1: to run" in resumed and "train fold 2: to run" in resumed
    assert "train fold 0: to run" not in resumed and "eval fold 0: to run" not in resumed
    jobs = json.loads((out / "jobs.json").read_text())
    # The dry run evaluated fold 0 alone; the rest shared one engine (one local slot: issue 35), each evaluation
    # into its own folder as its own job would (the SLURM test below compares a fold's records with its own job's).
    assert set(jobs) == {"train fold 0", "train fold 1", "train fold 2", "eval fold 0", "eval fold 1, fold 2, zero_shot"}
    assert jobs["eval fold 1, fold 2, zero_shot"]["instances"] == sum(
        len(_results(out / "eval" / name)["records"]) for name in ("fold1", "fold2", "zero_shot"))
    assert _commands(out / "logs" / "eval_fold1+fold2+zero_shot.log") == 1
    assert "one engine serves them all" in resumed
    # What executed each job: a local slot, here without GPUs (one job at a time: all the CPU threads).
    from rescue_train.devices import usable_cpus

    assert all((job["executor"]["kind"], job["executor"]["gpus"], job["executor"]["threads"]) ==
               ("local", [], str(len(usable_cpus()))) for job in jobs.values())
    for fold in range(3):
        run = out / "runs" / f"fold{fold}"
        assert jobs[f"train fold {fold}"]["steps"][0]["argv"][1:6] == ["-m", "rescue_train", "launch", "--config_file",
                                                                     str(CPU_CONFIG)]
        assert json.loads((run / "provenance.json").read_text())["executor"]["kind"] == "local"
    assert all(not (out / "runs" / f"fold{f}" / "checkpoints").exists() for f in range(3))
    # The dry run ran what was missing for a time estimate and said what was left.
    dry = seen["dry_run"]
    assert "running fold 0's to time them" in dry and "judge calls: none" in dry
    assert "fold 0: 2 unit(s)" in dry and "training run" in dry and "time: about" in dry
    assert "h left for 2 training run(s) and 3 evaluation(s)" in dry
    # A rerun of the finished cv launches nothing and writes the same pooled row.
    before = _results(out)
    assert cli(["cv", *ARGV, f"output_dir={out}"]) == 0
    after = _results(out)
    assert after["aggregates"] == before["aggregates"] and after["records"] == before["records"]
    assert _commands(out / "logs" / "train_fold1.log") == 2
    assert _commands(out / "logs" / "eval_fold1+fold2+zero_shot.log") == 1


def test_the_family_note_is_said_in_the_output_results_and_report(finished):
    out, seen = finished
    pooled = _results(out)
    (note,) = pooled["notes"]
    assert note.startswith("family: 0 training instances in the run of test fold ") and \
        "family scores measure couple-to-family transfer" in note
    assert f"note: {note}" in seen["resumed"] and note in (out / "report.md").read_text()


def test_report_card_and_zero_shot_read_the_pooled_results(finished, capsys):
    out, seen = finished
    pooled = _results(out)
    capsys.readouterr()
    assert cli(["report", str(out)]) == 0
    text = capsys.readouterr().out
    assert "| GPT-4o (paper) |" in text and "| ssp_lora tiny, 3-fold cv [rank] |" in text
    assert "#### Family" in text  # the Table 11 layout
    # The zero-shot base model on every instance with the same prompts, paired with the pooled row.
    zero = _results(out / "eval" / "zero_shot")
    assert sorted(r["id"] for r in zero["records"]) == sorted(r["id"] for r in pooled["records"])
    assert zero["config"]["data"]["split"] == "none" and zero["model"]["adapter"] is None
    assert zero["model"]["base"] == pooled["model"]["base"] and zero["config"]["protocol"] == "rank"
    cells = json.loads((out / "comparisons.json").read_text())
    ssp = [c for c in cells if c["task"] == "ssp" and c["scenario"] == "both"]
    assert {c["metric"] for c in ssp} >= {"recall@1", "mrr"}
    assert all(c["result"] == "ssp_lora tiny, 3-fold cv [rank]" and c["against"].endswith("zero-shot [rank]")
               and c["n_shared"] == pooled["aggregates"]["ssp"]["both"]["n"] for c in ssp)
    assert "− " in (out / "report.md").read_text() and "zero-shot [rank]" in seen["resumed"]
    # Each fold's model card: its own test fold's results, and the pooled row linked and shown apart.
    card = (out / "runs" / "fold1" / "README.md").read_text()
    assert "test fold 1" in card and "## Cross-validation" in card and "`../../results.json`" in card
    assert "fold-1 model of a cross-validation" in card


def _same_predictions(mine: list[dict], theirs: list[dict]) -> None:
    """The same records, each log-likelihood equal to float32 rounding: a SLURM job here has one thread, a local job
    all the cores, and a float32 matrix product split over another number of threads may round its last bit
    otherwise."""
    assert [{k: v for k, v in r.items() if k != "loglik"} for r in mine] == \
        [{k: v for k, v in r.items() if k != "loglik"} for r in theirs]
    for new, old in zip(mine, theirs):
        if old.get("loglik") is None:  # a generated answer
            assert new.get("loglik") is None, new["id"]
        else:
            assert new["loglik"] == pytest.approx(old["loglik"], rel=1e-6, abs=1e-5), new["id"]


def test_the_same_cv_on_slurm_pools_the_same_predictions(finished, slurm):
    """Issue 27: results never depend on the executor. Folds 0 and 2 of the cv above (trained and evaluated one job
    after another here; fold 1's training was killed and resumed, so it is left out) run again from scratch in
    the same folder (every path the same), each training and evaluation a job of the local one-node SLURM cluster
    (tests/slurm_helpers.py; skipped, saying why, where there is none): the same adapters byte for byte, the same
    prediction hashes, rankings and answers. The folder is put back as it was afterwards."""
    import shutil

    out, _ = finished
    kept = out.with_name(out.name + "-kept")
    shutil.copytree(out, kept, symlinks=True)
    local = {"pooled": _results(kept), "manifest": json.loads((kept / "split_manifest.json").read_text())["hash"]}
    names = ["train fold 0", "train fold 2", "eval fold 0", "eval fold 2"]
    try:
        shutil.rmtree(out)
        assert cli(["cv", *ARGV, *slurm, "folds=[0,2]", "baseline=none", f"output_dir={out}"]) == 0
        jobs = json.loads((out / "jobs.json").read_text())
        assert sorted(jobs) == sorted(names)
        ids = [jobs[name]["executor"]["job_id"] for name in names]
        assert all(jobs[name]["executor"]["kind"] == "slurm" and jobs[name]["executor"]["threads"] == "1"
                   for name in names)
        assert all(ids) and len(set(ids)) == 4  # four SLURM jobs
        for name, job_id in zip(names, ids):  # the executor kept each job's id beside its script
            assert (out / "executor" / "slurm" / name.replace(" ", "_") / "job_id").read_text().strip() == job_id
        for fold in (0, 2):
            run, before = out / "runs" / f"fold{fold}", kept / "runs" / f"fold{fold}"
            assert json.loads((run / "provenance.json").read_text())["executor"]["job_id"] == \
                jobs[f"train fold {fold}"]["executor"]["job_id"]
            assert (run / "adapter" / "adapter_model.safetensors").read_bytes() == \
                (before / "adapter" / "adapter_model.safetensors").read_bytes()
            mine, theirs = _results(out / "eval" / f"fold{fold}"), _results(kept / "eval" / f"fold{fold}")
            assert mine["executor"]["kind"] == "slurm"
            # The prediction hash covers the adapter's weights byte for byte and every setting.
            assert mine["prediction_hash"] == theirs["prediction_hash"]
            _same_predictions(mine["records"], theirs["records"])
        pooled = _results(out)
        assert json.loads((out / "split_manifest.json").read_text())["hash"] == local["manifest"]
        _same_predictions(pooled["records"], [r for r in local["pooled"]["records"] if r["fold"] in (0, 2)])
        assert sorted({r["fold"] for r in pooled["records"]}) == [0, 2]
    finally:
        shutil.rmtree(out, ignore_errors=True)
        kept.rename(out)
