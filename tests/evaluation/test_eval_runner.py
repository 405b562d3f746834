"""The evaluation runner on the tiny model: results document, resume after a kill, run identity, splits,
adapters (bare PEFT folder and training run folder)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from evaluation_helpers import Counting, make_adapter

from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.models import resolve_model
from rescue_train.evaluation.plan import load_instances
from rescue_train.evaluation.runner import run
from rescue_train.inference.hf import HFBackend
from rescue_train.io import read_jsonl
from rescue_train.tiny import tiny_model_path

FAST = ["model=tiny", "bertscore=none", "progress=false", "max_new_tokens=3", "limit=2"]


@pytest.fixture(scope="module")
def tiny():
    return str(tiny_model_path())


@pytest.fixture(scope="module")
def hf(tiny):
    return HFBackend(tiny)


@pytest.mark.parametrize("protocol", ["sft", "paper", "rank"])
def test_results_document_all_tasks(hf, tmp_path, protocol):
    cfg = load_config(FAST + [f"output_dir={tmp_path}", f"protocol={protocol}"])
    (results,) = run(cfg, backend=hf)
    assert [r["task"] for r in results["records"]] == ["itp"] * 2 + ["rpp"] * 2 + ["stp"] * 2 + ["ssp"] * 2 + \
        ["er"] * 2 + ["vp"] * 2 + ["rsg"] * 2
    for key in ("config", "prediction_hash", "versions", "git_commit", "split", "data", "aggregates", "table5"):
        assert key in results
    assert results["split"]["scheme"] == "none" and len(results["split"]["manifest_hash"]) == 16
    assert results["data"]["source"] == "bundled" and results["data"]["fingerprint"]
    record = results["records"][0]
    assert set(record) >= {"id", "task", "scenario", "unit", "sample_id", "gold", "prediction", "parse_status",
                           "raw", "prompt_hash", "scores"}
    # A free 3-token answer of a random model never parses: each one is counted as a wrong answer, none dropped.
    # (The random model's 3 tokens for an RSG turn are blank lines: an empty turn, which fails too.)
    failures = sum(r["parse_status"] == "failed" for r in results["records"])
    closed = [r for r in results["records"] if r["task"] in ("itp", "rpp", "stp", "ssp")]
    if protocol == "sft":  # held to the labels: an answer is a label, or a label cut short by the 3-token budget
        assert all(r["raw"] == r["prediction"][0] for r in closed if r["parse_status"] == "ok")
        assert any(r["parse_status"] == "ok" for r in closed)
        assert failures == 6 + sum(r["parse_status"] == "failed" for r in closed)
    else:
        assert failures == (6 if protocol == "rank" else 14)  # rank: only ER, VP and RSG are generated
    assert results["counts"]["itp"]["both"]["n"] == 2
    assert sum(results["counts"][t]["both"]["parse_failures"] for t in results["counts"]) == failures
    on_disk = json.loads((tmp_path / "results.json").read_text())
    assert on_disk["records"] == results["records"]


def test_rank_records_are_full_rankings_by_loglik(hf, tmp_path):
    cfg = load_config(FAST + [f"output_dir={tmp_path}", "protocol=rank", "tasks=[rpp,ssp,er]"])
    (results,) = run(cfg, backend=hf)
    for record in results["records"]:
        if record["task"] == "er":
            assert record["protocol"] == "sft" and record["raw"] is not None
            continue
        loglik = record["loglik"]
        assert sorted(record["prediction"]) == sorted(loglik) and len(loglik) >= 6
        values = [loglik[label] for label in record["prediction"]]
        assert values == sorted(values, reverse=True) and all(v < 0 for v in values)
        assert record["parse_status"] == "ok" and record["raw"] is None
        rank = record["prediction"].index(record["gold"]) + 1
        assert record["scores"]["mrr"] == (1 / rank if rank <= 3 else 0.0)


def test_killed_run_resumes_without_recomputing(hf, tmp_path, capsys):
    args = FAST + [f"output_dir={tmp_path}", "tasks=[itp,stp]", "limit=3", "batch_size=2"]
    # chunk = batch_size = 2 instances per step; die on the third backend call.
    killed = Counting(hf, fail_after_calls=2)
    with pytest.raises(KeyboardInterrupt):
        run(load_config(args), backend=killed)
    assert killed.generated == 4
    saved = read_jsonl(tmp_path / "predictions.jsonl")
    assert len(saved) == 4
    with (tmp_path / "predictions.jsonl").open("a") as handle:  # the kill also tore a line mid-write
        handle.write('{"id": "half a rec')
    again = Counting(hf)
    capsys.readouterr()
    (results,) = run(load_config(args), backend=again)
    assert again.generated == 2  # only the 2 unfinished instances
    assert f"base: reusing 4 finished predictions in {tmp_path}; 2 to predict\n" in capsys.readouterr().out
    assert [r["id"] for r in results["records"][:4]] == sorted((r["id"] for r in saved),  # saved as they came
                                                               key=[r["id"] for r in results["records"]].index)
    assert len(results["records"]) == 6 and len(read_jsonl(tmp_path / "predictions.jsonl")) == 6
    untouched = Counting(hf)
    run(load_config(args), backend=untouched)
    assert untouched.calls == 0


def test_other_config_in_same_folder_is_refused(hf, tmp_path):
    run(load_config(FAST + [f"output_dir={tmp_path}", "tasks=[itp]"]), backend=hf)
    with pytest.raises(ValueError, match="another configuration"):
        run(load_config(FAST + [f"output_dir={tmp_path}", "tasks=[itp]", "protocol=paper"]), backend=hf)
    (results,) = run(load_config(FAST + [f"output_dir={tmp_path}", "tasks=[itp]", "protocol=paper", "overwrite=true"]),
                     backend=hf)
    assert {r["protocol"] for r in results["records"]} == {"paper"}


def test_kfold_split_keeps_only_the_test_fold(tmp_path):
    manifest = tmp_path / "split_manifest.json"
    cfg = load_config(["model=tiny", "data.split=kfold", "data.test_fold=1", f"data.manifest={manifest}",
                       "tasks=[itp,er]"])
    data = load_instances(cfg)
    saved = json.loads(manifest.read_text())
    test_units = {u for u, fold in saved["assignment"].items() if fold == 1}
    assert data.split["manifest_hash"] == saved["hash"] and data.split["test_fold"] == 1
    units = {i.unit for task in data.instances.values() for i in task}
    assert units and units <= test_units
    everything = load_instances(load_config(["model=tiny", "tasks=[itp,er]"]))
    assert sum(map(len, everything.instances.values())) > sum(map(len, data.instances.values()))


def test_adapter_changes_rankings_and_run_folders_resolve(tiny, tmp_path):
    bare = make_adapter(tiny, tmp_path / "bare")
    run_dir = tmp_path / "run"
    make_adapter(tiny, run_dir / "adapter", seed=1)
    (run_dir / "provenance.json").write_text(json.dumps({"base_model": tiny}))
    # No model= given: the base comes from the run folder's provenance.
    cfg = load_config(["bertscore=none", "progress=false", "limit=3", "protocol=rank", "tasks=[rpp]",
                       f"adapter=[{bare},{run_dir}]", "include_base=true", f"output_dir={tmp_path / 'out'}"])
    spec = resolve_model(cfg)
    assert spec.model == tiny and spec.adapters == {"bare": str(bare), "run": str(run_dir / "adapter")}
    base, first, second = run(cfg)
    assert base["output_dir"].endswith("out/base") and first["output_dir"].endswith("out/bare")
    assert first["model"]["adapter"] == str(bare) and second["model"]["training_provenance"] == {"base_model": tiny}
    for adapted in (first, second):
        diffs = [abs(a["loglik"][k] - b["loglik"][k]) for a, b in zip(base["records"], adapted["records"])
                 for k in a["loglik"]]
        assert max(diffs) > 0.1
    # The base rows equal a plain run of the model without any adapter loaded.
    (plain,) = run(load_config(["model=tiny", "bertscore=none", "progress=false", "limit=3", "protocol=rank",
                                "tasks=[rpp]", f"output_dir={tmp_path / 'plain'}"]))
    for a, b in zip(base["records"], plain["records"]):
        assert all(math.isclose(a["loglik"][k], b["loglik"][k], abs_tol=1e-4) for k in a["loglik"])


def test_run_uses_the_training_runs_held_out_fold_and_data_configuration(tiny, tmp_path):
    from rescue_train.data import load_samples
    from rescue_train.data.splits import make_manifest

    run_dir = tmp_path / "run"
    make_adapter(tiny, run_dir / "adapter")
    manifest = make_manifest(load_samples("bundled"), "kfold", 5, 0)
    manifest.save(run_dir / "data" / "split_manifest.json")
    (run_dir / "config.yaml").write_text("data:\n  split: kfold\n  test_fold: 2\n  mode: audio\n"
                                         "  rpp_definition: A\n")
    (run_dir / "provenance.json").write_text(json.dumps(
        {"base_model": tiny, "adapter": "adapter", "split_manifest": "data/split_manifest.json"}))
    cfg = load_config([f"run={run_dir}", "tasks=[ssp]"])
    assert (cfg.data.split, cfg.data.test_fold, cfg.data.manifest) == \
        ("kfold", 2, str(run_dir / "data" / "split_manifest.json"))
    assert (cfg.data.mode, cfg.data.rpp_definition, cfg.model, cfg.adapter) == ("audio", "A", tiny, [str(run_dir)])
    data = load_instances(cfg)
    assert data.split["manifest_hash"] == manifest.hash
    assert {i.unit for i in data.instances["ssp"]} <= {u for u, f in manifest.assignment.items() if f == 2}
    with pytest.warns(UserWarning, match=r"data.mode='dialogue' overrides the run's data.mode='audio'"):
        assert load_config([f"run={run_dir}", "data.mode=dialogue"]).data.mode == "dialogue"
    with pytest.raises(ValueError, match="not a training run folder"):
        load_config([f"run={run_dir / 'adapter'}", "model=tiny"])
    # several runs: run=A run=B; they must share their data configuration
    twin = tmp_path / "twin"
    shutil.copytree(run_dir, twin)
    both = load_config([f"run={run_dir}", f"run={twin}", "tasks=[ssp]"])
    assert both.run == [str(run_dir), str(twin)] and both.adapter == [str(run_dir), str(twin)]
    (twin / "config.yaml").write_text("data:\n  split: kfold\n  test_fold: 2\n  mode: visual\n  rpp_definition: A\n")
    with pytest.raises(ValueError, match=f"run={twin} was trained with data.mode='visual'"):
        load_config([f"run={run_dir}", f"run={twin}"])


@pytest.mark.slow
def test_a_sigkilled_eval_process_resumes_where_it_stopped(tiny, tmp_path):
    """A real kill -9 of `rescue-train eval` mid-run: the rerun keeps every finished record and appends only
    the missing ones (a rerun that recomputed them would append duplicates)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    args = [sys.executable, "-m", "rescue_train", "eval", "model=tiny", "tasks=[itp]", "protocol=paper",
            "bertscore=none", "progress=false", "batch_size=1", "chunk=1", "limit=60", f"output_dir={tmp_path}"]
    env = {**os.environ, "RESCUE_TRAIN_CACHE": str(tiny_model_path().parent)}
    predictions = tmp_path / "predictions.jsonl"
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and process.poll() is None:
        if predictions.exists() and predictions.read_text().count("\n") >= 3:
            break
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = [line for line in predictions.read_text().splitlines(keepends=True) if line.endswith("\n")]
    assert 3 <= len(before) < 60
    subprocess.run(args, env=env, check=True, capture_output=True)
    after = predictions.read_text().splitlines(keepends=True)
    assert after[:len(before)] == before          # finished records kept byte for byte
    ids = [json.loads(line)["id"] for line in after]
    assert len(ids) == len(set(ids)) == 60         # the rest added once each, nothing redone
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["aggregates"]["itp"]["both"]["n"] == 60


