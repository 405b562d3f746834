"""Error bars and paired comparisons (scoring/uncertainty.py, scoring/metric_uncertainty.py) on small examples
worked out by hand, and the bootstrap's coverage on simulated data."""

import itertools
import math

import numpy as np
import pytest

from rescue_train.scoring.metric_uncertainty import COUNTS, covered_metrics, paired_differences, result_uncertainty
from rescue_train.scoring.metrics import aggregate, gold_probability, resampled_metrics, task_labels
from rescue_train.scoring.uncertainty import (FEW_CLUSTERS, cluster_bootstrap, clustered_mean, holm,
                                              minimal_detectable_difference)

T_975_2DF = 4.302652729911275  # 97.5% quantile of Student's t with 2 degrees of freedom (tables: 4.303)


IDS = itertools.count()


def stp(unit, gold_rank, scenario="couple"):
    """An STP record whose gold is at ``gold_rank`` (1-3) of the ranking, or missing from it (0)."""
    ranking = {1: ["Ann", "Ben", "Couple"], 2: ["Ben", "Ann", "Couple"], 3: ["Ben", "Couple", "Ann"],
               0: ["Ben", "Couple", "Cal"]}[gold_rank]
    return {"id": f"s{next(IDS)}", "task": "stp", "scenario": scenario, "unit": unit, "gold": "Ann",
            "prediction": ranking, "parse_status": "ok"}


# A small invented results file: three couples (clusters) a, b, c holding 2, 3 and 1 instances.
THREE_CLUSTERS = [stp("a", 1), stp("a", 2), stp("b", 1), stp("b", 3), stp("b", 0), stp("c", 2)]


def test_cr1_standard_errors_by_hand_on_three_clusters():
    couple = result_uncertainty("stp", THREE_CLUSTERS)["couple"]
    # Recall@1 per instance: a (1, 0), b (1, 0, 0), c (0); n = 6, mean 2/6 = 1/3.
    # Cluster sums of (s_i - 1/3): a 1 - 2/3 = 1/3, b 1 - 1 = 0, c -1/3.
    # se = sqrt(G/(G-1) * sum_g (.)^2) / n = sqrt(3/2 * (1/9 + 0 + 1/9)) / 6 = sqrt(1/3) / 6 = 0.0962250...
    r1 = couple["recall@1"]
    assert r1["estimate"] == pytest.approx(1 / 3)
    assert r1["se"] == pytest.approx(math.sqrt(1 / 3) / 6)
    assert r1["ci"] == pytest.approx([1 / 3 - T_975_2DF * math.sqrt(1 / 3) / 6, 1 / 3 + T_975_2DF * math.sqrt(1 / 3) / 6])
    assert (r1["clusters"], r1["n"], r1["few_clusters"]) == (3, 6, True)
    assert r1["method"].startswith("CR1") and "G-1 = 2 df" in r1["method"]
    # Recall@2: a (1, 1), b (1, 0, 0), c (1); mean 4/6 = 2/3. Cluster sums of (s_i - 2/3):
    # a 2 - 4/3 = 2/3, b 1 - 2 = -1, c 1/3. se = sqrt(3/2 * (4/9 + 1 + 1/9)) / 6 = sqrt(7/3) / 6 = 0.2546...
    assert couple["recall@2"]["se"] == pytest.approx(math.sqrt(7 / 3) / 6)
    # MRR: a (1, 1/2), b (1, 1/3, 0), c (1/2); mean (3/2 + 4/3 + 1/2) / 6 = (10/3) / 6 = 5/9.
    # Cluster sums: a 3/2 - 10/9 = 7/18, b 4/3 - 15/9 = -1/3, c 1/2 - 5/9 = -1/18.
    # se = sqrt(3/2 * (49 + 36 + 1) / 324) / 6 = sqrt(43/108) / 6
    assert couple["mrr"]["estimate"] == pytest.approx(5 / 9)
    assert couple["mrr"]["se"] == pytest.approx(math.sqrt(43 / 108) / 6)
    # Macro-F1 is no mean over instances: bootstrapped, draws and seed recorded.
    macro = couple["macro_f1"]
    assert macro["method"].startswith("percentile cluster bootstrap") and macro["draws"] >= 10_000
    assert macro["seed"][0] == 0 and macro["clusters"] == 3
    assert macro["ci"][0] <= macro["estimate"] <= macro["ci"][1]


