"""Whatever a user points the loader at: each class of odd input loads, loads with a note, or stops with
one located error (exit 2 from the CLI), never a traceback or a silently dropped file."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from factory import raw_sample, row, strategy

from rescue_train.cli import main as cli_main
from rescue_train.data import DataError, load_benchmark
from rescue_train.data.splits import assign_units

NOT_CLIENTS = "(participants are the clients; the therapist and the group words Couple/Family are not)"
ONE_SPELLING = "only in letter case or Unicode normalisation; names are matched exactly, so spell each person one way"


def write_lines(path, lines):
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def error_of(source) -> str:
    with pytest.raises(DataError) as info:
        load_benchmark(source)
    return str(info.value)


def one_row_sample(row_text: str) -> str:
    """A jsonl line whose only row is ``row_text`` (raw JSON, so it can hold what json.dumps cannot write)."""
    return '{"sample_id": "a/1", "scenario": "couple", "participants": ["Ann"], "rows": [' + row_text + ']}'


def intensity_line(literal: str) -> str:
    return one_row_sample('{"row_index": 1, "primary_speaker": "Ann", "internal_emotion": '
                          '[{"person": "Ann", "emotion_description": "tense", "intensity": ' + literal + '}]}')


# ------------------------------------------------------------------------------------ participant lists

def test_therapist_group_words_and_repeats_leave_participants_with_a_note(tmp_path):
    path = write_lines(tmp_path / "b.jsonl", [
        raw_sample("cal_and_dee/001", [row("Cal", ["Dee"])], participants=["Cal", "Therapist", "Dee", "Couple", "Cal"]),
        raw_sample("fam/001", [row("Mia", ["Family"])], scenario="family", participants=["family", "Mia", "THERAPIST"]),
    ])
    bench = load_benchmark(path)
    assert [s.participants for s in bench.samples] == [("Cal", "Dee"), ("Mia",)]
    where = f"{path}:1, sample 'cal_and_dee/001', field 'participants'"
    where2 = f"{path}:2, sample 'fam/001', field 'participants'"
    assert bench.notes == [f"{where}: removed 'Therapist' {NOT_CLIENTS}", f"{where}: removed 'Couple' {NOT_CLIENTS}",
                           f"{where}: removed a repeated 'Cal'", f"{where2}: removed 'family' {NOT_CLIENTS}",
                           f"{where2}: removed 'THERAPIST' {NOT_CLIENTS}"]


def test_a_speaker_missing_from_participants_is_noted_with_what_it_costs(tmp_path):
    """A red-team sample: Eve speaks but is not listed, so the therapist's strategy aimed at her is not an STP
    instance; the load says so, once per speaker, naming the first row."""
    from collections import Counter

    from rescue_train.tasks.targets import support_rows

    aimed = row("Therapist", ["Eve"], support_strategy=[strategy(["Eve"], "validation")])
    path = write_lines(tmp_path / "b.jsonl", [
        raw_sample("ann_and_ben/001", [row("Ann", ["Ben"]), row("Eve", ["Ann"]), aimed, row("Eve", ["Ben"])]),
    ])
    bench = load_benchmark(path)
    assert bench.notes == [f"{path}:1, sample 'ann_and_ben/001', field 'participants': 'Eve' speaks (first in row 2) "
                           f"but is not listed; therapist rows that target 'Eve' are left out of STP (target is not a "
                           f"participant of the sample)"]
    excluded: Counter = Counter()
    assert support_rows(bench.samples[0], "set", excluded) == []
    assert excluded == Counter({("couple", "target is not a participant of the sample"): 1})


def test_the_therapist_listed_as_a_participant_no_longer_joins_unrelated_couples(tmp_path):
    """The release's ER/VP checkpoint records list the therapist among participants."""
    path = write_lines(tmp_path / "b.jsonl", [
        raw_sample("ann_and_ben/001", [row("Ann", ["Ben"])], participants=["Ann", "Ben", "Therapist"]),
        raw_sample("cal_and_dee/001", [row("Cal", ["Dee"])], participants=["Cal", "Dee", "Therapist"]),
    ])
    assert assign_units(load_benchmark(path).samples) == {"ann_and_ben/001": "ann_and_ben",
                                                          "cal_and_dee/001": "cal_and_dee"}


