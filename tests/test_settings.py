"""One vocabulary across commands: the data configuration's names, typed values with errors that name the key,
suggestions for unknown keys, one argument reader (key=value and --flags), --cfg and --help from the schema."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import List

import evaluation_helpers  # noqa: F401  (offline settings)
import pytest

from rescue_train.cli import main as rescue_train
from rescue_train.cli.base import ArgumentReader, Command
from rescue_train.tasks import DataConfig
from rescue_train.evaluation.config import load_config
from rescue_train.settings import ConfigError, describe, find_yaml, meaning
from rescue_train.sft.config import load_config as load_training


def test_train_values_are_typed_and_unknown_keys_get_a_suggestion():
    with pytest.raises(ConfigError, match=r"^train.lr: expected a float, got 'abc'$"):
        load_training("ssp_lora", ["train.lr=abc"])
    with pytest.raises(ConfigError, match=r"^unknown key train.lrr; did you mean train.lr\?$"):
        load_training("ssp_lora", ["train.lrr=1"])
    with pytest.raises(ConfigError, match=r"^data.rpp_include_current: expected a bool, got 'maybe'$"):
        load_training("ssp_lora", ["data.rpp_include_current=maybe"])
    with pytest.raises(ValueError, match=r"data.mode: expected one of dialogue, audio, visual, audiovisual, got 'x'"):
        load_training("ssp_lora", ["data.mode=x"])


def test_train_reads_the_data_vocabulary():
    cfg = load_training("ssp_lora", ["data=/x/benchmark_191.jsonl", "data.split_seed=4", "data.folds=3"])
    assert (cfg.data.source, cfg.data.split_seed, cfg.data.folds) == ("/x/benchmark_191.jsonl", 4, 3)
    with pytest.raises(ConfigError, match="data.split=none: training needs kfold or holdout"):
        load_training("ssp_lora", ["data.split=none"])
    with pytest.raises(ConfigError, match="^unknown key data.k"):
        load_training("ssp_lora", ["data.k=3"])  # a 0.1 spelling (CHANGELOG.md lists the renames)


def test_recipes_and_blocks_by_name_or_path(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("tasks: {rpp: 1.0}\n")
    assert find_yaml(str(mine), "recipes", "recipe") == mine
    assert find_yaml("ssp_lora", "recipes", "recipe").name == "ssp_lora.yaml"
    with pytest.raises(ConfigError, match="did you mean ssp_lora"):
        find_yaml("ssp_lroa", "recipes", "recipe")
    with pytest.raises(ConfigError, match=r"recipe file .*nope.yaml does not exist"):
        find_yaml(str(tmp_path / "nope.yaml"), "recipes", "recipe")
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    with pytest.raises(ConfigError, match=rf"^{bad}: not a YAML mapping of settings"):
        load_training(str(bad))


def test_eval_takes_data_source_and_names_bad_keys(capsys):
    assert load_config(["data.source=/x.jsonl"]).data.source == "/x.jsonl"
    assert load_config(["data=/x.jsonl"]).data.source == "/x.jsonl"
    assert load_config(["data=hub"]).data.source == "tomhu/relation_therapy"
    cfg = load_config(["seed=3", "data.split=kfold"])
    assert (cfg.seed, cfg.data.split_seed) == (3, 0)
    assert rescue_train(["eval", "data.sourse=x"]) == 2
    assert "unknown key data.sourse; did you mean data.source?" in capsys.readouterr().err
    assert rescue_train(["eval", "data.split=leave_one_unit_out"]) == 2
    assert "for baselines" in capsys.readouterr().err


def test_an_eval_yaml_says_none_as_the_command_line_does(tmp_path):
    mine = tmp_path / "mine.yaml"
    mine.write_text("bertscore: none\njudge: null\nprotocol: rank\n")
    cfg = load_config([f"recipe={mine}", "model=tiny"])
    assert (cfg.bertscore.model, cfg.judge.backend, cfg.protocol) == ("none", "none", "rank")
    assert load_config(["recipe=vllm_gpu", "model=tiny"]).backend == "vllm"


@pytest.mark.parametrize("argv, expected", [
    (["train", "recipe=ssp_lora", "data.test_fold=2", "--cfg"], "  test_fold: 2"),
    (["train", "recipe=rpp_cls", "--test-fold", "2", "--cfg"], "  test_fold: 2"),
    (["compare", "recipe=rpp_cls", "data.split_seed=5", "--cfg"], "  split_seed: 5"),
    (["eval", "model=tiny", "--mode", "audio", "--cfg"], "  mode: audio"),
    (["convert", "bundled", "--output-dir", "x", "--answer-format=json", "--cfg"], "  answer_format: json"),
    (["stats", "bundled", "--rpp-definition", "A", "--cfg"], "  rpp_definition: A"),
    (["baselines", "bundled", "--split", "leave_one_unit_out", "--cfg"], "  split: leave_one_unit_out"),
    (["export", "lm-eval", "--out", "x", "--cfg"], "output_dir: x"),
    (["report", "a.json", "b.json", "--no-paper", "--cfg"], "paper: false"),
    (["audit", "reference", "model=tiny", "--dry-run", "--cfg"], "dry_run: true"),
])
def test_cfg_prints_the_resolved_config_on_every_command(argv, expected, capsys):
    assert rescue_train(argv) == 0
    assert expected in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("argv", [["train", "--help"], ["train", "recipe=rpp_cls", "--help"], ["compare", "--help"],
                                  ["eval", "--help"], ["convert", "--help"], ["stats", "--help"],
                                  ["baselines", "--help"], ["export", "--help"]])
def test_help_lists_every_data_key_with_type_default_and_meaning(argv, capsys):
    assert rescue_train(argv) == 0
    shown = capsys.readouterr().out
    for line in describe(DataConfig, "data."):
        key, kind = line.split()[:2]
        assert any(row.split()[:2] == [key, kind] and "=" in row and len(row.split("=", 1)[1].split()) > 1
                   for row in shown.splitlines()), key


def command_schemas():
    """(command, schema) for every command that reads settings (both kinds of train and compare recipe)."""
    import importlib

    from rescue_train.cli import COMMANDS
    from rescue_train.compare.merge import MergeConfig

    for name, (module, _) in COMMANDS.items():
        command = importlib.import_module(f"rescue_train.cli.{module}").COMMAND
        schemas = [command.schema_for(["recipe=ssp_lora"]), command.schema_for(["recipe=rpp_cls"])] \
            if command.schema_for else [command.schema]
        yield from ((name, schema) for schema in schemas if schema is not None)
    yield "compare", MergeConfig


def test_every_key_of_every_command_has_a_meaning():
    for name, schema in command_schemas():
        missing = [line.split()[0] for line in describe(schema) if len(line.split("=", 1)[1].split()) < 2]
        assert not missing, (name, missing)


def numeric_fields(schema, prefix=""):
    import dataclasses
    import typing

    from rescue_train.settings import _unwrap

    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        kind = _unwrap(hints[f.name])
        if dataclasses.is_dataclass(kind):
            yield from numeric_fields(kind, f"{prefix}{f.name}.")
        elif kind in (int, float) or typing.get_args(kind) in ((int,), (float,)):
            yield prefix + f.name, f


def test_every_numeric_key_of_every_command_has_a_range_that_help_shows(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # help wraps to the terminal
    for name, schema in command_schemas():
        unbounded = [key for key, f in numeric_fields(schema) if "range" not in f.metadata]
        assert not unbounded, (name, unbounded)
    assert rescue_train(["eval", "--help"]) == 0
    assert "  batch_size                     int          = 8            prompts per generation batch (hf) [>= 1]" \
        in capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("argv, message", [
    (["eval", "model=tiny", "batch_size=0"], "batch_size=0: expected >= 1"),
    (["eval", "model=tiny", "protocol=rank", "batch_size=-2"], "batch_size=-2: expected >= 1"),
    (["eval", "model=tiny", "limit=0"], "limit=0: expected >= 1"),
    (["eval", "model=tiny", "backend=openai", "concurrency=0"], "concurrency=0: expected >= 1"),
    (["eval", "model=tiny", "judge.timeout=0"], "judge.timeout=0.0: expected > 0"),
    (["eval", "model=tiny", "--gpu-memory-utilization", "1.5"], "gpu_memory_utilization=1.5: expected > 0 and <= 1"),
    (["audit", "reference", "model=tiny", "chunk=0"], "chunk=0: expected >= 1"),
    (["audit", "reference", "model=tiny", "context=-2"], "context=-2: expected >= -1"),
    (["train", "recipe=ssp_lora", "train.lr=-1"], "train.lr=-1.0: expected > 0"),
    (["train", "recipe=ssp_lora", "train.max_steps=0"], "train.max_steps=0: expected -1 or >= 1"),
    (["train", "recipe=ssp_lora", "lora.dropout=1"], "lora.dropout=1.0: expected >= 0 and < 1"),
    (["train", "recipe=rpp_cls", "torch.steps=0"], "torch.steps=0: expected >= 1"),
    (["compare", "recipe=rpp_cls", "seeds=[0,-1]"], "seeds=[0, -1]: expected >= 0"),
    (["compare", "recipe=ssp_lora", "train.grad_accum=0"], "train.grad_accum=0: expected >= 1"),
    (["compare", "recipe=rpp_cls", "evaluation.permutations=0"], "evaluation.permutations=0: expected >= 1"),
    (["compare", "recipe=rpp_cls", "evaluation.bootstrap=-1"], "evaluation.bootstrap=-1: expected >= 0"),
    (["baselines", "bundled", "--test-fold", "-1"], "data.test_fold=-1: expected >= 0"),
    (["convert", "bundled", "--output-dir", "x", "--folds", "1"], "data.folds=1: expected >= 2"),
])
def test_a_key_out_of_its_range_is_refused_before_any_work(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rescue_train(argv) == 2
    assert capsys.readouterr().err == f"rescue-train {argv[0]}: error: {message}\n"
    assert list(tmp_path.iterdir()) == []


READER = Command("toy", "usage", lambda i, o: (i, o), print, inputs=True, labelled_inputs=True,
                 schema=DataConfig, extra_keys=("recipe",))


@pytest.mark.parametrize("argv, inputs, overrides", [
    (["bundled", "--split-seed", "3"], ["bundled"], ["split_seed=3"]),
    (["--split_seed=3", "--rpp-include-current"], [], ["split_seed=3", "rpp_include_current=true"]),
    (["--no-rpp-include-current", "split=holdout"], [], ["rpp_include_current=false", "split=holdout"]),
    (["--man", "m.json", "--context=-1"], [], ["manifest=m.json", "context=-1"]),
    (["--source", "a b.jsonl"], [], ["source='a b.jsonl'"]),
    (["+recipe=x", "f.jsonl"], ["f.jsonl"], ["recipe=x"]),
])
def test_one_reader_for_key_value_and_flags(argv, inputs, overrides):
    assert ArgumentReader(READER, DataConfig).read(argv) == (inputs, overrides)


@pytest.mark.parametrize("argv, message", [
    (["--s", "1"], "option --s is ambiguous: it could be --source, --split, --split-seed, --ssp-target-emotion"),
    (["--splt-seed", "1"], "unknown option --splt-seed; did you mean --split-seed?"),
    (["--folds"], "option --folds needs a value"),
    (["-x"], "unknown option -x"),
])
def test_the_reader_names_a_bad_flag(argv, message):
    with pytest.raises(ConfigError, match="^" + message.replace("?", r"\?")):
        ArgumentReader(READER, DataConfig).read(argv)


def test_list_flags_take_the_words_that_follow_and_labelled_inputs_stay_inputs(tmp_path):
    @dataclass
    class Listy:
        tasks: List[str] = field(default_factory=list, metadata=meaning("tasks"))
        predictions: List[str] = field(default_factory=list, metadata=meaning("NAME=PATH"))
        out: str = field(default="", metadata=meaning("where"))

    command = Command("toy", "usage", lambda i, o: (i, o), print, schema=Listy, inputs=True, labelled_inputs=True)
    (tmp_path / "r").mkdir()
    argv = ["--tasks", "itp", "rpp", f"mine={tmp_path / 'r'}", "--predictions", "a=x", "b=y", "out=z"]
    assert ArgumentReader(command, Listy).read(argv) == (
        [f"mine={tmp_path / 'r'}"], ["tasks=[itp,rpp]", "predictions=['a=x','b=y']", "out=z"])


def test_flag_commands_use_the_same_words(tmp_path, capsys):
    assert rescue_train(["convert", "bundled", "--output-dir", str(tmp_path), "--tasks", "rpp", "--split-seed", "2",
                         "--folds", "3", "--rpp-include-current", "--answer-format", "json"]) == 0
    meta = json.loads((tmp_path / "convert_meta.json").read_text())
    assert {k: meta["config"]["data"][k] for k in ("split_seed", "folds", "rpp_include_current", "answer_format")} \
        == {"split_seed": 2, "folds": 3, "rpp_include_current": True, "answer_format": "json"}
    again = tmp_path / "again"  # --manifest reuses a split (another run's or convert's) instead of making one
    assert rescue_train(["convert", "bundled", f"output_dir={again}", "tasks=[rpp]", "data.folds=3",
                         "--manifest", str(tmp_path / "split_manifest.json")]) == 0
    assert json.loads((again / "convert_meta.json").read_text())["manifest_hash"] == meta["manifest_hash"]
    capsys.readouterr()
    assert rescue_train(["convert", "--help"]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "A = therapist rows, relation_cycle_state only" in shown and "data.split_seed" in shown
    assert rescue_train(["baselines", "bundled", "--split", "none", "--tasks", "rpp"]) == 2
    assert "data.split: the baselines take kfold or leave_one_unit_out, got 'none'" in capsys.readouterr().err
    assert rescue_train(["baselines", "bundled", "--split", "leave_one_unit_out", "--tasks", "rpp", "--baselines",
                         "majority", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["data"]["split"] == "leave_one_unit_out"


def test_eval_output_folder_is_per_model_and_a_changed_config_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    base = ["eval", "model=tiny", "tasks=[itp]", "protocol=rank", "limit=1", "bertscore=none", "progress=false"]
    assert rescue_train(base) == 0
    assert (tmp_path / "runs" / "eval" / "tiny" / "rank" / "results.json").is_file()
    assert rescue_train([*base, "data.mode=audio"]) == 2
    assert "data.mode: 'dialogue' there, 'audio' here" in capsys.readouterr().err


def test_unknown_keys_are_answered_by_meaning_before_spelling():
    """Other tools' names for our keys (settings.ALIASES), and a key of ours given without its section, suggest
    the key that means the same, in the key's own section first; other typos, the nearest spelling."""
    from rescue_train.settings import check_keys
    from rescue_train.sft.config import LoraRunConfig

    expected = {"train.learning_rate": "train.lr", "learning_rate": "train.lr", "epochs": "train.epochs",
                "num_train_epochs": "train.epochs", "batch": "train.batch_size", "batch_size": "train.batch_size",
                "output": "output_dir", "lora_r": "lora.r", "train.gradient_accumulation_steps": "train.grad_accum",
                "train.logging_step": "train.logging_steps"}
    for given, meant in expected.items():
        with pytest.raises(ConfigError) as info:
            check_keys(LoraRunConfig, [given], "train")
        assert str(info.value) == f"unknown key {given}; did you mean {meant}?"


def test_help_shows_the_recipes_values_main_keys_first_wrapped_to_the_terminal(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "90")
    assert rescue_train(["train", "recipe=ssp_lora", "--help"]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert any(line.split()[:4] == ["balance.strategy", "str", "=", "'sqrt_sampling'"] for line in shown)
    assert rescue_train(["eval", "--help"]) == 0
    keys = capsys.readouterr().out.split("keys (key", 1)[1].splitlines()[1:]
    first = [line.split()[0] for line in keys if line.startswith("  ") and not line.startswith("   ")]
    assert first[:5] == ["model", "adapter", "tokenizer", "include_base", "backend"]
    assert first.index("protocol") < first.index("dtype") < first.index("base_url")  # engine, API keys after
    assert max(len(line) for line in keys) <= 90
