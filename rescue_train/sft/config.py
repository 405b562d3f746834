"""The typed LoRA training config: schema defaults <- the model and data blocks <- the recipe <- overrides.

A recipe (a shipped name, ``recipes/NAME.yaml``, or the path to your own YAML file) says ``kind: lora`` (the
default kind) and sets what it changes, typically ``name``, ``tasks`` and ``balance.strategy``; every other key
keeps the default written once below. ``model=NAME`` merges ``configs/model/NAME.yaml`` (model, LoRA targets and
training precision of a preset), ``data=NAME`` a data block, ``data=PATH`` is ``data.source=PATH``. The result is
a :class:`LoraRunConfig`, which the runner takes as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..settings import ConfigError, compose, meaning, names_in, read_recipe, recipe_kind
from ..tasks import DataConfig
from .weighting import STRATEGIES

__all__ = ["LoraRunConfig", "load_config"]
GROUPS = {"model": "configs/model", "data": "configs/data"}


@dataclass
class ModelSettings:
    name: str = field(default="tiny", metadata=meaning(
        "the preset's name (model=NAME merges configs/model/NAME.yaml); any: named after model.path"))
    path: str = field(default="tiny", metadata=meaning("hub id, local folder, 'tiny', or package:MODULE/FILE.gguf"))
    chat_template: Optional[str] = field(default=None, metadata=meaning(
        "null: the model's own chat template; a .jinja file only for a model that has none"))
    pad_token: Optional[str] = field(default=None, metadata=meaning("pad token when the tokenizer has none"))
    attn_implementation: Optional[str] = field(default=None, metadata=meaning("null: transformers' default"))
    quantization: str = field(default="none", metadata=meaning("none | 4bit (QLoRA: CUDA + bitsandbytes)"))


@dataclass
class LoraSettings:
    r: int = field(default=16, metadata=meaning("LoRA rank", low=1))
    alpha: int = field(default=32, metadata=meaning("LoRA scaling alpha", low=1))
    dropout: float = field(default=0.05, metadata=meaning("LoRA dropout", low=0, below=1))
    target_modules: Any = field(default="all-linear", metadata=meaning(
        "modules LoRA adapts: all-linear, a list of names, or a regular expression (presets set their model's)"))


@dataclass
class TrainSettings:
    epochs: float = field(default=3.0, metadata=meaning("training epochs", above=0))
    max_steps: int = field(default=-1, metadata=meaning("> 0 overrides epochs", low=1, also=(-1,)))
    batch_size: int = field(default=4, metadata=meaning("per device", low=1))
    grad_accum: int = field(default=4, metadata=meaning("effective batch = batch_size x grad_accum x processes", low=1))
    lr: float = field(default=2e-4, metadata=meaning("peak learning rate", above=0))
    scheduler: str = field(default="cosine", metadata=meaning("transformers' lr scheduler name"))
    warmup: float = field(default=0.03, metadata=meaning("< 1: a share of the steps; >= 1: a number of steps", low=0))
    weight_decay: float = field(default=0.0, metadata=meaning("AdamW weight decay", low=0))
    max_grad_norm: float = field(default=1.0, metadata=meaning("gradient clipping", low=0))
    max_length: int = field(default=4096, metadata=meaning("tokens; longer instances are dropped (counted)", low=1))
    packing: bool = field(default=False, metadata=meaning("pack instances into max_length rows"))
    batching: str = field(default="length_grouped", metadata=meaning(
        "weighted draws (balance.strategy with sampling, or task mixing): length_grouped = each epoch's draws "
        "batched with draws of similar length (same draws, little padding) | drawn = batched as drawn",
        choices=("length_grouped", "drawn")))
    precision: str = field(default="auto", metadata=meaning(
        "auto (bf16 on a GPU that has it natively, else fp32) | bf16 | fp16 | fp32"))
    gradient_checkpointing: bool = field(default=False, metadata=meaning(
        "recompute activations in the backward pass (less memory; presets of large models set it)"))
    logging_steps: int = field(default=10, metadata=meaning("log every N steps", low=1))
    eval_steps: int = field(default=100, metadata=meaning("validation loss and a checkpoint every N steps", low=0))
    save_total_limit: int = field(default=2, metadata=meaning("checkpoints kept", low=1))
    early_stopping_patience: int = field(default=0, metadata=meaning(
        "> 0: stop after N evaluations without gain", low=0))
    report_to: List[str] = field(default_factory=lambda: ["tensorboard"], metadata=meaning("tensorboard, wandb, none"))
    num_workers: int = field(default=0, metadata=meaning("data loader workers", low=0))


@dataclass
class SftBalanceSettings:
    strategy: str = field(default="none", metadata=meaning(
        "closed-set tasks' class balance: " + "; ".join(f"{k} = {v.summary}" for k, v in STRATEGIES.items()),
        choices=STRATEGIES))


@dataclass
class LoraRunConfig:
    kind: str = field(default="lora", metadata=meaning("the recipe's kind: lora (this config) or classifier"))
    name: str = field(default="", metadata=meaning("the run's name (default: the recipe file's name)"))
    tasks: Dict[str, float] = field(default_factory=dict, metadata=meaning(
        "task -> mixing weight: its share of training draws, e.g. {ssp: 1.0}"))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "the run folder (adapter, logs, provenance); default runs/<name>/<model.name>/fold<data.test_fold>"))
    seed: int = field(default=0, metadata=meaning("training seed (the split seed is data.split_seed)", low=0))
    resume: str = field(default="auto", metadata=meaning(
        "auto: continue from the last checkpoint in output_dir if any; true: must; false: start over"))
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelSettings = field(default_factory=ModelSettings)
    lora: LoraSettings = field(default_factory=LoraSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    balance: SftBalanceSettings = field(default_factory=SftBalanceSettings)


def validate(cfg: LoraRunConfig) -> None:
    if not cfg.model.path.strip():
        raise ConfigError("model.path: required (a hub id such as Qwen/Qwen2.5-7B-Instruct, a local folder, tiny, or "
                          "package:MODULE/FILE.gguf), e.g. model=any model.path=ORG/NAME")
    if cfg.kind != "lora":
        raise ConfigError(f"kind: this is a LoRA config, got kind {cfg.kind!r}")
    if not cfg.tasks:
        raise ConfigError("tasks: name at least one task and its mixing weight, e.g. tasks={ssp: 1.0}")
    if cfg.output_dir is not None and not str(cfg.output_dir).strip():
        raise ConfigError("output_dir: empty; give a folder for the run, or leave it out for "
                          "runs/<name>/<model>/fold<k>")
    if cfg.resume not in ("auto", "true", "false"):
        raise ConfigError(f"resume: expected auto, true or false, got {cfg.resume!r}")
    if cfg.data.split not in ("kfold", "holdout"):
        raise ConfigError(f"data.split={cfg.data.split}: training needs kfold or holdout (none keeps every sample "
                          "for testing; leave_one_unit_out is the baselines' scheme)")


def model_options() -> list[str]:
    return names_in(GROUPS["model"])


def _preset_or_any(arguments: Sequence[str]) -> list[str]:
    """``model=ORG/NAME`` or ``model=FOLDER`` (not a preset's name) is ``model=any model.path=...``: the one meaning
    of ``model=`` on every command. A bare word stays a preset name (a typo is refused with the nearest one)."""
    out = []
    for argument in arguments:
        key, _, value = argument.lstrip("+").partition("=")
        if key == "model" and value not in model_options() and ("/" in value or Path(value).expanduser().exists()):
            out += ["model=any", f"model.path={value}"]
        else:
            out.append(argument)
    return out


def load_config(recipe: str, overrides: Sequence[str] = ()) -> LoraRunConfig:
    """The typed config of ``recipe`` (a shipped name or a YAML path) with ``overrides`` applied."""
    path, tree = read_recipe(recipe)
    overrides = _preset_or_any(overrides)
    if recipe_kind(tree) != "lora":
        raise ConfigError(f"recipe {recipe} is a {recipe_kind(tree)} recipe, not a LoRA recipe")
    cfg: LoraRunConfig = compose(LoraRunConfig, overrides, "train", base={"name": path.stem, **tree},
                                 groups=GROUPS, shorthand={"data": "data.source"})
    if cfg.model.name == "any" and cfg.model.path.strip():  # model=any: the run is named after the model it trains
        cfg.model.name = Path(cfg.model.path.rstrip("/")).name
    if cfg.output_dir is None:
        cfg.output_dir = f"runs/{cfg.name}/{cfg.model.name}/fold{cfg.data.test_fold}"
    cfg.resume = str(cfg.resume).lower()  # resume=false reads as the boolean False, written 'False'
    validate(cfg)
    return cfg
