"""rescue-train launch's --config_file: a shipped accelerate config by name, its DeepSpeed file found from any
folder."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rescue_train.cli.launch import config_for_here
from rescue_train.settings import shipped

ROOT = Path(__file__).resolve().parents[1]


def test_a_shipped_config_by_name_is_used_as_it_is_where_its_deepspeed_file_resolves(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # zero3.yaml names configs/accelerate/zero3.json, relative to a checkout
    assert config_for_here("zero3", tmp_path) == str(shipped("configs/accelerate") / "zero3.yaml")
    assert config_for_here("cpu", tmp_path) == str(shipped("configs/accelerate") / "cpu.yaml")
    assert list(tmp_path.iterdir()) == []


def test_elsewhere_the_deepspeed_file_is_taken_from_the_configs_own_folder(monkeypatch, tmp_path):
    work, scratch = tmp_path / "work", tmp_path / "scratch"
    work.mkdir(), scratch.mkdir()
    monkeypatch.chdir(work)
    used = Path(config_for_here("zero3", scratch))
    assert used == scratch / "zero3.yaml"
    original = yaml.safe_load((shipped("configs/accelerate") / "zero3.yaml").read_text())
    rewritten = yaml.safe_load(used.read_text())
    assert rewritten["deepspeed_config"]["deepspeed_config_file"] == str(shipped("configs/accelerate") / "zero3.json")
    rewritten["deepspeed_config"]["deepspeed_config_file"] = original["deepspeed_config"]["deepspeed_config_file"]
    assert rewritten == original  # nothing else changes


def test_a_deepspeed_file_found_nowhere_is_an_error_naming_both_places(monkeypatch, tmp_path):
    (tmp_path / "mine.yaml").write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n"
                                        "  deepspeed_config_file: ds/missing.json\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as error:
        config_for_here("mine.yaml", tmp_path)
    assert str(error.value) == (f"{tmp_path / 'mine.yaml'}: deepspeed_config_file ds/missing.json is neither there "
                                f"from {tmp_path} nor beside the config ({tmp_path / 'missing.json'})")
