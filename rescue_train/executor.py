"""Where the runs an experiment launches execute: local processes, N at a time, each on its own GPUs or its share
of the CPU threads (``launch.executor=local``), or SLURM jobs submitted through submitit (``launch.executor=slurm``).

A caller hands over :class:`Job` objects: a name, its steps (each an argv and the log file it appends to, and
what counts as that step already done) and what counts as the whole job already done. :func:`run_jobs` runs the
jobs that are not done, shows how many are queued, running, done and failed, reports a failed job with its log's
tail while the others go on, and returns one :class:`Outcome` per job. A job's steps run one after the other in
one slot (one SLURM job); a step found done is skipped, so a rerun, or a SLURM job requeued after a timeout or a
preemption, resumes where the job stopped (training itself resumes from its last checkpoint).

A job never learns anything from the executor but where it runs: the child's environment gets
``CUDA_VISIBLE_DEVICES`` (its GPU group), ``OMP_NUM_THREADS`` and its kin (its share of the CPU threads), and
``RESCUE_TRAIN_EXECUTOR``, which :func:`executor_info` reads back so that every run's provenance records what
executed it. The same job gives the same result under every executor.
"""

from __future__ import annotations

import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from .devices import THREAD_VARIABLES, Slot, local_slots, usable_cpus
from .jobs import ExecutorSettings, check

ENV = "RESCUE_TRAIN_EXECUTOR"  # {"kind": ...}, set for every child; executor_info() reads it
TAIL_LINES = 12  # lines of a failed step's log shown in the report
QUEUED_STATES = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SUSPENDED")
GONE_GRACE_S = 60.0  # a SLURM job that left the queue gets this long for its result file to appear


@dataclass
class Step:
    """One process of a job: its argv, the log its output is appended to, and what counts as it done already."""

    argv: Sequence[str]
    log: Path
    done: Optional[Callable[[], bool]] = None


@dataclass
class Job:
    name: str  # unique among the jobs of one call, e.g. "none/fold0_seed0"; also its SLURM job's name
    steps: Sequence[Step]
    done: Optional[Callable[[], bool]] = None  # the whole job finished before (nothing to run)
    ranks: int = 1  # processes of one run that split its slot's CPUs (vLLM's CPU workers: tensor_parallel_size)


@dataclass
class Outcome:
    job: Job
    state: str  # "done" (ran now), "skipped" (done before) or "failed"
    message: str = ""  # for a failed job: the step, its exit status and its log's tail
    # The steps' own time (a SLURM job's wait in the queue left out); for a SLURM job that left the queue without a
    # result, the time since it was submitted.
    seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)  # per step; 0 for a skipped step
    executor: dict[str, Any] = field(default_factory=dict)  # kind, job_id, host, gpus


# ------------------------------------------------------------------------------------------ the child's side

