"""rescue_train/folders.py: output folders are marked and locked against a second writer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from rescue_train.cli import main as rescue_train
from rescue_train.folders import LOCK, MARKER, FolderInUse, _process_start, folder_lock, output_folder


def _lock_of(pid: int) -> dict:
    return {"pid": pid, "host": socket.gethostname(), "command": "eval", "started": "2026-01-01T00:00:00+00:00",
            "pid_start": _process_start(pid)}


def test_a_folder_is_refused_while_its_writer_lives_and_taken_over_once_it_is_gone(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (folder / LOCK).write_text(json.dumps(_lock_of(holder.pid)))
        with pytest.raises(FolderInUse) as info:
            with folder_lock(folder, "eval"):
                pass
        assert str(info.value) == (f"{folder} is being written by `rescue-train eval` (pid {holder.pid} on host "
                                   f"{socket.gethostname()}, since 2026-01-01T00:00:00+00:00); wait for it to "
                                   f"finish, or choose another output_dir")
    finally:
        holder.kill()
        holder.wait()
    with folder_lock(folder, "eval"):
        mine = json.loads((folder / LOCK).read_text())
        assert (mine["pid"], mine["command"]) == (os.getpid(), "eval")
        with folder_lock(folder, "eval"):  # the library call inside a command runs under its lock
            pass
        assert (folder / LOCK).exists()
    assert sorted(p.name for p in folder.iterdir()) == []


def test_a_lock_from_another_host_is_refused_with_how_to_release_it(tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / LOCK).write_text(json.dumps({**_lock_of(os.getpid()), "host": "node-17", "pid": 4242}))
    with pytest.raises(FolderInUse) as info:
        with folder_lock(folder, "audit"):
            pass
    assert str(info.value).endswith(f"it runs on another host, which cannot be checked from here: wait for it, "
                                    f"choose another output_dir, or, if that process is gone (its node crashed), "
                                    f"delete {folder / LOCK} and rerun")


def test_an_output_folder_is_marked_and_another_commands_or_a_foreign_one_refused(tmp_path):
    with output_folder(tmp_path / "run", "eval") as folder:
        assert sorted(p.name for p in folder.iterdir()) == [MARKER, LOCK]
    assert json.loads((folder / MARKER).read_text()) == {"format": "rescue-train/output-folder/v1", "command": "eval"}
    assert sorted(p.name for p in folder.iterdir()) == [MARKER]
    with pytest.raises(ValueError) as other:
        with output_folder(folder, "audit"):
            pass
    assert str(other.value) == (f"{folder} was made by `rescue-train eval`; choose another output_dir for "
                                f"`rescue-train audit`")
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("x")
    with pytest.raises(ValueError) as taken:
        with output_folder(foreign, "eval"):
            pass
    assert str(taken.value) == (f"{foreign}: not empty and not made by `rescue-train eval` (it holds thesis.tex); "
                                f"choose a new or empty folder for output_dir")
    assert sorted(p.name for p in foreign.iterdir()) == ["thesis.tex"]


def test_eval_of_a_missing_model_folder_names_the_key_and_writes_nothing(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rescue_train(["eval", "model=./no/such/model", "tasks=[rpp]", f"output_dir={tmp_path / 'out'}"]) == 2
    assert capsys.readouterr().err == (f"rescue-train eval: error: model=./no/such/model: no such folder (current "
                                       f"directory: {tmp_path})\n")
    assert list(tmp_path.iterdir()) == []
