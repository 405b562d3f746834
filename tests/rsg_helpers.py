"""Shared pieces of the RSG end-to-end tests: a local judge server with known rules, and the checks of a
judged RSG results document against those rules."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rescue_train.data import load_samples
from rescue_train.tasks import BuildOptions, build

CANDIDATE = 'Candidate next therapist turn: "'


def support_score(turn: str) -> int:
    """The fake judge's rule: a question scores 5, a statement 4, anything else 2."""
    turn = turn.strip()
    return 5 if turn.endswith("?") else 4 if turn.endswith(".") else 2


def adheres(turn: str, targets) -> int:
    """The fake judge's adherence rule: the turn names one of its targets."""
    return int(any(name in turn for name in targets))


class RsgJudgeServer:
    """A real local HTTP server speaking the chat-completions protocol, grading RSG judge prompts by the
    rules above (and answering any other prompt with a fixed therapist turn)."""

    def __init__(self):
        server = self
        self.requests: list[dict] = []

        def answer(content: str) -> str:
            if CANDIDATE not in content:
                return "Ann, what do you need from Ben right now?"
            turn = content.split(CANDIDATE, 1)[1].rsplit('"\n\n', 1)[0]
            if '"adheres"' in content:
                addressed = re.search(r"The turn addresses (.+?)\.\n", content).group(1)
                names = [n for n in re.findall(r"[A-Z][\w'-]*", addressed)]
                return json.dumps({"adheres": adheres(turn, names), "reason": "rule"})
            return json.dumps({"score": support_score(turn), "reason": "rule"})

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                data = json.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                   "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                       "role": "assistant", "content": answer(body["messages"][-1]["content"])}}]})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data.encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


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
    assert both["n"] == len(records) and both["judged"] == len(records)
    assert both["judge"] == pytest.approx(sum(r["scores"]["judge_score"] for r in records) / len(records))
    human = both["human"]
    assert human["judge"] == pytest.approx(sum(support_score(r["gold"]) for r in records) / len(records))
    assert human["length_words"] == pytest.approx(sum(len(re.findall(r"[A-Za-z0-9']+", r["gold"]))
                                                      for r in records) / len(records))
    assert results["human_reference"]["both"]["rsg_llm"] == pytest.approx(human["judge"])
