"""Shared pieces of the RSG end-to-end tests: a local judge server with known rules, and the checks of a
judged RSG results document against those rules."""

from __future__ import annotations

import json
import re

import pytest
from evaluation_helpers import FakeOpenAIServer

from rescue_train.data import load_samples
from rescue_train.tasks import BuildOptions
from rescue_train.tasks import build

CANDIDATE = 'Candidate next therapist turn: "'


def support_score(turn: str) -> int:
    """The fake judge's rule: a question scores 5, a statement 4, anything else 2."""
    turn = turn.strip()
    return 5 if turn.endswith("?") else 4 if turn.endswith(".") else 2


def adheres(turn: str, targets) -> int:
    """The fake judge's adherence rule: the turn names one of its targets."""
    return int(any(name in turn for name in targets))


def rsg_judge_answer(content: str) -> str:
    """The fake judge's reply: RSG judge prompts graded by the rules above, any other prompt answered with a
    fixed therapist turn."""
    if CANDIDATE not in content:
        return "Ann, what do you need from Ben right now?"
    turn = content.split(CANDIDATE, 1)[1].rsplit('"\n\n', 1)[0]
    if '"adheres"' in content:
        addressed = re.search(r"The turn addresses (.+?)\.\n", content).group(1)
        return json.dumps({"adheres": adheres(turn, re.findall(r"[A-Z][\w'-]*", addressed)), "reason": "rule"})
    return json.dumps({"score": support_score(turn), "reason": "rule"})


def rsg_judge_server() -> FakeOpenAIServer:
    """A real local HTTP server speaking the chat-completions protocol, replying by ``rsg_judge_answer``."""
    return FakeOpenAIServer(answer=rsg_judge_answer)


def judge_args(url: str) -> list[str]:
    return ["judge.backend=openai", "judge.model=rule-judge", f"judge.base_url={url}", "judge.max_new_tokens=64"]


def check_judged_records(results: dict, condition: str) -> None:
    """Every judge score follows the server's rules, and the aggregates are their means (model and real turns)."""
    records = results["records"]
    assert records and {r["task"] for r in records} == {"rsg"}
    instances = {i.id: i for i in build("rsg", load_samples("bundled"), BuildOptions(rsg_condition=condition)).instances}
    for r in records:
        inst = instances[r["id"]]
        assert r["gold"] == inst.gold and r["row_index"] == inst.row_index and r["sample_id"] == inst.sample_id
        assert set(r) >= {"id", "task", "sample_id", "scenario", "row_index", "prompt_hash", "prediction", "gold",
                          "parse_status", "raw", "scores"}
        scores = r["scores"]
        ok = r["parse_status"] == "ok"
        assert scores["judge_score"] == (support_score(r["prediction"]) if ok else 1)
        assert scores["human_judge_score"] == support_score(r["gold"])
        if condition == "target_strategy":
            targets = inst.given_value("targets")
            assert scores["adherence_score"] == (adheres(r["prediction"], targets) if ok else 0)
            assert scores["human_adherence_score"] == adheres(r["gold"], targets)
        else:
            assert "adherence_score" not in scores
    both = results["aggregates"]["rsg"]["both"]
    assert both["n"] == len(records)
    assert both["judge"] == pytest.approx(sum(r["scores"]["judge_score"] for r in records) / len(records))
    human = both["human"]
    assert human["judge"] == pytest.approx(sum(support_score(r["gold"]) for r in records) / len(records))
    # length describes text: the answered turns, and the real turns at the same rows
    answered = [r for r in records if r["parse_status"] == "ok"]

    def mean_words(texts):
        return pytest.approx(sum(len(re.findall(r"[A-Za-z0-9']+", t)) for t in texts) / len(texts)) if texts else None

    assert both["length_words"] == mean_words([r["prediction"] for r in answered])
    assert human["length_words"] == mean_words([r["gold"] for r in answered])
    assert results["human_reference"]["both"]["rsg_llm"] == pytest.approx(human["judge"])
