"""Accelerator facts shared by training and evaluation: native bf16, the GPUs one process would spread over,
giving device memory back, and the GPUs and CPUs of this machine shared out between the runs the executor starts
(``local_slots``)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

from .settings import ConfigError

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def native_bf16() -> bool:
    """True on a CUDA GPU that computes in bf16 natively (Ampere and later). torch's plain
    ``is_bf16_supported()`` also says yes on GPUs that only emulate bf16 (V100, T4), where it is slow and
    fp16/fp32 are the right choices."""
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported(including_emulation=False)


def gpus_without_launcher() -> int:
    """How many GPUs transformers' Trainer would spread this process over with ``nn.DataParallel``: all that
    are visible when no launcher started it (``WORLD_SIZE`` unset or 1), else 0. With more than one, each
    batch is split over them and multiplied by their number, which trl refuses and which makes a run of
    fixed steps see that many times the samples of a one-GPU run."""
    import torch

    if int(os.environ.get("WORLD_SIZE", "1")) > 1 or not torch.cuda.is_available():
        return 0
    return torch.cuda.device_count()


def release_memory() -> None:
    """Collect unreachable objects and return the CUDA caching allocator's free blocks to the driver, so that
    another engine (vLLM measures free memory when it starts) or model can use them."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def visible_gpus() -> list[str]:
    """The GPUs this process may hand out: ``CUDA_VISIBLE_DEVICES`` when set, else those ``nvidia-smi`` lists."""
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is not None:
        return [g.strip() for g in given.split(",") if g.strip()]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, line in enumerate(line for line in listed.splitlines() if line.startswith("GPU"))]


def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return list(range(os.cpu_count() or 1))


@dataclass
class Slot:
    """Where one local run executes: its GPUs and the CPUs whose number sets its threads."""

    gpus: tuple[str, ...]
    cpus: tuple[int, ...]

    def env(self, ranks: int = 1) -> dict[str, str]:
        """The child's environment for this slot (``ranks``: vLLM CPU workers that split the slot's CPUs)."""
        threads = str(max(1, len(self.cpus)))
        env = {name: threads for name in THREAD_VARIABLES}
        env["CUDA_VISIBLE_DEVICES"] = ",".join(self.gpus)
        if not self.gpus:  # vLLM's CPU build binds its threads to cores itself: give it this slot's
            ranks = max(1, min(ranks, len(self.cpus)))
            size = len(self.cpus) // ranks
            env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(
                ",".join(map(str, self.cpus[r * size:(r + 1) * size])) for r in range(ranks))
        return env


def local_slots(parallel: int, gpus_per_run: int | None) -> list[Slot]:
    """``parallel`` slots: each ``gpus_per_run`` GPUs of those visible (none on a CPU machine) and an equal share
    of the CPUs. Too few GPUs is an error naming what was asked and what is there."""
    gpus = visible_gpus()
    per_run = (1 if gpus else 0) if gpus_per_run is None else gpus_per_run
    if parallel < 1 or per_run < 0:
        raise ConfigError(f"launch.parallel must be >= 1 and launch.gpus_per_run >= 0, got {parallel}, {per_run}")
    if parallel * per_run > len(gpus):
        seen = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f"CUDA_VISIBLE_DEVICES={seen}" if seen is not None else "nvidia-smi"
        raise ConfigError(f"launch.parallel={parallel} x launch.gpus_per_run={per_run} needs {parallel * per_run} "
                          f"GPUs; {len(gpus)} visible ({where}). Lower launch.parallel, or set "
                          f"launch.gpus_per_run=0 to run on the CPU")
    cpus = usable_cpus()
    share = max(1, len(cpus) // parallel)
    return [Slot(tuple(gpus[i * per_run:(i + 1) * per_run]),
                 tuple(cpus[(i * share) % len(cpus):][:share]) or tuple(cpus[:share])) for i in range(parallel)]