def test_stp_candidates_hold_each_client_once(tmp_path):
    from rescue_train.tasks.targets import candidate_targets

    path = write_lines(tmp_path / "b.jsonl", [raw_sample("a/1", [
        row("Ann", ["Ben"]), row("Therapist", ["Ann"], support_strategy=[strategy(["Ann"], "evoke")])],
        participants=["Ann", "Ben", "Ann", "Couple", "Therapist"])])
    (sample,) = load_benchmark(path).samples
    assert candidate_targets(sample, "collapse") == ("Ann", "Ben", "Couple")


@pytest.mark.parametrize("participants, rows, where, message", [
    (["Ann", "ann"], [row("Ann")], "field 'participants'", "'Ann' and 'ann' differ " + ONE_SPELLING),
    # "José" precomposed and with a combining accent: two spellings of one name
    (["Jos\u00e9", "Ben"], [row("Jose\u0301", ["Ben"])], "row 1, field 'primary_speaker'",
     "'Jose\u0301' differs from 'Jos\u00e9' " + ONE_SPELLING),
    (["Ann", "Ben"], [row("Ann", ["Ben"]), row("therapist", ["Ann"])], "row 2, field 'primary_speaker'",
     "'therapist' differs from 'Therapist' " + ONE_SPELLING),
    (["Ann", "Ben"], [row("Therapist", ["ANN"])], "row 1, field 'target'", "'ANN' differs from 'Ann' " + ONE_SPELLING),
    (["Ann", "Ben"], [row("Therapist", ["Ann"], support_strategy=[strategy(["couple"], "join")])],
     "row 1, field 'support_strategy[0].target'", "'couple' differs from 'Couple' " + ONE_SPELLING),
])
def test_two_spellings_of_one_name_are_an_error(tmp_path, participants, rows, where, message):
    path = write_lines(tmp_path / "b.jsonl", [raw_sample("a/1", rows, participants=participants)])
    assert error_of(path) == f"{path}:1, sample 'a/1', {where}: {message}"


def test_a_per_sample_file_without_participants_checks_spellings_too(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "1.json").write_text(json.dumps({"rows": raw_sample("x", [
        row("Ann", ["Ben"]), row("Ben", ["ann"])])["rows"]}))
    assert error_of(tmp_path) == (f"{tmp_path}/a/1.json, sample 'a/1', row 2, field 'target': "
                                  f"'ann' differs from 'Ann' {ONE_SPELLING}")


# ------------------------------------------------------------------------------------ folder mode

def per_sample_file(path: Path, speaker: str = "Ann") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rows": raw_sample("x", [row(speaker, ["Ben"]), row("Therapist", [speaker])])["rows"]}))


def test_folder_mode_reads_or_names_every_path(tmp_path):
    root, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    per_sample_file(root / "ann_and_ben" / "001.json")
    per_sample_file(root / "ann_and_ben" / "002.JSON")                       # upper-case extension
    per_sample_file(elsewhere / "001.Json")
    (root / "eve_and_fay").symlink_to(elsewhere, target_is_directory=True)   # symlinked sub-folder
    (root / "extra").mkdir()
    write_lines(root / "extra" / "more.JSONL", [raw_sample("cal_and_dee/001", [row("Cal", ["Dee"])],
                                                           participants=["Cal", "Dee"])])
    (root / "ann_and_ben" / "README.txt").write_text("transcribed by hand")
    (root / ".DS_Store").write_bytes(b"\0")
    (root / ".cache").mkdir()
    (root / "dangling.json").symlink_to(root / "gone.json")
    (root / "ann_and_ben" / "up").symlink_to(root, target_is_directory=True)  # a loop
    (root / "self.json").symlink_to(root / "self.json")                        # a link to itself
    (root / "copy.json").symlink_to(root / "ann_and_ben" / "001.json")         # the same file twice
    (root / "blank.json").write_text("  \n")
    bench = load_benchmark(root)
    assert [s.sample_id for s in bench.samples] == [
        "ann_and_ben/001", "ann_and_ben/002", "eve_and_fay/001", "cal_and_dee/001"]
    assert bench.notes == [
        f"{root}/.cache: skipped (a hidden folder)",
        f"{root}/.DS_Store: skipped (a hidden file)",
        f"{root}/dangling.json: skipped (a symbolic link to nothing: {root}/gone.json is missing or loops)",
        f"{root}/self.json: skipped (a symbolic link to nothing: {root}/self.json is missing or loops)",
        f"{root}/ann_and_ben/up: skipped (a link to a folder inside this tree: {root}; it is read under its own "
        f"path, and following the link would read it twice or loop)",
        f"{root}/ann_and_ben/README.txt: skipped (not a .json or .jsonl file)",
        f"{root}/copy.json: skipped (the same file as {root}/ann_and_ben/001.json)",
        f"{root}/blank.json: skipped (an empty file)",
    ]


