"""How the runs an experiment launches are started: the ``launch.*`` keys that ``compare`` and ``cv`` share and the
command line of every training run they start.

:class:`LaunchSettings` is the executor's :class:`~rescue_train.executor.ExecutorSettings` (``launch.executor``,
``launch.parallel``, ``launch.gpus_per_run``, ``launch.slurm.*``: where each run executes) plus how a training run
is started (``launch.config_file``, ``launch.args``) and whether its checkpoints are kept. Every training run is
the ordinary training path under ``accelerate launch`` (:func:`training_command`, one function for compare and cv,
so both start their runs the same way); every evaluation the ordinary ``rescue-train eval``
(:func:`rescue_train_command`). The runs themselves are :class:`~rescue_train.executor.Job` s handed to
:func:`rescue_train.executor.run_jobs`.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from .executor import ExecutorSettings
from .settings import find_yaml, meaning


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


def problems(launch: LaunchSettings) -> list[str]:
    """What would stop the training runs before the first starts: the executor's settings and, for runs on this
    machine, an accelerate config asking for GPUs it does not have."""
    from .executor import problems as executor_problems
    from .executor import visible_gpus

    found = executor_problems(launch)
    if not found and launch.executor == "local":
        found += [p for p in [gpu_config_problem(launch.config_file, visible_gpus(), "launch.config_file")] if p]
    return found


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
