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


def test_a_gpu_config_on_a_machine_without_gpus_is_refused_before_any_run(monkeypatch, capsys):
    """single_gpu (gpu_ids: 0) and multi_gpu ask for GPUs: with none visible, rescue-train launch and the
    comparisons' and cv's launch settings stop in one line; the cpu config, and any config where GPUs are, pass."""
    import rescue_train.jobs
    from rescue_train.cli import main
    from rescue_train.jobs import LaunchSettings, gpu_config_problem, problems

    monkeypatch.setattr(rescue_train.jobs, "visible_gpus", lambda: [])
    advice = ("and this machine has none (CUDA_VISIBLE_DEVICES and nvidia-smi list none): train on the CPU with "
              "{}=cpu (or without a config), or on GPU nodes")
    assert gpu_config_problem("single_gpu", []) == \
        "--config_file=single_gpu asks for GPUs (gpu_ids: 0) " + advice.format("--config_file")
    assert problems(LaunchSettings(config_file="multi_gpu")) == [
        "launch.config_file=multi_gpu asks for GPUs (distributed_type: MULTI_GPU) " + advice.format("launch.config_file")]
    assert gpu_config_problem("cpu", []) is None and gpu_config_problem("single_gpu", ["0"]) is None
    # on SLURM the runs go to the cluster's nodes, whatever this machine has
    assert not any("asks for GPUs" in p for p in problems(LaunchSettings(config_file="single_gpu", executor="slurm")))
    assert main(["launch", "--config_file", "single_gpu", "train.py", "recipe=ssp_lora", "model=tiny"]) == 2
    assert capsys.readouterr().err == ("rescue-train launch: error: --config_file=single_gpu asks for GPUs "
                                       "(gpu_ids: 0) " + advice.format("--config_file") + "\n")