def test_a_folder_with_nothing_to_read_is_an_error(tmp_path):
    (tmp_path / "a.json").write_text("")
    (tmp_path / "b.jsonl").write_text("\n\n")
    assert error_of(tmp_path) == (f"{tmp_path}: no samples: the input is empty (2 path(s) skipped: see the notes)"
                                  f"\n  note: {tmp_path}/a.json: skipped (an empty file)"
                                  f"\n  note: {tmp_path}/b.jsonl: skipped (an empty file)")


def test_upper_case_extensions_of_a_single_file(tmp_path):
    one = raw_sample("a/1", [row("Ann", ["Ben"])])
    (tmp_path / "ONE.JSON").write_text(json.dumps(one))
    write_lines(tmp_path / "ALL.JSONL", [one, raw_sample("b/1", [row("Ann", ["Ben"])])])
    assert [s.sample_id for s in load_benchmark(tmp_path / "ONE.JSON").samples] == ["a/1"]
    assert [s.sample_id for s in load_benchmark(tmp_path / "ALL.JSONL").samples] == ["a/1", "b/1"]


def test_lines_of_samples_in_a_json_file_get_a_hint(tmp_path):
    path = write_lines(tmp_path / "b.json", [raw_sample("a/1", [row("Ann")]), raw_sample("b/1", [row("Ann")])])
    assert error_of(path) == (f"{path}:2: invalid JSON: Extra data at column 1; a .json file holds one sample or a "
                              f"list of them, one sample per line is a .jsonl file")


# ------------------------------------------------------------------------------------ located errors

@pytest.mark.parametrize("literal, expected", [
    ("Infinity", "expected a finite number, got float inf"),
    ("-Infinity", "expected a finite number, got float -inf"),
    ("NaN", "expected a finite number, got float nan"),
    ('"inf"', "expected a finite number, got str 'inf'"),
    ("1" + "0" * 400, "expected a number within a float's range, got int 1" + "0" * 59 + "..."),
    ("9" * 5000, "expected a number within a float's range, got a number with 5000 digits"),
    ("-" + "9" * 6000, "expected a number within a float's range, got a number with 6000 digits"),
])
def test_odd_numbers_as_intensity_are_located_errors(tmp_path, literal, expected):
    path = write_lines(tmp_path / "b.jsonl", [intensity_line(literal)])
    assert error_of(path) == f"{path}:1, sample 'a/1', row 1, field 'internal_emotion[0].intensity': {expected}"


def test_a_huge_integer_in_a_field_nobody_reads_is_harmless(tmp_path):
    line = one_row_sample('{"row_index": 1, "primary_speaker": "Ann", "relation_cycle_evidence_rows": [' +
                          "7" * 5000 + "]}")
    (sample,) = load_benchmark(write_lines(tmp_path / "b.jsonl", [line])).samples
    assert sample.rows[0].speaker == "Ann"


