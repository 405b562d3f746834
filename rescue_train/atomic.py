"""Output folders that are complete or absent, whatever kills the writer.

``complete_or_absent(final)`` hands out a temporary sibling folder; only when the block ends without an
exception is it renamed to ``final``. A kill leaves ``final`` as it was (absent, or the previous complete
version) plus a hidden ``.NAME.partial-PID`` sibling, which the next writer of that folder removes once
its process is gone. An existing ``final`` is first mirrored into the temporary folder with hard links
(no copying), so what the writer keeps (a reused split manifest, other tasks' data) survives; a writer
must replace, never modify in place, a file it inherited that way (delete it first, or write it
atomically), because a hard link shares its content with the old folder.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PARTIAL = ".partial-"
OLD = ".old-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_abandoned(final: Path) -> None:
    """Delete the temporary siblings of ``final`` left by writers that were killed."""
    for marker in (PARTIAL, OLD):
        for leftover in final.parent.glob(f".{final.name}{marker}*"):
            pid = leftover.name.rsplit("-", 1)[-1]
            if not pid.isdigit() or not _alive(int(pid)) or int(pid) == os.getpid():
                shutil.rmtree(leftover, ignore_errors=True)


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)


@contextmanager
def complete_or_absent(final: str | Path) -> Iterator[Path]:
    """Yield a temporary folder to fill; on success it replaces ``final`` by renames."""
    final = Path(os.path.abspath(final))  # "." or "out/" have a name to put a sibling beside
    if final.exists() and not final.is_dir():
        raise ValueError(f"{final}: exists and is not a folder; choose another output folder")
    final.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned(final)
    partial = final.with_name(f".{final.name}{PARTIAL}{os.getpid()}")
    if final.is_dir():
        shutil.copytree(final, partial, copy_function=_link_or_copy, symlinks=True)
    else:
        partial.mkdir()
    try:
        yield partial
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if final.exists():
        old = final.with_name(f".{final.name}{OLD}{os.getpid()}")
        final.rename(old)
        partial.rename(final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        partial.rename(final)
