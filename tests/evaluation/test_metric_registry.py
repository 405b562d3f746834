"""A metric is one entry: a toy metric registered here is scored, gets its interval and shows in ``report``'s
paired comparison, without any other file knowing it. And macro-F1 / balanced accuracy, defined once on
batches of confusion matrices, are scikit-learn's on every matrix."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, f1_score

from rescue_train.cli import main
from rescue_train.scoring.metric import (BOOTSTRAP, MEAN, ClassScores, Metric, balanced_accuracy, macro_f1,
                                         register_metric, unregister_metric)
from rescue_train.scoring.metric_uncertainty import result_uncertainty
from rescue_train.scoring.metrics import SCOPES, aggregate, table5_row, task_metrics


@pytest.fixture
def answered():
    """The share of records whose answer parsed: a mean over records, shown in comparisons as "answered"."""
    metric = register_metric(Metric("answered", ("ranking",), (0.0, 1.0), header="answered", scale=100,
                                    values=lambda scored: [float(ok) for ok in scored.answered]))
    yield metric
    unregister_metric(metric)


def _records(parsed: list[bool]) -> list[dict]:
    return [{"id": f"r{i}", "unit": f"family{i // 2}", "task": "rpp", "scenario": "family",
             "gold": "cross_generational_coalition", "prediction": ["cross_generational_coalition"] if ok else [],
             "parse_status": "ok" if ok else "failed"} for i, ok in enumerate(parsed)]


def test_a_registered_metric_is_scored_with_its_interval_method_and_range(answered):
    records = _records([True, True, True, False])
    assert aggregate("rpp", records)["family"]["answered"] == 0.75
    entry = result_uncertainty("rpp", records)["family"]["answered"]
    assert entry["estimate"] == 0.75 and entry["clusters"] == 2
    assert task_metrics("rpp")["answered"].method == MEAN and task_metrics("rpp")["macro_f1"].method == BOOTSTRAP
    assert answered.bounds(records) == (0.0, 1.0)


def test_a_registered_metric_shows_in_the_report_command(answered, tmp_path):
    folders = []
    for name, parsed in (("mine", [True, True, True, False]), ("base", [True] * 4)):
        records = _records(parsed)
        aggregates = {"rpp": aggregate("rpp", records)}
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(
            {"label": name, "config": {"protocol": "sft"}, "aggregates": aggregates, "records": records,
             "table5": {scope: table5_row(aggregates, scope) for scope in SCOPES}}))
        folders.append(str(tmp_path / name))
    assert main(["report", *folders, "--out", str(tmp_path / "rep"), "--against", folders[1]]) == 0
    cells = json.loads((tmp_path / "rep" / "comparisons.json").read_text())
    cell = next(c for c in cells if c["metric"] == "answered" and c["scenario"] == "family")
    assert cell["diff"] == -0.25  # 3 of 4 parsed against 4 of 4
    assert "| RPP | RPP answered | -25.00" in (tmp_path / "rep" / "report.md").read_text()


@pytest.mark.filterwarnings("ignore:y_pred contains classes not in y_true")
def test_macro_f1_and_balanced_accuracy_are_scikit_learns_on_every_matrix():
    rng = np.random.default_rng(0)
    gold, pred = rng.integers(0, 4, 40), rng.integers(0, 5, 40)  # class 4 is predicted, never gold
    weights = rng.integers(0, 3, (3, 40)).astype(float)
    conf = np.zeros((3, 5, 5))
    for b in range(3):
        np.add.at(conf[b], (gold, pred), weights[b])
    for scores, chosen in ((ClassScores.of(conf), range(3)), (ClassScores.of(conf[:1]), range(1))):
        for b in chosen:
            w = weights[b]
            present = sorted(set(gold[w > 0]))
            assert macro_f1(scores)[b] == pytest.approx(
                f1_score(gold, pred, labels=present, average="macro", sample_weight=w, zero_division=0))
            assert balanced_accuracy(scores)[b] == pytest.approx(balanced_accuracy_score(gold, pred, sample_weight=w))
