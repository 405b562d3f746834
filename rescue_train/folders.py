"""Output folders: one writer each, and complete or absent whatever kills the writer.

* ``output_folder(folder, command)``: the folder a command writes, claimed for it (see below).
* ``complete_or_absent(final, command)``: see below.

One writer per output folder. A command writes only into a folder it created: creating one (or taking an empty
one) leaves ``.rescue-train.json`` in it, naming the command, and a non-empty folder without that marker (or with
another command's) is refused, naming what it holds. While a command writes, ``.rescue-train.lock`` holds its
pid, host and start; another process is refused with the holder's name while the holder lives, and takes the
lock over once it is gone (on this host: its pid has ended or now belongs to another process). A holder on
another host cannot be checked from here: the refusal says so, and deleting the lock file (once that process
is known to be gone) releases the folder. The lock file is made whole and then linked into place, which is
atomic on local file systems and on NFS.

``complete_or_absent(final, command)`` hands out a temporary sibling folder; only when the block ends without an
exception is it renamed to ``final``. A kill leaves ``final`` as it was (absent, or the previous complete
version) plus a hidden ``.NAME.partial-PID`` sibling, which the next writer of that folder removes once
its process is gone. An existing ``final`` is first mirrored into the temporary folder with hard links
(no copying), so what the writer keeps (a reused split manifest, other tasks' data) survives; a writer
must replace, never modify in place, a file it inherited that way (delete it first, or write it
atomically), because a hard link shares its content with the old folder. Its lock is the sibling
``.NAME.lock`` (a lock inside would make ``final`` exist before it is complete).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import socket
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from .io import read_json, write_json_atomic

PARTIAL = ".partial-"
OLD = ".old-"
MARKER = ".rescue-train.json"
LOCK = ".rescue-train.lock"
FOLDER_FORMAT = "rescue-train/output-folder/v1"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True

# ------------------------------------------------------------------------------------------ one writer per folder

def _process_start(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot, Linux), so that a reused pid is not taken for the
    holder; None where /proc does not say."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]  # field 22 of the line, counted after the command name


def _holder_gone(holder: dict[str, Any]) -> bool:
    """Whether the process named in a lock file has ended (only knowable for a holder on this host)."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    if not _alive(holder["pid"]):
        return True
    started = _process_start(holder["pid"])
    return bool(holder.get("pid_start") and started and started != holder["pid_start"])


