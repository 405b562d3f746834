"""Output folders are complete or absent: real `kill -9`s of `convert` and `compare` at several points, and a
resumed prediction file whose last record lost its newline."""

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rescue_train.folders import complete_or_absent
from rescue_train.io import append_jsonl, read_jsonl

MARKED = b'{\n  "format": "rescue-train/output-folder/v1",\n  "command": "convert"\n}\n'  # what convert made


def tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path, with its bytes (datasets' cache files excepted)."""
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.startswith("cache-")}


def convert_args(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rescue_train", "convert", "bundled", "--output-dir", str(out), *extra]


def kill_when(args: list[str], ready, timeout: float = 120) -> None:
    """Start ``args``, SIGKILL it as soon as ``ready()`` holds; fail if it finished first."""
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + timeout
    while process.poll() is None and time.time() < deadline and not ready():
        time.sleep(0.01)
    assert process.poll() is None, "the command ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()


def partials(out: Path) -> list[Path]:
    return list(out.parent.glob(f".{out.name}.partial-*"))


def partial_has(out: Path, relative: str):
    return lambda: any((p / relative).exists() for p in partials(out))


@pytest.fixture(scope="module")
def clean_conversion(tmp_path_factory) -> dict[str, bytes]:
    out = tmp_path_factory.mktemp("clean") / "data"
    subprocess.run(convert_args(out), check=True, capture_output=True)
    return tree(out)


@pytest.mark.parametrize("point", ["split_manifest.json", pytest.param("itp/sft", marks=pytest.mark.slow),
                                   "stp/instances.jsonl", pytest.param("vp/gen", marks=pytest.mark.slow)])
def test_a_killed_convert_leaves_no_output_folder_and_a_rerun_completes(tmp_path, clean_conversion, point):
    out = tmp_path / "data"
    kill_when(convert_args(out), partial_has(out, point))
    assert not out.exists() and len(partials(out)) == 1
    subprocess.run(convert_args(out), check=True, capture_output=True)
    assert tree(out) == clean_conversion and partials(out) == []


def test_a_killed_reconversion_keeps_the_previous_complete_folder(tmp_path, clean_conversion):
    out = tmp_path / "data"
    subprocess.run(convert_args(out), check=True, capture_output=True)
    kill_when(convert_args(out, "--answer-format", "json"), partial_has(out, "ssp/sft"))
    assert tree(out) == clean_conversion
    subprocess.run(convert_args(out, "--tasks", "itp", "--answer-format", "json"), check=True, capture_output=True)
    converted = tree(out)
    assert partials(out) == [] and converted["itp/instances.jsonl"] == clean_conversion["itp/instances.jsonl"]
    assert converted["vp/instances.jsonl"] == clean_conversion["vp/instances.jsonl"]  # other tasks kept
    assert json.loads(converted["convert_meta.json"])["config"]["data"]["answer_format"] == "json"


def test_a_failing_writer_leaves_the_old_folder_untouched(tmp_path):
    final = tmp_path / "out"
    with complete_or_absent(final, "convert") as folder:
        (folder / "a.txt").write_text("first")
    with pytest.raises(RuntimeError, match="disk full"):
        with complete_or_absent(final, "convert") as folder:
            (folder / "a.txt").unlink()
            (folder / "a.txt").write_text("second")
            raise RuntimeError("disk full")
    assert tree(final) == {".rescue-train.json": MARKED, "a.txt": b"first"} and partials(final) == []


def test_convert_never_takes_over_a_folder_holding_something_else(tmp_path):
    from rescue_train.convert import ConvertConfig, convert

    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(ValueError) as info:
        convert(ConvertConfig(output_dir=str(tmp_path), tasks=["itp"]))
    assert str(info.value) == (f"{tmp_path}: not empty and not made by `rescue-train convert` (it holds notes.txt); "
                               "choose a new or empty folder for output_dir")
    assert tree(tmp_path) == {"notes.txt": b"mine"}


def test_an_output_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "out").write_text("keep me")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        with complete_or_absent(tmp_path / "out", "convert"):
            pass
    assert (tmp_path / "out").read_text() == "keep me"


@pytest.mark.slow
def test_a_compare_killed_while_converting_its_data_reruns_cleanly(tmp_path):
    out = tmp_path / "cmp"
    args = [sys.executable, "-m", "rescue_train", "compare", "recipe=rpp_cls", "strategies=[none]", "test_folds=[0]",
            f"output_dir={out}", "evaluation.bootstrap=20", "evaluation.permutations=20", "plots=false"]
    kill_when(args, partial_has(out / "data", "rpp/instances.jsonl"))
    assert not (out / "data").exists()
    subprocess.run(args, check=True, capture_output=True)
    assert (out / "data" / "rpp" / "cls" / "dataset_dict.json").exists() and partials(out / "data") == []
    assert json.loads((out / "results.json").read_text())["strategies"]


def test_a_record_that_lost_its_newline_is_not_glued_to_the_next(tmp_path):
    path = tmp_path / "predictions.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}')  # the crash came after the record, before its newline
    assert read_jsonl(path) == [{"id": "a"}, {"id": "b"}]
    append_jsonl(path, [{"id": "c"}])
    assert read_jsonl(path) == [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "predic')  # torn mid-record: dropped
    assert read_jsonl(path) == [{"id": "a"}, {"id": "b"}]
    append_jsonl(path, [{"id": "c"}])
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n{"id": "c"}\n'


def test_resume_passes_over_a_checkpoint_cut_short_by_a_kill(tmp_path):
    from rescue_train.sft.runner import last_checkpoint

    # 6: killed before the trainer state was written; 8: killed while writing it (an empty file)
    for step, state in ((2, "{}"), (4, "{}"), (6, None), (8, "")):
        folder = tmp_path / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text("{}")
        if state is not None:
            (folder / "trainer_state.json").write_text(state)
    assert last_checkpoint(tmp_path, "auto") == str(tmp_path / "checkpoints" / "checkpoint-4")
