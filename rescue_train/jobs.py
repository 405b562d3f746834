"""How the runs an experiment launches are started: the ``launch.*`` keys that ``compare`` and ``cv`` share and the
command line of every training run they start.

:class:`ExecutorSettings` says where each run executes (``launch.executor``, ``launch.parallel``,
``launch.gpus_per_run``, ``launch.slurm.*``; :func:`problems` says what would stop them before any run starts);
:class:`LaunchSettings` is those keys plus how a training run
is started (``launch.config_file``, ``launch.args``) and whether its checkpoints are kept. Every training run is
the ordinary training path under ``accelerate launch`` (:func:`training_command`, one function for compare and cv,
so both start their runs the same way); every evaluation the ordinary ``rescue-train eval``
(:func:`rescue_train_command`). The runs themselves are :class:`~rescue_train.executor.Job` s handed to
:func:`rescue_train.executor.run_jobs`.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from .devices import local_slots, visible_gpus
from .settings import ConfigError, find_yaml, meaning

KINDS = ("local", "slurm")


@dataclass
class SlurmSettings:
    """The sbatch options of every job (``launch.executor=slurm``); null leaves an option to the cluster."""

    partition: Optional[str] = field(default=None, metadata=meaning("partition (null: the cluster's default)"))
    gpus_per_node: Optional[int] = field(default=None, metadata=meaning(
        "GPUs each job asks for (null: launch.gpus_per_run, else none)", low=0))
    cpus_per_task: Optional[int] = field(default=None, metadata=meaning(
        "CPUs each job asks for (null: the cluster's default); the job's threads follow it", low=1))
    mem_gb: Optional[float] = field(default=None, metadata=meaning("memory of each job (null: the cluster's)", above=0))
    timeout_min: int = field(default=240, metadata=meaning(
        "time limit of each job; a timed-out job is requeued (3 times at most) and resumes from its checkpoint",
        low=1))
    account: Optional[str] = field(default=None, metadata=meaning("account to charge"))
    qos: Optional[str] = field(default=None, metadata=meaning("quality of service"))
    constraint: Optional[str] = field(default=None, metadata=meaning("node features, e.g. a100"))
    additional_parameters: Dict[str, Any] = field(default_factory=dict, metadata=meaning(
        "any other sbatch option, e.g. {exclude: node7, mail-type: END}"))


@dataclass
class ExecutorSettings:
    """How runs are executed; a command puts these keys in its ``launch`` section."""

    executor: str = field(default="local", metadata=meaning(
        "local: processes on this machine; slurm: one SLURM job per run (submitit)"))
    parallel: Optional[int] = field(default=None, metadata=meaning(
        "runs at a time (null: 1 locally; on SLURM as many as the scheduler starts)", low=1))
    gpus_per_run: Optional[int] = field(default=None, metadata=meaning(
        "GPUs each run gets through CUDA_VISIBLE_DEVICES (null: 1 where there are GPUs, 0 on a CPU machine)",
        low=0))
    slurm: SlurmSettings = field(default_factory=SlurmSettings)


def problems(settings: ExecutorSettings) -> list[str]:
    """What would stop these settings before any run starts (each one line): an unknown executor, too few GPUs, an
    accelerate config asking for GPUs this machine lacks (local runs), no ``sbatch``, an unknown partition."""
    found = []
    if settings.executor not in KINDS:
        return [f"launch.executor must be one of {', '.join(KINDS)}, got {settings.executor!r}"]
    if settings.parallel is not None and settings.parallel < 1:
        found.append(f"launch.parallel must be at least 1, got {settings.parallel}")
    if settings.gpus_per_run is not None and settings.gpus_per_run < 0:
        found.append(f"launch.gpus_per_run must be at least 0, got {settings.gpus_per_run}")
    if found:
        return found
    if settings.executor == "local":
        try:
            local_slots(settings.parallel or 1, settings.gpus_per_run)
        except ConfigError as exc:
            found.append(str(exc))
        # runs on this machine: an accelerate config asking for GPUs it does not have
        asked = gpu_config_problem(getattr(settings, "config_file", None), visible_gpus(), "launch.config_file")
        return found + ([asked] if asked else [])
    if shutil.which("sbatch") is None:
        return ["launch.executor=slurm needs SLURM's sbatch, and none is on PATH: run on the cluster's login node, "
                "or use launch.executor=local"]
    partition = settings.slurm.partition
    if partition:
        try:
            listed = subprocess.run(["sinfo", "-h", "-o", "%R"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError) as exc:
            return [f"launch.executor=slurm: sinfo does not answer ({exc}); is the cluster up?"]
        names = sorted(set(listed.split()))
        if names and partition not in names:
            found.append(f"launch.slurm.partition={partition}: no such partition (sinfo lists {', '.join(names)})")
    return found


def check(settings: ExecutorSettings) -> None:
    found = problems(settings)
    if found:
        raise ConfigError("; ".join(found))


@dataclass
class LaunchSettings(ExecutorSettings):
    """Where each training run executes (``launch.executor``, ``launch.parallel``, ``launch.gpus_per_run``,
    ``launch.slurm.*``: rescue_train.executor) and how it is started: ``python -m rescue_train launch
    [--config_file F] --gpu_ids all --main_process_port 0 ARGS -m rescue_train train ...``."""

    config_file: Optional[str] = field(default=None, metadata=meaning(
        "an accelerate config (configs/accelerate/*.yaml or your own)"))
    args: str = field(default="", metadata=meaning(
        "more launch flags, one string: 'launch.args=--num_processes 2 --mixed_precision bf16'"))
    keep_checkpoints: bool = field(default=False, metadata=meaning(
        "trainer checkpoints only serve resuming a run; removed once it is recorded"))


def shaping_settings(launch: LaunchSettings) -> dict[str, Any]:
    """What of ``launch.*`` shapes a run's result, as an experiment's settings hash sees it: the accelerate config's
    content (so ``cpu``, ``configs/accelerate/cpu.yaml`` and a copy of it are one setting, and an edited file is
    another) and the extra launch flags. Where a run executes (the executor keys) never changes its result."""
    import yaml

    content = None
    if launch.config_file:
        content = yaml.safe_load(find_yaml(launch.config_file, "configs/accelerate", "accelerate config").read_text())
    return {"config_file": content, "args": launch.args}


def gpus_asked(config: Any) -> str | None:
    """What an accelerate config asks of GPUs, in its own words (``gpu_ids: 0``, ``distributed_type: MULTI_GPU``),
    or None for a config that trains on the CPU or anywhere."""
    if not isinstance(config, dict) or config.get("use_cpu"):
        return None
    kind = str(config.get("distributed_type", "NO")).upper()
    if kind in ("MULTI_GPU", "FSDP", "DEEPSPEED"):
        return f"distributed_type: {kind}"
    ids = config.get("gpu_ids")
    return f"gpu_ids: {ids}" if ids not in (None, "", "all") else None


def gpu_config_problem(config_file: str | None, gpus: Sequence[str], where: str = "--config_file") -> str | None:
    """A config that asks for GPUs on a machine without them is refused before any run starts: accelerate would
    train on the CPU without a word (only provenance's ``gpus: []`` telling), hours slower than the config meant."""
    if not config_file or gpus:
        return None
    import yaml

    found = find_yaml(config_file, "configs/accelerate", "accelerate config")
    asked = gpus_asked(yaml.safe_load(found.read_text(encoding="utf-8")))
    if asked is None:
        return None
    return (f"{where}={config_file} asks for GPUs ({asked}) and this machine has none (CUDA_VISIBLE_DEVICES and "
            f"nvidia-smi list none): train on the CPU with {where}=cpu (or without a config), or on GPU nodes")


def rescue_train_command(command: str, *args: str) -> list[str]:
    """``python -m rescue_train COMMAND ARGS`` with this interpreter."""
    return [sys.executable, "-m", "rescue_train", command, *args]


def training_command(launch: LaunchSettings, recipe: str, overrides: Sequence[str], output_dir: Path) -> list[str]:
    """The training run of ``recipe`` with ``overrides`` into ``output_dir``, under ``rescue-train launch``
    (``accelerate launch`` that exits with the training's own status), so that whatever accelerate config the
    user gives applies (``resume=auto``, the default, continues an interrupted run from its last checkpoint).

    The executor gives each run its GPUs (``CUDA_VISIBLE_DEVICES``): an accelerate config's ``gpu_ids``
    (single_gpu.yaml says 0) would move every run to those, hence ``--gpu_ids all``; runs sharing a machine each
    need their own rendezvous port, hence ``--main_process_port 0``. Flags in ``launch.args`` come later and win."""
    command = rescue_train_command("launch")
    if launch.config_file:
        command += ["--config_file", str(find_yaml(launch.config_file, "configs/accelerate", "accelerate config"))]
    command += ["--gpu_ids", "all", "--main_process_port", "0"]
    return [*command, *shlex.split(launch.args), "-m", "rescue_train", "train", f"recipe={recipe}", *overrides,
            f"output_dir={output_dir}"]


def override(key: str, value: Any) -> str:
    """``key=value`` that the dot-list reads back as ``value`` (strings quoted, None as null)."""
    return f"{key}={json.dumps(value, ensure_ascii=False)}"
