"""What a command shows on the console, and what goes to its run's log file instead.

The console gets our own lines (progress bars, results, warnings); the engines' chatter (vLLM's INFO lines and
weight-loading warnings, its engine process's output, C-level messages such as a missing libtcmalloc) goes to the
run's log file, whole. The chatter is written to the process's file descriptors 1 and 2, by child processes that
inherit them and by loggers that hold the streams of the moment they were configured, so those descriptors are
pointed at the log, while ``sys.stdout`` and ``sys.stderr``, which our own lines use, keep the console.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from pathlib import Path
from typing import Iterator, Sequence


@contextlib.contextmanager
def chatter_to(log: Path, *, verbose: bool = False, loggers_of: Sequence[str] = ()) -> Iterator[None]:
    """Within the block, what libraries, C code and child processes write goes to ``log`` (appended); our own
    ``print``s, progress bars and warnings stay on the console. ``loggers_of``: modules that configure their
    logging on import (``vllm.logger``), imported first so that their handlers write to the log.
    ``verbose``: everything stays on the console."""
    if verbose:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    streams = sys.stdout, sys.stderr
    try:
        with open(log, "ab", buffering=0) as sink:
            for fd in (1, 2):
                os.dup2(sink.fileno(), fd)
            for module in loggers_of:
                if importlib.util.find_spec(module.split(".")[0]) is not None:
                    importlib.import_module(module)
            # Our streams, where they are the real descriptors (not a test's capture), keep the console.
            sys.stdout, sys.stderr = (_console(stream, saved[fd]) for stream, fd in zip(streams, (1, 2)))
            yield
    finally:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        sys.stdout, sys.stderr = streams
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _console(stream, fd: int):
    try:
        real = stream.fileno() in (1, 2)
    except (AttributeError, OSError, ValueError):
        real = False
    if not real:
        return stream
    return open(fd, "w", encoding=getattr(stream, "encoding", None) or "utf-8", errors="replace", buffering=1,
                closefd=False)