def test_fewer_than_two_clusters_gives_no_interval_and_says_why():
    records = THREE_CLUSTERS + [stp("f", 1, "family"), stp("f", 0, "family")]
    family = result_uncertainty("stp", records)["family"]
    for metric in ("recall@1", "mrr", "macro_f1"):
        assert family[metric]["ci"] is None and family[metric]["se"] is None
        assert family[metric]["reason"] == "1 cluster in family: an interval needs at least 2"
    # Pooled, the family is a stratum of one cluster: held fixed while the three couples are resampled.
    both = result_uncertainty("stp", records)["both"]["macro_f1"]
    assert both["clusters_per_stratum"] == {"couple": 3, "family": 1} and both["ci"] is not None
    assert clustered_mean([1.0, 2.0], ["x", "x"])["reason"] == "1 cluster: an interval needs at least 2"
    assert cluster_bootstrap(lambda c: c.sum(1), ["couple", "family"]) == \
        "every scenario has a single cluster: nothing to resample"


def test_records_without_units_get_no_interval():
    records = [{k: v for k, v in r.items() if k != "unit"} for r in THREE_CLUSTERS]
    entry = result_uncertainty("stp", records)["couple"]["recall@1"]
    assert entry["ci"] is None and "no unit" in entry["reason"]


def test_paired_se_by_hand():
    # Reference: THREE_CLUSTERS. The other result answers a's second and b's third instance right (rank 1)
    # and c's wrong. Recall@1 differences per instance: a (0, 1), b (0, 0, 1), c (0 - 0) = 0; n = 6, mean 2/6.
    # Cluster sums of (d_i - 1/3): a 1 - 2/3 = 1/3, b 1 - 1 = 0, c -1/3: the same as above, se = sqrt(1/3)/6.
    other = [dict(r) for r in THREE_CLUSTERS]
    for i, rank in ((1, 1), (4, 1), (5, 0)):
        other[i]["prediction"] = stp("x", rank)["prediction"]
    cells = {(c["scenario"], c["metric"]): c for c in paired_differences("stp", other, THREE_CLUSTERS)}
    cell = cells["couple", "recall@1"]
    se = math.sqrt(1 / 3) / 6
    assert cell["diff"] == pytest.approx(1 / 3) and cell["se"] == pytest.approx(se)
    assert cell["ci"] == pytest.approx([1 / 3 - T_975_2DF * se, 1 / 3 + T_975_2DF * se])
    # Two-sided t test with G-1 = 2 df: t = (1/3) / se = 2 sqrt(3) = 3.4641, p = 2 (1 - F_t2(3.4641)) = 0.0742
    # (the t distribution with 2 df has F(t) = 1/2 + t / (2 sqrt(t^2 + 2)), so p = 1 - t / sqrt(t^2 + 2)).
    t = 2 * math.sqrt(3)
    assert cell["p"] == pytest.approx(1 - t / math.sqrt(t * t + 2))
    assert (cell["n_shared"], cell["clusters"]) == (6, 3)
    # Only the shared instances are compared: drop one of the other result's instances.
    fewer = {(c["scenario"], c["metric"]): c for c in paired_differences("stp", other[:5], THREE_CLUSTERS)}
    assert fewer["couple", "recall@1"]["n_shared"] == 5 and fewer["couple", "recall@1"]["clusters"] == 2
    # The same instances under another gold (other data): not comparable, and said so.
    relabelled = [dict(r, gold="Ben") for r in other]
    cell = paired_differences("stp", relabelled, THREE_CLUSTERS)[0]
    assert cell["p"] is None and "gold answers differ on 6 shared instances" in cell["reason"]


