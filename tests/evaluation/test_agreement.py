"""Judge-vs-human agreement on a hand-computed example."""

from __future__ import annotations

import json

import pytest

from rescue_train.cli import main
from rescue_train.scoring.agreement import agreement, gwet_ac1

JUDGE = [1, 2, 3, 4, 5, 5]
HUMAN = [1, 2, 3, 5, 5, 4]


def test_hand_computed_agreement():
    # exact 4/6; MAE 2/6; category shares over both raters 1/6,1/6,1/6,1/6,1/3 -> pe = (7/9)/4 = 7/36,
    # AC1 = (2/3 - 7/36) / (1 - 7/36) = 17/29; linear kappa = 1 - 2/10 (weighted disagreement observed/expected).
    m = agreement(JUDGE, HUMAN, 1, 5, "linear")
    assert m["n"] == 6 and m["exact_agreement"] == pytest.approx(4 / 6) and m["mae"] == pytest.approx(2 / 6)
    assert m["gwet_ac1"] == pytest.approx(17 / 29) and m["kappa_linear"] == pytest.approx(0.8)
    assert m["within_1"] == 1.0
    assert gwet_ac1([3, 3], [3, 3], [1, 2, 3, 4, 5]) == 1.0


def _results(tmp_path):
    records = [{"id": f"i{k}", "task": "er", "scores": {"judge_score": j, "judge_scale": "1-5"}}
               for k, j in enumerate(JUDGE)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"records": records, "table5": {}, "aggregates": {}}))
    return path


def test_agreement_command_per_rater(tmp_path, capsys):
    human = tmp_path / "human.csv"
    human.write_text("id,score,rater\n" + "".join(f"i{k},{h},{'r1' if k < 3 else 'r2'}\n"
                                                 for k, h in enumerate(HUMAN)))
    assert main(["agreement", str(_results(tmp_path)), "--human", str(human), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["er"]
    assert report["r1"]["exact_agreement"] == 1.0 and report["r2"]["mae"] == pytest.approx(2 / 3)
    assert report["all raters"]["gwet_ac1"] == pytest.approx(17 / 29)


def test_unknown_id_is_located(tmp_path, capsys):
    human = tmp_path / "human.jsonl"
    human.write_text('{"id": "i0", "score": 1}\n{"id": "nope", "score": 2}\n')
    assert main(["agreement", str(_results(tmp_path)), "--human", str(human)]) == 2
    assert "human.jsonl:2: id 'nope'" in capsys.readouterr().err
