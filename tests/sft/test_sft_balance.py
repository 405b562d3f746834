"""Class balance inside SFT: draw probabilities, sampler frequencies and the class-weighted answer loss,
against values worked out by hand."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from sft_helpers import chat, chat_rows, make_trainer, tiny_tokenizer

from rescue_train.sft.weighting import class_key, class_weights, sampling_weights

# one task, classes a:6, b:3, c:1 (10 instances)
TASKS = ["ssp"] * 10
CLASSES = ["a"] * 6 + ["b"] * 3 + ["c"]


def by_class(values, classes=CLASSES):
    return {c: [v for v, k in zip(values, classes) if k == c] for c in dict.fromkeys(classes)}


def test_balanced_sampling_gives_each_class_a_third():
    probs = by_class(sampling_weights(TASKS, CLASSES, {"ssp": 1.0}, "balanced"))
    assert probs["a"] == pytest.approx([1 / 18] * 6)
    assert probs["b"] == pytest.approx([1 / 9] * 3)
    assert probs["c"] == pytest.approx([1 / 3])


def test_sqrt_sampling_gives_classes_shares_proportional_to_root_counts():
    total = math.sqrt(6) + math.sqrt(3) + 1  # 5.1815
    probs = by_class(sampling_weights(TASKS, CLASSES, {"ssp": 1.0}, "sqrt"))
    assert probs["a"] == pytest.approx([math.sqrt(6) / total / 6] * 6)  # 0.07879 each, class share 0.4727
    assert probs["b"] == pytest.approx([math.sqrt(3) / total / 3] * 3)  # 0.11143 each, class share 0.3343
    assert probs["c"] == pytest.approx([1 / total])                    # 0.19299


def test_no_balancing_draws_uniformly():
    assert sampling_weights(TASKS, CLASSES, {"ssp": 1.0}, "none") == pytest.approx([0.1] * 10)


def test_task_mixing_weights_split_draws_before_classes():
    # itp: 2 instances (yes, no) with weight 3; er: 4 unclassed instances with weight 1
    tasks = ["itp", "itp", "er", "er", "er", "er"]
    classes = ["yes", "no", None, None, None, None]
    probs = sampling_weights(tasks, classes, {"itp": 3.0, "er": 1.0}, "balanced")
    assert probs == pytest.approx([0.375, 0.375, 0.0625, 0.0625, 0.0625, 0.0625])


def test_mixing_weight_missing_or_not_positive_is_an_error():
    with pytest.raises(ValueError, match=r"no mixing weight for task\(s\) \['er'\]"):
        sampling_weights(["itp", "er"], ["yes", None], {"itp": 1.0}, "none")
    with pytest.raises(ValueError, match="must be > 0"):
        sampling_weights(["itp"], ["yes"], {"itp": 0.0}, "none")
    with pytest.raises(ValueError, match="sampling must be one of none, balanced, sqrt, got 'inverse'"):
        sampling_weights(["itp"], ["yes"], {"itp": 1.0}, "inverse")


def test_class_loss_weights_balanced_and_sqrt():
    # balanced: n / (K n_c) = 10/18, 10/9, 10/3
    balanced = by_class(class_weights(TASKS, CLASSES, "balanced"))
    assert balanced == {"a": pytest.approx([10 / 18] * 6), "b": pytest.approx([10 / 9] * 3),
                        "c": pytest.approx([10 / 3])}
    root = by_class(class_weights(TASKS, CLASSES, "sqrt"))
    assert root["c"] == pytest.approx([math.sqrt(10 / 3)])
    assert class_weights(TASKS, CLASSES, "none") == [1.0] * 10


def test_class_weights_are_per_task_and_one_for_generation_tasks():
    tasks = ["itp", "itp", "itp", "vp"]
    weights = class_weights(tasks, ["yes", "yes", "no", None], "balanced")
    assert weights == pytest.approx([0.75, 0.75, 1.5, 1.0])


def test_class_keys():
    assert class_key("ssp", "reframing") == "reframing"
    assert class_key("itp", "yes") == "yes"
    assert class_key("stp", "Couple") == "group"
    assert class_key("stp", "Alice") == "person"
    assert class_key("stp", ["Alice", "Bob"]) == "subset"
    assert class_key("stp", ["Family"]) == "group"
    assert class_key("er", {"emotion": "sad", "intensity": 3}) is None


def test_trainer_sampler_draws_classes_at_the_computed_frequencies(tmp_path):
    probs = sampling_weights(TASKS, CLASSES, {"ssp": 1.0}, "sqrt")
    ds = chat_rows([(c,) for c in CLASSES], sample_weight=probs)
    trainer = make_trainer(ds, tmp_path, per_device_train_batch_size=1)
    sampler = trainer._get_train_sampler()
    assert len(sampler) == 10  # one epoch = as many draws as instances
    drawn = Counter()
    for epoch in range(3000):  # the trainer sets each epoch, which seeds its draws
        sampler.set_epoch(epoch)
        drawn.update(CLASSES[i] for i in sampler)
    total = math.sqrt(6) + math.sqrt(3) + 1
    for label, expected in {"a": math.sqrt(6) / total, "b": math.sqrt(3) / total, "c": 1 / total}.items():
        assert drawn[label] / 30000 == pytest.approx(expected, abs=0.01)


def test_weighted_draws_depend_only_on_the_seed_and_the_epoch():
    """A resumed run makes a new sampler and sets the epoch it resumes in: it must draw what the sampler of the
    uninterrupted run drew in that epoch, however many epochs that one went through first."""
    import torch

    from rescue_train.sft.trainer import EpochWeightedSampler

    weights = torch.tensor(sampling_weights(TASKS, CLASSES, {"ssp": 1.0}, "balanced"), dtype=torch.float64)
    running = EpochWeightedSampler(weights, seed=3)
    epochs = []
    for epoch in range(3):
        running.set_epoch(epoch)
        epochs.append(list(running))
    fresh = EpochWeightedSampler(weights, seed=3)
    fresh.set_epoch(2)
    assert list(fresh) == epochs[2] == list(fresh)  # a pass changes nothing for the next one
    assert len({tuple(e) for e in epochs}) == 3  # each epoch its own draws
    first_of_seed_4 = EpochWeightedSampler(weights, seed=4)
    assert list(first_of_seed_4) != epochs[1]  # seed 4's first epoch is not seed 3's second


def test_trainer_without_weights_keeps_the_default_random_sampler(tmp_path):
    import torch

    ds = chat_rows([("a",), ("b",)])
    sampler = make_trainer(ds, tmp_path)._get_train_sampler()
    assert isinstance(sampler, torch.utils.data.RandomSampler)


def test_class_weighted_loss_is_the_weighted_token_mean(tmp_path):
    """With all-zero logits every answer token costs ln V, so the loss is ln V * sum(w_i n_i) / sum(n_i)."""
    import torch

    tok = tiny_tokenizer()
    answers = ["reframing the problem together", "no"]
    trainer = make_trainer(chat_rows([(a,) for a in answers], class_weight=[2.0, 0.5]), tmp_path, tokenizer=tok)
    with torch.no_grad():
        trainer.model.get_output_embeddings().weight.zero_()
    trainer.model.train()
    batch = next(iter(trainer.get_train_dataloader()))  # the trainer's own sampler and collator
    counts = (batch["labels"] != -100).sum(-1).tolist()  # answer tokens + <|im_end|>, in the drawn order
    weights = batch["class_weight"].tolist()
    assert sorted(zip(counts, weights)) == sorted(zip([len(tok(a)["input_ids"]) + 1 for a in answers], [2.0, 0.5]))
    loss = trainer.compute_loss(trainer.model, dict(batch))
    vocab = trainer.model.get_output_embeddings().weight.shape[0]
    expected = math.log(vocab) * (2.0 * max(counts) + 0.5 * min(counts)) / sum(counts)  # the long answer weighs 2
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    # evaluation loss stays the plain token mean
    trainer.model.eval()
    batch = next(iter(trainer.get_train_dataloader()))
    assert trainer.compute_loss(trainer.model, dict(batch)).item() == pytest.approx(math.log(vocab), rel=1e-5)


def test_class_weights_with_packing_is_refused(tmp_path):
    ds = chat_rows([("a",), ("b",)], class_weight=[1.0, 2.0])
    with pytest.raises(ValueError, match="train.packing=false"):
        make_trainer(ds, tmp_path, packing=True, max_length=64)


@pytest.mark.slow
def test_class_weighted_recipe_trains_through_its_evaluations(tmp_path):
    """The recipe run as documented: class weights on the training rows only, evaluation at every 2 steps
    (the validation rows carry no weight and share the wrapped collator), then the run finishes."""
    from rescue_train.sft.config import load_config
    from rescue_train.sft.runner import run

    cfg = load_config("ssp_lora", ["model=tiny", "balance.strategy=sqrt_weights",
                               "train.max_steps=4", "train.eval_steps=2", "train.batch_size=2", "train.grad_accum=1",
                               "train.logging_steps=1", "train.report_to=[none]", f"output_dir={tmp_path}"])
    run(cfg)
    prov = json.loads((tmp_path / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["global_step"] == 4
    state = json.loads((tmp_path / "checkpoints" / "checkpoint-4" / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "eval_loss" in e] == [2, 4]
    assert math.isfinite(prov["metrics"]["eval_loss"])


def test_an_instance_whose_answer_max_length_would_cut_is_dropped(tmp_path):
    """trl keeps the start of a too-long instance, which would train an answer that never ends; the trainer
    drops it, and keeps an instance whose answer and end of turn fit, even if only the markup after them
    was cut."""
    tok = tiny_tokenizer()
    short = chat("yes")
    text = tok.apply_chat_template(short["prompt"] + short["completion"], tokenize=False)
    full = tok(text, add_special_tokens=False)["input_ids"]
    through_end_of_turn = len(full) - full[::-1].index(tok.convert_tokens_to_ids("<|im_end|>"))  # the answer's
    trainer = make_trainer(chat_rows([("yes",), (" ".join(["maybe"] * 30),)]), tmp_path, tokenizer=tok,
                           max_length=through_end_of_turn)
    (kept,) = trainer.train_dataset
    assert len(full) > through_end_of_turn  # the short one lost its trailing newline too, and is kept
    assert tok.decode([t for t in kept["labels"] if t != -100]) == "yes<|im_end|>"


def test_length_grouped_batches_are_the_drawn_instances_sorted_by_length_in_groups():
    """Same draws as the drawn order; every ``group_batches`` batches' worth of draws sorted by length and cut
    into batches (their order shuffled), the epoch's incomplete batch last; the order depends only on
    (seed, epoch)."""
    import torch

    from rescue_train.sft.trainer import EpochWeightedSampler

    weights = torch.tensor(sampling_weights(TASKS, CLASSES, {"ssp": 1.0}, "sqrt"), dtype=torch.float64)
    lengths = [10 * (i + 1) for i in range(10)]  # instance i has 10(i+1) tokens: all lengths differ
    grouped = EpochWeightedSampler(weights, seed=3, lengths=lengths, batch_size=2)
    grouped.group_batches = 2  # groups of 4 draws: draws 0-3, 4-7, then 8-9 (the last batch)
    for epoch in range(3):
        drawn = EpochWeightedSampler(weights, seed=3)
        drawn.set_epoch(epoch)
        grouped.set_epoch(epoch)
        draws, order = list(drawn), list(grouped)
        batches = [order[b:b + 2] for b in range(0, 10, 2)]
        for start in (0, 4):
            by_length = sorted(draws[start:start + 4], key=lambda i: -lengths[i])
            assert sorted(batches[start // 2:start // 2 + 2]) == sorted([by_length[:2], by_length[2:]])
        assert sorted(batches[4]) == sorted(draws[8:10])
        fresh = EpochWeightedSampler(weights, seed=3, lengths=lengths, batch_size=2)
        fresh.group_batches = 2
        fresh.set_epoch(epoch)
        assert list(fresh) == order  # a resumed run's sampler orders the epoch the same way


def test_length_grouping_keeps_the_epochs_loss_and_removes_padding(tmp_path):
    """The same epoch of weighted draws, with class weights, batched as drawn and length-grouped: each batch's
    loss is its instances' weighted answer-token loss whatever their padding, so the epoch's losses (each over
    the epoch's token count, as gradient accumulation divides) sum to the same value, to 1e-5 in fp32; the
    grouped batches hold fewer pad tokens."""
    import torch

    tok = tiny_tokenizer()
    words = ["yes", "maybe not", "reframing the problem together now", "no", "a long answer " * 6, "ok then"]
    # seed 0 draws rows 5, 1, 2, 2, 3, 4: drawn batches pair long 5 with short 1 and short 3 with long 4
    questions = ["Q?", "Q?", "A much longer question, " * 4 + "?", "Short?", "Why " * 20, "Why " * 25]
    ds = chat_rows(list(zip(words, questions)), sample_weight=[1 / 6] * 6,
                   class_weight=[2.0, 0.5, 1.0, 3.0, 0.25, 1.5])
    losses, pads = {}, {}
    for batching in ("drawn", "length_grouped"):
        torch.manual_seed(0)  # the same LoRA initialisation
        trainer = make_trainer(ds, tmp_path / batching, tokenizer=tok, batching=batching)
        trainer.model.train()
        batches = list(trainer.get_train_dataloader())
        total = sum(int((b["labels"] != -100).sum()) for b in batches)
        with torch.no_grad():
            losses[batching] = sum(trainer.compute_loss(trainer.model, dict(b), num_items_in_batch=total).item()
                                   for b in batches)
        pads[batching] = sum(int((b["attention_mask"] == 0).sum()) for b in batches)
    assert trainer.batching == "length_grouped"
    assert losses["length_grouped"] == pytest.approx(losses["drawn"], rel=1e-5, abs=0)
    assert pads["length_grouped"] < pads["drawn"]
