"""Every JSON and JSONL read and write of the toolkit, and output folders that are complete or absent.

* ``write_json_atomic`` writes through a temporary file and a rename; ``read_jsonl`` / ``append_jsonl`` keep
  append-only record files whose last line a kill may have torn (it is dropped on the next read).
* ``complete_or_absent(final)``: see below.

Output folders that are complete or absent, whatever kills the writer.

``complete_or_absent(final)`` hands out a temporary sibling folder; only when the block ends without an
exception is it renamed to ``final``. A kill leaves ``final`` as it was (absent, or the previous complete
version) plus a hidden ``.NAME.partial-PID`` sibling, which the next writer of that folder removes once
its process is gone. An existing ``final`` is first mirrored into the temporary folder with hard links
(no copying), so what the writer keeps (a reused split manifest, other tasks' data) survives; a writer
must replace, never modify in place, a file it inherited that way (delete it first, or write it
atomically), because a hard link shares its content with the old folder.
"""

from __future__ import annotations

import json
import os
import shutil
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

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


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # backslashreplace: a lone surrogate (from a model answer) is written as its JSON escape and reads back.
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False, default=str) + "\n",
                   encoding="utf-8", errors="backslashreplace")
    tmp.replace(path)


def read_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            if number >= len(lines) - 1:  # the last line, cut by a kill mid-write: drop it and go on
                write_jsonl_atomic(path, records)
                break
            raise ValueError(f"{path}:{number}: corrupt record ({exc.msg}); delete the run folder or the line") from None
    if lines[-1]:  # the crash also cost the last record its newline: end the line, or the next append joins it
        write_jsonl_atomic(path, records)
    return records


# A lone surrogate (a model answer's escaped "\\ud800") cannot be written as UTF-8: backslashreplace writes
# it as the JSON escape it came from (it only occurs inside JSON strings), so every line reads back.
def write_jsonl_atomic(path: Path, records: Iterable[dict]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8",
                   errors="backslashreplace")
    tmp.replace(path)


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    with path.open("a", encoding="utf-8", errors="backslashreplace") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
