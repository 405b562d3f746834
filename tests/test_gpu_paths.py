"""GPU code paths checked on a CPU: precision choice, how training is launched, freeing a backend's memory.

Where the decision depends on the GPU, the device count or the bf16 capability is simulated by replacing
torch's query; everything after it runs for real.
"""

from __future__ import annotations

import gc
import weakref

from cli_helpers import command
import pytest
import torch

from rescue_train.inference.hf import HFBackend, resolve_dtype
from rescue_train.sft.models import compute_dtype
from rescue_train.tiny import tiny_model_path

train_main = command("train")


def _gpu(monkeypatch, *, count: int = 1, native_bf16: bool = True) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
    # an emulating GPU (V100, T4) answers yes only when emulation counts
    monkeypatch.setattr(torch.cuda, "is_bf16_supported",
                        lambda including_emulation=True: native_bf16 or including_emulation)


@pytest.mark.parametrize("native, training, evaluation", [(True, torch.bfloat16, torch.bfloat16),
                                                          (False, torch.float32, torch.float16)])
def test_auto_precision_takes_bf16_only_where_the_gpu_has_it(monkeypatch, native, training, evaluation):
    _gpu(monkeypatch, native_bf16=native)
    assert compute_dtype("auto") == training
    assert resolve_dtype("auto", "cuda") == evaluation


def test_training_on_several_gpus_without_a_launcher_says_what_to_run(monkeypatch, tmp_path, capsys):
    _gpu(monkeypatch, count=4)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    args = ["recipe=ssp_lora", f"output_dir={tmp_path / 'run'}"]
    assert train_main(args) == 2
    err = capsys.readouterr().err
    assert "4 GPUs are visible to this one process" in err
    assert f"--num_processes 4 train.py recipe=ssp_lora output_dir={tmp_path / 'run'}" in err
    assert "CUDA_VISIBLE_DEVICES=0 rescue-train train" in err
    assert not (tmp_path / "run").exists()  # refused before converting data or loading a model


@pytest.mark.parametrize("env, scheme", [({"ACCELERATE_USE_FSDP": "true"}, "FSDP"),
                                         ({"ACCELERATE_USE_DEEPSPEED": "true",
                                           "ACCELERATE_DEEPSPEED_CONFIG_FILE": "configs/accelerate/zero3.json"},
                                          "DeepSpeed ZeRO-3"),
                                         ({"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_ZERO_STAGE": "3"},
                                          "DeepSpeed ZeRO-3")])
def test_qlora_under_parameter_sharding_is_refused(monkeypatch, tmp_path, capsys, env, scheme):
    from sft_helpers import ROOT

    monkeypatch.chdir(ROOT)  # accelerate passes the DeepSpeed json by the path the config names
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    args = ["recipe=ssp_lora", "model.quantization=4bit", f"output_dir={tmp_path / 'run'}"]
    assert train_main(args) == 2
    assert f"cannot be combined with {scheme}" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_hf_backend_close_lets_the_model_be_collected():
    backend = HFBackend(str(tiny_model_path()))
    model = weakref.ref(backend.model)
    backend.close()
    gc.collect()
    assert model() is None


@pytest.mark.slow
def test_a_local_judge_starts_after_the_predicting_backend_is_freed(monkeypatch, tmp_path):
    """backend=hf with judge.backend=hf (the same holds for vllm beside hf): on one GPU both must not hold
    memory at once, so every prediction is made and its model freed before the judge's model loads."""
    from rescue_train.evaluation.config import load_config
    from rescue_train.evaluation.runner import run

    events, loaded = [], []
    real_init, real_close = HFBackend.__init__, HFBackend.close

    def init(self, *args, **kwargs):
        events.append(("load", sum(ref() is not None for ref in loaded)))  # models still alive at this load
        real_init(self, *args, **kwargs)
        loaded.append(weakref.ref(self.model))

    def close(self):
        real_close(self)
        gc.collect()
        events.append(("close", sum(ref() is not None for ref in loaded)))

    monkeypatch.setattr(HFBackend, "__init__", init)
    monkeypatch.setattr(HFBackend, "close", close)
    cfg = load_config(["model=tiny", "tasks=[er]", "limit=2", "max_new_tokens=4", "bertscore=none", "progress=false",
                       "judge.backend=hf", "judge.model=tiny", "judge.max_new_tokens=4", f"output_dir={tmp_path}"])
    (results,) = run(cfg)
    assert events == [("load", 0), ("close", 0), ("load", 0), ("close", 0)]
    assert len(results["records"]) == 2 and all("judge_status" in r["scores"] for r in results["records"])


def test_greedy_evaluation_leaves_out_the_models_repetition_penalty(tmp_path):
    """The rule both local backends follow (tests/evaluation/test_vllm.py runs vLLM on the same kind of model): the
    penalty in generation_config.json would change the answer, yet the backend answers as without it."""
    from evaluation_helpers import with_repetition_penalty
    from transformers import AutoModelForCausalLM

    penalised = with_repetition_penalty(tiny_model_path(), tmp_path / "penalised")
    prompts = [[{"role": "user", "content": "How do you feel about the fight with your partner?"}]]
    plain = HFBackend(str(tiny_model_path())).generate(prompts, max_new_tokens=[8])
    backend = HFBackend(str(penalised))
    assert backend.generate(prompts, max_new_tokens=[8]) == plain
    ids = torch.tensor([backend.encoder.prompt_ids(prompts[0])])
    with_penalty = AutoModelForCausalLM.from_pretrained(penalised).generate(ids, max_new_tokens=8, do_sample=False)
    assert backend.encoder.decode(with_penalty[0, ids.shape[1]:].tolist()) != plain[0]
