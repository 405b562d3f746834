"""The OpenAI-compatible backend against a real local server that behaves like a current reasoning-model
API: its parameter rules, the error policy (refusals, stops, retries, malformed answers, hangs), reasoning
answers, resuming after a stop, the judge cache and the key never leaving the Authorization header."""

from __future__ import annotations

import json
import logging
import re
import time

from cli_helpers import command
import pytest
from reasoning_api import CANARY_KEY, ReasoningAPI

from rescue_train.inference import BackendError
from rescue_train.inference.openai import OpenAIBackend

eval_main = command("eval")
report_main = command("report")

KEY_VAR = "RT_TEST_CANARY_KEY"
JSON = {"json": {"type": "object", "properties": {"score": {"type": "integer"}}, "required": ["score"],
                 "additionalProperties": False}}
ER_PROMPT = [{"role": "user", "content": 'Answer with JSON only: {"emotion": "...", "intensity": 3}'}]


@pytest.fixture(autouse=True)
def canary_key(monkeypatch):
    monkeypatch.setenv(KEY_VAR, CANARY_KEY)


def backend(api: ReasoningAPI, **options) -> OpenAIBackend:
    return OpenAIBackend("reasoner", base_url=api.url, api_key_env=KEY_VAR, retry_backoff=0.01,
                         **{"concurrency": 1, **options})


def ask(b: OpenAIBackend, n: int = 1, budget: int = 500, constraint=None):
    return b.generate([ER_PROMPT] * n, max_new_tokens=[budget] * n, constraints=[constraint] * n)


# ---------------------------------------------------------------- parameter rules


def test_requests_follow_the_reasoning_api_rules():
    with ReasoningAPI() as api:
        (answer,) = ask(backend(api, reasoning_effort="low", extra_body={"service_tier": "flex"}), constraint=JSON)
        (request,) = api.requests
    assert answer.text == '{"emotion": "feels hurt", "intensity": 5}' and answer.finish_reason == "stop"
    assert answer.usage == {"prompt_tokens": len(ER_PROMPT[0]["content"]) // 4, "completion_tokens": 40 + 10 + 1,
                            "reasoning_tokens": 40}
    assert request["max_completion_tokens"] == 500 and "max_tokens" not in request and "temperature" not in request
    assert request["reasoning_effort"] == "low" and request["service_tier"] == "flex"
    assert request["response_format"] == {"type": "json_schema", "json_schema": {
        "name": "answer", "schema": JSON["json"], "strict": True}}


@pytest.mark.parametrize("structured,expected", [("json_object", {"type": "json_object"}), ("none", None)])
def test_structured_answers_can_be_json_mode_or_plain(structured, expected):
    with ReasoningAPI() as api:
        ask(backend(api, structured=structured), constraint=JSON)
        assert api.requests[0].get("response_format") == expected


@pytest.mark.parametrize("pydantic", [False, True])
def test_auto_token_param_learns_from_the_first_rejection_and_keeps_it(pydantic):
    with ReasoningAPI(accepts="max_tokens", pydantic=pydantic) as api:      # an older server
        b = backend(api)
        assert [a.text for a in ask(b, n=3)] == ['{"emotion": "feels hurt", "intensity": 5}'] * 3
        sent = [("max_tokens" in r, "max_completion_tokens" in r) for r in api.requests]
    assert sent == [(False, True), (True, False), (True, False), (True, False)]   # one rejection, then remembered
    assert b.describe()["token_param"] == "max_tokens"


def test_a_server_without_json_schemas_gets_json_mode_for_the_rest_of_the_run():
    with ReasoningAPI(schemas=False) as api:
        b = backend(api)
        assert [a.text for a in ask(b, n=2, constraint=JSON)] == ['{"emotion": "feels hurt", "intensity": 5}'] * 2
        formats = [r["response_format"]["type"] for r in api.requests]
    assert formats == ["json_schema", "json_object", "json_object"] and b.describe()["structured"] == "json_object"


def test_a_fixed_token_param_that_the_server_rejects_stops_with_its_message():
    with ReasoningAPI() as api, pytest.raises(BackendError, match="Unsupported parameter: 'max_tokens'"):
        ask(backend(api, token_param="max_tokens"))


def test_temperature_is_sent_only_when_configured_and_a_rejection_stops():
    with ReasoningAPI() as api:
        ask(backend(api, temperature=1.0))
        assert api.requests[-1]["temperature"] == 1.0
        with pytest.raises(BackendError, match="'temperature' does not support 0") as stop:
            ask(backend(api, temperature=0.0))
    assert "HTTP 400" in str(stop.value) and "rerun the same command to resume" in str(stop.value)


# ---------------------------------------------------------------- error policy


