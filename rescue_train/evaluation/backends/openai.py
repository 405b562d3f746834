"""Any OpenAI-compatible chat endpoint (``vllm serve``, an API model of the paper, a local server).

The key is read from the environment variable named in the config and never written anywhere. The openai
client retries connection errors, timeouts, 429 and 5xx answers with exponential backoff itself
(``max_retries``); when they are exhausted the error stops the run, which then resumes where it stopped.
A request the server rejects as invalid (e.g. a content filter's 400) is an empty answer: a parse failure,
counted like any other wrong answer.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

from .base import Backend, Messages

log = logging.getLogger(__name__)


class OpenAIBackend(Backend):
    name = "openai"
    can_rank = False

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 max_retries: int = 5, timeout: float = 240.0, concurrency: int = 8, json_mode: bool = True,
                 extra_body: dict[str, Any] | None = None):
        from openai import OpenAI

        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise ValueError(f"backend=openai: set the API key in the environment variable {api_key_env} "
                             "(or name another one with api_key_env=...)")
        # Local servers (vllm serve) accept any key; the client insists on one.
        self.client = OpenAI(base_url=base_url, api_key=key or "unused", max_retries=max_retries, timeout=timeout)
        self.model, self.base_url, self.api_key_env = model, base_url, api_key_env
        self.concurrency, self.json_mode = concurrency, json_mode
        self.extra_body = dict(extra_body or {})

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "base_url": self.base_url,
                "api_key_env": self.api_key_env, "json_mode": self.json_mode}

    def _complete(self, messages: Messages, max_tokens: int, constraint: dict[str, Any] | None, model: str) -> str:
        import openai

        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0, "max_tokens": max_tokens}
        if constraint and "json" in constraint and self.json_mode:
            kwargs["response_format"] = {"type": "json_object"}
        if self.extra_body:
            kwargs["extra_body"] = self.extra_body
        try:
            response = self.client.chat.completions.create(**kwargs)
        except openai.BadRequestError as exc:
            log.warning("request rejected by %s: %s", self.base_url or "the API", exc)
            return ""
        return response.choices[0].message.content or ""

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: Sequence[int],
                 constraints: Sequence[dict[str, Any] | None] | None = None, adapter: str | None = None) -> list[str]:
        # An adapter served by `vllm serve --lora-modules NAME=PATH` is addressed by its name as the model.
        model = adapter or self.model
        constraints = constraints or [None] * len(prompts)
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda args: self._complete(*args, model), zip(prompts, max_new_tokens, constraints)))
