"""Recipes and config blocks -> one resolved, typed LoRA training config.

A recipe (a shipped name, ``conf/recipes/NAME.yaml``, or the path to your own YAML file) is the primary
config; its defaults list pulls ``conf/lora_defaults.yaml``, which pulls the ``model`` and ``data`` groups
(``conf/model/*.yaml``, ``conf/data/*.yaml``). Hydra's compose API does the composition and the ``key=value``
overrides (``model=qwen2.5-7b-instruct``, ``train.lr=1e-4``); the result is then checked against the
schema below, so a bad value or an unknown key is refused naming the key.

We compose instead of using ``@hydra.main``: the same function serves ``train.py`` and ``rescue-train
train`` (which receives its argv as a list), and there is no working-directory change and no per-process
timestamped run folder for ``accelerate launch`` ranks to race on; the run folder is ``output_dir``.
The recipes and config blocks are package data (``rescue_train/conf``), found after any install.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..data.config import RENAMED, DataConfig, source_shortcut
from ..settings import CONF_DIR, ConfigError, check_keys, load, meaning, recipe_names, recipe_path, rename

__all__ = ["LoraRunConfig", "compose", "recipe_names", "split_recipe"]


@dataclass
class ModelSettings:
    name: str = field(default="tiny", metadata=meaning("preset name (model=NAME picks conf/model/NAME.yaml)"))
    path: str = field(default="tiny", metadata=meaning("hub id, local folder, 'tiny', or package:MODULE/FILE.gguf"))
    chat_template: Optional[str] = field(default=None, metadata=meaning(
        "null: the model's own chat template; a .jinja file only for a model that has none"))
    pad_token: Optional[str] = field(default=None, metadata=meaning("pad token when the tokenizer has none"))
    lora_target_modules: Any = field(default="all-linear", metadata=meaning("modules LoRA adapts"))
    gradient_checkpointing: bool = field(default=False, metadata=meaning("recompute activations (less memory)"))
    attn_implementation: Optional[str] = field(default=None, metadata=meaning("null: transformers' default"))
    precision: str = field(default="auto", metadata=meaning("auto | bf16 | fp16 | fp32 (train.precision's default)"))
    quantization: str = field(default="none", metadata=meaning("none | 4bit (QLoRA: CUDA + bitsandbytes)"))


@dataclass
class LoraSettings:
    r: int = field(default=16, metadata=meaning("LoRA rank"))
    alpha: int = field(default=32, metadata=meaning("LoRA scaling alpha"))
    dropout: float = field(default=0.05, metadata=meaning("LoRA dropout"))
    target_modules: Any = field(default="all-linear", metadata=meaning("default: model.lora_target_modules"))


@dataclass
class TrainSettings:
    epochs: float = field(default=3.0, metadata=meaning("training epochs"))
    max_steps: int = field(default=-1, metadata=meaning("> 0 overrides epochs"))
    batch_size: int = field(default=4, metadata=meaning("per device"))
    grad_accum: int = field(default=4, metadata=meaning("effective batch = batch_size x grad_accum x processes"))
    lr: float = field(default=2e-4, metadata=meaning("peak learning rate"))
    scheduler: str = field(default="cosine", metadata=meaning("transformers' lr scheduler name"))
    warmup: float = field(default=0.03, metadata=meaning("< 1: a share of the steps; >= 1: a number of steps"))
    weight_decay: float = field(default=0.0, metadata=meaning("AdamW weight decay"))
    max_grad_norm: float = field(default=1.0, metadata=meaning("gradient clipping"))
    max_length: int = field(default=4096, metadata=meaning("tokens; longer instances are dropped (counted)"))
    packing: bool = field(default=False, metadata=meaning("pack instances into max_length rows"))
    precision: str = field(default="auto", metadata=meaning("default: model.precision; auto | bf16 | fp16 | fp32"))
    gradient_checkpointing: bool = field(default=False, metadata=meaning("default: model.gradient_checkpointing"))
    logging_steps: int = field(default=10, metadata=meaning("log every N steps"))
    eval_steps: int = field(default=100, metadata=meaning("validation loss and a checkpoint every N steps"))
    save_total_limit: int = field(default=2, metadata=meaning("checkpoints kept"))
    early_stopping_patience: int = field(default=0, metadata=meaning("> 0: stop after N evaluations without gain"))
    report_to: List[str] = field(default_factory=lambda: ["tensorboard"], metadata=meaning("tensorboard, wandb, none"))
    num_workers: int = field(default=0, metadata=meaning("data loader workers"))


@dataclass
class SftBalanceSettings:
    sampling: str = field(default="none", metadata=meaning("none | balanced | sqrt: class-balanced draws"))
    class_weights: str = field(default="none", metadata=meaning("none | balanced | sqrt: per-class loss weights"))


@dataclass
class LoraRunConfig:
    name: str = field(default="", metadata=meaning("the recipe's name"))
    tasks: Dict[str, float] = field(default_factory=dict, metadata=meaning("task -> mixing weight, e.g. {ssp: 1.0}"))
    output_dir: str = field(default="", metadata=meaning("run folder; default runs/<name>/<model>/fold<test_fold>"))
    seed: int = field(default=0, metadata=meaning("training seed (the split seed is data.split_seed)"))
    resume: str = field(default="auto", metadata=meaning("auto | true | false: continue from a checkpoint"))
    data: DataConfig = field(default_factory=DataConfig)
    model: ModelSettings = field(default_factory=ModelSettings)
    lora: LoraSettings = field(default_factory=LoraSettings)
    train: TrainSettings = field(default_factory=TrainSettings)
    balance: SftBalanceSettings = field(default_factory=SftBalanceSettings)


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def split_recipe(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The ``recipe=NAME`` argument and the remaining overrides."""
    recipes = [a for a in argv if a.startswith("recipe=")]
    if len(recipes) != 1:
        raise ConfigError(f"give exactly one recipe=NAME (one of: {', '.join(recipe_names())}, or a .yaml path)")
    return recipes[0].split("=", 1)[1], [a for a in argv if not a.startswith("recipe=")]