def test_paired_bootstrap_of_a_non_mean_uses_the_same_draws_for_both():
    same = paired_differences("stp", THREE_CLUSTERS, THREE_CLUSTERS, metrics=["macro_f1"])
    # Identical results: every draw's difference is 0, so the interval is [0, 0] and p = 1 (couple and both).
    assert [(c["diff"], c["ci"], c["p"]) for c in same] == [(0.0, [0.0, 0.0], 1.0)] * 2
    assert same[0]["draws"] >= 10_000


def test_holm_by_hand():
    # Sorted 0.01, 0.03, 0.04, 0.2 (4 tests): 0.01*4 = 0.04; 0.03*3 = 0.09; max(0.04*2, 0.09) = 0.09; 0.2*1 = 0.2.
    assert holm([0.01, 0.04, None, 0.03, 0.2]) == pytest.approx([0.04, 0.09, None, 0.09, 0.2])
    assert holm([None]) == [None]


def test_minimal_detectable_difference():
    # Many clusters: (z_0.975 + z_0.8) se = (1.95996 + 0.84162) se = 2.80158 se (statsmodels' root finder
    # stops within about 1e-4 of it).
    assert minimal_detectable_difference(0.01, 100_000) == pytest.approx(0.0280158, rel=2e-4)
    # Ten clusters: about (t_0.975,9 + t_0.8,9) se = (2.26216 + 0.88340) se = 3.1456 se (noncentral t: 3.1496).
    assert minimal_detectable_difference(1.0, 10) == pytest.approx(3.1456, abs=0.01)
    assert minimal_detectable_difference(1.0, 1) is None and minimal_detectable_difference(None, 10) is None


def test_expected_accuracy_normalises_the_gold_over_the_candidates():
    # Candidate probabilities 0.6 (yes) and 0.2 (no) normalise to 0.75 and 0.25.
    record = {"task": "itp", "scenario": "couple", "unit": "a", "gold": "yes", "prediction": ["yes", "no"],
              "parse_status": "ok", "loglik": {"yes": math.log(0.6), "no": math.log(0.2)}}
    assert gold_probability(record) == pytest.approx(0.75)
    other = dict(record, gold="no", prediction=["yes", "no"])
    both = aggregate("itp", [record, other])["both"]
    assert both["expected_accuracy"] == pytest.approx((0.75 + 0.25) / 2)
    assert aggregate("itp", [record, {k: v for k, v in other.items() if k != "loglik"}])["both"][
        "expected_accuracy"] is None  # generated answers have no candidate probabilities: no mean over part


def _random_records(rng, task, n_units=6, per_unit=5):
    """Random closed-set records: golds and rankings over the task's couple labels (a few unparsed)."""
    labels = list(task_labels(task)["couple"])
    records = []
    for u in range(n_units):
        for j in range(per_unit):
            ranking = list(rng.permutation(labels))
            failed = rng.random() < 0.1
            records.append({"id": f"{u}-{j}", "task": task, "scenario": "couple", "unit": f"u{u}",
                            "gold": labels[rng.integers(len(labels))], "prediction": [] if failed else ranking,
                            "parse_status": "failed" if failed else "ok"})
    return records


@pytest.mark.parametrize("task", ["itp", "rpp", "ssp"])
def test_resampled_metrics_equal_the_aggregator_on_the_resampled_records(task):
    """The bootstrap's statistic is the aggregator's metric: on a draw (clusters taken 0, 2 or 3 times) it
    equals ``aggregate`` on the records of that draw written out."""
    rng = np.random.default_rng(7)
    space = task_labels(task)
    for _ in range(5):
        records = _random_records(rng, task)
        units = sorted({r["unit"] for r in records})
        index = np.array([units.index(r["unit"]) for r in records])
        statistic = resampled_metrics(task, records, list(space["couple"]), index, len(units))
        counts = rng.integers(0, 4, len(units)).astype(float)
        counts[0] = max(counts[0], 1)
        drawn = [r for r in records for _ in range(int(counts[units.index(r["unit"])]))]
        expected = aggregate(task, drawn, space)["couple"]
        for metric, values in statistic(counts[None, :]).items():
            if expected[metric] is None:
                assert np.isnan(values[0])
            else:
                assert values[0] == pytest.approx(expected[metric], abs=1e-12), metric


