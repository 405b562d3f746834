"""The OpenAI-compatible backend against a real local HTTP server."""

from __future__ import annotations

import pytest
from evaluation_helpers import FakeOpenAIServer

from rescue_train.evaluation.config import load_config
from rescue_train.inference.openai import OpenAIBackend


def test_generate_sends_key_and_json_schema_and_reads_answers(monkeypatch):
    monkeypatch.setenv("MY_TEST_KEY", "sk-test-123")
    with FakeOpenAIServer() as server:
        backend = OpenAIBackend("served-model", base_url=server.url, api_key_env="MY_TEST_KEY", concurrency=2)
        texts = backend.generate(
            [[{"role": "user", "content": "Question?\n\nCandidates: mutual_blame, pursue_withdraw"}],
             [{"role": "user", "content": 'Answer with JSON only: {"emotion": "...", "intensity": 3}'}]],
            max_new_tokens=[5, 50], constraints=[{"choice": ["mutual_blame", "pursue_withdraw"]}, {"json": {}}])
        assert [t.text for t in texts] == ["mutual_blame", '{"emotion": "feels hurt", "intensity": 5}']
        first, second = sorted(server.requests, key=lambda r: r["max_completion_tokens"])
        assert first["_auth"] == "Bearer sk-test-123" and first["model"] == "served-model"
        assert "temperature" not in first
        assert "response_format" not in first and second["response_format"] == {
            "type": "json_schema", "json_schema": {"name": "answer", "schema": {}, "strict": True}}
        # An adapter served by `vllm serve --lora-modules` is addressed as the model.
        backend.generate([[{"role": "user", "content": "x"}]], max_new_tokens=[4], adapter="my-lora")
        assert server.requests[-1]["model"] == "my-lora"


def test_server_errors_are_retried_and_rejections_are_empty_answers():
    with FakeOpenAIServer(fail_first=2) as server:
        backend = OpenAIBackend("m", base_url=server.url, max_retries=3, concurrency=1)
        (answer,) = backend.generate([[{"role": "user", "content": "Candidates: yes, no"}]], max_new_tokens=[4])
        assert answer.text == "yes"
        assert len(server.requests) == 3
        (refused,) = backend.generate([[{"role": "user", "content": "REJECT me"}]], max_new_tokens=[4])
        assert (refused.text, refused.refusal) == ("", "content filter")   # this server's 400 names a content filter


def test_missing_key_for_a_remote_api_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY_VAR", raising=False)
    with pytest.raises(ValueError, match="NO_SUCH_KEY_VAR"):
        OpenAIBackend("gpt-x", api_key_env="NO_SUCH_KEY_VAR")


def test_rank_needs_a_local_backend():
    with pytest.raises(ValueError, match="protocol=rank"):
        load_config(["model=m", "backend=openai", "protocol=rank"])
