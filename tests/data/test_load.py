"""Loading every layout, the release's value conventions, and located errors for malformed input."""

import gc
import hashlib
import json
import subprocess
import sys
import types
import weakref

import pytest
from factory import emotion, raw_sample, row, strategy

from rescue_train.cli import main as cli_main
from rescue_train.data import DataError, load_benchmark, load_samples


def write_jsonl(path, objects):
    path.write_text("".join(json.dumps(o) + "\n" for o in objects))
    return path


def good(sample_id="ann_and_ben/001", **row_fields):
    """Two rows; ``row_fields`` override keys of row 2 (the therapist's), e.g. to break them."""
    return raw_sample(sample_id, [row("Ann", ["Ben"]), {**row("Therapist", ["Ann"]), **row_fields}])


def test_jsonl_values_conventions(tmp_path):
    rows = [
        row("Ann", ["Ben"], relation_pattern=None, relation_pattern_reason=None),
        row("Therapist", ["Ann"], relation_cycle_state="", support_strategy=[strategy(["Ann"], "evoke")]),
        {k: v for k, v in row("Ben", None).items() if k not in ("target", "internal_emotion")},
        row("Ann", None, body_posture=["slumped in the chair"], background_dialogue=None,
            internal_emotion=[{"intensity": "6", "emotion_description": "tense", "person": "Ann"}]),
    ]
    (s,) = load_samples(write_jsonl(tmp_path / "b.jsonl", [raw_sample("ann_and_ben/001", rows)]))
    assert [r.relation_cycle_state for r in s.rows] == [None, "", None, None]   # missing key = not annotated
    assert s.rows[0].relation_pattern is None and s.rows[1].relation_pattern is None
    assert s.rows[2].target == () and s.rows[2].internal_emotion == ()          # missing lists read as empty
    assert s.rows[3].body_posture[0].description == "slumped in the chair"      # bare string cue kept
    assert s.rows[3].internal_emotion[0].intensity_0_10 == 6                    # key order, numeric string
    assert s.rows[1].support_strategy[0].target == ("Ann",)


def test_odd_text_is_kept_and_bad_bytes_are_reported_not_fatal(tmp_path):
    mojibake = "I donâ€™t know"
    path = tmp_path / "b.jsonl"
    line1 = json.dumps(raw_sample("ann_and_ben/001", [row("Ann", dialogue=mojibake)]), ensure_ascii=False)
    line2 = json.dumps(raw_sample("cal_and_dee/001", [row("Cal", dialogue="caf\u00e9")]), ensure_ascii=False)
    path.write_bytes(line1.encode() + b"\n" + line2.encode("latin-1") + b"\n")
    bench = load_benchmark(path)
    assert bench.samples[0].rows[0].dialogue == mojibake
    assert bench.samples[1].rows[0].dialogue == "caf\u00e9"
    assert len(bench.notes) == 1 and ":2" in bench.notes[0] and "latin-1" in bench.notes[0]


def test_per_sample_tree_layout(tmp_path):
    family = raw_sample("ignored", [row("Mia", ["Family"]), row("Therapist", ["Mia"])])
    for key in ("sample_id", "scenario", "participants"):
        family.pop(key)
    couple = {"rows": good()["rows"]}
    (tmp_path / "family_therapy" / "003").mkdir(parents=True)
    (tmp_path / "ann_and_ben").mkdir()
    (tmp_path / "family_therapy" / "003" / "merged.json").write_text(json.dumps(family))
    (tmp_path / "ann_and_ben" / "001_seg.json").write_text(json.dumps(couple))
    (tmp_path / "manifest.json").write_text("")
    bench = load_benchmark(tmp_path)
    assert [(s.sample_id, s.scenario, s.participants) for s in bench.samples] == [
        ("ann_and_ben/001_seg", "couple", ("Ann", "Ben")), ("family_therapy/003/merged", "family", ("Mia",))]
    assert any("manifest.json: skipped" in n for n in bench.notes)


def test_saved_hf_dataset_layout(tmp_path):
    import datasets

    raw = good()
    records = [{**raw, "rows": json.dumps(raw["rows"])}]   # nested rows stored as a JSON string column
    datasets.Dataset.from_list(records).save_to_disk(str(tmp_path / "saved"))
    (s,) = load_samples(tmp_path / "saved")
    assert (s.sample_id, len(s.rows), s.rows[1].speaker) == ("ann_and_ben/001", 2, "Therapist")


def test_bundled_source_loads():
    samples = load_samples("bundled")
    assert {s.scenario for s in samples} == {"couple", "family"}