def executor_info(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What executed this process (or a child with environment ``env``), for its provenance: the executor's kind
    (``direct`` when a user started it), the SLURM job id, the host, the GPUs it sees (``CUDA_VISIBLE_DEVICES``;
    null when unset, i.e. all) and its threads (``OMP_NUM_THREADS``; null when unset)."""
    env = os.environ if env is None else env
    try:
        given = json.loads(env.get(ENV) or "{}")
    except ValueError:
        given = {}
    visible = env.get("CUDA_VISIBLE_DEVICES")
    job_id = env.get("SLURM_JOB_ID")
    if env.get("SLURM_ARRAY_JOB_ID"):
        job_id = f"{env['SLURM_ARRAY_JOB_ID']}_{env.get('SLURM_ARRAY_TASK_ID')}"
    return {"kind": given.get("kind", "direct"), "job_id": job_id, "host": socket.gethostname(),
            "gpus": None if visible is None else [g for g in visible.split(",") if g],
            "threads": env.get("OMP_NUM_THREADS")}


def log_tail(path: Path, lines: int = TAIL_LINES) -> str:
    """The last lines of a log, indented, for an error message."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("  " + line for line in text.strip().splitlines()[-lines:])


def run_steps(steps: Sequence[Step], env: dict[str, str], started: Callable[[subprocess.Popen], None] | None = None
              ) -> dict[str, Any]:
    """Run the steps not done yet, one after the other, each appending its output to its log; stop at the first
    that fails. Returns ``{"failed": None | step index, "exit": status, "seconds": [...], "executor": info}``."""
    child_env = {**os.environ, **env}
    seconds = []
    for index, step in enumerate(steps):
        if step.done is not None and step.done():
            seconds.append(0.0)
            continue
        begin = time.time()
        Path(step.log).parent.mkdir(parents=True, exist_ok=True)
        with open(step.log, "a", encoding="utf-8") as handle:
            handle.write("$ " + " ".join(map(str, step.argv)) + "\n")
            handle.flush()
            process = subprocess.Popen(list(map(str, step.argv)), stdout=handle, stderr=subprocess.STDOUT,
                                       env=child_env)
            if started is not None:
                started(process)
            status = process.wait()
        seconds.append(round(time.time() - begin, 3))
        if status != 0:
            return {"failed": index, "exit": status, "seconds": seconds, "executor": executor_info(child_env)}
    return {"failed": None, "exit": 0, "seconds": seconds, "executor": executor_info(child_env)}


def _failure(job: Job, result: dict[str, Any]) -> str:
    step = job.steps[result["failed"]]
    command = Path(str(step.argv[0])).name if step.argv else "?"
    words = [str(a) for a in step.argv[1:4]]
    return (f"{job.name}: step {result['failed'] + 1} of {len(job.steps)} ({command} {' '.join(words)} ...) failed "
            f"with exit status {result['exit']}; the end of {step.log}:\n{log_tail(Path(step.log))}")


# ------------------------------------------------------------------------------------------ progress

class Progress:
    """One line: done of total, and how many are queued, running and failed; a line per finished or failed job."""

    def __init__(self, title: str, total: int, done_before: int, enabled: bool = True):
        from tqdm.auto import tqdm

        self.bar = tqdm(total=total, initial=done_before, desc=title, unit="run", disable=not enabled,
                        dynamic_ncols=True)
        self.counts = {"queued": 0, "running": 0, "failed": 0}

    def show(self, queued: int, running: int, failed: int) -> None:
        counts = {"queued": queued, "running": running, "failed": failed}
        if counts != self.counts:
            self.counts = counts
            self.bar.set_postfix_str(", ".join(f"{n} {state}" for state, n in counts.items()), refresh=True)

    def finished(self, outcome: Outcome) -> None:
        from tqdm.auto import tqdm

        if outcome.state == "failed":
            tqdm.write(f"FAILED {outcome.message}", file=sys.stderr)
        else:
            where = outcome.executor.get("job_id") or outcome.executor.get("host")
            tqdm.write(f"done {outcome.job.name} in {outcome.seconds:.0f} s ({where})", file=sys.stderr)
            self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


# ------------------------------------------------------------------------------------------ running jobs

def run_jobs(jobs: Sequence[Job], settings: ExecutorSettings, folder: Path, *, title: str = "runs",
             on_done: Callable[[Outcome], None] | None = None, progress: bool = True) -> list[Outcome]:
    """Run every job that is not done under ``settings``; one outcome per job, in the jobs' order.

    The interface every command that launches runs uses (``compare``'s LoRA runs; cross-validation and ``eval``'s
    data-parallel engines the same way):

    - ``jobs``: :class:`Job` objects, each ``Job(name, steps, done)``. ``name`` is unique among ``jobs`` (e.g.
      ``"none/fold0_seed0"``; it names the SLURM job and its folder). ``steps`` run one after the other in one
      slot: each ``Step(argv, log, done)`` is an argv list (start it with ``sys.executable`` and give absolute
      paths: a SLURM job runs on another node), the log file its stdout and stderr are appended to (after a ``$
      argv`` line), and optionally a callable saying that step is done already (then it is skipped; it is
      pickled into a SLURM job, so it may only look at files, e.g. ``functools.partial(training_finished,
      run_dir)``). ``Job.done`` is the done-marker of the whole job, asked here before anything starts (e.g.
      ``record_path.exists``): a done job is not run again and its outcome is ``skipped``.
    - ``settings``: an :class:`ExecutorSettings` (a command's ``launch`` section: ``executor``, ``parallel``,
      ``gpus_per_run``, ``slurm.*``). They are checked (:func:`rescue_train.jobs.problems`) before any job starts: a
      :class:`~rescue_train.settings.ConfigError` names what is wrong.
    - ``folder``: where the executor keeps its own files: ``folder/slurm/<name with / as __, a space as _>/`` holds a SLURM
      job's script, submitit's logs and its ``job_id`` (so a second call waits for a job still queued instead of
      submitting it twice). Nothing is written there for local jobs.
    - ``on_done(outcome)`` is called in this process as each job succeeds, e.g. to read the job's outputs into a
      record; a ``ValueError``, ``OSError`` or ``KeyError`` it raises marks that job failed with that message.
      ``title`` heads the progress line; ``progress=False`` hides it (a line per finished or failed job is still
      printed).

    Returns one :class:`Outcome` per job: ``state`` ``done``, ``skipped`` or ``failed`` (``message``: the job, the
    failed step, its exit status and its log's tail), ``seconds`` and ``step_seconds`` (the steps' own time) and
    ``executor`` (``kind``, ``job_id``, ``host``, ``gpus``, ``threads``). A failed job never stops the others;
    calling again with the same jobs resumes (done jobs and steps skipped). A job name given twice is a
    ``ValueError``."""
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"job names must be unique, got {sorted(n for n in set(names) if names.count(n) > 1)}")
    check(settings)
    outcomes: dict[str, Outcome] = {}
    todo = []
    for job in jobs:
        if job.done is not None and job.done():
            outcomes[job.name] = Outcome(job, "skipped")
        else:
            todo.append(job)
    display = Progress(f"{title} ({settings.executor})", len(jobs), len(outcomes), progress)

    def finish(outcome: Outcome) -> None:
        if outcome.state == "done" and on_done is not None:
            try:
                on_done(outcome)
            except (ValueError, OSError, KeyError) as exc:
                outcome.state, outcome.message = "failed", f"{outcome.job.name}: {exc}"
        outcomes[outcome.job.name] = outcome
        display.finished(outcome)

    try:
        if todo:
            runner = _run_local if settings.executor == "local" else _run_slurm
            runner(todo, settings, Path(folder), finish, display)
    finally:
        display.close()
    return [outcomes[job.name] for job in jobs]


