"""Calibrated ranking on a three-candidate example worked out by hand (comments give the arithmetic)."""

import math

import pytest

from rescue_train.data import load_benchmark
from rescue_train.evaluation.protocols import calibration_requests, rank_request
from rescue_train.scoring.calibration import calibrated, choose_tau, class_prior, ranking, rerank
from rescue_train.tasks import build

LN = math.log


def record(p=(0.5, 0.3, 0.2), shift=-2.0, gold="a", **more):
    """Candidates a, b, c whose summed log-likelihoods normalise to ``p`` (shifted: a raw log-likelihood is no
    probability over the candidates)."""
    return {"id": "x", "task": "ssp", "scenario": "couple", "gold": gold,
            "loglik": {c: LN(q) + shift for c, q in zip("abc", p)}, "answer_tokens": {"a": 1, "b": 3, "c": 1},
            **more}


def test_none_ranks_by_the_raw_sum_or_mean():
    r = record()
    # sum: ln .5 - 2 > ln .3 - 2 > ln .2 - 2; mean per token divides b's by its 3 tokens: (ln .3 - 2)/3 = -1.068
    # ranks above a's ln .5 - 2 = -2.693
    assert ranking(calibrated(r, "none"), "abc") == ["a", "b", "c"]
    assert calibrated(r, "none", rank_score="mean")["b"] == pytest.approx((LN(0.3) - 2) / 3)
    assert ranking(calibrated(r, "none", rank_score="mean"), "abc") == ["b", "a", "c"]


def test_contextual_divides_by_the_mean_content_free_probabilities():
    # content-free p: (.7, .2, .1) and (.5, .4, .1), each shifted (normalised away); mean p_cf = (.6, .3, .1);
    # calibrated p / p_cf = (.5/.6, .3/.3, .2/.1) = (.833, 1, 2): c, b, a
    r = record(loglik_content_free=[{c: LN(q) - 5 for c, q in zip("abc", (0.7, 0.2, 0.1))},
                                    {c: LN(q) + 1 for c, q in zip("abc", (0.5, 0.4, 0.1))}])
    scores = calibrated(r, "contextual")
    assert scores == pytest.approx({"a": LN(0.5 / 0.6), "b": 0.0, "c": LN(2.0)})
    assert rerank(r, "contextual")["prediction"] == ["c", "b", "a"]


def test_pmi_subtracts_the_premise_log_likelihood():
    # raw - premise, unnormalised: a ln .5 - 2 + 2 = -0.693, b ln .3 - 2 + 1 = -2.204, c ln .2 - 2 + 4 = 0.391
    r = record(loglik_premise={"a": -2.0, "b": -1.0, "c": -4.0})
    assert calibrated(r, "pmi") == pytest.approx({"a": LN(0.5), "b": LN(0.3) - 1, "c": LN(0.2) + 2})
    assert rerank(r, "pmi")["prediction"] == ["c", "a", "b"]


def test_prior_subtracts_tau_times_the_smoothed_training_prior():
    # training golds a x5, b x2, c x0: add-one smoothed (6, 3, 1) / 10
    prior = class_prior(["a"] * 5 + ["b"] * 2, ["a", "b", "c"])
    assert prior == pytest.approx({"a": 0.6, "b": 0.3, "c": 0.1})
    # tau 1: ln(.5 / .6), ln(.3 / .3) = 0, ln(.2 / .1) = ln 2: c, b, a; tau 0.5: ln .5 - 0.5 ln .6 = -0.438,
    # ln .3 - 0.5 ln .3 = -0.602, ln .2 - 0.5 ln .1 = -0.458: a, c, b
    scores = calibrated(record(), "prior", prior=prior, tau=1.0)
    assert scores == pytest.approx({"a": LN(0.5 / 0.6), "b": 0.0, "c": LN(2.0)})
    assert ranking(scores, "abc") == ["c", "b", "a"]
    assert ranking(calibrated(record(), "prior", prior=prior, tau=0.5), "abc") == ["a", "c", "b"]
    assert ranking(calibrated(record(), "prior", prior=prior, tau=0.0), "abc") == ["a", "b", "c"]


def test_tau_is_chosen_by_balanced_accuracy_on_validation_records():
    prior = class_prior(["a"] * 4 + ["b"] * 2, ["a", "b", "c"])
    validation = [record((0.5, 0.3, 0.2), gold="a"),    # tau 0: a (right); tau 1: .9, .9, 1.8 -> c (wrong)
                  record((0.4, 0.35, 0.25), gold="c"),  # tau 0: a (wrong); tau 1: .72, 1.05, 2.25 -> c (right)
                  record((0.45, 0.3, 0.25), gold="c"),  # tau 0: a (wrong); tau 1: .81, .9, 2.25 -> c (right)
                  record((0.8, 0.1, 0.1), gold="a")]    # tau 0: a; tau 1: 1.44, .3, .9 -> a (right both)
    # tau 0: recall a 2/2, c 0/2 -> 0.5; tau 1: recall a 1/2, c 2/2 -> 0.75
    tau, found = choose_tau(validation, lambda r: prior, grid=(0.0, 1.0))
    assert (tau, found) == (1.0, {0.0: 0.5, 1.0: 0.75})


def test_a_calibration_without_its_scores_is_refused():
    with pytest.raises(ValueError, match="holds no loglik_content_free"):
        calibrated(record(), "contextual")
    with pytest.raises(ValueError, match="holds no loglik_premise"):
        rerank(record(), "pmi")


def test_rerank_rescores_and_names_the_calibration():
    r = record(gold="c", loglik_premise={"a": -2.0, "b": -1.0, "c": -4.0})
    pmi = rerank(r, "pmi")
    assert (pmi["calibration"], pmi["scores"]["rank"], pmi["scores"]["correct"]) == ("pmi", 1, 1.0)
    back = rerank(pmi, "none")
    assert "calibration" not in back and back["prediction"] == ["a", "b", "c"] and back["scores"]["rank"] == 3


def test_the_calibration_prompts_drop_the_dialogue_and_keep_the_question():
    bench = load_benchmark("bundled")
    inst = build("ssp", bench.samples).instances[0]
    prompt, answers = rank_request(inst, "dialogue")
    free_na, free_empty, premise = calibration_requests(inst)
    row_text = inst.sample.row(inst.context[-1]).dialogue
    assert row_text in prompt[1]["content"]
    question = prompt[1]["content"].split("\n\nQuestion:", 1)[1]
    for messages, same in (free_na, free_empty, premise):
        assert same == answers and messages[0] == prompt[0]
        assert row_text not in messages[1]["content"] and messages[1]["content"].endswith(question)
    assert "Conversation so far:\nN/A\n\nQuestion:" in free_na[0][1]["content"]
    assert "Conversation so far: (no earlier rows shown)" in free_empty[0][1]["content"]
    assert premise[0][1]["content"] == "Question:" + question