def test_deep_nesting_is_a_located_error(tmp_path):
    path = write_lines(tmp_path / "b.jsonl", [intensity_line("1"), '{"rows": ' + "[" * 50_000 + "]" * 50_000 + "}"])
    assert error_of(path) == f"{path}:2: lists or objects nested too deeply to read (Python's limit is about 1000 levels)"


def test_deep_nesting_in_a_json_file_is_a_located_error(tmp_path):
    path = tmp_path / "one.json"
    path.write_text('{"sample_id": "a/1", "rows": [' + "[" * 3000 + "]" * 3000 + "]}")
    assert error_of(path) == f"{path}: lists or objects nested too deeply to read (Python's limit is about 1000 levels)"


def test_lone_surrogate_is_a_located_error_but_a_pair_is_text(tmp_path):
    lone = one_row_sample('{"row_index": 1, "primary_speaker": "Ann", "dialogue_cleaned": "fine \\ud83d"}')
    path = write_lines(tmp_path / "b.jsonl", [lone])
    assert error_of(path) == (f"{path}:1, sample 'a/1', row 1, field 'dialogue_cleaned': text holds a lone "
                              f"surrogate \\ud83d at character 6 (half of a UTF-16 pair: not valid Unicode)")
    in_a_list = one_row_sample('{"row_index": 1, "primary_speaker": "Ann", "body_posture": [{"person": "Ann", '
                               '"description": "ok"}, {"person": "Ann", "description": "\\uDC00"}]}')
    path = write_lines(tmp_path / "c.jsonl", [in_a_list])
    assert error_of(path) == (f"{path}:1, sample 'a/1', row 1, field 'body_posture[1].description': text holds a "
                              f"lone surrogate \\udc00 at character 1 (half of a UTF-16 pair: not valid Unicode)")
    pair = one_row_sample('{"row_index": 1, "primary_speaker": "Ann", "dialogue_cleaned": "fine \\ud83d\\ude00"}')
    (sample,) = load_benchmark(write_lines(tmp_path / "d.jsonl", [pair])).samples
    assert sample.rows[0].dialogue == "fine \U0001f600"


def test_a_lone_surrogate_in_a_list_of_samples_names_the_item(tmp_path):
    path = tmp_path / "two.json"
    path.write_text('[' + one_row_sample('{"row_index": 1, "primary_speaker": "Ann"}') + ', ' +
                    one_row_sample('{"row_index": 1, "primary_speaker": "Ann \\udfff"}').replace("a/1", "b/1") + ']')
    assert error_of(path) == (f"{path}:2, sample 'b/1', row 1, field 'primary_speaker': text holds a lone "
                              f"surrogate \\udfff at character 5 (half of a UTF-16 pair: not valid Unicode)")


def test_a_convert_output_folder_is_not_taken_for_a_benchmark(tmp_path):
    from rescue_train.convert import ConvertConfig, convert
    from rescue_train.tasks import DataConfig

    convert(ConvertConfig(data=DataConfig(split="none"), output_dir=str(tmp_path / "out"), tasks=["itp"]))
    assert error_of(tmp_path / "out") == (f"{tmp_path / 'out'}: this is an output folder of `rescue-train convert`, "
                                          f"not a benchmark: point at the source it was converted from (see its "
                                          f"convert_meta.json)")


def test_an_unreadable_file_is_a_located_error(tmp_path, monkeypatch):
    path = write_lines(tmp_path / "b.jsonl", [intensity_line("3")])
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads anything: make the read fail as it fails for a user
        real_read = Path.read_bytes

        def refuse(self):
            if self == path:
                raise PermissionError(13, "Permission denied", str(self))
            return real_read(self)

        monkeypatch.setattr(Path, "read_bytes", refuse)
    assert error_of(path) == f"{path}: cannot read the file: Permission denied"


def test_invalid_utf8_is_read_as_latin1_with_a_note_naming_the_line(tmp_path):
    path = tmp_path / "b.jsonl"
    line = json.dumps(raw_sample("a/1", [row("Ann", dialogue="caf\u00e9")]), ensure_ascii=False).encode("latin-1")
    path.write_bytes(line + b"\n")
    bench = load_benchmark(path)
    assert bench.samples[0].rows[0].dialogue == "caf\u00e9"
    bad_byte = line.index(b"caf") + 3
    assert bench.notes == [f"{path}:1: not valid UTF-8 (invalid continuation byte at byte {bad_byte}); read as latin-1"]