def _outcome(job: Job, result: dict[str, Any]) -> Outcome:
    state = "done" if result["failed"] is None else "failed"
    message = _failure(job, result) if state == "failed" else ""
    return Outcome(job, state, message, round(sum(result["seconds"]), 3), list(result["seconds"]), result["executor"])


def _run_local(jobs: list[Job], settings: ExecutorSettings, folder: Path, finish, display: Progress) -> None:
    slots: queue.Queue[Slot] = queue.Queue()
    for slot in local_slots(settings.parallel or 1, settings.gpus_per_run):
        slots.put(slot)
    running: set[subprocess.Popen] = set()
    lock = threading.Lock()
    active = [0]

    def track(process: subprocess.Popen) -> None:
        with lock:
            running.add(process)

    def execute(job: Job) -> Outcome:
        slot = slots.get()
        with lock:
            active[0] += 1
        try:
            env = {**slot.env(job.ranks), ENV: json.dumps({"kind": "local"})}
            return _outcome(job, run_steps(job.steps, env, started=track))
        finally:
            with lock:
                active[0] -= 1
                running.difference_update({p for p in running if p.poll() is not None})
            slots.put(slot)

    failed = 0
    pool = ThreadPoolExecutor(max_workers=settings.parallel or 1, thread_name_prefix="run")
    try:
        pending = {pool.submit(execute, job) for job in jobs}
        while pending:
            finished, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
            for future in finished:
                outcome = future.result()
                failed += outcome.state == "failed"
                finish(outcome)
            with lock:
                busy = active[0]
            display.show(len(pending) - busy, busy, failed)
    except BaseException:  # Ctrl-C or an error here: stop the children, a rerun resumes them
        with lock:
            for process in running:
                if process.poll() is None:
                    process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


class SlurmRun:
    """What a SLURM job executes (pickled by submitit): the job's steps, with the node's threads. On a timeout or a
    preemption submitit calls :meth:`checkpoint` and requeues the same steps; the done ones are skipped."""

    def __init__(self, steps: Sequence[Step]):
        self.steps = list(steps)

    def __call__(self) -> dict[str, Any]:
        threads = os.environ.get("SLURM_CPUS_PER_TASK") or str(len(usable_cpus()))
        env = {**{name: threads for name in THREAD_VARIABLES}, ENV: json.dumps({"kind": "slurm"})}
        return run_steps(self.steps, env)

    def checkpoint(self, *args: Any, **kwargs: Any):
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)


def slurm_parameters(settings: ExecutorSettings, name: str) -> dict[str, Any]:
    """The sbatch options of one job (submitit's SlurmExecutor names)."""
    slurm = settings.slurm
    gpus = slurm.gpus_per_node if slurm.gpus_per_node is not None else settings.gpus_per_run
    chosen = {"job_name": "rescue-" + re.sub(r"[^\w.-]", "-", name), "time": slurm.timeout_min,
              "partition": slurm.partition,
              "gpus_per_node": gpus or None, "cpus_per_task": slurm.cpus_per_task, "mem": slurm.mem_gb,
              "account": slurm.account, "qos": slurm.qos, "constraint": slurm.constraint,
              "additional_parameters": dict(slurm.additional_parameters) or None}
    return {key: value for key, value in chosen.items() if value is not None}


