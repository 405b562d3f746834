"""Runs that an experiment launches as subprocesses: how a training run is started, and a job list run in order.

A :class:`Job` is one command line, the log its output goes to and a check that says whether its result is
already there; :func:`run_jobs` runs a list of jobs one after the other (a job found done is skipped). The
experiments build their runs as such lists (``compare``'s LoRA runs, ``cv``'s folds) and hand them over in
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
class Job:
    """One run: its name (unique in its list), command line, log file and "already done" check."""

    name: str
    argv: tuple[str, ...]
    log: Path
    done: Callable[[], bool]  # a module-level function (or a partial of one), so an executor may pickle it


def run_jobs(jobs: Sequence[Job], finished: Callable[[Job, float], None] | None = None,
             starting: Callable[[Job], None] | None = None) -> list[str]:
    """Run the jobs that are not done yet, in order, each to its log (a failure stops with ValueError); calls
    ``starting(job)`` before and ``finished(job, seconds)`` after each. Returns the names of the jobs it ran."""
    ran = []
    for job in jobs:
        if job.done():
            continue
        if starting is not None:
            starting(job)
        started = time.time()
        call(job.argv, job.log, job.name)
        ran.append(job.name)
        if finished is not None:
            finished(job, time.time() - started)
    return ran
