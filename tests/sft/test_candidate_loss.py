"""Candidate-set losses in LoRA SFT: each loss on a 3-candidate example worked out by hand, the training fold's
class prior per task and scenario, the settings that refuse to apply, and the candidate log-likelihoods training
computes equal to the evaluator's rank scores (every closed-set task, fp32)."""

from __future__ import annotations

import math

import pytest
from sft_helpers import make_trainer, tiny_tokenizer

from rescue_train.sft.candidates import CandidateLoss, candidate_columns, candidate_set_loss

STEPS = 30  # the overfit check's training steps (learning rate 3e-3, two instances)

# z = (ln 1, ln 2, ln 3): softmax (1/6, 2/6, 3/6); the gold is the first candidate; training counts (3, 2, 1),
# so pi = (1/2, 1/3, 1/6).
Z = [0.0, math.log(2), math.log(3)]
PRIOR = [math.log(1 / 2), math.log(1 / 3), math.log(1 / 6)]


def loss(name, logits=(Z,), golds=(0,), priors=(PRIOR,), weights=None, tau=1.0):
    import torch

    return candidate_set_loss(name, [torch.tensor(z, dtype=torch.float64) for z in logits], list(golds),
                              list(priors), weights, tau).item()


def test_each_candidate_loss_by_hand():
    # plain softmax cross-entropy: -ln(1/6)
    assert loss("candidate_ce") == pytest.approx(math.log(6))
    # logit-adjusted, tau=1: z + ln pi = ln(1/2), ln(2/3), ln(1/2) -> p_gold = (1/2) / (5/3) = 3/10
    assert loss("logit_adjusted") == pytest.approx(math.log(10 / 3))
    # tau=2: z + 2 ln pi = ln(1/4), ln(2/9), ln(1/12) -> p_gold = (1/4) / (5/9) = 9/20
    assert loss("logit_adjusted", tau=2.0) == pytest.approx(math.log(20 / 9))
    # balanced softmax: z + ln n_c = ln 3, ln 4, ln 3 -> p_gold = 3/10, whatever tau says
    assert loss("balanced_softmax", tau=2.0) == pytest.approx(math.log(10 / 3))


def test_class_weights_give_a_weighted_mean_over_instances_of_different_candidate_counts():
    # a second instance: two equal candidates, the gold the second -> ln 2; weights 2 and 1
    both = loss("candidate_ce", logits=(Z, [0.0, 0.0]), golds=(0, 1), priors=(PRIOR, [0.0, 0.0]), weights=[2.0, 1.0])
    assert both == pytest.approx((2 * math.log(6) + math.log(2)) / 3)
    assert loss("candidate_ce", logits=(Z, [0.0, 0.0]), golds=(0, 1), priors=(PRIOR, [0.0, 0.0])) == \
        pytest.approx((math.log(6) + math.log(2)) / 2)


def test_the_prior_is_the_training_folds_per_task_and_scenario_an_unseen_class_counted_once():
    def ssp(gold, scenario):
        return {"id": f"{scenario}-{gold}", "gold": gold, "candidates": ["a", "b", "c"]}

    records = [ssp("a", "x"), ssp("a", "x"), ssp("b", "x"), ssp("c", "y"), None]
    columns = candidate_columns(["ssp"] * 4 + ["er"], ["x", "x", "x", "y", "x"], records, "label")
    assert columns["candidates"] == [["a", "b", "c"]] * 4 + [[]]
    assert columns["gold_index"] == [0, 0, 1, 2, -1]
    # scenario x: a 2, b 1, c unseen (1) of 4; scenario y: c 1, a and b unseen -> a third each
    assert columns["candidate_log_prior"][0] == pytest.approx([math.log(2 / 4), math.log(1 / 4), math.log(1 / 4)])
    assert columns["candidate_log_prior"][3] == pytest.approx([math.log(1 / 3)] * 3)
    assert columns["candidate_log_prior"][4] == []
    # STP counts each candidate as its kind of target: the group label, one person
    stp = [{"id": "s1", "gold": "Couple", "candidates": ["Ann", "Ben", "Couple"]},
           {"id": "s2", "gold": "Ann", "candidates": ["Ann", "Ben", "Couple"]},
           {"id": "s3", "gold": "Couple", "candidates": ["Ann", "Ben", "Couple"]}]
    prior = candidate_columns(["stp"] * 3, ["x"] * 3, stp, "json")
    assert prior["candidate_log_prior"][0] == pytest.approx([math.log(1 / 4), math.log(1 / 4), math.log(2 / 4)])
    assert prior["candidates"][1][0] == '{"target_top3": ["Ann"]}'
    with pytest.raises(ValueError, match="its gold 'd' is not one of its candidates"):
        candidate_columns(["ssp"], ["x"], [{"id": "i", "gold": "d", "candidates": ["a"]}], "label")


