"""A rebalancing strategy from existing parts is one line, a new loss one entry plus its function: registered
here, they train from the command line and are refused, with what the learner supports, where a learner lacks
a part."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from cli_helpers import command

from rescue_train.classifiers.classifier import BalanceSettings, make_loss
from rescue_train.compare.config import strategies_for  # every learner's, LoRA runs' too
from rescue_train.rebalance import LOSSES, STRATEGIES, Strategy, check_strategies, cross_entropy, register_strategy

train = command("train")


@pytest.fixture
def toy():
    """Inverse-frequency weights with square-root draws: two parts every learner implements."""
    strategy = register_strategy(Strategy("toy_sqrt_weighted", "square-root draws, inverse-frequency weights",
                                          class_weights="balanced", sampling="sqrt"))
    yield strategy
    del STRATEGIES[strategy.name]


@pytest.fixture
def doubled_loss():
    """A new loss (twice cross-entropy) and a strategy that uses it."""
    LOSSES["toy_double_ce"] = lambda logits, targets, weight, inputs: 2 * cross_entropy(logits, targets, weight)
    strategy = register_strategy(Strategy("toy_double", "twice cross-entropy", loss="toy_double_ce"))
    yield strategy
    del STRATEGIES[strategy.name], LOSSES["toy_double_ce"]


def test_a_strategy_from_existing_parts_trains_from_the_command_line(toy, tmp_path):
    assert all(toy.name in strategies_for(learner) for learner in ("sklearn", "torch", "lora"))
    assert train(["recipe=rpp_cls", f"output_dir={tmp_path / 'run'}", f"strategy={toy.name}"]) == 0
    prov = json.loads((tmp_path / "run" / "provenance.json").read_text())
    assert (prov["strategy"], prov["strategy_summary"]) == (toy.name, toy.summary)
    # Square-root draws with replacement, as many as the training fold has examples.
    assert prov["learner_info"]["sampled_training_examples"] == prov["sizes"]["train"]


def test_a_new_loss_is_one_entry_and_a_learner_without_it_refuses_it(doubled_loss):
    logits, targets = torch.tensor([[2.0, 0.0], [0.5, 1.5]]), torch.tensor([0, 0])
    loss = make_loss(doubled_loss, np.array([3, 1]), BalanceSettings())(logits, targets, 0.5)
    assert float(loss) == pytest.approx(2 * float(torch.nn.functional.cross_entropy(logits, targets)))
    assert doubled_loss.name in strategies_for("torch")
    with pytest.raises(ValueError, match=r"toy_double needs loss=toy_double_ce\); it supports: none, inverse_freq"):
        check_strategies([doubled_loss.name], "sklearn")
    with pytest.raises(ValueError, match=r"ldam_drw needs loss=ldam, class_weights=effective, deferred=true"):
        check_strategies(["ldam_drw"], "lora")