def _job_folder(folder: Path, name: str) -> Path:
    """The job's folder: its name with ``/`` as ``__`` and any other character sbatch's options or a shell would
    split on (a space: cv's "train fold 0") as ``_``."""
    return folder / "slurm" / re.sub(r"[^\w.-]", "_", name.replace("/", "__"))


def queue_states(job_ids: Sequence[str]) -> dict[str, str] | None:
    """The queue state of each job still in SLURM's queue (``squeue``; works without accounting); None when squeue
    does not answer."""
    if not job_ids:
        return {}
    try:
        listed = subprocess.run(["squeue", "-h", "-r", "-o", "%i|%T", "-j", ",".join(job_ids)], capture_output=True,
                                text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if listed.returncode != 0:
        return {} if "Invalid job id" in listed.stderr else None
    states = {}
    for line in listed.stdout.splitlines():
        job_id, _, state = line.strip().partition("|")
        states[job_id] = state
    return states


def _run_slurm(jobs: list[Job], settings: ExecutorSettings, folder: Path, finish, display: Progress) -> None:
    import submitit

    limit = settings.parallel or len(jobs)
    waiting = list(jobs)
    live: dict[str, tuple[Job, Any, float]] = {}  # job id -> (job, submitit job, began)
    gone: dict[str, float] = {}  # job id -> when it was first missing from the queue without a result
    failed = 0
    warned = False
    # A job submitted by an earlier call that is still queued or running is waited for, not submitted twice.
    known = {}
    for job in waiting:
        id_file = _job_folder(folder, job.name) / "job_id"
        if id_file.is_file():
            known[id_file.read_text().strip()] = job
    still = queue_states(list(known)) or {}
    for job_id, job in known.items():
        if job_id in still:
            live[job_id] = (job, submitit.SlurmJob(folder=_job_folder(folder, job.name), job_id=job_id), time.time())
            waiting.remove(job)
    while waiting or live:
        while waiting and len(live) < limit:
            job = waiting.pop(0)
            job_folder = _job_folder(folder, job.name)
            executor = submitit.SlurmExecutor(folder=job_folder)
            executor.update_parameters(**slurm_parameters(settings, job.name))
            submitted = executor.submit(SlurmRun(job.steps))
            (job_folder / "job_id").write_text(submitted.job_id + "\n")
            live[submitted.job_id] = (job, submitted, time.time())
        states = queue_states(list(live))
        if states is None:
            if not warned:
                print("warning: squeue does not answer; waiting for the jobs' result files", file=sys.stderr)
                warned = True
            states = {job_id: "UNKNOWN" for job_id in live}
        for job_id in list(live):
            job, handle, began = live[job_id]
            if job_id in states:
                gone.pop(job_id, None)
                continue
            if not handle.paths.result_pickle.exists():
                first = gone.setdefault(job_id, time.time())
                if time.time() - first < GONE_GRACE_S:
                    continue  # a shared file system may show the result a little later
            del live[job_id]
            gone.pop(job_id, None)
            outcome = _slurm_outcome(job, handle, began)
            failed += outcome.state == "failed"
            finish(outcome)
        queued = len(waiting) + sum(1 for j in live if states.get(j, "PENDING") in QUEUED_STATES)
        display.show(queued, len(live) - (queued - len(waiting)), failed)
        if live:
            time.sleep(2.0)


def _slurm_outcome(job: Job, handle, began: float) -> Outcome:
    """A finished SLURM job's outcome: its steps' result, or, when the job left the queue without one (cancelled,
    out of memory, a node failure, requeued too often), the end of submitit's log of it."""
    import submitit

    seconds = round(time.time() - began, 3)
    reason = "it left the queue without a result: cancelled, out of memory or time, or its node failed"
    if handle.paths.result_pickle.exists():
        try:
            return _outcome(job, handle.result())
        except (submitit.core.utils.UncompletedJobError, submitit.core.utils.FailedJobError) as exc:
            reason = next((line for line in str(exc).splitlines() if line.strip()), reason)
    return Outcome(job, "failed", f"{job.name}: SLURM job {handle.job_id} did not finish its steps ({reason}); the "
                   f"end of {handle.paths.stderr}:\n{log_tail(Path(handle.paths.stderr))}", seconds,
                   executor={"kind": "slurm", "job_id": handle.job_id})