@pytest.mark.parametrize("scoring, message", [
    (["bertscore.model=distilbert-base-uncased"], "BERTScore model 'distilbert-base-uncased' could not be loaded"),
    (["bertscore.model=/nowhere/minilm"], "bertscore.model='/nowhere/minilm' is not a model bert-score knows"),
    (["judge.backend=openai", "judge.model=gpt-5.4", "judge.api_key_env=RESCUE_NO_SUCH_KEY"],
     "judge.backend=openai: set the API key in the environment variable RESCUE_NO_SUCH_KEY"),
    (["judge.backend=hf", "judge.model=/nowhere/judge"],
     f"judge.model=/nowhere/judge: no such folder (current directory: {Path.cwd()})"),
])
def test_every_scorer_is_checked_before_the_first_prediction(tmp_path, capsys, scoring, message):
    """Offline, the default BERTScore model is not in the cache: the run stops before predicting, not after."""
    from rescue_train.cli import main

    bertscore = [] if any(s.startswith("bertscore") for s in scoring) else ["bertscore=none"]
    out = tmp_path / "out"
    assert main(["eval", "model=tiny", "tasks=[er]", "limit=1", "progress=false", *bertscore, *scoring,
                 f"output_dir={out}"]) == 2
    assert message in capsys.readouterr().err
    assert not (out / "predictions.jsonl").exists()


def test_sample_spreads_its_instances_over_the_units():
    """sample=N: N instances per task, as many units as N allows, in benchmark order, the same for the same seed;
    limit=N takes the first N (here all of one unit)."""
    from collections import namedtuple

    from rescue_train.data.splits import spread_sample

    Item = namedtuple("Item", "unit n")
    items = [Item("a", 0), Item("a", 1), Item("a", 2), Item("b", 3), Item("b", 4), Item("c", 5)]
    drawn = spread_sample(items, 3, seed=0)
    assert sorted(i.unit for i in drawn) == ["a", "b", "c"] and drawn == sorted(drawn, key=lambda i: i.n)
    assert spread_sample(items, 3, seed=0) == drawn and spread_sample(items, 5, seed=1)[-1] == Item("c", 5)
    assert spread_sample(items, 9, seed=0) == items
    first = load_instances(load_config(["model=tiny", "data.split=none", "tasks=[itp]", "limit=4"])).instances["itp"]
    sampled = load_instances(load_config(["model=tiny", "data.split=none", "tasks=[itp]", "sample=4"])).instances["itp"]
    assert len({i.unit for i in first}) == 1 and len({i.unit for i in sampled}) == 4 and len(sampled) == 4
