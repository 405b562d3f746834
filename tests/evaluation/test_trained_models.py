"""A model that was trained on part of the benchmark is scored on its own test fold: an adapter given as a run
folder, several adapters of different folds, a merged model, an adapter served behind an OpenAI-compatible API.
Scoring it on samples it trained or validated on needs ``allow_training_data=true`` and is then said."""

from __future__ import annotations

from pathlib import Path

import pytest
from evaluation_helpers import FakeOpenAIServer, adapter_run

from rescue_train.data import load_samples
from rescue_train.data.splits import make_manifest
from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.tables import name_of
from rescue_train.evaluation.runner import run
from rescue_train.tasks import build

FAST = ["bertscore=none", "progress=false", "protocol=rank", "tasks=[rpp]"]
MANIFEST = make_manifest(load_samples("bundled"), "kfold", 5, 0)  # the bundled data's default split (adapter_run's)
RPP = build("rpp", load_samples("bundled")).instances  # 94 instances; folds 2 and 3 hold 8 each


def _units(fold: int) -> set[str]:
    return {unit for unit, f in MANIFEST.assignment.items() if f == fold}


def _ids(*folds: int) -> set[str]:
    return {i.id for i in RPP if MANIFEST.assignment[i.unit] in folds}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("runs")
    return {fold: adapter_run(root / f"fold{fold}", fold, seed=fold) for fold in (2, 3)}


def test_an_adapter_run_is_scored_on_its_own_test_fold_and_never_silently_on_its_training_data(runs, tmp_path):
    cfg = load_config([f"adapter={runs[2]}", *FAST, f"output_dir={tmp_path / 'own'}"])
    assert (cfg.data.split, cfg.data.folds, cfg.data.split_seed) == ("kfold", 5, 0)
    (results,) = run(cfg)
    assert {r["id"] for r in results["records"]} == _ids(2) and len(results["records"]) == 8
    assert (results["split"]["test_fold"], results["includes_training_data"]) == (2, False)
    assert results["model"]["training_run"] == str(runs[2].resolve())

    # The whole benchmark: 86 of the 94 RPP instances are from folds 0, 1, 3, 4 (its training and validation folds).
    whole = [f"adapter={runs[2]}", *FAST, "data.split=none", f"output_dir={tmp_path / 'whole'}"]
    with pytest.raises(ValueError, match=r"86 of the 94 instances asked come from samples it trained or validated on"
                                         r".*allow_training_data=true"):
        run(load_config(whole))
    assert not (tmp_path / "whole" / "predictions.jsonl").exists()  # refused before any prediction
    (scored,) = run(load_config([*whole, "allow_training_data=true"]))
    assert len(scored["records"]) == 94 and scored["includes_training_data"] is True
    assert scored["training_data"]["instances"] == 86
    assert set(scored["training_data"]["units"]) == _units(0) | _units(1) | _units(3) | _units(4)
    assert name_of(scored).endswith("(includes training data)") and "includes" not in name_of(results)

    # Another test fold than its own is its training data too; so is the adapter folder inside the run.
    with pytest.raises(ValueError, match="8 of the 8 instances asked"):
        run(load_config([f"adapter={runs[2] / 'adapter'}", *FAST, "data.test_fold=3",
                         f"output_dir={tmp_path / 'other'}"]))


def test_adapters_of_several_folds_are_each_scored_on_their_own_and_the_base_on_all_of_them(runs, tmp_path):
    cfg = load_config([f"adapter=[{runs[2]},{runs[3]}]", "include_base=true", *FAST, f"output_dir={tmp_path}"])
    assert cfg.data.test_fold is None
    base, fold2, fold3 = run(cfg)
    assert {r["id"] for r in fold2["records"]} == _ids(2) and fold2["split"]["test_fold"] == 2
    assert {r["id"] for r in fold3["records"]} == _ids(3) and fold3["split"]["test_fold"] == 3
    assert {r["id"] for r in base["records"]} == _ids(2, 3) and base["split"]["test_folds"] == [2, 3]
    assert base["output_dir"].endswith("/base") and fold3["output_dir"].endswith("/rpp_lora-fold3")
    # run= with the two folds says the same, and narrows the tasks to the ones the runs trained
    both = load_config([f"run=[{runs[2]},{runs[3]}]"])
    assert (both.tasks, both.data.test_fold, both.adapter) == (["rpp"], None, [str(runs[2]), str(runs[3])])
    assert load_config([f"run={runs[2]}", "tasks=[itp,rpp]"]).tasks == ["itp", "rpp"]


@pytest.mark.slow
def test_a_merged_model_is_scored_on_the_test_fold_of_its_run(runs, tmp_path):
    from rescue_train.sft.merge import merge

    merged = merge(runs[2], tmp_path / "merged")
    (results,) = run(load_config([f"model={merged}", *FAST, f"output_dir={tmp_path / 'eval'}"]))
    assert {r["id"] for r in results["records"]} == _ids(2)
    assert results["model"]["training_run"] == str(runs[2].resolve())
    with pytest.raises(ValueError, match="allow_training_data=true"):
        run(load_config([f"model={merged}", *FAST, "data.split=none", f"output_dir={tmp_path / 'whole'}"]))


def test_a_served_adapter_named_with_its_run_is_scored_on_its_test_fold(runs, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeOpenAIServer() as server:
        common = ["backend=openai", "model=base", f"adapter=served={runs[3]}", f"base_url={server.url}",
                  "bertscore=none", "progress=false", "protocol=sft", "tasks=[rpp]"]
        (results,) = run(load_config([*common, f"output_dir={tmp_path / 'own'}"]))
        assert {r["id"] for r in results["records"]} == _ids(3)
        assert {r["model"] for r in server.requests} == {"served"}  # the name the server knows it by
        asked = len(server.requests)
        with pytest.raises(ValueError, match="allow_training_data=true"):
            run(load_config([*common, "data.split=none", f"output_dir={tmp_path / 'whole'}"]))
        assert len(server.requests) == asked
