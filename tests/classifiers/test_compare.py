"""``rescue-train compare``: configuration, metrics by hand, unit bootstrap and paired tests, and end-to-end
runs on the bundled data (scikit-learn path, tiny torch models), with resuming."""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import json

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, f1_score

from rescue_train.classifiers.classifier import LabelSpace
from rescue_train.cli import main as cli
from rescue_train.compare.config import EvalSettings, load_config
from rescue_train.compare.runner import compare
from rescue_train.compare.stats import HEADLINE, Predictions, batch_metrics, frequency_groups, scope_statistics

pytestmark = pytest.mark.usefixtures("one_torch_thread")

def test_load_config_merges_recipe_and_overrides_and_always_compares_against_none():
    config = load_config(["recipe=rpp_cls", "strategies=[posthoc_la,oversample]", "seeds=[0,1]", "sklearn.C=0.5"])
    assert (config.task, config.learner, config.recipe) == ("rpp", "sklearn", "rpp_cls")
    assert config.strategies == ["none", "posthoc_la", "oversample"]
    assert config.seeds == [0, 1] and config.sklearn.C == 0.5
    assert config.output_dir == "runs/compare/rpp_cls-sklearn"
    assert "smote" in load_config(["recipe=ssp_cls"]).strategies
    assert "crt" in load_config(["recipe=ssp_cls", "learner=torch"]).strategies


@pytest.mark.parametrize("argv, message", [
    (["recipe=rpp_cls", "strategies=[focal]"], "do not apply to learner=sklearn"),
    (["recipe=rpp_cls", "sklearn.nope=1"], "unknown key sklearn.nope"),
    (["recipe=rpp_cls", "sklearn.C=big"], "sklearn.C: expected a float, got 'big'"),
    (["recipe=rpp_cls", "data.split_sed=1"], "unknown key data.split_sed; did you mean data.split_seed"),
    (["recipe=no_such_recipe"], "unknown recipe 'no_such_recipe'"),
    (["recipe=rpp_clss"], "did you mean rpp_cls"),
    (["recipe=rpp_cls", "task=er"], "not a closed-set task"),
    (["recipe=rpp_cls", "oops"], "key=value"),
    # every run sets its own test fold, as in the LoRA comparison: a given one would be ignored
    (["recipe=rpp_cls", "data.test_fold=3"], r"data.test_fold=3: every run of the comparison sets data.test_fold "
                                             r"itself \(use test_folds=\[...\]\)"),
    (["recipe=rpp_cls", "data.split=leave_one_unit_out"], "data.split=leave_one_unit_out: classifiers train on "
                                                          "grouped k-fold splits"),
])
def test_load_config_rejects_bad_settings_clearly(argv, message):
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_config(argv)


