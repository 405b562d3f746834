"""Runs that an experiment launches as subprocesses: how a training run is started, and a job list run in order.

A :class:`Job` is a name, its :class:`Step` s (each one command line, the log its output is appended to and
optionally a check that says the step is done already) and a check that says the whole job is done already;
:func:`run_jobs` runs a list of jobs one after the other (a job or step found done is skipped) and returns one
:class:`Outcome` per job. The three types have the fields of ``rescue_train.executor``'s (name, steps, done;
argv, log, done; job, state, seconds, step_seconds), so that the experiments' job lists (``cv``'s folds) can be
handed to an executor that runs them on GPU slots or SLURM unchanged. The experiments hand their jobs over in
phases whose jobs do not depend on each other, so any executor can run a phase's jobs in any order.

Every training run is the ordinary training path under ``accelerate launch`` (:func:`training_command`), with
the ``launch.*`` keys the experiments share (:class:`LaunchSettings`); every evaluation the ordinary
``rescue-train eval`` (:func:`rescue_train_command`).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from .settings import find_yaml, meaning


@dataclass
class LaunchSettings:
    """How each training run is started: ``accelerate launch [--config_file F] ARGS -m rescue_train train ...``."""

    config_file: Optional[str] = field(default=None, metadata=meaning(
        "an accelerate config (configs/accelerate/*.yaml or your own)"))
    args: str = field(default="", metadata=meaning(
        "more launch flags, one string: 'launch.args=--num_processes 2 --mixed_precision bf16'"))
    keep_checkpoints: bool = field(default=False, metadata=meaning(
        "trainer checkpoints only serve resuming a run; removed once it is recorded"))


def rescue_train_command(command: str, *args: str) -> list[str]:
    """``python -m rescue_train COMMAND ARGS`` with this interpreter."""
    return [sys.executable, "-m", "rescue_train", command, *args]


def training_command(launch: LaunchSettings, recipe: str, overrides: Sequence[str], output_dir: Path) -> list[str]:
    """The training run of ``recipe`` with ``overrides`` into ``output_dir``, under ``accelerate launch`` so that
    whatever accelerate config the user gives applies (``resume=auto``, the default, continues an interrupted
    run from its last checkpoint)."""
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    if launch.config_file:
        command += ["--config_file", str(find_yaml(launch.config_file, "configs/accelerate", "accelerate config"))]
    return [*command, *shlex.split(launch.args), "-m", "rescue_train", "train", f"recipe={recipe}", *overrides,
            f"output_dir={output_dir}"]


def override(key: str, value: Any) -> str:
    """``key=value`` that the dot-list reads back as ``value`` (strings quoted, None as null)."""
    return f"{key}={json.dumps(value, ensure_ascii=False)}"


def call(command: Sequence[str], log: Path, what: str) -> None:
    """Run ``command`` with its output appended to ``log`` (after the command line itself); a failure is a
    ValueError naming ``what``, the exit status and the log's last lines."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a", encoding="utf-8") as handle:
        handle.write("$ " + " ".join(command) + "\n")
        handle.flush()
        done = subprocess.run(list(command), stdout=handle, stderr=subprocess.STDOUT, env=os.environ.copy())
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        raise ValueError(f"{what} failed (exit {done.returncode}); log {log}:\n  " + "\n  ".join(tail))


@dataclass(frozen=True)
class Step:
    """One process of a job: its command line (absolute paths, ``sys.executable`` first), the log its output is
    appended to, and what counts as this step done already (None: never)."""

    argv: tuple[str, ...]
    log: Path
    done: Optional[Callable[[], bool]] = None  # a module-level function (or a partial of one): picklable


@dataclass(frozen=True)
class Job:
    """One run: its name (unique in its list), its steps (run one after the other) and what counts as the whole
    job done already (None: never)."""

    name: str
    steps: tuple[Step, ...]
    done: Optional[Callable[[], bool]] = None  # a module-level function (or a partial of one): picklable


@dataclass
class Outcome:
    """What running a job gave: ``state`` ``done`` (ran now) or ``skipped`` (done before); ``seconds`` and
    ``step_seconds`` (0 for a skipped step) its steps' own time."""

    job: Job
    state: str
    seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)


def run_jobs(jobs: Sequence[Job], *, on_done: Callable[[Outcome], None] | None = None,
             starting: Callable[[Job], None] | None = None) -> list[Outcome]:
    """Run the jobs that are not done yet, in order, each step to its log (a failed step stops everything with
    a ValueError naming the job, its exit status and its log's tail); calls ``starting(job)`` before and
    ``on_done(outcome)`` after each job it runs. Returns one outcome per job, in the jobs' order."""
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"job names must be unique, got {sorted(n for n in set(names) if names.count(n) > 1)}")
    outcomes = []
    for job in jobs:
        if job.done is not None and job.done():
            outcomes.append(Outcome(job, "skipped"))
            continue
        if starting is not None:
            starting(job)
        seconds = []
        for step in job.steps:
            if step.done is not None and step.done():
                seconds.append(0.0)
                continue
            started = time.time()
            call(step.argv, step.log, job.name)
            seconds.append(round(time.time() - started, 3))
        outcome = Outcome(job, "done", round(sum(seconds), 3), seconds)
        outcomes.append(outcome)
        if on_done is not None:
            on_done(outcome)
    return outcomes