def _read_holder(lock: Path) -> dict[str, Any] | None:
    try:
        holder = json.loads(lock.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {}  # unreadable: never taken for a holder that is gone
    return holder if isinstance(holder, dict) else {}


class FolderInUse(ValueError):
    """Another process holds the folder's lock."""


def _refusal(folder: Path, lock: Path, holder: dict[str, Any]) -> FolderInUse:
    who = (f"`rescue-train {holder.get('command', '?')}` (pid {holder.get('pid', '?')} on host "
           f"{holder.get('host', '?')}, since {holder.get('started', '?')})")
    if holder.get("host") == socket.gethostname():
        advice = "wait for it to finish, or choose another output_dir"
    else:
        advice = (f"it runs on another host, which cannot be checked from here: wait for it, choose another "
                  f"output_dir, or, if that process is gone (its node crashed), delete {lock} and rerun")
    return FolderInUse(f"{folder} is being written by {who}; {advice}")


@contextmanager
def folder_lock(folder: Path, command: str, lock: Path | None = None) -> Iterator[None]:
    """Hold ``lock`` (``folder/.rescue-train.lock`` unless given) while the block runs; a block inside another
    that holds it already (a command and the library call it makes) runs under the outer lock."""
    folder = Path(folder)
    lock = lock or folder / LOCK
    me = {"pid": os.getpid(), "host": socket.gethostname(), "command": command,
          "started": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
          "pid_start": _process_start(os.getpid())}
    held = _read_holder(lock)
    if held and all(held.get(k) == me[k] for k in ("pid", "host", "pid_start")):
        yield
        return
    draft = lock.with_name(f"{lock.name}.{os.getpid()}.tmp")
    write_json_atomic(draft, me)
    try:
        while True:
            try:
                os.link(draft, lock)  # fails when the lock exists: only one process can make it
                break
            except FileExistsError:
                holder = _read_holder(lock)
                if holder is None:  # released meanwhile
                    continue
                if not _holder_gone(holder):
                    raise _refusal(folder, lock, holder) from None
                stale = lock.with_name(f"{lock.name}.stale-{os.getpid()}")
                try:  # one taker wins the rename; a fresh lock moved by mistake is put back
                    os.rename(lock, stale)
                except FileNotFoundError:
                    continue
                if _read_holder(stale) != holder:
                    try:
                        os.link(stale, lock)
                    except FileExistsError:
                        pass
                stale.unlink(missing_ok=True)
    finally:
        draft.unlink(missing_ok=True)
    try:
        yield
    finally:
        held = _read_holder(lock)
        if held and all(held.get(k) == me[k] for k in ("pid", "host", "pid_start")):
            lock.unlink(missing_ok=True)


def check_owner(folder: Path, command: str) -> bool:
    """Whether ``folder`` (which exists) is ``command``'s own, or empty (True: the marker must be written);
    refuses another command's folder and a non-empty folder without a marker (one that 0.1 made, too)."""
    if not folder.is_dir():
        raise ValueError(f"{folder}: exists and is not a folder; choose another output_dir")
    marker = folder / MARKER
    if marker.is_file():
        made_by = read_json(marker, {"command": str}, "an output folder marker")["command"]
        if made_by != command:
            raise ValueError(f"{folder} was made by `rescue-train {made_by}`; choose another output_dir for "
                             f"`rescue-train {command}`")
        return False
    held = sorted(p.name for p in folder.iterdir() if p.name != LOCK)
    if held:
        shown = ", ".join(held[:5]) + (f" and {len(held) - 5} more" if len(held) > 5 else "")
        raise ValueError(f"{folder}: not empty and not made by `rescue-train {command}` (it holds {shown}); choose "
                         f"a new or empty folder for output_dir")
    return True


def _write_marker(folder: Path, command: str) -> None:
    write_json_atomic(folder / MARKER, {"format": FOLDER_FORMAT, "command": command})


def own_folder(folder: str | Path, command: str) -> Path:
    """Create ``folder`` for ``command`` (or check that it is its own, or empty) and mark it, without a lock
    (for subfolders of a locked folder)."""
    folder = Path(os.path.abspath(folder))
    if not folder.exists() or check_owner(folder, command):
        folder.mkdir(parents=True, exist_ok=True)
        _write_marker(folder, command)
    return folder


@contextmanager
def output_folder(folder: str | Path, command: str) -> Iterator[Path]:
    """``folder`` claimed for ``command`` while the block runs: created and marked, or checked to be its own,
    and locked against other writers."""
    folder = Path(os.path.abspath(folder))
    if folder.exists():
        check_owner(folder, command)  # before anything is written into it
    folder.mkdir(parents=True, exist_ok=True)
    with folder_lock(folder, command):
        own_folder(folder, command)
        yield folder


# ------------------------------------------------------------------------------------------ complete or absent

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
def complete_or_absent(final: str | Path, command: str) -> Iterator[Path]:
    """Yield a temporary folder to fill; on success it replaces ``final`` by renames. ``final`` must be
    ``command``'s own (see :func:`output_folder`)."""
    final = Path(os.path.abspath(final))  # "." or "out/" have a name to put a sibling beside
    fresh = not final.exists() or check_owner(final, command)
    final.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(final, command, final.with_name(f".{final.name}.lock")):
        remove_abandoned(final)
        partial = final.with_name(f".{final.name}{PARTIAL}{os.getpid()}")
        if final.is_dir():
            shutil.copytree(final, partial, copy_function=_link_or_copy, symlinks=True)
        else:
            partial.mkdir()
        if fresh:
            _write_marker(partial, command)
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
