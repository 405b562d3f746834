"""convert: the instances.jsonl contract, the three dataset kinds, split columns and determinism."""

import json
import os
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
from factory import emotion, raw_sample, row, strategy, viewpoint

from rescue_train.cli import main as cli_main
from rescue_train.convert import ConvertConfig, convert
from rescue_train.tasks import DataConfig

T = "Therapist"
WORDS = "I just do not feel heard by you at all."


def couple_rows(a, b):
    return [
        row(a, [b], WORDS, internal_emotion=[emotion(a, "feels unheard", 6)],
            viewpoints_attitudes=[viewpoint(a, b, "he never listens")]),
        row(b, [a], WORDS),
        row(T, [a], "What happens inside when he turns away?", relation_cycle_state="pursue_withdraw",
            support_strategy=[strategy([a], "evoke")]),
        row(a, [T], WORDS, internal_emotion=[emotion(a, "feels lonely", 7)],
            viewpoints_attitudes=[viewpoint(a, b, "she only criticises")]),
        row(b, [a], WORDS, internal_emotion=[emotion(b, "feels attacked", 5)]),
        row(T, [a, b], "You both get caught in this same loop.", relation_cycle_state="attack_attack",
            support_strategy=[strategy([a, b], "reframe")]),
    ]


@pytest.fixture()
def source(tmp_path):
    names = [("Ann", "Ben"), ("Cal", "Dee"), ("Eve", "Fin"), ("Gus", "Hal"), ("Ivy", "Jon"), ("Kai", "Lou")]
    samples = [raw_sample(f"{a.lower()}_and_{b.lower()}/00{i}", couple_rows(a, b), participants=[a, b])
               for a, b in names for i in (1, 2)]
    path = tmp_path / "bench.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


def files(folder: Path):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_input_gives_byte_identical_outputs(source, tmp_path):
    convert(ConvertConfig(data=DataConfig(source=str(source)), output_dir=str(tmp_path / "a")))
    # the second run in another process with another string-hash seed: no set or dict order may leak out
    subprocess.run([sys.executable, "-m", "rescue_train", "convert", str(source), "--output-dir", str(tmp_path / "b")],
                   check=True, capture_output=True, env={**os.environ, "PYTHONHASHSEED": "12345"})
    first, second = files(tmp_path / "a"), files(tmp_path / "b")
    assert first.keys() == second.keys() and len(first) > 30
    assert [name for name in first if first[name] != second[name]] == []


def test_instances_contract_and_datasets(source, tmp_path):
    out = tmp_path / "out"
    meta = convert(ConvertConfig(data=DataConfig(source=str(source), folds=3), output_dir=str(out)))
    lines = [json.loads(line) for line in (out / "ssp" / "instances.jsonl").read_text().splitlines()]
    # 12 samples x 2 therapist rows with in-taxonomy strategies
    assert len(lines) == 24 and meta["tasks"]["ssp"]["instances"] == {"couple": 24}
    first = lines[0]
    assert first["id"] == "ann_and_ben/001::ssp::row3" and first["gold"] == "evoke"
    assert {k: first[k] for k in ("task", "sample_id", "unit", "scenario", "row_index")} == {
        "task": "ssp", "sample_id": "ann_and_ben/001", "unit": "ann_and_ben", "scenario": "couple", "row_index": 3}
    assert first["given"]["target"] == "Ann" and first["context_rows"] == [1, 2]
    # folds: six couples over 3 folds; test fold 0, validation fold 1
    split_of_unit = {line["unit"]: (line["fold"], line["split"]) for line in lines}
    assert {s for _, s in split_of_unit.values()} == {"train", "validation", "test"}
    assert all(s == {0: "test", 1: "validation", 2: "train"}[f] for f, s in split_of_unit.values())

    sft = datasets.load_from_disk(str(out / "ssp" / "sft"))
    assert set(sft) == {"train", "validation", "test"}
    test_units = set(sft["test"]["unit"])
    assert test_units.isdisjoint(sft["train"]["unit"]) and test_units.isdisjoint(sft["validation"]["unit"])
    example = next(r for r in sft["test"]) if sft["test"].num_rows else next(r for r in sft["train"])
    assert [m["role"] for m in example["prompt"]] == ["system", "user"]
    assert [m["role"] for m in example["completion"]] == ["assistant"]
    assert example["completion"][0]["content"] in ("evoke", "reframe")
    assert example["chat_template_kwargs"] == {"enable_thinking": False}

    cls = datasets.load_from_disk(str(out / "rpp" / "cls"))
    rpp = next(r for split in cls.values() for r in split if r["id"] == "ann_and_ben/001::rpp::row6")
    assert (rpp["label"], rpp["label_names"][rpp["label_id"]]) == ("attack_attack", "attack_attack")
    assert rpp["label_names"][:2] == ["pursue_withdraw", "attack_attack"]

    gen = datasets.load_from_disk(str(out / "er" / "gen"))
    er = next(r for split in gen.values() for r in split if r["id"] == "ann_and_ben/001::er::row4")
    assert json.loads(er["reference"]) == {"emotion": "feels lonely", "intensity": 7}
    assert json.loads(er["gold_json"]) == {"emotion": "feels lonely", "intensity": 7}
    assert not (out / "er" / "cls").exists() and not (out / "rpp" / "gen").exists()


def test_options_reach_the_datasets(source, tmp_path):
    out = tmp_path / "json"
    convert(ConvertConfig(data=DataConfig(source=str(source), answer_format="json", mode="audiovisual", split="none"),
                          output_dir=str(out), tasks=["rpp", "vp"]))
    sft = datasets.load_from_disk(str(out / "rpp" / "sft"))
    assert list(sft) == ["test"] and set(sft["test"]["fold"]) == {-1}
    answer = json.loads(sft["test"][0]["completion"][0]["content"])
    assert answer == {"relation_top3": ["pursue_withdraw"]}
    vp = datasets.load_from_disk(str(out / "vp" / "sft"))["test"][0]["completion"][0]["content"]
    assert json.loads(vp) == {"predicted_viewpoints": [{"source": "Ann", "target": "Ben",
                                                        "viewpoint": "he never listens"}]}
    assert sorted(p.name for p in out.iterdir()) == [".rescue-train.json", "convert_meta.json", "rpp",
                                                   "split_manifest.json", "vp"]


def test_cli_convert_and_stats(source, tmp_path, capsys):
    assert cli_main(["convert", str(source), "--output-dir", str(tmp_path / "c"), "--tasks", "itp", "--folds", "3"]) == 0
    assert "itp: {'couple': " in capsys.readouterr().out
    assert cli_main(["stats", str(source), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["tasks"]["rpp"]["couple"]["instances"] == 24
    assert stats["tasks"]["rpp"]["couple"]["labels"] == {"pursue_withdraw": 12, "attack_attack": 12}
    assert stats["rpp_definitions"]["C"]["couple"]["instances"] == 0
    assert stats["tasks"]["rpp"]["couple"]["paper_instances"] == 1608
    assert stats["options"]["rpp_definition"] == "D" and "rescue-train" in stats["versions"]
    # RPP shows every prior row, STP the last three: its longest prompt must be the longer one
    assert stats["tasks"]["rpp"]["couple"]["prompt_chars"]["max"] > stats["tasks"]["stp"]["couple"]["prompt_chars"]["max"]
    assert stats["tasks"]["itp"]["family"]["prompt_chars"] is None