# ------------------------------------------------------------------------------------ paths

@pytest.mark.parametrize("source", ["data/benchmark_191.jsonl", "./data", "/nowhere/at/all", "~/no_such_data",
                                    "runs/data/itp", "benchmark.json", "mydata"])
def test_a_missing_local_path_is_no_such_file_naming_the_current_folder(tmp_path, monkeypatch, source):
    monkeypatch.chdir(tmp_path)
    assert error_of(source) == (
        f"{source}: no such file or folder (current directory: {tmp_path}); expected a .jsonl or .json file, a "
        f"folder, 'bundled' or a Hugging Face dataset id like 'tomhu/relation_therapy'")


def test_a_failed_hub_lookup_is_one_message(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    message = error_of("someone/some_dataset")
    assert message.startswith(f"someone/some_dataset: not a file or folder in {tmp_path}, and loading it as the "
                              f"Hugging Face dataset 'someone/some_dataset' failed: ")
    assert "\n" not in message


# ------------------------------------------------------------------------------------ empty and duplicate

@pytest.mark.parametrize("name, content", [("b.jsonl", ""), ("b.jsonl", "\n \n"), ("b.json", "[]")])
def test_empty_input_is_an_error(tmp_path, name, content):
    (tmp_path / name).write_text(content)
    assert error_of(tmp_path / name) == f"{tmp_path / name}: no samples: the input is empty"


def test_a_duplicate_sample_id_names_both_lines(tmp_path):
    same = raw_sample("a/1", [row("Ann")])
    path = write_lines(tmp_path / "b.jsonl", [same, raw_sample("b/1", [row("Ann")]), same])
    assert error_of(path) == f"{path}:3, sample 'a/1': duplicate sample_id (also at {path}:1)"


def test_a_duplicate_across_files_of_a_tree_names_both_files(tmp_path):
    per_sample_file(tmp_path / "a" / "1.json")
    write_lines(tmp_path / "z.jsonl", [raw_sample("a/1", [row("Ann")])])
    assert error_of(tmp_path) == f"{tmp_path}/z.jsonl:1, sample 'a/1': duplicate sample_id (also at {tmp_path}/a/1.json)"


# ------------------------------------------------------------------------------------ the CLI

def test_cli_exits_2_with_the_message_and_prints_notes(tmp_path, capsys):
    path = write_lines(tmp_path / "b.jsonl", [intensity_line("Infinity")])
    assert cli_main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"rescue-train stats: error: {path}:1, sample 'a/1', row 1, field 'internal_emotion[0].intensity': "
                   f"expected a finite number, got float inf\n")
    path = write_lines(tmp_path / "c.jsonl", [raw_sample("a/1", [row("Ann", ["Ben"])],
                                                         participants=["Ann", "Ben", "Therapist"])])
    assert cli_main(["stats", str(path)]) == 0
    note = f"note: {path}:1, sample 'a/1', field 'participants': removed 'Therapist' {NOT_CLIENTS}"
    assert capsys.readouterr().out.rstrip().endswith(note)
    assert cli_main(["convert", str(path), "--output-dir", str(tmp_path / "out"), "--tasks", "itp", "--split", "none"]) == 0
    assert note in capsys.readouterr().out
    meta = json.loads((tmp_path / "out" / "convert_meta.json").read_text())
    assert meta["load_notes"] == [note.removeprefix("note: ")]


def test_cli_never_shows_a_traceback_for_deep_nesting_in_a_subprocess(tmp_path):
    path = write_lines(tmp_path / "b.jsonl", ['{"rows": ' + "[" * 200_000 + "]" * 200_000 + "}"])
    done = subprocess.run([sys.executable, "-m", "rescue_train", "stats", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (f"rescue-train stats: error: {path}:1: lists or objects nested too deeply to read (Python's "
                           f"limit is about 1000 levels)\n")