@pytest.mark.parametrize("argv, message", [
    (["recipe=er_lora", "balance.strategy=logit_adjusted"], "tasks .*'er'.* have none"),
    (["recipe=ssp_lora", "balance.strategy=posthoc_la"], "not a way to train"),
    (["recipe=ssp_lora", "balance.candidate_loss_weight=0.3"], "candidate_loss_weight applies to the candidate-set"),
    (["recipe=ssp_lora", "balance.strategy=balanced_softmax", "balance.tau=2"], "balance.tau applies to"),
    (["recipe=ssp_lora", "balance.strategy=candidate_ce", "train.packing=true"], "train.packing=false"),
    (["recipe=ssp_lora", "balance.strategy=candidate_ce", "balance.candidate_loss_weight=1.5"], "candidate_loss_weight"),
])
def test_candidate_loss_settings_that_do_not_apply_are_refused(argv, message):
    from rescue_train.sft.config import load_config

    recipe, *overrides = argv
    with pytest.raises(ValueError, match=message):
        load_config(recipe.split("=")[1], ["model=tiny", *overrides])


def test_candidate_loss_settings_are_typed_and_recorded():
    from dataclasses import asdict

    from rescue_train.sft.config import load_config

    cfg = load_config("ssp_lora", ["model=tiny", "balance.strategy=logit_adjusted", "balance.tau=1.5",
                                   "balance.candidate_loss_weight=0.25"])
    assert asdict(cfg)["balance"] == {"strategy": "logit_adjusted", "candidate_loss_weight": 0.25, "tau": 1.5}


def closed_set_rows():
    """Two instances of every closed-set task from the bundled data, as the training rows of a candidate-set
    run (the converter's SFT row plus the candidate columns) and as the rank protocol's requests."""
    import datasets

    from rescue_train.convert import sft_row
    from rescue_train.data import load_samples
    from rescue_train.evaluation.protocols import rank_request
    from rescue_train.tasks import CLOSED_SET_TASKS, BuildOptions, build

    samples = load_samples("bundled")[:4]
    instances = [inst for task in CLOSED_SET_TASKS for inst in build(task, samples, BuildOptions(context=3)).instances[:2]]
    assert sorted({i.task for i in instances}) == sorted(CLOSED_SET_TASKS)
    rows = [sft_row(inst, "dialogue", "label") for inst in instances]
    columns = candidate_columns([i.task for i in instances], [i.scenario for i in instances],
                                [i.to_record() for i in instances], "label")
    dataset = datasets.Dataset.from_dict({"prompt": [r["prompt"] for r in rows],
                                          "completion": [r["completion"] for r in rows],
                                          "chat_template_kwargs": [r["chat_template_kwargs"] for r in rows],
                                          **columns})
    return dataset, [rank_request(inst, "dialogue", "label") for inst in instances]