@pytest.mark.parametrize("behaviour", ["content_filter", "filtered", "safety"])
def test_a_content_policy_refusal_is_an_empty_answer_with_its_reason(behaviour):
    with ReasoningAPI(mode=behaviour) as api:
        (answer,) = ask(backend(api))
    assert answer.text == "" and answer.finish_reason == "content_filter"
    assert answer.refusal == ("The response was filtered due to the prompt triggering the content management policy."
                              if behaviour == "content_filter" else "content filter")


@pytest.mark.parametrize("behaviour", ["500", "429"])
def test_server_errors_are_retried_with_backoff_then_answered(behaviour):
    with ReasoningAPI() as api:
        api.plan(behaviour, behaviour)
        (answer,) = ask(backend(api, max_retries=2))
        assert len(api.requests) == 3 and answer.text.startswith("{")


def test_persistent_server_errors_stop_after_the_retries():
    with ReasoningAPI(mode="500") as api, pytest.raises(BackendError, match=r"HTTP 500.*gave up after 3 attempts"):
        ask(backend(api, max_retries=2))


@pytest.mark.parametrize("behaviour,words", [
    ("empty_choices", "without choices"), ("html", "not JSON (text/html)"), ("null_content", "null content"),
    ("reject", "HTTP 400: This model's maximum context length is 128 tokens."),
    ("wrong_key", "HTTP 401: Incorrect API key provided: <api key>"),
])
def test_malformed_answers_and_other_4xx_stop_and_name_the_prompt(behaviour, words):
    with ReasoningAPI(key="sk-other" if behaviour == "wrong_key" else CANARY_KEY) as api:
        api.plan("ok", behaviour)
        with pytest.raises(BackendError) as stop:
            ask(backend(api), n=3)
    assert words in str(stop.value) and CANARY_KEY not in str(stop.value)
    if behaviour != "wrong_key":
        assert stop.value.index == 1 and stop.value.partial[0].text.startswith("{")
        assert stop.value.partial[2] is None and len(api.requests) == 2   # nothing asked after the stop


def test_a_hanging_server_fails_after_the_timeout():
    with ReasoningAPI(mode="hang") as api:
        started = time.monotonic()
        with pytest.raises(BackendError, match=r"did not answer within timeout=0.3s.*gave up after 2 attempts"):
            ask(backend(api, timeout=0.3, max_retries=1))
        assert time.monotonic() - started < 5 and len(api.requests) == 2


# ---------------------------------------------------------------- whole runs through the CLI


def eval_args(api: ReasoningAPI, out, *extra: str, judge: bool = True) -> list[str]:
    args = ["model=reasoner", "backend=openai", f"base_url={api.url}", f"api_key_env={KEY_VAR}", "protocol=paper",
            "tasks=[itp,er,vp]", "limit=2", "progress=false", "bertscore=none", f"output_dir={out}", "concurrency=2"]
    if judge:
        args += ["judge.backend=openai", "judge.model=judge-model", f"judge.base_url={api.url}",
                 f"judge.api_key_env={KEY_VAR}"]
    return args + list(extra)


def records(out) -> list[dict]:
    return json.loads((out / "results.json").read_text())["records"]


def assert_no_canary(out, *texts: str) -> None:
    for text in texts:
        assert CANARY_KEY not in text
    for path in out.rglob("*"):
        if path.is_file():
            assert CANARY_KEY not in path.read_text(errors="replace"), path


