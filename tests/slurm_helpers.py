"""The one-node SLURM cluster of the tests (scripts/slurm_local.sh starts it; .ci/run through scripts/test.sh).

A test that needs it takes the ``slurm`` fixture (tests/conftest.py): the launch settings that send runs to it, or a
skip that names the reason (no root, no apt-get, or a cluster that is not up). ``compare`` and ``cv`` read the same
``launch.*`` keys, so their tests pass the same overrides.
"""

from __future__ import annotations

import os
import shutil
import subprocess

START = "bash scripts/slurm_local.sh"


def cluster_answers() -> bool:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return False
    try:
        states = subprocess.run(["sinfo", "-h", "-o", "%t"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any(state.strip() in ("idle", "mix", "alloc") for state in states.splitlines())


def skip_reason() -> str | None:
    """None when a cluster takes jobs; else why not, and what would start one."""
    if cluster_answers():
        return None
    if os.geteuid() != 0:
        return f"no SLURM cluster here, and {START} needs root to install and start one (this user is not root)"
    if shutil.which("apt-get") is None:
        return f"no SLURM cluster here, and {START} needs apt-get to install slurm-wlm and munge (none on PATH)"
    return f"no SLURM cluster answers (sinfo lists no idle node): start one with {START}"


def overrides(cpus_per_task: int = 1) -> list[str]:
    """``launch.*`` settings that run every job on the local cluster, one CPU each (two at once on two cores)."""
    return ["launch.executor=slurm", f"launch.slurm.cpus_per_task={cpus_per_task}", "launch.slurm.timeout_min=30"]


def queue_state(job_id: str) -> str:
    """The job's state in the queue ('' once it has left it)."""
    done = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=20)
    return done.stdout.strip()
