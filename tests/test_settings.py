"""One vocabulary across commands: the data configuration's names, old spellings with a warning, typed values
with errors that name the key, suggestions for unknown keys, --cfg and --help from the schema."""

from __future__ import annotations

import json

import evaluation_helpers  # noqa: F401  (offline settings)
import pytest

from rescue_train.cli import main as rescue_train
from rescue_train.data.config import DataConfig
from rescue_train.evaluation.config import load_config
from rescue_train.settings import ConfigError, RenamedWarning, describe, recipe_path
from rescue_train.sft.config import compose


def test_train_values_are_typed_and_unknown_keys_get_a_suggestion():
    with pytest.raises(ConfigError, match=r"^train.lr: expected a float, got 'abc'$"):
        compose("ssp_lora", ["train.lr=abc"])
    with pytest.raises(ConfigError, match=r"^unknown key train.lrr; did you mean train.lr\?$"):
        compose("ssp_lora", ["train.lrr=1"])
    with pytest.raises(ConfigError, match=r"^data.rpp_include_current: expected a bool, got 'maybe'$"):
        compose("ssp_lora", ["data.rpp_include_current=maybe"])
    with pytest.raises(ValueError, match=r"data.mode: expected one of dialogue, audio, visual, audiovisual, got 'x'"):
        compose("ssp_lora", ["data.mode=x"])


def test_train_reads_the_data_vocabulary_and_the_old_spellings():
    cfg = compose("ssp_lora", ["data=/x/benchmark_191.jsonl", "data.split_seed=4", "data.folds=3"])
    assert (cfg.data.source, cfg.data.split_seed, cfg.data.folds) == ("/x/benchmark_191.jsonl", 4, 3)
    with pytest.warns(RenamedWarning) as caught:
        old = compose("ssp_lora", ["data.k=3", "data.seed=4", "data.scheme=holdout", "data.build.rpp_definition=A"])
    assert [str(w.message) for w in caught] == [
        "data.k= is deprecated; use data.folds=", "data.seed= is deprecated; use data.split_seed=",
        "data.scheme= is deprecated; use data.split=", "data.build.rpp_definition= is deprecated; use data.rpp_definition="]
    assert (old.data.folds, old.data.split_seed, old.data.split, old.data.rpp_definition) == (3, 4, "holdout", "A")
    with pytest.raises(ConfigError, match="leaves nothing to train on"):
        compose("ssp_lora", ["data.split=none"])


def test_users_own_recipe_file_in_the_old_spelling(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("defaults:\n  - /lora_defaults\n  - _self_\nname: mine\ntasks: {rpp: 1.0}\n"
                    "data:\n  k: 4\n  build:\n    stp_targets: set\n")
    with pytest.warns(RenamedWarning, match="data.k is deprecated; use data.folds"):
        cfg = compose(str(mine))
    assert (cfg.name, cfg.data.folds, cfg.data.stp_targets, cfg.output_dir) == ("mine", 4, "set", "runs/mine/tiny/fold0")
    assert recipe_path(str(mine)) == mine and recipe_path("ssp_lora").name == "ssp_lora.yaml"
    with pytest.raises(ConfigError, match="did you mean ssp_lora"):
        recipe_path("ssp_lroa")


def test_eval_takes_data_source_and_names_bad_keys(capsys):
    assert load_config(["data.source=/x.jsonl"]).data.source == "/x.jsonl"
    with pytest.warns(RenamedWarning, match="data= is deprecated; use data.source="):
        assert load_config(["data=/x.jsonl"]).data.source == "/x.jsonl"
    with pytest.warns(RenamedWarning, match="seed= now only seeds the backend"):
        cfg = load_config(["seed=3", "data.split=kfold"])
    assert (cfg.seed, cfg.data.split_seed) == (3, 3)
    assert rescue_train(["eval", "data.sourse=x"]) == 2
    assert "unknown key data.sourse; did you mean data.source?" in capsys.readouterr().err
    assert rescue_train(["eval", "data.split=leave_one_unit_out"]) == 2
    assert "for baselines" in capsys.readouterr().err


@pytest.mark.parametrize("argv, expected", [
    (["train", "recipe=ssp_lora", "data.test_fold=2", "--cfg"], "  test_fold: 2"),
    (["train", "recipe=rpp_cls", "data.test_fold=2", "--cfg"], "  test_fold: 2"),
    (["compare", "recipe=rpp_cls", "data.split_seed=5", "--cfg"], "  split_seed: 5"),
    (["eval", "model=tiny", "data.mode=audio", "--cfg"], "  mode: audio"),
])
def test_cfg_prints_the_resolved_config_on_every_key_value_command(argv, expected, capsys):
    assert rescue_train(argv) == 0
    assert expected in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("argv", [["train", "--help"], ["train", "recipe=rpp_cls", "--help"], ["compare", "--help"],
                                  ["eval", "--help"]])
def test_help_lists_every_data_key_with_type_default_and_meaning(argv, capsys):
    assert rescue_train(argv) == 0
    shown = capsys.readouterr().out
    for line in describe(DataConfig, "data."):
        key, kind = line.split()[:2]
        assert any(row.split()[:2] == [key, kind] and "=" in row and len(row.split("=", 1)[1].split()) > 1
                   for row in shown.splitlines()), key


def test_flag_commands_use_the_same_words(tmp_path, capsys):
    with pytest.warns(RenamedWarning, match="--seed is deprecated; use --split-seed"):
        assert rescue_train(["convert", "bundled", "--output-dir", str(tmp_path), "--tasks", "rpp", "--seed", "2",
                             "--folds", "3", "--rpp-include-current", "--answer-format", "json"]) == 0
    meta = json.loads((tmp_path / "convert_meta.json").read_text())
    assert {k: meta["config"]["data"][k] for k in ("split_seed", "folds", "rpp_include_current", "answer_format")} \
        == {"split_seed": 2, "folds": 3, "rpp_include_current": True, "answer_format": "json"}
    again = tmp_path / "again"  # --manifest reuses a split (another run's or convert's) instead of making one
    assert rescue_train(["convert", "bundled", "--output-dir", str(again), "--tasks", "rpp", "--folds", "3",
                         "--manifest", str(tmp_path / "split_manifest.json")]) == 0
    assert json.loads((again / "convert_meta.json").read_text())["manifest_hash"] == meta["manifest_hash"]
    with pytest.raises(SystemExit):  # argparse's help
        rescue_train(["convert", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert "A = therapist rows, relation_cycle_state only" in shown and "--split-seed" in shown
    with pytest.warns(RenamedWarning, match="--split none is deprecated for baselines; use --split leave_one_unit_out"):
        assert rescue_train(["baselines", "bundled", "--split", "none", "--tasks", "rpp", "--baselines", "majority",
                             "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["split"] == "leave_one_unit_out"


def test_eval_output_folder_is_per_model_and_a_changed_config_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = ["eval", "model=tiny", "tasks=[itp]", "protocol=rank", "limit=1", "bertscore=none", "progress=false"]
    assert rescue_train(base) == 0
    assert (tmp_path / "runs" / "eval" / "tiny" / "rank" / "results.json").is_file()
    assert rescue_train([*base, "data.mode=audio"]) == 2
    assert "data.mode: 'dialogue' there, 'audio' here" in capsys.readouterr().err
