"""Calibrated ranking on a three-candidate example worked out by hand (comments give the arithmetic)."""

import math

import evaluation_helpers  # noqa: F401  (offline settings)
import pytest
from cli_helpers import command

from rescue_train.data import load_benchmark
from rescue_train.evaluation.calibrate import recalibrated
from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.protocols import calibration_requests, rank_request
from rescue_train.evaluation.runner import run
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


@pytest.fixture(scope="module")
def contextual(tmp_path_factory):
    """A zero-shot rank evaluation of the tiny model under calibration=contextual (two SSP instances)."""
    out = tmp_path_factory.mktemp("calibrated") / "run"
    (results,) = run(load_config(ZERO_SHOT + ["calibration=contextual", f"output_dir={out}"]))
    return out, results


ZERO_SHOT = ["model=tiny", "protocol=rank", "tasks=[ssp]", "limit=2", "bertscore=none", "progress=false"]


def test_eval_calibrated_contextual_and_pmi_on_hf(contextual):
    out, results = contextual
    assert results["label"] == "tiny [contextual]" and results["config"]["calibration"] == "contextual"
    records = results["records"]
    assert all(len(r["loglik_content_free"]) == 2 and r["loglik_premise"].keys() == r["loglik"].keys()
               for r in records)
    # each record ranked by its own contextual scores (the run's rank_score is the sum)
    assert all(r["prediction"] == ranking(calibrated(r, "contextual"), list(r["loglik"])) for r in records)
    # pmi in the same folder: the predictions are the run's (same prediction hash), only re-ranked
    predictions = (out / "predictions.jsonl").read_text()
    (pmi,) = run(load_config(ZERO_SHOT + ["calibration=pmi", f"output_dir={out}"]))
    assert (out / "predictions.jsonl").read_text() == predictions
    assert pmi["label"] == "tiny [pmi]" and pmi["prediction_hash"] == results["prediction_hash"]
    assert all(r["prediction"] == ranking(calibrated(r, "pmi"), list(r["loglik"])) for r in pmi["records"])
    # report re-ranks the saved contextual result under pmi exactly as the pmi evaluation scored it
    again = recalibrated(results, "pmi")
    assert again["label"] == "tiny [pmi]" and again["aggregates"] == pmi["aggregates"]
    assert [r["prediction"] for r in again["records"]] == [r["prediction"] for r in pmi["records"]]


def test_report_shows_each_calibration_and_the_collapse_line(contextual, capsys):
    out, _ = contextual
    assert command("report")([str(out), "--calibration", "none,contextual,pmi", "--no-paper"]) == 0
    text = capsys.readouterr().out
    assert "## Rare labels and label collapse" in text
    for name in ("tiny [rank]", "tiny [contextual] [rank]", "tiny [pmi] [rank]"):
        assert f"| {name} | ssp | 2 |" in text


def test_calibration_is_refused_where_it_does_not_apply():
    with pytest.raises(ValueError, match="calibration=pmi re-ranks candidates' log-likelihoods: it needs protocol=rank"):
        load_config(["model=tiny", "protocol=sft", "calibration=pmi"])
    with pytest.raises(ValueError, match="calibration=contextual has no tau"):
        load_config(["model=tiny", "protocol=rank", "calibration=contextual", "calibration_tau=1"])
    with pytest.raises(ValueError, match="calibration=prior adjusts by the class prior .* has no training run"):
        run(load_config(ZERO_SHOT + ["calibration=prior"]))
