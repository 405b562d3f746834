"""rescue_train/io.py: records read back are checked (file, line and field named), failed writes name their file
and leave no temporary file (the output folders' lock and marker: test_folders.py)."""

from __future__ import annotations

import json

import pytest

from rescue_train.cli import main as rescue_train
from rescue_train.io import check_record, read_json, read_jsonl, read_records, write_json_atomic

FIELDS = {"id": str, "task": str, "prediction": object, "scores": dict}


@pytest.mark.parametrize("line, message", [
    ('{"foo": 1}', "a prediction record lacks 'id', 'task', 'prediction', 'scores'"),
    ("42", "expected a prediction record (an object with id, task, prediction, scores), got int 42"),
    ('["a"]', 'expected a prediction record (an object with id, task, prediction, scores), got list ["a"]'),
    ('{"id": "a", "task": "rpp", "scores": {}}', "a prediction record lacks 'prediction'"),
    ('{"id": 3, "task": "rpp", "prediction": null, "scores": {}}',
     "a prediction record field 'id': expected a string, got int 3"),
    ('{"id": "a", "task": "rpp", "prediction": null, "scores": true}',
     "a prediction record field 'scores': expected an object, got bool true"),
    ('{"id": "a", "task": "rpp", "prediction": null, "scores": {}', "not valid JSON (Expecting ',' delimiter)"),
])
def test_a_record_of_the_wrong_shape_names_file_line_and_field(tmp_path, line, message):
    path = tmp_path / "predictions.jsonl"
    good = '{"id": "x", "task": "rpp", "prediction": ["a"], "scores": {}}'
    path.write_text(f"{good}\n\n{line}\n{good}\n")
    with pytest.raises(ValueError) as given:
        read_records(path, FIELDS, "a prediction record")
    assert str(given.value) == f"{path}:3: {message}"
    with pytest.raises(ValueError) as kept:  # one of our append-only files: the same check, the same words
        read_jsonl(path, FIELDS, "a prediction record")
    assert str(kept.value) == f"{path}:3: {message}".replace("not valid JSON", "corrupt record") + \
        ("; delete the run folder or the line" if "JSON" in message else "")


def test_numbers_are_never_booleans_and_object_takes_anything():
    check_record({"n": 1.5, "x": None}, {"n": (int, float), "x": object}, "here", "a row")
    with pytest.raises(ValueError, match=r"^here: a row field 'n': expected a number, got bool true$"):
        check_record({"n": True}, {"n": (int, float)}, "here", "a row")
    with pytest.raises(ValueError, match=r"^here: expected a row \(an object\), got str \"x\"$"):
        check_record("x", {}, "here", "a row")


def test_a_last_line_torn_by_a_kill_is_dropped_and_the_file_mended(tmp_path):
    path = tmp_path / "scores.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b"}\n{"id": "c", "sc')
    assert read_jsonl(path, {"id": str}) == [{"id": "a"}, {"id": "b"}]
    assert path.read_text() == '{"id": "a"}\n{"id": "b"}\n'
    assert read_jsonl(tmp_path / "absent.jsonl") == []


def test_a_json_file_cut_short_or_of_another_shape_names_the_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('{"table5": {"couple": {}}, "aggregates"')
    with pytest.raises(ValueError) as cut:
        read_json(path)
    assert str(cut.value) == (f"{path}: not valid JSON (Expecting ':' delimiter at line 1, column 40); the file is "
                              "cut short or damaged")
    path.write_text('{"table5": []}')
    with pytest.raises(ValueError) as shape:
        read_json(path, {"table5": dict, "aggregates": dict}, "an evaluation results file")
    assert str(shape.value) == f"{path}: an evaluation results file lacks 'aggregates'"


def test_report_and_agreement_stop_on_a_results_file_cut_short_or_a_bad_record(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text('{"table5": {}, "aggregates": {}, "records": [{"id"')
    assert rescue_train(["report", str(path)]) == 2
    assert capsys.readouterr().err == (f"rescue-train report: error: {path}: not valid JSON (Expecting ':' delimiter "
                                       f"at line 1, column 51); the file is cut short or damaged\n")
    path.write_text(json.dumps({"table5": {}, "aggregates": {}, "records": [{"task": "rpp", "scenario": "couple",
                                                                             "gold": "x"}]}))
    assert rescue_train(["report", str(path)]) == 2
    assert capsys.readouterr().err == (f"rescue-train report: error: {path}: records[0]: a prediction record lacks "
                                       f"'prediction'\n")
    human = tmp_path / "human.csv"
    human.write_text("id,score\ni0,3\n")
    path.write_text(json.dumps({"table5": {}, "aggregates": {}}))
    assert rescue_train(["agreement", str(path), "--human", str(human)]) == 2
    assert capsys.readouterr().err == (f"rescue-train agreement: error: {path}: an evaluation results file lacks "
                                       f"'records'\n")


def test_a_failed_write_names_its_file_and_leaves_no_temporary_file(tmp_path):
    target = tmp_path / "results.json"
    target.mkdir()  # the rename onto a folder fails, as a full disk would fail the write
    (target / "inside").write_text("x")
    with pytest.raises(OSError) as info:
        write_json_atomic(target, {"a": 1})
    assert str(info.value).endswith(f": '{target}'") and "cannot write it" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]