def test_a_model_made_before_loading_is_freed_after_it(one_torch_thread):
    """Loading leaves the garbage collector as it was: a model in a reference cycle (trl and accelerate
    patch ``forward`` with a method bound to the model) that exists while data is loaded is still collected
    once it is dropped. ``gc.freeze()`` during loading used to keep such a model, and its GPU memory, alive
    for the rest of the process."""
    import torch

    model = torch.nn.Linear(4, 4)
    model.forward = types.MethodType(lambda self, x: torch.nn.Linear.forward(self, x), model)  # the cycle
    alive = weakref.ref(model)
    load_benchmark("bundled")
    del model
    gc.collect()
    assert alive() is None
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_without_orjson_the_standard_library_reads_the_same_samples():
    """orjson is only a speed-up: where it is not installed (the lent GPU machine's image) the bundled
    benchmark loads into the same samples, with the same fingerprint and notes."""
    script = ("import sys; sys.modules['orjson'] = None  # makes `import orjson` raise ImportError\n"
              "import hashlib\n"
              "from rescue_train.data import load, load_benchmark\n"
              "assert load.orjson is None\n"
              "b = load_benchmark('bundled')\n"
              "print(len(b.samples), b.fingerprint, hashlib.sha256(repr((b.samples, b.notes)).encode()).hexdigest())")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    from rescue_train.data import load

    assert load.orjson is not None  # this environment has it: the two runs took the two paths
    here = load_benchmark("bundled")
    expected = hashlib.sha256(repr((here.samples, here.notes)).encode()).hexdigest()
    assert done.stdout.split() == [str(len(here.samples)), here.fingerprint, expected]


MALFORMED = [
    # (name, jsonl lines (objects or raw text), expected fragments of the message)
    ("invalid json", ['{"sample_id": "a/1", "rows": [}'], ["b.jsonl:1", "invalid JSON"]),
    ("not an object", ["[1, 2]"], ["b.jsonl:1", "expected an object"]),
    ("no sample id", [{"scenario": "couple", "rows": []}], ["b.jsonl:1", "'sample_id'", "non-empty string"]),
    ("rows not a list", [{"sample_id": "a/1", "scenario": "couple", "rows": {"0": {}}}],
     ["sample 'a/1'", "field 'rows'", "list of rows"]),
    ("bad scenario", [{**good(), "scenario": "couples"}], ["field 'scenario'", "('couple', 'family')", "'couples'"]),
    ("row not an object", [{**good(), "rows": [good()["rows"][0], "Therapist: hello"]}],
     ["row 2", "expected an object"]),
    ("row index out of order", [{**good(), "rows": [good()["rows"][1]]}], ["row 1", "'row_index'", "expected 1"]),
    ("no speaker", [raw_sample("a/1", [{**row("Ann"), "primary_speaker": None}])],
     ["row 1", "'primary_speaker'", "speaker name"]),
    ("target a string", [good(target="Ann")], ["row 2", "field 'target'", "list of names"]),
    ("intensity not a number", [good(internal_emotion=[emotion("Ann", "sad", "high")])],
     ["row 2", "'internal_emotion[0].intensity'", "expected a number"]),
    ("strategy target a string", [good(support_strategy=[strategy("Ann", "evoke")])],
     ["row 2", "'support_strategy[0].target'", "list of names"]),
    ("label a number", [good(relation_cycle_state=3)], ["row 2", "'relation_cycle_state'", "string label"]),
    ("viewpoint not an object", [good(viewpoints_attitudes=["he never listens"])],
     ["row 2", "'viewpoints_attitudes[0]'", "expected an object"]),
    ("duplicate id", [good(), good()], ["sample 'ann_and_ben/001'", "duplicate sample_id"]),
    ("line two broken", [good(), '{"sample_id": '], ["b.jsonl:2", "invalid JSON"]),
]


@pytest.mark.parametrize("name, lines, fragments", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_gets_a_located_error(tmp_path, name, lines, fragments):
    path = tmp_path / "b.jsonl"
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    with pytest.raises(DataError) as info:
        load_samples(path)
    for fragment in fragments:
        assert fragment in str(info.value), str(info.value)


def test_bad_file_in_tree_names_the_file(tmp_path):
    (tmp_path / "ann_and_ben").mkdir()
    (tmp_path / "ann_and_ben" / "001.json").write_text('{"rows": [{"row_index": 1, "primary_speaker": 5}]}')
    with pytest.raises(DataError, match=r"ann_and_ben/001.json, sample 'ann_and_ben/001', row 1, field "
                                        r"'primary_speaker'"):
        load_samples(tmp_path)


def test_missing_source_is_a_clear_error(tmp_path):
    with pytest.raises(DataError, match="no such file or folder"):
        load_samples(tmp_path / "nope.jsonl")


def test_cli_prints_the_error_without_traceback(tmp_path, capsys):
    path = write_jsonl(tmp_path / "b.jsonl", [good(target="Ann")])
    assert cli_main(["stats", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rescue-train stats: error: ") and "row 2, field 'target'" in err and "Traceback" not in err