def test_metrics_from_a_hand_computed_confusion():
    # gold (0, 0, 1, 2), predicted (0, 1, 1, 1), gold ranks (1, 2, 1, 3); classes 0/1/2 are head/medium/tail.
    # recall (1/2, 1, 0); precision (1, 1/3, 0); F1 (2/3, 1/2, 0).
    gold, pred, rank = np.array([0, 0, 1, 2]), np.array([0, 1, 1, 1]), np.array([1, 2, 1, 3])
    m = batch_metrics(gold, pred[None, None], rank[None, None], np.ones((1, 4)), 3, np.array([0, 1, 2]))
    expected = {"accuracy": 0.5, "macro_f1": (2 / 3 + 1 / 2) / 3, "balanced_accuracy": 0.5,
                "weighted_f1": (2 * 2 / 3 + 1 / 2) / 4, "mrr": (1 + 1 / 2 + 1 + 1 / 3) / 4,
                "head_recall": 0.5, "medium_recall": 1.0, "tail_recall": 0.0,
                # the label-collapse line: 2 labels predicted, 1 of 4 and 3 of 4 -> entropy -(1/4 log2 1/4 + 3/4 log2 3/4)
                "predicted_labels": 2.0, "prediction_entropy": 0.5 + 0.75 * np.log2(4 / 3)}
    assert {k: float(v[0]) for k, v in m.items()} == pytest.approx(expected)
    assert expected["macro_f1"] == pytest.approx(f1_score(gold, pred, average="macro"))
    assert expected["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(gold, pred))


def test_bootstrap_weights_equal_duplicated_instances_and_seeds_are_averaged():
    gold, pred = np.array([0, 0, 1, 2]), np.array([0, 1, 1, 1])
    groups = np.array([0, 0, 2])
    weighted = batch_metrics(gold, pred[None, None], np.ones((1, 1, 4)), np.array([[2.0, 0, 1, 1]]), 3, groups)
    copied = batch_metrics(np.array([0, 0, 1, 2]), np.array([[[0, 0, 1, 1]]]), np.ones((1, 1, 4)),
                           np.ones((1, 4)), 3, groups)
    assert {k: float(v[0]) for k, v in weighted.items() if k != "medium_recall"} == pytest.approx(
        {k: float(v[0]) for k, v in copied.items() if k != "medium_recall"})
    assert np.isnan(weighted["medium_recall"][0])  # no medium class: nan, reported as None
    # Two seeds: accuracy 1/4 and 3/4 -> mean 1/2.
    two = batch_metrics(gold, np.array([[[0, 1, 0, 0]], [[0, 0, 1, 0]]]), np.ones((2, 1, 4)), np.ones((1, 4)), 3, groups)
    assert two["accuracy"][0] == pytest.approx(0.5)


def test_frequency_groups_use_shares_within_each_scenario():
    space = LabelSpace([("couple", "a"), ("couple", "b"), ("couple", "c"), ("family", "d"), ("family", "e")])
    counts = {"couple:a": 70, "couple:b": 22, "couple:c": 8, "family:d": 1, "family:e": 9}
    assert frequency_groups(counts, space, 0.2, 0.1) == {
        "couple:a": "head", "couple:b": "head", "couple:c": "tail", "family:d": "medium", "family:e": "head"}


def _strategies(n_units: int, per_unit: int):
    gold = np.zeros(n_units * per_unit, dtype=int)
    right = Predictions(gold, np.zeros((1, len(gold)), dtype=int), np.ones((1, len(gold))))
    wrong = Predictions(gold, np.ones((1, len(gold)), dtype=int), np.full((1, len(gold)), 2.0))
    units = np.repeat([f"u{i}" for i in range(n_units)], per_unit)
    return right, wrong, units


def test_paired_permutation_test_over_units():
    right, wrong, units = _strategies(10, 3)
    settings = EvalSettings(bootstrap=200, permutations=999, stats_seed=0)
    stats = scope_statistics({"none": wrong, "better": right, "same": wrong}, units, 2, np.array([0, 2]), settings)
    better = stats["better"]["vs_none"]["accuracy"]
    # Only "swap no unit" reaches +1 (and "swap every unit" -1) of 2^10 patterns, more than the 999 drawn:
    # random patterns, two-sided p = 2 * (extreme + 1) / 1000, about 2 * 2/1000.
    assert better["difference"] == 1.0 and better["p_value"] < 0.02 and better["ci"] == [1.0, 1.0]
    assert better["test"] == "random: 999 of 2^10 unit swap patterns, p = (extreme + 1) / (999 + 1)"
    same = stats["same"]["vs_none"]["accuracy"]
    assert same["difference"] == 0.0 and same["p_value"] == 1.0
    assert stats["none"]["estimate"]["accuracy"] == 0.0 and stats["none"]["ci"]["accuracy"] == [0.0, 0.0]


def test_bootstrap_resamples_units_not_rows():
    # Unit u0 holds 9 correct rows, unit u1 one wrong row: a unit resample is all-u0 (acc 1), all-u1 (acc 0)
    # or mixed (acc 0.9); rows resampled would give many other values.
    gold = np.zeros(10, dtype=int)
    pred = np.array([0] * 9 + [1])
    p = Predictions(gold, pred[None], np.where(pred == 0, 1.0, 2.0)[None])
    units = np.array(["u0"] * 9 + ["u1"])
    settings = EvalSettings(bootstrap=400, permutations=0, confidence=0.95)
    stats = scope_statistics({"none": p}, units, 2, np.array([0, 2]), settings)
    assert stats["none"]["estimate"]["accuracy"] == pytest.approx(0.9)
    assert stats["none"]["ci"]["accuracy"] == [0.0, 1.0]


def test_bootstrap_resamples_units_within_scenario():
    # Couples u0 (right) and u1 (wrong), one family f (right), one row each. Within scenario, f is in every
    # draw and the two couple draws give (u0, u0) 1, (u0, u1) 2/3 or (u1, u1) 1/3, each pure pair 1/4 of the
    # time; pooled resampling would also give all-u1 draws (accuracy 0). One unit alone gets no interval.
    gold = np.zeros(3, dtype=int)
    pred = np.array([0, 1, 0])
    p = Predictions(gold, pred[None], np.where(pred == 0, 1.0, 2.0)[None])
    settings = EvalSettings(bootstrap=400, permutations=0)
    stats = scope_statistics({"none": p}, np.array(["u0", "u1", "f"]), 2, np.array([0, 2]), settings,
                             strata=np.array(["couple", "couple", "family"]))
    assert stats["none"]["ci"]["accuracy"] == pytest.approx([1 / 3, 1.0])
    alone = scope_statistics({"none": p}, np.array(["f"] * 3), 2, np.array([0, 2]), settings)
    assert alone["none"]["ci"]["accuracy"] is None


def _run(tmp_path, *extra):
    argv = ["recipe=rpp_cls", f"output_dir={tmp_path / 'cmp'}", "evaluation.bootstrap=100",
            "evaluation.permutations=100", *extra]
    assert cli(["compare", *argv]) == 0
    return json.loads((tmp_path / "cmp" / "results.json").read_text())


@pytest.mark.slow
def test_sklearn_compare_on_bundled_data_writes_everything_and_resumes(tmp_path):
    results = _run(tmp_path, "strategies=[inverse_freq,posthoc_la,oversample]")
    out = tmp_path / "cmp"
    assert list(results["strategies"]) == ["none", "inverse_freq", "posthoc_la", "oversample"]
    assert results["folds"] == [0, 1, 2, 3, 4]
    couple = results["scopes"]["couple"]
    assert couple["n"] == 54 and couple["units"] == 5  # every couple RPP instance is tested once
    for name, stats in couple["strategies"].items():
        assert set(stats["estimate"]) == set(HEADLINE)
        low, high = stats["ci"]["macro_f1"]
        assert low <= stats["estimate"]["macro_f1"] <= high
        assert (name == "none") != ("vs_none" in stats)
    assert set(results["per_class_recall_table"]["couple:pursue_withdraw"]) >= {"group", "none", "oversample"}
    provenance = results["provenance"]
    assert provenance["manifest_hash"] and provenance["versions"]["scikit-learn"] and provenance["run_hash"]
    assert results["strategies"]["posthoc_la"]["taus"]  # chosen on each validation fold
    text = (out / "results.md").read_text()
    for png in results["plots"]:  # in OUT/plots, each linked from results.md under the per-class recall table
        assert png.startswith("plots/") and (out / png).read_bytes()[:4] == b"\x89PNG"
        assert f"]({png})" in text.split("## Per-class recall")[1]
    assert "| posthoc_la |" in (out / "results.md").read_text()
    # all folds pooled: the family instances all come from fold 0's runs, which trained on couples only
    assert results["fold_notes"] == [
        "family: 0 training instances in the run of test fold 0, which tests 40 of the 40 pooled family instances (all "
        "family data is in fold 0): family scores measure couple-to-family transfer. While all family data is in one "
        "fold, no fold both trains on and tests it"]
    assert f"- {results['fold_notes'][0]}\n" in (out / "results.md").read_text()
    assert "## family (40 instances, 1 unit)" in (out / "results.md").read_text()
    # Resume: finished runs are read back, only the new strategy is trained.
    finished = out / "runs" / "none" / "fold0_seed0.json"
    stamp = finished.stat().st_mtime_ns
    again = _run(tmp_path, "strategies=[inverse_freq,posthoc_la,oversample,sqrt_sampling]")
    assert finished.stat().st_mtime_ns == stamp and (out / "runs" / "sqrt_sampling" / "fold4_seed0.json").exists()
    assert again["scopes"]["couple"]["strategies"]["none"] == couple["strategies"]["none"]
    # Settings that change a run's result refuse to mix.
    with pytest.raises(ValueError, match=r"other settings \(changed: \['sklearn'\]\)"):
        compare(load_config(["recipe=rpp_cls", f"output_dir={out}", "evaluation.bootstrap=100",
                             "evaluation.permutations=100", "sklearn.C=3.0"]))


@pytest.mark.slow
def test_torch_compare_with_tiny_encoder_on_bundled_data(tmp_path):
    results = _run(tmp_path, "learner=torch", "strategies=[ldam_drw,crt,posthoc_la]", "test_folds=[0,1]",
                   "torch.steps=3", "torch.batch_size=4", "torch.crt_steps=2", "torch.max_length=128", "plots=false")
    assert list(results["strategies"]) == ["none", "ldam_drw", "crt", "posthoc_la"]
    assert results["folds"] == [0, 1] and "plots" not in results
    run = json.loads((tmp_path / "cmp" / "runs" / "crt" / "fold1_seed0.json").read_text())
    assert len(run["learner_info"]["train_loss"]) == 2
    record = run["predictions"][0]
    assert record["parse_status"] == "ok" and sorted(record["prediction"]) == sorted(record["label_scores"])


@pytest.mark.slow
def test_torch_compare_with_tiny_decoder_and_lora(tmp_path):
    results = _run(tmp_path, "learner=torch", "strategies=[balanced_softmax]", "test_folds=[0]", "torch.model=tiny",
                   "torch.lora=true", "torch.steps=2", "torch.batch_size=2", "torch.max_length=96", "plots=false",
                   "recipe=ssp_cls")
    assert results["task"] == "ssp" and set(results["strategies"]) == {"none", "balanced_softmax"}


@pytest.mark.slow
def test_merge_puts_two_comparisons_in_one_table_each_tested_against_its_own_none(tmp_path, capsys):
    base = ["recipe=ssp_cls", "test_folds=[0,1]", "evaluation.bootstrap=50", "evaluation.permutations=64", "plots=false"]
    assert cli(["compare", *base, "strategies=[inverse_freq]", f"output_dir={tmp_path / 'plain'}"]) == 0
    assert cli(["compare", *base, "strategies=[posthoc_la]", "sklearn.C=0.5", f"output_dir={tmp_path / 'c05'}"]) == 0
    merged_dir = tmp_path / "merged"
    assert cli(["compare", f"merge=[{tmp_path / 'plain'},{tmp_path / 'c05'}]", f"output_dir={merged_dir}",
                         "evaluation.bootstrap=50", "evaluation.permutations=64", "plots=false"]) == 0
    merged = json.loads((merged_dir / "results.json").read_text())
    plain = json.loads((tmp_path / "plain" / "results.json").read_text())
    assert list(merged["strategies"]) == ["plain:none", "plain:inverse_freq", "c05:none", "c05:posthoc_la"]
    both = merged["scopes"]["both"]["strategies"]
    assert both["c05:posthoc_la"]["vs_none"]["accuracy"]["reference"] == "c05:none"
    # Estimates and raw p-values are those of the single comparison; Holm now counts both comparisons' tests.
    assert both["plain:inverse_freq"]["estimate"] == plain["scopes"]["both"]["strategies"]["inverse_freq"]["estimate"]
    single = plain["scopes"]["both"]["strategies"]["inverse_freq"]["vs_none"]["macro_f1"]
    assert both["plain:inverse_freq"]["vs_none"]["macro_f1"]["p_value"] == single["p_value"]
    assert [m["prefix"] for m in merged["provenance"]["merged"]] == ["plain", "c05"]
    assert "| c05:posthoc_la |" in (merged_dir / "results.md").read_text()
    assert cli(["compare", f"merge=[{tmp_path / 'plain'}]", f"output_dir={merged_dir}"]) == 2
    assert "two or more comparisons" in capsys.readouterr().err
