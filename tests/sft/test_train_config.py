"""Recipes, presets and the train command's argument handling (no training here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from cli_helpers import command
import pytest
from sft_helpers import ROOT

from rescue_train.settings import ConfigError, names_in, recipe_names
from rescue_train.sft.config import LoraRunConfig, load_config

main = command("train")

LORA_RECIPES = ["all_lora", "er_lora", "itp_lora", "rpp_lora", "ssp_lora", "stp_lora", "vp_lora"]
PRESETS = [name for name in names_in("configs/model") if name != "any"]


def test_every_lora_recipe_is_shipped_and_says_its_kind():
    assert set(LORA_RECIPES) | {"rsg_lora"} == set(recipe_names("lora"))
    assert set(recipe_names("classifier")) == {"itp_cls", "rpp_cls", "ssp_cls", "stp_cls"}


@pytest.mark.parametrize("recipe", LORA_RECIPES)
@pytest.mark.parametrize("model", PRESETS)
def test_every_recipe_composes_with_every_model_preset(recipe, model):
    cfg = load_config(recipe, [f"model={model}"])
    assert cfg.name == recipe
    assert cfg.model.name == model
    assert cfg.output_dir == f"runs/{recipe}/{model}/fold0"


def test_any_hub_model_by_name_without_a_preset():
    cfg = load_config("ssp_lora", ["model=any", "model.path=HuggingFaceTB/SmolLM2-360M-Instruct"])
    assert (cfg.model.name, cfg.output_dir) == ("SmolLM2-360M-Instruct", "runs/ssp_lora/SmolLM2-360M-Instruct/fold0")
    assert (cfg.lora.target_modules, cfg.model.chat_template, cfg.train.precision) == ("all-linear", None, "auto")
    with pytest.raises(ConfigError, match=r"^model.path: required \(a hub id"):
        load_config("ssp_lora", ["model=any"])
    # a template file of one's own is a typed key (null by default: the model's own)
    assert load_config("ssp_lora", ["model=tiny", "model.chat_template=/t/mine.jinja"]).model.chat_template == "/t/mine.jinja"


def test_presets_set_precision_and_attention():
    gemma = load_config("ssp_lora", ["model=gemma-3-1b-it"])
    assert (gemma.train.precision, gemma.model.attn_implementation) == ("bf16", "eager")
    assert load_config("ssp_lora", ["model=gemma-3-1b-it", "train.precision=fp32"]).train.precision == "fp32"
    assert load_config("ssp_lora", ["model=qwen3-8b"]).train.precision == "auto"


def test_ssp_recipe_defaults_and_overrides():
    cfg = load_config("ssp_lora", ["train.lr=1e-4", "data.test_fold=2"])
    assert dict(cfg.tasks) == {"ssp": 1.0} and cfg.balance.strategy == "sqrt_sampling"
    assert load_config("ssp_lora", ["balance.strategy=inverse_freq"]).balance.strategy == "inverse_freq"
    with pytest.raises(ConfigError, match="balance.strategy: expected one of none, inverse_freq, sqrt_sampling"):
        load_config("ssp_lora", ["balance.strategy=focal"])
    assert cfg.train.lr == 1e-4 and cfg.data.test_fold == 2 and cfg.data.source == "bundled"
    assert cfg.output_dir == "runs/ssp_lora/tiny/fold2"


def test_all_lora_mixes_the_six_tasks():
    assert dict(load_config("all_lora", ["tasks.vp=2"]).tasks) == {
        "itp": 1.0, "rpp": 1.0, "stp": 1.0, "ssp": 1.0, "er": 1.0, "vp": 2.0}


def test_real_presets_name_their_hub_model_and_projections_and_keep_its_own_template():
    qwen = load_config("ssp_lora", ["model=qwen2.5-7b-instruct"]).model
    assert (qwen.path, qwen.chat_template) == ("Qwen/Qwen2.5-7B-Instruct", None)
    llama = load_config("ssp_lora", ["model=llama-3.1-8b-instruct"]).model
    assert (llama.path, llama.chat_template) == ("meta-llama/Llama-3.1-8B-Instruct", None)
    assert list(load_config("ssp_lora", ["model=llama-3.1-8b-instruct"]).lora.target_modules) == ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                               "down_proj"]


def test_data_names_a_block_or_is_the_source():
    assert load_config("ssp_lora", ["data=hub"]).data.source == "tomhu/relation_therapy"
    assert load_config("ssp_lora", ["data=/x/benchmark_191.jsonl"]).data.source == "/x/benchmark_191.jsonl"
    assert load_config("ssp_lora", ["data=/x/b.jsonl", "data.source=/y/c.jsonl"]).data.source == "/y/c.jsonl"


def test_recipe_argument_errors(capsys):
    assert main(["model=tiny"]) == 2
    assert "give recipe=NAME" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=r"unknown recipe 'nope' \(shipped: .*ssp_lora"):
        load_config("nope")
    with pytest.raises(ConfigError, match="did you mean ssp_lora"):
        load_config("ssp_lroa")
    with pytest.raises(ConfigError, match="recipe rpp_cls is a classifier recipe, not a LoRA recipe"):
        load_config("rpp_cls")


def test_cli_reports_bad_recipes_and_keys_without_a_traceback(capsys):
    assert main(["recipe=nope"]) == 2
    assert "unknown recipe 'nope'" in capsys.readouterr().err
    assert main(["recipe=ssp_lora", "train.nosuchkey=1"]) == 2
    assert "nosuchkey" in capsys.readouterr().err


@pytest.mark.slow
def test_a_launched_training_ends_with_its_own_message_and_status(tmp_path):
    """accelerate's launcher follows a failed training with a CalledProcessError traceback; rescue-train launch
    (what compare starts its runs with) ends with the training's one line and its status."""
    launcher = ["--cpu", "--num_processes", "1", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend",
                "no", "--num_cpu_threads_per_process", "1"]
    done = subprocess.run([sys.executable, "-m", "rescue_train", "launch", *launcher, "train.py", "recipe=ssp_lora",
                           "train.max_steps=0", f"output_dir={tmp_path / 'run'}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", "rescue-train train: error: train.max_steps=0: expected -1 or >= 1\n")
    assert not (tmp_path / "run").exists()


def test_quantized_preset_is_refused_without_a_gpu():
    import torch

    from rescue_train.sft.config import ModelSettings
    from rescue_train.sft.models import quantization_config

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        quantization_config(ModelSettings(quantization="4bit"), torch.bfloat16)
    assert quantization_config(ModelSettings(quantization="none"), torch.bfloat16) is None


def test_train_command_works_from_any_directory(tmp_path):
    """`rescue-train train` finds the recipes through the installed package, not the working directory."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "rescue_train", "train", "recipe=vp_lora", "--cfg"], cwd=tmp_path,
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "name: vp_lora" in done.stdout and "vp: 1.0" in done.stdout


def test_training_data_is_the_fold_without_its_test_split(tmp_path):
    """all_lora reads the train and validation splits of every task; no test instance gets in."""
    from rescue_train.sft.data import prepare

    cfg = load_config("all_lora", [f"output_dir={tmp_path}"])
    data = prepare(cfg, tmp_path, is_main=True, barrier=lambda: None)
    splits = {}
    for task in cfg.tasks:
        for line in (tmp_path / "data" / task / "instances.jsonl").read_text().splitlines():
            record = json.loads(line)
            splits[record["id"]] = record["split"]
    assert {splits[i] for i in data.train["id"]} == {"train"}
    assert {splits[i] for i in data.validation["id"]} == {"validation"}
    assert len(data.train) == sum(s == "train" for s in splits.values())
    assert set(data.train["task"]) == set(cfg.tasks)
    by_task = {}
    for task, weight in zip(data.train["task"], data.train["sample_weight"]):
        by_task[task] = by_task.get(task, 0.0) + weight
    assert by_task == pytest.approx({t: 1 / 6 for t in cfg.tasks})
    assert data.meta["manifest_hash"] == json.loads((tmp_path / "data" / "split_manifest.json").read_text())["hash"]


@pytest.mark.parametrize("name", ["single_gpu", "multi_gpu", "fsdp", "zero3"])
def test_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(ROOT / "configs" / "accelerate" / f"{name}.yaml"))
    assert config.distributed_type.value == {"single_gpu": "NO", "multi_gpu": "MULTI_GPU", "fsdp": "FSDP",
                                             "zero3": "DEEPSPEED"}[name]


# The architecture behind each hub preset, for a randomly initialised miniature of it (no download).
ARCHITECTURES = {"qwen2.5-0.5b-instruct": "Qwen2Config", "qwen2.5-1.5b-instruct": "Qwen2Config",
                 "qwen2.5-7b-instruct": "Qwen2Config", "qwen3-8b": "Qwen3Config", "smollm2": "LlamaConfig",
                 "llama-3.1-8b-instruct": "LlamaConfig", "gemma-3-1b-it": "Gemma3TextConfig",
                 "mistral-7b-instruct-v0.3": "MistralConfig", "phi-4-mini-instruct": "Phi3Config"}


def test_every_hub_preset_has_its_architecture_listed():
    assert set(ARCHITECTURES) == set(PRESETS) - {"tiny"}


@pytest.mark.parametrize("preset", sorted(ARCHITECTURES))
def test_preset_lora_targets_are_the_architectures_projections(preset):
    """Every module a preset names exists in its architecture and gets a LoRA pair; with its attention."""
    import transformers
    from peft import get_peft_model
    from transformers import AutoModelForCausalLM

    from rescue_train.sft.models import lora_config

    cfg = load_config("ssp_lora", [f"model={preset}"])
    config = getattr(transformers, ARCHITECTURES[preset])(
        vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=cfg.model.attn_implementation or "sdpa")
    adapted = get_peft_model(model, lora_config(cfg.lora))
    wrapped = {name.rsplit(".", 1)[-1] for name, module in adapted.named_modules() if hasattr(module, "lora_A")}
    assert wrapped == set(cfg.lora.target_modules)


@pytest.mark.parametrize("tied", [False, True])
def test_training_flops_per_token_counts_4_per_frozen_and_6_per_trained_weight(tied):
    """A one-layer Llama, hidden 4, 2 heads of size 2 with one key/value head, MLP 8, vocabulary 10. Matrix
    weights: q 16, k 8, v 8, o 16, gate/up/down 32 each, output layer 40; norms 3 x 4: 196 counted weights
    (the 40 of the input embedding are a lookup; tied, it is the output layer and counts once)."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from rescue_train.sft.models import training_flops_per_token

    config = LlamaConfig(vocab_size=10, hidden_size=4, intermediate_size=8, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied)
    model = LlamaForCausalLM(config)
    assert training_flops_per_token(model) == 6 * 196
    lora = get_peft_model(model, LoraConfig(r=1, target_modules=["q_proj"]))  # A 1x4 and B 4x1 train
    assert training_flops_per_token(lora) == 4 * 196 + 6 * 8


def test_a_users_plain_recipe_gets_every_default_and_its_own_run_folder(tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("name: mine\ntasks: {rpp: 1.0}\ntrain:\n  max_steps: 2\n")
    cfg = load_config(str(plain))
    defaults = LoraRunConfig()
    assert (cfg.kind, cfg.name, cfg.output_dir) == ("lora", "mine", "runs/mine/tiny/fold0")
    assert (cfg.train.max_steps, cfg.train.lr, cfg.lora, cfg.data) == (2, defaults.train.lr, defaults.lora, defaults.data)
    unnamed = tmp_path / "unnamed.yaml"
    unnamed.write_text("tasks: {ssp: 1.0}\n")
    assert load_config(str(unnamed)).output_dir == "runs/unnamed/tiny/fold0"
    with pytest.raises(ConfigError, match="^output_dir: empty"):
        load_config(str(plain), ["output_dir=''"])
    taskless = tmp_path / "taskless.yaml"
    taskless.write_text("train:\n  max_steps: 2\n")
    with pytest.raises(ConfigError, match="^tasks: name at least one task"):
        load_config(str(taskless))
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("kind: clasifier\ntask: rpp\n")
    with pytest.raises(ConfigError, match="^kind: expected one of lora, classifier, got 'clasifier'"):
        load_config(str(wrong))


def test_warmup_is_counted_from_the_first_step():
    """A linear schedule of 2 warmup steps in 4: transformers' rates are 0, 0.5, 1, 0.5 (the first step learns
    nothing); counted from one they are 0.5, 1, 1, 0.5."""
    import torch
    from transformers import get_scheduler

    from rescue_train.sft.trainer import count_warmup_from_one

    def rates(make_scheduler) -> list[float]:
        optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        scheduler = make_scheduler(get_scheduler("linear", optimizer, num_warmup_steps=2, num_training_steps=4))
        seen = []
        for _ in range(4):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        return seen

    assert rates(lambda s: s) == [0.0, 0.5, 1.0, 0.5]
    assert rates(lambda s: count_warmup_from_one(s, 2)) == [0.5, 1.0, 1.0, 0.5]