def normalise(overrides: Sequence[str]) -> list[str]:
    """Old spellings renamed (with a warning), ``data=PATH`` read as ``data.source=PATH``, unknown keys refused."""
    overrides = rename(source_shortcut(list(overrides), tuple(group_options("data"))), RENAMED)
    check_keys(LoraRunConfig, [a.lstrip("+~").split("=", 1)[0] for a in overrides], "train")
    return overrides


def compose(recipe: str, overrides: Sequence[str] = ()):
    """The resolved, typed config of ``recipe`` with ``overrides`` applied (an OmegaConf DictConfig typed by
    :class:`LoraRunConfig`)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    path = recipe_path(recipe)
    overrides = normalise(overrides)
    # model=any names its run after the model: runs/<recipe>/<last part of model.path>/fold<k>
    OmegaConf.register_new_resolver("model_name", lambda path: Path(str(path).rstrip("/")).name, replace=True)
    search = f"hydra.searchpath=[file://{CONF_DIR}]"
    try:
        with initialize_config_dir(config_dir=str(path.parent), version_base=None):
            cfg = hydra_compose(config_name=path.stem, overrides=[search, *overrides])
    except HydraException as exc:
        raise ConfigError(str(exc).splitlines()[0]) from None
    missing = _unset(OmegaConf.to_container(cfg, resolve=False))  # not what is derived from them
    if missing:
        raise ConfigError(f"recipe {path.stem}: set {', '.join(missing)} (e.g. {missing[0]}=...)")
    OmegaConf.resolve(cfg)
    plain = OmegaConf.to_container(cfg)
    if "data" in plain:  # a user's recipe in the old spelling (data.build.*, data.k, ...)
        from ..settings import rename_in

        plain = rename_in(plain, RENAMED, str(path))
    typed: LoraRunConfig = load(LoraRunConfig, [plain], "train")
    if typed.data.split not in ("kfold", "holdout"):
        raise ConfigError(f"data.split={typed.data.split} leaves nothing to train on; training needs kfold or holdout")
    return OmegaConf.structured(typed)


def _unset(node, prefix: str = "") -> list[str]:
    """The keys left ``???`` (mandatory) in a raw config container."""
    if isinstance(node, dict):
        return [k for key, value in node.items() for k in _unset(value, f"{prefix}{key}.")]
    return [prefix[:-1]] if node == "???" else []