def test_a_judged_paper_run_against_a_reasoning_api_answers_every_instance(tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    with ReasoningAPI(think=True) as api:
        assert eval_main(eval_args(api, tmp_path)) == 0
        requests = len(api.requests)
        assert all("max_tokens" not in r and "temperature" not in r for r in api.requests)
    out = capsys.readouterr()
    assert "estimate before calling the API: model: 6 calls" in out.out and "judge: 4 calls" in out.out
    results = json.loads((tmp_path / "results.json").read_text())
    assert all(r["parse_status"] == "ok" and r["finish_reason"] == "stop" for r in results["records"])
    # <think> held decoy JSON and the answer came in a fence: the parsers read the answer
    assert [r["prediction"] for r in results["records"] if r["task"] == "er"] == [
        {"emotion": "feels hurt", "intensity": 5}] * 2
    er = [r["scores"] for r in results["records"] if r["task"] == "er"]
    assert all(s["judge_status"] == "ok" and s["judge_usage"]["reasoning_tokens"] == 40 for s in er)
    assert results["aggregates"]["vp"]["both"]["judge"] == 3.0 and results["aggregates"]["er"]["both"]["judged"] == 2
    assert results["usage"]["model"]["calls"] == 6 and results["usage"]["judge"]["calls"] == 4
    assert results["usage"]["model"]["reasoning_tokens"] == 6 * 40
    assert requests == 6 + 4
    assert_no_canary(tmp_path, out.out, out.err, caplog.text)


def test_a_4xx_stops_at_once_with_exit_2_and_the_run_resumes(tmp_path, capsys):
    with ReasoningAPI() as api:
        api.plan("ok", "ok", "reject")
        assert eval_main(eval_args(api, tmp_path, "concurrency=1", judge=False)) == 2
        err = capsys.readouterr().err
        kept = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
        assert len(kept) == 2 and len(api.requests) == 3
        assert "maximum context length is 128 tokens" in err and "::row" in err and "Traceback" not in err
        failed_id = re.search(r"error: (\S+::er::row\d+): ", err).group(1)
        assert failed_id not in {r["id"] for r in kept}
        assert eval_main(eval_args(api, tmp_path, "concurrency=1", judge=False)) == 0
        assert len(api.requests) == 3 + 4          # only the four unfinished instances were asked again
    assert len(records(tmp_path)) == 6 and all(r["parse_status"] == "ok" for r in records(tmp_path))


@pytest.mark.parametrize("behaviour,words", [("html", "not JSON"), ("empty_choices", "without choices"),
                                             ("hang", "did not answer within timeout=0.3s"), ("500", "HTTP 500")])
def test_failures_end_with_exit_2_naming_the_cause_and_resume(tmp_path, capsys, behaviour, words):
    with ReasoningAPI(mode=behaviour) as api:
        args = eval_args(api, tmp_path, "timeout=0.3", "max_retries=1", judge=False)
        assert eval_main(args) == 2
        err = capsys.readouterr().err
        assert words in err and "::row" in err and "Traceback" not in err and CANARY_KEY not in err
        api.mode = None
        assert eval_main(args) == 0
    assert len(records(tmp_path)) == 6


def test_answers_are_on_disk_as_they_arrive_and_a_second_writer_is_refused(tmp_path, capsys):
    """A run whose server stops answering after three prompts (of six) holds those three on disk at once; a second
    eval into the folder is refused while the first lives; after a kill -9 the rerun asks only the other three."""
    import os
    import signal
    import subprocess
    import sys

    with ReasoningAPI() as api:
        api.plan("ok", "ok", "ok", "hang")
        args = eval_args(api, tmp_path, "concurrency=1", judge=False)
        first = subprocess.Popen([sys.executable, "-m", "rescue_train", "eval", *args], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=dict(os.environ))
        try:
            predictions = tmp_path / "predictions.jsonl"
            deadline = time.time() + 180
            while len(api.requests) < 4 and time.time() < deadline and first.poll() is None:
                time.sleep(0.2)
            assert len(api.requests) == 4  # the fourth hangs
            assert len(predictions.read_text().splitlines()) == 3  # written as they came, not at the chunk's end
            assert eval_main(args) == 2
            assert f"{tmp_path} is being written by `rescue-train eval` (pid {first.pid} " in capsys.readouterr().err
        finally:
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
        assert eval_main(args) == 0
        assert len(api.requests) == 4 + 3
    assert len(records(tmp_path)) == 6 and all(r["parse_status"] == "ok" for r in records(tmp_path))


def test_an_empty_answer_is_asked_again_then_kept_as_an_empty_failure():
    with ReasoningAPI() as api:
        api.plan("empty", "empty")
        (answer,) = ask(backend(api, max_retries=2))
        assert len(api.requests) == 3 and answer.text.startswith("{") and not answer.empty
    with ReasoningAPI(mode="empty") as api:
        (answer,) = ask(backend(api, max_retries=1))
        assert len(api.requests) == 2 and answer.text == "" and answer.empty


def test_a_run_of_mostly_empty_answers_stops_before_scoring_unless_allowed(tmp_path, capsys):
    with ReasoningAPI(mode="empty") as api:
        args = eval_args(api, tmp_path, "max_retries=1", "tasks=[itp]", judge=False)
        assert eval_main(args) == 2
        err = capsys.readouterr().err
        assert (f"{tmp_path}: the server answered nothing to 2 of 2 prompts, even when asked again (max_retries=1); "
                "they count as parse failures with reason 'empty'. Check the server") in err
        assert len(api.requests) == 4 and not (tmp_path / "results.json").exists()
        kept = [json.loads(line) for line in (tmp_path / "predictions.jsonl").read_text().splitlines()]
        assert [r["parse_error"] for r in kept] == ["empty", "empty"]
        assert eval_main([*args, "allow_empty_answers=true"]) == 0
        assert len(api.requests) == 4  # the kept answers are scored, not asked again
    both = json.loads((tmp_path / "results.json").read_text())["aggregates"]["itp"]["both"]
    assert (both["n"], both["empty"], both["parse_failures"]) == (2, 2, 2)


def test_refusals_and_truncated_answers_are_counted_failures(tmp_path, capsys):
    # 60 tokens: the 40 reasoning tokens leave room for a short label, not for a JSON answer
    with ReasoningAPI() as api:
        api.plan("content_filter")
        assert eval_main(eval_args(api, tmp_path, "concurrency=1", "max_new_tokens={itp: 60, er: 45, vp: 45}",
                                   judge=False)) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    counts = results["counts"]
    assert counts["itp"]["both"] == {"n": 2, "parse_failures": 1, "truncated": 0, "refused": 1, "empty": 0}
    assert counts["er"]["both"]["truncated"] == counts["vp"]["both"]["truncated"] == 2
    refused = next(r for r in results["records"] if r["parse_error"] and r["parse_error"].startswith("refused"))
    assert refused["prediction"] == [] and "content management policy" in refused["parse_error"]
    assert all(r["finish_reason"] == "length" and r["prediction"] in ({"emotion": "", "intensity": None}, [])
               for r in results["records"] if r["task"] != "itp")
    summary = capsys.readouterr().out
    assert "er: n=2 parse failures=2 truncated=2 " in summary and "itp: n=2 parse failures=1 refused=1 " in summary
    assert report_main([str(tmp_path), "--no-paper"]) == 0
    assert "| reasoner [paper] | er | 2 | 2 | 2 | 0 | 0 | 0 |" in capsys.readouterr().out


def test_judge_verdicts_are_cached_by_model_and_prompt(tmp_path, capsys):
    with ReasoningAPI() as api:
        assert eval_main(eval_args(api, tmp_path)) == 0
        first = len(api.requests)
        # other scoring settings discard the scores, not the verdicts: nothing is asked again
        assert eval_main(eval_args(api, tmp_path, "bertscore.idf=true")) == 0
        assert len(api.requests) == first
        assert "note: judge/BERTScore settings changed" in capsys.readouterr().out
        # another judge model is another key
        assert eval_main(eval_args(api, tmp_path, "judge.model=judge-2")) == 0
        assert len(api.requests) == first + 4
    cached = [r["scores"]["judge_cached"] for r in records(tmp_path) if r["task"] in ("er", "vp")]
    assert cached == [False] * 4
    cache = [json.loads(line) for line in (tmp_path / "judge_cache.jsonl").read_text().splitlines()]
    assert sorted(e["judge_model"] for e in cache) == ["judge-2"] * 4 + ["judge-model"] * 4


def test_an_unreadable_judge_verdict_is_asked_again_or_scores_the_floor(tmp_path):
    def er_aggregate():
        return json.loads((tmp_path / "results.json").read_text())["aggregates"]["er"]["both"]

    with ReasoningAPI() as api:
        assert eval_main(eval_args(api, tmp_path, "tasks=[er]", "concurrency=1")) == 0   # predictions and verdicts
        api.plan("garbage")
        no_retry = ["tasks=[er]", "concurrency=1", "judge.model=other", "judge.retries=0"]
        assert eval_main(eval_args(api, tmp_path, *no_retry)) == 0
        er = er_aggregate()
        assert er["judge_failures"] == 1 and er["judged"] == 1
        assert er["s_er"] == pytest.approx((er["s_emo"] + er["s_int"]) / 2)
        asked = len(api.requests)
        assert eval_main(eval_args(api, tmp_path, *no_retry)) == 0  # the rerun asks that verdict, and only it
        assert len(api.requests) == asked + 1 and (er_aggregate()["judge_failures"], er_aggregate()["judged"]) == (0, 2)
        api.plan("garbage")  # a new judge, with the default retries of an API judge: asked again within the run
        assert eval_main(eval_args(api, tmp_path, "tasks=[er]", "concurrency=1", "judge.model=third")) == 0
        assert len(api.requests) == asked + 1 + 3 and er_aggregate()["judge_failures"] == 0
        assert sorted(r["scores"]["judge_attempts"] for r in records(tmp_path)) == [1, 2]


def test_a_judge_failure_stops_naming_the_instance_and_keeps_the_finished_verdicts(tmp_path, capsys):
    args = ["concurrency=1", "judge.concurrency=1"]
    with ReasoningAPI() as api:
        api.plan(*["ok"] * 6, "ok", "reject")   # six answers, one verdict, then a 400
        assert eval_main(eval_args(api, tmp_path, *args)) == 2
        err = capsys.readouterr().err
        assert re.search(r"error: judging \S+::(er|vp)::row\d+: .*maximum context length is 128 tokens", err)
        assert len((tmp_path / "judge_cache.jsonl").read_text().splitlines()) == 1
        assert len(api.requests) == 8
        assert eval_main(eval_args(api, tmp_path, *args)) == 0
        assert len(api.requests) == 8 + 3          # the verdict given before the stop is not paid again
    assert [r["scores"]["judge_cached"] for r in records(tmp_path) if r["task"] in ("er", "vp")].count(True) == 1
