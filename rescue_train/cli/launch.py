"""``rescue-train launch [accelerate launch options] train.py ARGS...``: ``accelerate launch`` that ends as the
training ends.

accelerate's launcher answers a failed training process with a traceback of its own (``CalledProcessError``, or
torch's ``ChildFailedError`` for several processes) after the training's one-line error, and its ``--quiet``
exits 1 whatever the training's status. This runs the same launcher, with every option of ``accelerate launch``
(config files included), and exits with the training process's own status instead: a bad setting ends in the
one ``rescue-train train: error: ...`` line and status 2, as without a launcher.
"""

from __future__ import annotations

import signal

from .base import Command

USAGE = """usage: rescue-train launch [accelerate launch options] train.py recipe=NAME [key=value ...]
       rescue-train launch [accelerate launch options] -m rescue_train train recipe=NAME [key=value ...]

accelerate launch (the same options: --config_file, --num_processes, --multi_gpu, ...; accelerate launch
--help lists them) that exits with the training's own status and message, without the launcher's traceback."""


def exit_status(code: int) -> int:
    """A process status as a shell reports it: a process killed by signal N is 128 + N."""
    return 128 - code if code < 0 else code


def load(inputs: list[str], overrides: list[str]):
    from accelerate.commands.launch import launch_command_parser

    return launch_command_parser().parse_args(inputs)


def run(args) -> int:
    import subprocess

    from accelerate.commands.launch import launch_command
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    try:
        launch_command(args)
    except subprocess.CalledProcessError as failed:  # one process: the child has printed its own error
        return exit_status(failed.returncode)
    except ChildFailedError as failed:  # several processes (torch.distributed.run): the first one that failed
        return exit_status(failed.get_first_failure()[1].exitcode)
    except KeyboardInterrupt:
        return 128 + signal.SIGINT
    return 0


COMMAND = Command("launch", USAGE, load, run, inputs=True, raw=True)
