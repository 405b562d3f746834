"""``rescue-train launch [accelerate launch options] train.py ARGS...``: ``accelerate launch`` that ends as the
training ends.

accelerate's launcher answers a failed training process with a traceback of its own (``CalledProcessError``, or
torch's ``ChildFailedError`` for several processes) after the training's one-line error, and its ``--quiet``
exits 1 whatever the training's status. This runs the same launcher, with every option of ``accelerate launch``
(config files included), and exits with the training process's own status instead: a bad setting ends in the
one ``rescue-train train: error: ...`` line and status 2, as without a launcher.

``--config_file`` also takes a shipped config by name (``zero3``, ``multi_gpu``: ``configs/accelerate``). A
DeepSpeed file the config names by a relative path that is not there from the current folder is taken from the
config's own folder (the shipped ``zero3.yaml`` names ``configs/accelerate/zero3.json``, relative to a checkout),
so that a config works from any folder and from an installed wheel.
"""

from __future__ import annotations

import signal
import tempfile
from pathlib import Path

from .base import Command

USAGE = """usage: rescue-train launch [accelerate launch options] train.py recipe=NAME [key=value ...]
       rescue-train launch [accelerate launch options] -m rescue_train train recipe=NAME [key=value ...]

accelerate launch (the same options: --config_file, --num_processes, --multi_gpu, ...; accelerate launch
--help lists them) that exits with the training's own status and message, without the launcher's traceback.
--config_file takes a path or a shipped config's name: cpu, single_gpu, multi_gpu, fsdp, zero3."""


def exit_status(code: int) -> int:
    """A process status as a shell reports it: a process killed by signal N is 128 + N."""
    return 128 - code if code < 0 else code


def load(inputs: list[str], overrides: list[str]):
    from accelerate.commands.launch import launch_command_parser

    return launch_command_parser().parse_args(inputs)


def config_for_here(config_file: str, scratch: Path) -> str:
    """The accelerate config to hand to the launcher: ``config_file`` found by name or path, rewritten into
    ``scratch`` when its DeepSpeed file is named by a relative path that only its own folder resolves."""
    from ..settings import find_yaml, read_yaml, to_yaml

    found = find_yaml(config_file, "configs/accelerate", "accelerate config")
    config = read_yaml(found)
    deepspeed = (config.get("deepspeed_config") or {}) if isinstance(config, dict) else {}
    named = deepspeed.get("deepspeed_config_file")
    if not named or Path(named).is_absolute() or Path(named).exists():
        return str(found)
    beside = found.parent / Path(named).name
    if not beside.is_file():
        raise ValueError(f"{found}: deepspeed_config_file {named} is neither there from {Path.cwd()} nor beside "
                         f"the config ({beside})")
    rewritten = scratch / found.name
    rewritten.write_text(to_yaml({**config, "deepspeed_config": {**deepspeed, "deepspeed_config_file": str(beside)}}),
                         encoding="utf-8")
    return str(rewritten)


def run(args) -> int:
    import subprocess

    from accelerate.commands.launch import launch_command
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from .. import jobs

    problem = jobs.gpu_config_problem(args.config_file, jobs.visible_gpus())
    if problem:
        raise ValueError(problem)
    try:
        with tempfile.TemporaryDirectory(prefix="rescue-train-launch-") as scratch:
            if args.config_file:
                args.config_file = config_for_here(args.config_file, Path(scratch))
            launch_command(args)
    except subprocess.CalledProcessError as failed:  # one process: the child has printed its own error
        return exit_status(failed.returncode)
    except ChildFailedError as failed:  # several processes (torch.distributed.run): the first one that failed
        return exit_status(failed.get_first_failure()[1].exitcode)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return 0


COMMAND = Command("launch", USAGE, load, run, inputs=True, raw=True)