def test_resampled_distinct_n_equals_the_aggregator():
    texts = ["we hear you both", "you both feel unheard", "let us slow down", "we hear you"]
    records = [{"id": str(i), "task": "rsg", "scenario": "couple", "unit": f"u{i % 3}", "gold": t[::-1],
                "prediction": t, "parse_status": "ok"} for i, t in enumerate(texts)]
    index = np.array([i % 3 for i in range(4)])
    counts = np.array([[2.0, 0.0, 1.0]])  # u0 (texts 0 and 3) twice, u2 (text 2) once
    drawn = [records[0], records[3]] * 2 + [records[2]]
    expected = aggregate("rsg", drawn)["couple"]
    values = resampled_metrics("rsg", records, None, index, 3)(counts)
    # The drawn model turns have 4+3+4+3+4 = 18 words, distinct {we, hear, you, both, let, us, slow, down} = 8.
    assert values["distinct_1"][0] == pytest.approx(8 / 18) == pytest.approx(expected["distinct_1"])
    assert values["distinct_2"][0] == pytest.approx(expected["distinct_2"])
    assert values["human.distinct_1"][0] == pytest.approx(expected["human"]["distinct_1"])


def test_every_numeric_metric_gets_an_interval_or_is_a_count():
    rng = np.random.default_rng(3)
    for task in ("itp", "rpp", "stp"):
        records = _random_records(rng, "rpp" if task == "stp" else task)
        records = [dict(r, task=task) for r in records]
        numeric = {k for k, v in aggregate(task, records)["couple"].items() if isinstance(v, (int, float))}
        assert numeric - set(COUNTS) <= set(covered_metrics(task, records)), task


def test_percentile_cluster_bootstrap_covers_the_truth_at_about_the_nominal_rate():
    """A ratio of sums (precision's shape) over 40 clusters whose success rates vary (a cluster effect),
    true ratio 0.3: the 95% interval covers 0.3 in about 95% of 300 simulated benchmarks (binomial sd over
    300: 1.3 points; percentile intervals run a little short with few clusters)."""
    rng = np.random.default_rng(11)
    covered, simulations = 0, 300
    for _ in range(simulations):
        sizes = rng.integers(2, 13, 40).astype(float)
        successes = rng.binomial(sizes.astype(int), rng.beta(3, 7, 40)).astype(float)  # cluster rates, mean 0.3
        drawn = cluster_bootstrap(lambda counts: (counts @ successes) / (counts @ sizes), ["couple"] * 40,
                                  draws=1000, seed=int(rng.integers(1 << 31)))
        low, high = drawn.interval(0)
        covered += low <= 0.3 <= high
    assert 0.91 <= covered / simulations <= 0.985, covered / simulations


def test_clusters_below_the_threshold_are_flagged():
    values = [1.0, 0.0] * FEW_CLUSTERS
    assert clustered_mean(values, [str(i // 2) for i in range(len(values))])["few_clusters"] is False
    assert clustered_mean(values[:-2], [str(i // 2) for i in range(len(values) - 2)])["few_clusters"] is True


def test_an_interval_around_another_number_than_the_aggregate_is_withheld(monkeypatch):
    """Should a metric's bootstrap twin drift from the aggregator, the entry keeps the aggregate's value and
    gives no interval, with a warning, instead of an interval around another number."""
    from rescue_train.scoring import metric_uncertainty

    def drifted(*args):
        statistic = resampled_metrics(*args)
        return lambda counts: {k: v + 0.1 for k, v in statistic(counts).items()}

    monkeypatch.setattr(metric_uncertainty, "resampled_metrics", drifted)
    with pytest.warns(RuntimeWarning, match="internal check failed"):
        macro = result_uncertainty("stp", THREE_CLUSTERS)["couple"]["macro_f1"]
    assert macro["ci"] is None and macro["estimate"] == aggregate("stp", THREE_CLUSTERS)["couple"]["macro_f1"]
