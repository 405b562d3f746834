"""Recipes and config blocks -> one resolved config, with Hydra's compose API.

``recipes/NAME.yaml`` is the primary config; its defaults list pulls ``configs/lora_defaults.yaml``, which
pulls the ``model`` and ``data`` groups from ``configs/``. ``key=value`` overrides follow Hydra's syntax
(``model=qwen2.5-7b-instruct``, ``train.lr=1e-4``, ``+new.key=1``).

We compose instead of using ``@hydra.main``: the same function serves ``train.py`` and ``rescue-train
train`` (which receives its argv as a list), and there is no working-directory change and no per-process
timestamped run folder for ``accelerate launch`` ranks to race on; the run folder is ``output_dir``.

The recipes and configs are read from the checkout holding this package (``pip install -e .``), or from
``$RESCUE_TRAIN_HOME`` when set (a folder holding ``recipes/`` and ``configs/``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence


def project_root() -> Path:
    root = Path(os.environ.get("RESCUE_TRAIN_HOME") or Path(__file__).resolve().parents[2])
    if not (root / "recipes").is_dir() or not (root / "configs").is_dir():
        raise FileNotFoundError(f"recipes/ and configs/ not found under {root}: install the project editable "
                                "(pip install -e .) or set RESCUE_TRAIN_HOME to a checkout")
    return root


def recipe_names() -> list[str]:
    return sorted(p.stem for p in (project_root() / "recipes").glob("*.yaml"))


def split_recipe(argv: Sequence[str]) -> tuple[str, list[str]]:
    """The ``recipe=NAME`` argument and the remaining overrides."""
    recipes = [a for a in argv if a.startswith("recipe=")]
    if len(recipes) != 1:
        raise ValueError(f"give exactly one recipe=NAME (one of: {', '.join(recipe_names())})")
    return recipes[0].split("=", 1)[1], [a for a in argv if not a.startswith("recipe=")]


def compose(recipe: str, overrides: Sequence[str] = ()):
    """The resolved config of ``recipe`` with ``overrides`` applied (an OmegaConf DictConfig)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    root = project_root()
    # model=any names its run after the model: runs/<recipe>/<last part of model.path>/fold<k>
    OmegaConf.register_new_resolver("model_name", lambda path: Path(str(path).rstrip("/")).name, replace=True)
    if recipe not in recipe_names():
        raise ValueError(f"unknown recipe {recipe!r}; available: {', '.join(recipe_names())}")
    search = f"hydra.searchpath=[file://{root / 'configs'}]"
    with initialize_config_dir(config_dir=str(root / "recipes"), version_base=None):
        cfg = hydra_compose(config_name=recipe, overrides=[search, *overrides])
    missing = _unset(OmegaConf.to_container(cfg, resolve=False))  # not what is derived from them
    if missing:
        raise ValueError(f"recipe {recipe}: set {', '.join(missing)} (e.g. {missing[0]}=...)")
    OmegaConf.resolve(cfg)
    return cfg


def _unset(node, prefix: str = "") -> list[str]:
    """The keys left ``???`` (mandatory) in a raw config container."""
    if isinstance(node, dict):
        return [k for key, value in node.items() for k in _unset(value, f"{prefix}{key}.")]
    return [prefix[:-1]] if node == "???" else []
