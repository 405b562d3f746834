"""The label space with masking, data checks, strategy losses over training, and both training paths on a
small synthetic text problem."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import math

import numpy as np
import pytest
import torch

from rescue_train import rebalance
from rescue_train.classifiers.classifier import (
    BalanceSettings,
    LabelSpace,
    Split,
    TorchSettings,
    _head,
    _model,
    _tokenizer,
    fit_predict_torch,
    load_cls_rows,
    make_loss,
    training_indices,
)
from rescue_train.classifiers.sklearn_path import SklearnSettings, fit_predict_sklearn

COUPLE = ["pursue_withdraw", "repair_softening", "mixed_transition"]
FAMILY = ["cooperative_family_alliance", "repair_softening"]



pytestmark = pytest.mark.usefixtures("one_torch_thread")

def row(i: int, scenario: str, label: str, text: str | None = None) -> dict:
    names = COUPLE if scenario == "couple" else FAMILY
    text = text or f"{label} words here"
    return {"id": f"s{i}::rpp::row{i}", "task": "rpp", "scenario": scenario, "unit": f"u{i % 4}",
            "sample_id": f"s{i}", "text": text, "query": "", "conversation": text, "label": label,
            "label_names": names}


def test_label_space_keys_classes_by_scenario_and_masks_other_scenarios():
    rows = [row(0, "family", "repair_softening"), row(1, "couple", "pursue_withdraw")]
    space = LabelSpace.from_rows(rows)
    assert space.names == ["couple:pursue_withdraw", "couple:repair_softening", "couple:mixed_transition",
                           "family:cooperative_family_alliance", "family:repair_softening"]
    split = Split.of(rows, space)
    assert split.y.tolist() == [4, 0]
    assert split.mask.tolist() == [[False, False, False, True, True], [True, True, True, False, False]]
    assert split.counts(len(space)).tolist() == [1, 0, 0, 0, 1]


def test_load_cls_rows_names_the_instance_whose_label_is_not_a_candidate(tmp_path):
    import datasets

    bad = row(7, "couple", "attack_attack")
    datasets.DatasetDict({"train": datasets.Dataset.from_list([row(1, "couple", "pursue_withdraw"), bad])}
                         ).save_to_disk(str(tmp_path / "rpp" / "cls"))
    with pytest.raises(ValueError, match=r"instance s7::rpp::row7: label 'attack_attack' is not among"):
        load_cls_rows(tmp_path, "rpp")
    with pytest.raises(FileNotFoundError, match="rescue-train convert"):
        load_cls_rows(tmp_path, "ssp")


def test_deferred_reweighting_switches_weights_on_at_drw_start():
    logits, targets = torch.tensor([[2.0, 0.0], [0.0, 0.0]]), torch.tensor([0, 1])
    settings = BalanceSettings(beta=0.5, ldam_max_margin=0.5, drw_start=0.8)
    loss = make_loss(rebalance.STRATEGIES["ldam_drw"], np.array([16, 1]), settings)
    # margins (0.25, 0.5); before 0.8 of training unweighted, then effective-number weights
    # beta=0.5, counts (16, 1): raw (0.5/(1-0.5^16), 1) -> scaled to sum 2: (0.66667, 1.33333).
    l1, l2 = math.log(1 + math.exp(-1.75)), math.log(1 + math.exp(0.5))
    assert loss(logits, targets, 0.5).item() == pytest.approx((l1 + l2) / 2, abs=1e-6)
    raw = np.array([0.5 / (1 - 0.5 ** 16), 1.0])
    w = raw * 2 / raw.sum()
    assert loss(logits, targets, 0.8).item() == pytest.approx((w[0] * l1 + w[1] * l2) / w.sum(), abs=1e-6)


def test_training_indices_per_sampling_strategy():
    y = np.array([0, 0, 0, 1])
    assert training_indices(rebalance.STRATEGIES["none"], y, 10, 0).tolist() == [0, 1, 2, 3]
    assert np.bincount(y[training_indices(rebalance.STRATEGIES["oversample"], y, 10, 0)]).tolist() == [3, 3]
    assert len(training_indices(rebalance.STRATEGIES["sqrt_sampling"], y, 10, 0)) == 10


def _synthetic_splits():
    """Couple classes told apart by one keyword; 'mixed_transition' is rare (2 of 26 training rows)."""
    plan = [("couple", "pursue_withdraw", "chase")] * 16 + [("couple", "repair_softening", "sorry")] * 8 + \
        [("couple", "mixed_transition", "shift")] * 2 + [("family", "cooperative_family_alliance", "together")] * 4 + \
        [("family", "repair_softening", "mend")] * 4
    rows = [row(i, sc, label, f"the {word} moment number {i}") for i, (sc, label, word) in enumerate(plan)]
    space = LabelSpace.from_rows(rows)
    test = [row(100 + i, "couple", label, f"the {word} moment")
            for i, (label, word) in enumerate(zip(COUPLE, ("chase", "sorry", "shift")))]
    return {"train": Split.of(rows, space), "validation": Split.of(test, space), "test": Split.of(test, space)}, space


def test_sklearn_path_masks_other_scenarios_and_applies_strategies():
    splits, space = _synthetic_splits()
    settings, bal = SklearnSettings(min_df=1), BalanceSettings()
    cache: dict = {}
    plain = fit_predict_sklearn(splits, space, rebalance.STRATEGIES["none"], settings, bal, 0, cache)
    assert np.isneginf(plain["test"][:, 3:]).all() and np.isfinite(plain["test"][:, :3]).all()
    assert plain["test"][:, :3].argmax(1).tolist() == [0, 1, 2]  # the keyword decides
    # logit-adjusted training of a linear model = the plain fit with logits shifted by -tau*log(pi).
    adjusted = fit_predict_sklearn(splits, space, rebalance.STRATEGIES["logit_adjusted"], settings,
                                   BalanceSettings(tau=2.0), 0, cache)
    prior = rebalance.log_prior(splits["train"].counts(len(space)))
    assert adjusted["test"][:, :3] == pytest.approx(plain["test"][:, :3] - 2.0 * prior[:3])
    over = fit_predict_sklearn(splits, space, rebalance.STRATEGIES["oversample"], settings, bal, 0, cache)
    assert over["sampled_training_examples"] == 16 * 5  # five classes, each up to the largest (16)
    smote = fit_predict_sklearn(splits, space, rebalance.STRATEGIES["smote"], settings, bal, 0, cache)
    assert smote["sampled_training_examples"] == 16 * 5 and smote["smote_skipped_singleton_classes"] == []


def test_tiny_bert_head_is_found_and_torch_path_returns_masked_logits(tmp_path):
    splits, space = _synthetic_splits()
    settings = TorchSettings(model="tiny-bert", max_length=32, steps=3, batch_size=4, crt_steps=2)
    tok = _tokenizer(settings)
    model = _model(settings, tok, space)
    assert _head(model, len(space)) is model.classifier
    out = fit_predict_torch(splits, space, rebalance.STRATEGIES["crt"], settings, BalanceSettings(), 0, tmp_path)
    assert len(out["train_loss"]) == 2  # the plain stage, then the re-trained head
    assert out["test"].shape == (3, 5) and np.isneginf(out["test"][:, 3:]).all()
    assert np.isfinite(out["test"][:, :3]).all()


@pytest.mark.parametrize("model_name", ["tiny-bert", "tiny"])
def test_gradient_accumulation_gives_the_same_update_as_one_large_batch(tmp_path, model_name):
    """Four examples as one batch of 4, or as 2 accumulated batches of 2: plain SGD without clipping or
    dropout must take exactly the same step (the loss is a per-batch mean that the Trainer must divide by
    the accumulation steps)."""
    from rescue_train.classifiers.classifier import _Encoded, _trainer

    rows = [row(i, "couple", label) for i, label in enumerate(COUPLE + COUPLE[:1])]
    space = LabelSpace.from_rows(rows)
    split = Split.of(rows, space)
    stepped = []
    for batch_size, accumulation in ((4, 1), (2, 2)):
        settings = TorchSettings(model=model_name, max_length=16, batch_size=batch_size,
                                 extra={"gradient_accumulation_steps": accumulation, "optim": "sgd",
                                        "max_grad_norm": 0.0, "lr_scheduler_type": "constant"})
        tok = _tokenizer(settings)
        torch.manual_seed(0)
        model = _model(settings, tok, space)
        for module in model.modules():
            if isinstance(module, torch.nn.Dropout):
                module.p = 0.0
        dataset = _Encoded(tok(split.texts), split.y, split.mask)
        plain = make_loss(rebalance.STRATEGIES["none"], split.counts(len(space)), BalanceSettings())
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        _trainer(model, tok, dataset, plain, settings, 1, 0.5, 0, tmp_path / f"b{batch_size}").train()
        stepped.append({n: p.detach() - before[n] for n, p in model.named_parameters()})
    assert max(d.abs().max().item() for d in stepped[0].values()) > 1e-3  # the step moved the weights
    for name, delta in stepped[0].items():
        assert torch.allclose(delta, stepped[1][name], atol=1e-6), name


@pytest.mark.parametrize("lora", [False, True])
def test_bf16_is_autocast_over_fp32_weights(tmp_path, lora):
    """torch.bf16=true computes the forward in bf16 while the weights (LoRA's ``score`` head, kept in
    modules_to_save, too) and AdamW's updates stay fp32. AdamW's first step moves each weight with a
    gradient by the learning rate: at 3e-5 (the documented rate for real encoders) against weights of ~0.02
    that step is below half a bf16 unit, so bf16 weights would mostly not move at all."""
    from rescue_train.classifiers.classifier import _Encoded, _trainer

    rows = [row(i, "couple", label) for i, label in enumerate(COUPLE * 2)]  # every class a candidate of every row
    space = LabelSpace.from_rows(rows)
    split = Split.of(rows, space)
    settings = TorchSettings(model="tiny", lora=lora, bf16=True, max_length=16, batch_size=6,
                             extra={"lr_scheduler_type": "constant", "max_grad_norm": 0.0})
    tok = _tokenizer(settings)
    model = _model(settings, tok, space)
    head = _head(model, len(space))
    watched = head if lora else model.model.layers[0].self_attn.q_proj  # LoRA: only the head trains fully
    before = watched.weight.detach().clone()
    computed_in = []
    head.register_forward_hook(lambda module, args, output: computed_in.append(output.dtype))
    plain = make_loss(rebalance.STRATEGIES["none"], split.counts(len(space)), BalanceSettings())
    _trainer(model, tok, _Encoded(tok(split.texts), split.y, split.mask), plain, settings, 1, 3e-5, 0,
             tmp_path).train()
    assert computed_in == [torch.bfloat16]
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    moved = (watched.weight.detach() - before).abs()
    assert before.abs().median() > 0.005  # weights this large do not move by 3e-5 in bf16
    assert ((moved - 3e-5).abs() < 1e-7).float().mean() > 0.99


def test_several_visible_gpus_are_refused_before_the_model_loads(monkeypatch, tmp_path):
    """One process that sees several GPUs would get nn.DataParallel from transformers (a batch N times as
    large); the torch classifier trains on one GPU and says how to choose it."""
    import rescue_train.classifiers.classifier as classifier

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setattr(classifier, "_tokenizer", lambda settings: pytest.fail("loaded a tokenizer"))
    splits, space = _synthetic_splits()
    with pytest.raises(ValueError, match=r"3 GPUs are visible to this one process.*3x the samples.*"
                                         r"CUDA_VISIBLE_DEVICES=0"):
        fit_predict_torch(splits, space, rebalance.STRATEGIES["none"], TorchSettings(), BalanceSettings(), 0, tmp_path)

    class Trains(Exception):
        pass

    def tokenizer(settings):
        raise Trains

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(classifier, "_tokenizer", tokenizer)
    with pytest.raises(Trains):  # one GPU: training goes ahead
        fit_predict_torch(splits, space, rebalance.STRATEGIES["none"], TorchSettings(), BalanceSettings(), 0, tmp_path)
