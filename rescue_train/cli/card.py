"""``rescue-train card RUN_DIR [EVAL_DIR ...]``: write a run's Hugging Face model card, with eval results."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List

from ..settings import ConfigError, compose, meaning
from .base import Command

USAGE = """usage: rescue-train card RUN_DIR [EVAL_OUTPUT ...]

(Re)writes RUN_DIR/README.md, the run's Hugging Face model card, adding the results of the given evaluation
folders (each holding results.json at any depth, or a results.json itself) that are of this run's model: its
adapter's weights, or the merged model of this run. Others (the base model's, another run's) are left out, named;
each protocol and split is shown once (the newest), with its n and any limit. Publish the run with:
  hf upload YOUR_NAME/MODEL_NAME RUN_DIR --exclude "checkpoints/*" --exclude "data/*\""""


@dataclass
class CardConfig:
    run: str = field(default="", metadata=meaning("the training run folder (holds provenance.json)"))
    results: List[str] = field(default_factory=list, metadata=meaning(
        "evaluation folders (or results.json files) whose results go in the card"))


def load(inputs: list[str], overrides: list[str]) -> CardConfig:
    base = {"run": inputs[0], "results": inputs[1:]} if inputs else {}
    config: CardConfig = compose(CardConfig, overrides, "card", base=base)
    if not config.run:
        raise ConfigError("name the training run folder: rescue-train card RUN_DIR [EVAL_DIR ...]")
    if not (Path(config.run) / "provenance.json").exists():
        raise ConfigError(f"{config.run} is not a training run folder (no provenance.json)")
    return config


def run(config: CardConfig) -> None:
    from ..model_card import choose_results, read_results, write_model_card

    given = [r for p in config.results for r in read_results(p)]
    mine, others = choose_results(config.run, given)
    for other in others:
        print(f"left out {other.get('label', '?')} ({other.get('output_dir', '?')}): not this run's model")
    if given and not mine:
        raise ValueError(f"none of the {len(given)} results given are of the model of {config.run} (its adapter's "
                         "weights, or its merged model): evaluate it with rescue-train eval run=RUN_DIR")
    path = write_model_card(Path(config.run), mine)
    print(f"model card: {path} ({len(mine)} evaluation results)")


COMMAND = Command("card", USAGE, load, run, schema=CardConfig, inputs=True)