def test_training_scores_the_candidates_as_rank_evaluation_does(tmp_path):
    """Same model (a LoRA adapter with random weights), same instances: the candidate log-likelihoods of the
    training step equal the evaluator's rank scores, and each row's trained answer tokens are its gold candidate's
    tokens (the answer through its end of turn)."""
    import torch

    from rescue_train.inference.hf import HFBackend
    from rescue_train.tiny import tiny_model_path

    dataset, requests = closed_set_rows()
    tok = tiny_tokenizer()
    trainer = make_trainer(dataset, tmp_path / "train", tokenizer=tok,
                           candidate_loss=CandidateLoss("candidate_ce", 0.5, 1.0))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in trainer.model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.05)
    trainer.model.eval()
    rows = trainer.train_dataset
    items = [(r["candidate_prompt_ids"], r["candidate_ids"]) for r in rows]
    with torch.no_grad():
        trained = [z.tolist() for z in trainer.candidate_scores(trainer.model, items)]
    for row in rows:
        assert [t for t in row["labels"] if t != -100] == row["candidate_ids"][row["gold_index"]]
    trainer.model.save_pretrained(tmp_path / "adapter")
    backend = HFBackend(str(tiny_model_path()), adapters={"a": str(tmp_path / "adapter")}, dtype="float32",
                        device="cpu")
    ranked = backend.loglikelihood(requests, adapter="a")
    assert [len(r) for r in ranked] == [len(z) for z in trained]
    worst = max(abs(s.logprob - z) for row, zs in zip(ranked, trained) for s, z in zip(row, zs))
    assert worst < 1e-4, worst
    assert max(abs(a - b) for zs in trained for a, b in zip(zs, [0.0] * len(zs))) > 1.0  # real scores, not zeros


@pytest.fixture(scope="module")
def itp_pair():
    """Two ITP instances of the bundled data, one answered yes and one no: a training set with distinct labels."""
    import datasets

    from rescue_train.convert import sft_row
    from rescue_train.data import load_samples
    from rescue_train.evaluation.protocols import rank_request
    from rescue_train.tasks import BuildOptions, build

    instances = build("itp", load_samples("bundled")[:4], BuildOptions(context=1)).instances
    pair = [next(i for i in instances if i.gold == gold) for gold in ("yes", "no")]
    rows = [sft_row(inst, "dialogue", "label") for inst in pair]
    columns = candidate_columns([i.task for i in pair], [i.scenario for i in pair], [i.to_record() for i in pair],
                                "label")
    dataset = datasets.Dataset.from_dict({"prompt": [r["prompt"] for r in rows],
                                          "completion": [r["completion"] for r in rows],
                                          "chat_template_kwargs": [r["chat_template_kwargs"] for r in rows],
                                          **columns})
    return pair, dataset, [rank_request(inst, "dialogue", "label") for inst in pair]


@pytest.mark.parametrize("candidate_loss", [None, CandidateLoss("balanced_softmax", 1.0, 1.0)],
                         ids=["token-loss", "candidate-loss"])
def test_lora_overfits_a_few_instances_until_rank_scoring_gets_each_right(itp_pair, candidate_loss, tmp_path):
    """The chain check: LoRA on the tiny model, trained through trl's path (template, loss mask, label
    tokenisation) on a few instances, then ranked by the evaluator's hf backend with the saved adapter: every
    instance's gold ranks first. Any disagreement between what training renders and what ranking scores fails it."""
    from rescue_train.inference.hf import HFBackend
    from rescue_train.sft.config import LoraSettings
    from rescue_train.sft.models import lora_config
    from rescue_train.sft.trainer import RescueSFTTrainer
    from rescue_train.tiny import tiny_model_path
    from sft_helpers import sft_args, tiny_model

    pair, dataset, requests = itp_pair
    trainer = RescueSFTTrainer(
        model=tiny_model(), train_dataset=dataset, processing_class=tiny_tokenizer(),
        args=sft_args(tmp_path / "train", max_steps=STEPS, learning_rate=3e-3, lr_scheduler_type="constant",
                      per_device_train_batch_size=len(pair)),
        peft_config=lora_config(LoraSettings(dropout=0.0)), candidate_loss=candidate_loss)
    trainer.train()
    trainer.model.save_pretrained(tmp_path / "adapter")
    backend = HFBackend(str(tiny_model_path()), adapters={"run": str(tmp_path / "adapter")}, dtype="float32",
                        device="cpu")
    ranked = backend.loglikelihood(requests, adapter="run")
    best = [inst.candidates[max(range(len(scores)), key=lambda k: scores[k].logprob)]
            for inst, scores in zip(pair, ranked)]
    assert best == [inst.gold for inst in pair]

