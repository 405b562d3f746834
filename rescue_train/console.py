"""What a command shows on the console, and what goes to its run's log file instead.

The console gets our own lines (progress bars, results, warnings); the engines' chatter (vLLM's INFO lines and
weight-loading warnings, its engine process's output, C-level messages such as a missing libtcmalloc) goes to the
run's log file, whole. That chatter is written to the process's file descriptors 1 and 2: by child processes that
inherit them, by C code, and by loggers that (re)configure their handlers on ``sys.stdout`` at any moment. So
within :func:`chatter_to` those descriptors, and ``sys.stdout``/``sys.stderr`` with them, point at the log, and our
own lines are written to :func:`shown` (and :func:`shown_err`), the console saved before.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator, TextIO

_consoles: list[tuple[TextIO, TextIO]] = []  # (out, err) of the console, while chatter goes to a log


def shown() -> TextIO:
    """Where our own lines go: the console (``sys.stdout`` unless chatter is being sent to a log)."""
    return _consoles[-1][0] if _consoles else sys.stdout


def shown_err() -> TextIO:
    return _consoles[-1][1] if _consoles else sys.stderr


@contextlib.contextmanager
def chatter_to(log: Path, *, verbose: bool = False) -> Iterator[None]:
    """Within the block, whatever is written to file descriptors 1 and 2 (libraries, C code, child processes) is
    appended to ``log``; our lines, written to :func:`shown` and :func:`shown_err`, stay on the console.
    ``verbose``: everything stays on the console."""
    if verbose:
        yield
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    out, err = shown(), shown_err()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    # The console as it was: our streams where they are not the descriptors (a test's capture), else copies of them.
    console = [stream if _fd(stream) != fd else open(saved[fd], "w", encoding=stream.encoding or "utf-8",
                                                     errors="replace", buffering=1, closefd=False)
               for stream, fd in ((out, 1), (err, 2))]
    try:
        with open(log, "ab", buffering=0) as sink:
            for fd in (1, 2):
                os.dup2(sink.fileno(), fd)
            _consoles.append((console[0], console[1]))
            try:
                yield
            finally:
                _consoles.pop()
                for stream in (sys.stdout, sys.stderr, *console):
                    stream.flush()
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


def _fd(stream) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):
        return None
