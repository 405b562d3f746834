"""rescue_train.executor with real processes: local slots (GPU groups, threads divided), failures reported with the
log's tail while the others go on, resuming done steps, checks before work, and real SLURM jobs (the local
one-node cluster: submitted through submitit, a failure, a job requeued after a signal that resumes)."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from rescue_train.devices import local_slots, usable_cpus
from rescue_train.executor import ENV, Job, Step, executor_info, run_jobs
from rescue_train.jobs import ExecutorSettings, SlurmSettings, problems
from rescue_train.settings import ConfigError

# A step that writes what it was given (its environment's executor keys) to a JSON file.
REPORT = ("import json, os, sys; from rescue_train.executor import executor_info; "
          "json.dump({'info': executor_info(), 'omp': os.environ.get('OMP_NUM_THREADS'), "
          "'cuda': os.environ.get('CUDA_VISIBLE_DEVICES'), 'bind': os.environ.get('VLLM_CPU_OMP_THREADS_BIND')}, "
          "open(sys.argv[1], 'w'))")


def python_step(tmp: Path, name: str, code: str, *args: str, done=None) -> Step:
    return Step([sys.executable, "-c", code, *args], tmp / f"{name}.log", done)


def rendezvous(me: Path, other: Path) -> str:
    """Code that marks ``me`` started and waits (20 s at most) for ``other``: both finish only if they run at once."""
    return (f"import pathlib, sys, time; pathlib.Path({str(me)!r}).touch(); end = time.time() + 20\n"
            f"while not pathlib.Path({str(other)!r}).exists():\n"
            f"    if time.time() > end: sys.exit('ran alone')\n"
            f"    time.sleep(0.05)")


def test_local_runs_in_parallel_with_the_threads_divided(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    a, b = tmp_path / "a.started", tmp_path / "b.started"
    jobs = [Job("one", [python_step(tmp_path, "one", rendezvous(a, b)),
                        python_step(tmp_path, "one-report", REPORT, str(tmp_path / "one.json"))]),
            Job("two", [python_step(tmp_path, "two", rendezvous(b, a)),
                        python_step(tmp_path, "two-report", REPORT, str(tmp_path / "two.json"))])]
    outcomes = run_jobs(jobs, ExecutorSettings(parallel=2), tmp_path, progress=False)
    assert [(o.job.name, o.state) for o in outcomes] == [("one", "done"), ("two", "done")], \
        [o.message for o in outcomes]
    cpus = usable_cpus()
    share = max(1, len(cpus) // 2)
    seen = [json.loads((tmp_path / f"{n}.json").read_text()) for n in ("one", "two")]
    if not local_slots(1, None)[0].gpus:  # a CPU machine: no GPU, half the threads each, vLLM bound to its half
        assert [s["cuda"] for s in seen] == ["", ""]
        assert {s["bind"] for s in seen} == {",".join(map(str, cpus[:share])), ",".join(map(str, cpus[share:2 * share]))}
    assert [s["omp"] for s in seen] == [str(share)] * 2
    assert [s["info"]["kind"] for s in seen] == ["local", "local"] and seen[0]["info"]["threads"] == str(share)
    assert outcomes[0].executor["kind"] == "local" and len(outcomes[0].step_seconds) == 2
    assert [o.seconds for o in outcomes] == [round(sum(o.step_seconds), 3) for o in outcomes]  # the steps' own time
    # the log starts with the command that wrote it
    assert (tmp_path / "one.log").read_text().startswith(f"$ {sys.executable} -c import pathlib")


def test_a_job_of_several_ranks_binds_each_to_its_share_of_the_slots_cpus(tmp_path, monkeypatch):
    """A vLLM engine of tensor_parallel_size 2 on the CPU (eval's data-parallel engines): its slot's CPUs are split
    between its two workers."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    cpus = usable_cpus()
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    job = Job("engine", [python_step(tmp_path, "engine", REPORT, str(tmp_path / "engine.json"))], ranks=2)
    [outcome] = run_jobs([job], ExecutorSettings(parallel=1), tmp_path, progress=False)
    assert outcome.state == "done", outcome.message
    half = len(cpus) // 2
    assert json.loads((tmp_path / "engine.json").read_text())["bind"] == \
        f"{','.join(map(str, cpus[:half]))}|{','.join(map(str, cpus[half:2 * half]))}"


def test_a_failed_job_is_reported_with_its_logs_tail_and_the_others_go_on(tmp_path):
    failing = "import sys\nfor i in range(30): print('line', i)\nsys.exit(3)"
    never = tmp_path / "never.txt"
    jobs = [Job("bad", [python_step(tmp_path, "bad", failing),
                        python_step(tmp_path, "after", f"open({str(never)!r}, 'w')")]),
            Job("good", [python_step(tmp_path, "good", "print('fine')")])]
    outcomes = run_jobs(jobs, ExecutorSettings(), tmp_path, progress=False)
    bad, good = outcomes
    assert (bad.state, good.state) == ("failed", "done")
    assert "bad: step 1 of 2" in bad.message and "exit status 3" in bad.message
    assert "line 29" in bad.message and "line 17" not in bad.message  # the last 12 lines
    assert not never.exists()  # the failed job's later steps never ran


def test_done_jobs_and_steps_are_skipped_and_a_failing_on_done_fails_the_job(tmp_path):
    marker = tmp_path / "first.txt"
    first = python_step(tmp_path, "first", f"open({str(marker)!r}, 'a').write('x')", done=marker.exists)
    jobs = [Job("finished", [python_step(tmp_path, "x", "raise SystemExit(1)")], done=lambda: True),
            Job("resumed", [first, python_step(tmp_path, "second", "print('second')")])]
    assert [o.state for o in run_jobs(jobs, ExecutorSettings(), tmp_path, progress=False)] == ["skipped", "done"]
    outcomes = run_jobs(jobs[1:], ExecutorSettings(), tmp_path, progress=False)  # again: the first step is done
    assert marker.read_text() == "x" and outcomes[0].step_seconds[0] == 0.0
    assert (tmp_path / "second.log").read_text().count("second\n") == 2

    def refuse(outcome):
        raise ValueError("the record does not match")

    refused = run_jobs(jobs[1:], ExecutorSettings(), tmp_path, progress=False, on_done=refuse)
    assert refused[0].state == "failed" and refused[0].message == "resumed: the record does not match"


def test_local_slots_hand_out_gpu_groups_and_refuse_too_few(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,6,7")
    assert [s.gpus for s in local_slots(2, 2)] == [("3", "5"), ("6", "7")]
    assert [s.env()["CUDA_VISIBLE_DEVICES"] for s in local_slots(4, None)] == ["3", "5", "6", "7"]
    assert "VLLM_CPU_OMP_THREADS_BIND" not in local_slots(1, None)[0].env()
    with pytest.raises(ConfigError, match=r"launch.parallel=3 x launch.gpus_per_run=2 needs 6 GPUs; 4 visible "
                                          r"\(CUDA_VISIBLE_DEVICES=3,5,6,7\)"):
        local_slots(3, 2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert [s.gpus for s in local_slots(2, None)] == [(), ()]
    assert problems(ExecutorSettings(parallel=2, gpus_per_run=1)) == [
        "launch.parallel=2 x launch.gpus_per_run=1 needs 2 GPUs; 0 visible (CUDA_VISIBLE_DEVICES=). Lower "
        "launch.parallel, or set launch.gpus_per_run=0 to run on the CPU"]


def test_checks_before_work(tmp_path, monkeypatch):
    assert problems(ExecutorSettings(executor="cloud")) == ["launch.executor must be one of local, slurm, got 'cloud'"]
    assert problems(ExecutorSettings(parallel=0)) == ["launch.parallel must be at least 1, got 0"]
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch anywhere
    assert problems(ExecutorSettings(executor="slurm")) == [
        "launch.executor=slurm needs SLURM's sbatch, and none is on PATH: run on the cluster's login node, or use "
        "launch.executor=local"]
    with pytest.raises(ConfigError, match="needs SLURM's sbatch"):
        run_jobs([Job("x", [])], ExecutorSettings(executor="slurm"), tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"^job names must be unique, got \['a'\]$"):
        run_jobs([Job("a", []), Job("b", []), Job("a", [])], ExecutorSettings(), tmp_path, progress=False)


def test_executor_info_reads_what_the_executor_set():
    assert executor_info({})["kind"] == "direct"
    info = executor_info({ENV: json.dumps({"kind": "slurm"}), "SLURM_JOB_ID": "42", "CUDA_VISIBLE_DEVICES": "0,1",
                          "OMP_NUM_THREADS": "8"})
    assert {k: info[k] for k in ("kind", "job_id", "gpus", "threads")} == {
        "kind": "slurm", "job_id": "42", "gpus": ["0", "1"], "threads": "8"}


# ------------------------------------------------------------------------------------------ SLURM


@pytest.mark.slow
def test_slurm_jobs_run_fail_and_report(tmp_path, slurm):
    settings = ExecutorSettings(executor="slurm", slurm=SlurmSettings(cpus_per_task=1, timeout_min=10))
    jobs = [Job("ok/a", [python_step(tmp_path, "a", REPORT, str(tmp_path / "a.json"))]),
            Job("bad", [python_step(tmp_path, "bad", "import sys; print('about to fail'); sys.exit(4)")])]
    ok, bad = run_jobs(jobs, settings, tmp_path / "launch", progress=False)
    assert ok.state == "done", ok.message
    seen = json.loads((tmp_path / "a.json").read_text())
    assert seen["info"]["kind"] == "slurm" and seen["omp"] == "1"
    assert seen["info"]["job_id"] == ok.executor["job_id"] == (tmp_path / "launch/slurm/ok__a/job_id").read_text().strip()
    assert bad.state == "failed" and "exit status 4" in bad.message and "about to fail" in bad.message
    # the steps' own time, the wait in SLURM's queue left out
    assert [o.seconds for o in (ok, bad)] == [round(sum(o.step_seconds), 3) for o in (ok, bad)]
    assert len(ok.step_seconds) == len(bad.step_seconds) == 1


@pytest.mark.slow
def test_a_slurm_job_requeued_after_a_signal_resumes_where_it_stopped(tmp_path, slurm):
    """SLURM signals a job before its time limit or a preemption; submitit requeues it, and the requeued job skips
    the steps that are done (training resumes from its checkpoint the same way, through resume=auto)."""
    import subprocess

    from slurm_helpers import queue_state

    first, started = tmp_path / "first.done", tmp_path / "second.started"
    once = python_step(tmp_path, "first", f"open({str(first)!r}, 'a').write('ran ')", done=first.exists)
    # The second step waits until it is killed on its first attempt; on the requeued one it finishes.
    second = python_step(tmp_path, "second", f"import os, pathlib, time\np = pathlib.Path({str(started)!r})\n"
                                             f"if p.exists(): raise SystemExit(0)\np.touch(); time.sleep(300)")
    settings = ExecutorSettings(executor="slurm", slurm=SlurmSettings(cpus_per_task=1, timeout_min=10))
    results = []
    driver = threading.Thread(target=lambda: results.extend(
        run_jobs([Job("requeued", [once, second])], settings, tmp_path / "launch", progress=False)))
    driver.start()
    deadline = time.time() + 120
    while not started.exists() and time.time() < deadline:
        time.sleep(0.2)
    job_id = (tmp_path / "launch/slurm/requeued/job_id").read_text().strip()
    subprocess.run(["scancel", "--signal=USR2", job_id], check=True)
    while queue_state(job_id) != "PENDING" and time.time() < deadline:
        time.sleep(0.2)
    # SLURM holds a requeued job for two minutes; let it start now.
    subprocess.run(["scontrol", "update", f"jobid={job_id}", "StartTime=now"], check=True)
    driver.join(timeout=180)
    assert results and results[0].state == "done", results and results[0].message
    assert first.read_text() == "ran "  # the first step ran once, before the requeue
    assert (tmp_path / "second.log").read_text().count("$ ") == 2  # the second step twice
