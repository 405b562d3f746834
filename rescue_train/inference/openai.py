"""Any OpenAI-compatible chat endpoint (``vllm serve``, an API model of the paper, a reasoning-model API).

Requests follow today's API rules: the answer budget goes in ``max_completion_tokens`` (``token_param=auto``
falls back to ``max_tokens`` once a server rejects it, and remembers that for the run); ``temperature`` and
``reasoning_effort`` are sent only when configured; JSON answers are asked for with a strict JSON schema,
JSON mode or not at all (``structured``). The key is read from the environment variable named in the
config; it is sent only in the Authorization header and scrubbed from every message this module writes.

Error policy (docs/evaluation.md):

* a content-policy refusal (an HTTP error whose code or message names a content filter or usage policy, a
  ``content_filter`` finish reason, or a ``refusal`` field) is an empty answer with the reason kept: the
  instance counts as a parse failure;
* a parameter rejected as unsupported is switched once and remembered for the run: ``max_completion_tokens``
  and ``max_tokens`` (``token_param=auto``), and ``structured`` json_schema -> json_object -> none;
* any other 4xx stops the run at once with the server's own message (:class:`BackendError`);
* 408, 429, 5xx, timeouts and connection errors are retried with exponential backoff (the server's
  Retry-After is honoured), ``max_retries`` times, then stop the run;
* an empty answer (no text, though the budget was not spent) is retried like a transient error, then kept as
  an ``empty`` answer (``Completion.empty``): the instance counts as a parse failure with reason ``empty``;
* a malformed answer (not JSON, an HTML page, no choices, no message, null content) stops the run;
* a server that does not answer within ``timeout`` seconds counts as a timeout.

Stopping keeps every answer that finished, so a rerun of the same command resumes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Any, Callable, Sequence

from ..tasks.answers import clean_text
from .base import Arrived, Backend, BackendError, Completion, Messages
from .options import ApiOptions

log = logging.getLogger(__name__)

TOKEN_PARAMS = ("auto", "max_completion_tokens", "max_tokens")
STRUCTURED = ("json_schema", "json_object", "none")
RETRY_STATUS = (408, 429)
MAX_WAIT = 60.0  # seconds: the longest backoff or Retry-After we wait between two attempts
SNIPPET = 300  # characters of a server's body quoted in an error

# Codes and wording servers use for content-policy refusals (OpenAI, Azure OpenAI, vLLM/proxies).
REFUSAL_CODES = {"content_filter", "content_policy_violation", "responsibleaipolicyviolation", "invalid_prompt"}
REFUSAL_WORDS = re.compile(r"content[ _-]?(?:filter|policy|management)|usage polic|safety system", re.I)
# Finish reasons of OpenAI-compatible servers that say the same as OpenAI's `length` and `content_filter`.
FINISH_ALIASES = {"max_tokens": "length", "max_output_tokens": "length", "safety": "content_filter",
                  "refusal": "content_filter"}
# How servers say that they do not accept a parameter (as opposed to an out-of-range value).
UNSUPPORTED_WORDS = re.compile(r"unsupported|not supported|unrecogni[sz]ed|unknown|not allowed|not permitted|"
                               r"extra (?:field|input)s?|unexpected|use '?max_", re.I)


def endpoint_problem(api, prefix: str = "") -> str | None:
    """Why the endpoint of ``api`` (:class:`~rescue_train.inference.options.ApiOptions`) cannot serve, found before
    any work: OpenAI's own API without a key, or a server that does not answer at all. Any HTTP answer counts as
    reachable (an unknown path, a refused key: the requests themselves then say what is wrong)."""
    import urllib.error
    import urllib.request

    key = os.environ.get(api.api_key_env)
    if not key and api.base_url is None:
        return (f"{prefix}backend=openai: set the API key in the environment variable {api.api_key_env} (or name "
                f"another one with {prefix}api_key_env=...), or give {prefix}base_url= of a local server")
    url = (api.base_url or "https://api.openai.com/v1").rstrip("/") + "/models"
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        urllib.request.urlopen(request, timeout=min(api.timeout, 20.0)).close()
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return (f"{prefix}base_url={api.base_url or 'https://api.openai.com/v1'}: the server does not answer "
                f"({reason}); start it, or correct {prefix}base_url")
    return None


class _Retry(Exception):
    """A transient failure: try again after ``wait`` seconds (None: our own backoff)."""

    def __init__(self, message: str, wait: float | None = None):
        super().__init__(message)
        self.wait = wait


class _Empty(_Retry):
    """An empty answer: asked again like a transient failure; ``answer`` is kept when no retry helps."""

    def __init__(self, message: str, answer: Completion):
        super().__init__(message)
        self.answer = answer


class OpenAIBackend(Backend):
    name = "openai"
    can_rank = False
    remote = True
    adapters_by_name = True
    constrains = True  # json mode
    default_chunk = 64
    reasons = True
    judge_retries = 2  # sampled answers: asking again may give a readable verdict

    @classmethod
    def start(cls, spec) -> OpenAIBackend:
        options = {f.name: getattr(spec.api, f.name) for f in dataclasses.fields(ApiOptions) if f.name != "reasoning"}
        return cls(spec.model, **{**options, "extra_body": dict(spec.api.extra_body or {})})

    @classmethod
    def problems(cls, api=None, prefix: str = "", *, separate_process: bool = False) -> list[str]:
        """An endpoint without a key, or one that does not answer."""
        problem = endpoint_problem(api or ApiOptions(), prefix)
        return [problem] if problem else []

    def __init__(self, model: str, *, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 max_retries: int = 5, timeout: float = 600.0, concurrency: int = 8, structured: str = "json_schema",
                 token_param: str = "auto", temperature: float | None = None, reasoning_effort: str | None = None,
                 extra_body: dict[str, Any] | None = None, retry_backoff: float = 1.0):
        from openai import OpenAI

        if structured not in STRUCTURED:
            raise ValueError(f"structured must be one of {', '.join(STRUCTURED)}, got {structured!r}")
        if token_param not in TOKEN_PARAMS:
            raise ValueError(f"token_param must be one of {', '.join(TOKEN_PARAMS)}, got {token_param!r}")
        key = os.environ.get(api_key_env)
        if not key and base_url is None:
            raise ValueError(f"backend=openai: set the API key in the environment variable {api_key_env} "
                             "(or name another one with api_key_env=...)")
        self._key = key or ""
        # Local servers (vllm serve) accept any key; the client insists on one. Retries are ours (the policy
        # above), so the client makes exactly one attempt per call.
        self.client = OpenAI(base_url=base_url, api_key=key or "unused", max_retries=0, timeout=timeout)
        self.model, self.base_url, self.api_key_env = model, base_url, api_key_env
        self.max_retries, self.timeout, self.concurrency = max_retries, timeout, max(1, concurrency)
        self.structured, self.temperature, self.reasoning_effort = structured, temperature, reasoning_effort
        self.extra_body = dict(extra_body or {})
        self.retry_backoff = retry_backoff
        self.token_param = "max_completion_tokens" if token_param == "auto" else token_param
        self._learn_token_param = token_param == "auto"
        self._lock = threading.Lock()

    def describe(self) -> dict[str, Any]:
        return {"backend": self.name, "model": self.model, "base_url": self.base_url,
                "api_key_env": self.api_key_env, "structured": self.structured, "token_param": self.token_param,
                "temperature": self.temperature, "reasoning_effort": self.reasoning_effort,
                "extra_body": self.extra_body, "timeout": self.timeout, "max_retries": self.max_retries}

    # ------------------------------------------------------------------ requests

    def request_body(self, messages: Messages, max_tokens: int, constraint: dict[str, Any] | None,
                     model: str) -> dict[str, Any]:
        """The keyword arguments of one chat-completions call."""
        body: dict[str, Any] = {
            "model": model, self.token_param: max_tokens,
            # A lone surrogate (from an escaped model answer) cannot be encoded as UTF-8 for the request.
            "messages": [{**m, "content": clean_text(m["content"])} for m in messages]}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.reasoning_effort:
            body["reasoning_effort"] = self.reasoning_effort
        if constraint and "json" in constraint:
            if self.structured == "json_schema":
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": "answer", "schema": constraint["json"], "strict": True}}
            elif self.structured == "json_object":
                body["response_format"] = {"type": "json_object"}
        if self.extra_body:
            body["extra_body"] = self.extra_body
        return body

    def _complete(self, messages: Messages, max_tokens: int, constraint: dict[str, Any] | None,
                  model: str) -> Completion:
        attempt = 0
        while True:
            try:
                return self._attempt(messages, max_tokens, constraint, model)
            except _Retry as exc:
                if attempt >= self.max_retries and isinstance(exc, _Empty):
                    return exc.answer
                if attempt >= self.max_retries:
                    raise BackendError(self._scrub(f"{exc} (gave up after {attempt + 1} attempts, "
                                                   f"max_retries={self.max_retries})")) from None
                wait = exc.wait if exc.wait is not None else self.retry_backoff * 2 ** attempt * random.uniform(0.75, 1)
                log.warning("%s; retrying in %.2fs", self._scrub(str(exc)), min(wait, MAX_WAIT))
                time.sleep(min(wait, MAX_WAIT))
                attempt += 1

    def _attempt(self, messages, max_tokens, constraint, model) -> Completion:
        import openai

        while True:
            sent = (self.token_param, self.structured)
            body = self.request_body(messages, max_tokens, constraint, model)
            try:
                raw = self.client.chat.completions.with_raw_response.create(**body)
            except openai.APITimeoutError:
                raise _Retry(f"{self._where()} did not answer within timeout={self.timeout}s") from None
            except openai.APIConnectionError as exc:
                raise _Retry(f"cannot reach {self._where()} ({exc.__cause__ or exc})") from None
            except openai.APIStatusError as exc:
                refusal = self._status_error(exc, sent, "response_format" in body)
                if refusal is None:
                    continue  # a parameter was switched: ask again at once
                return refusal
            return self._read(raw.http_response)

    def _status_error(self, exc, sent: tuple[str, str], had_format: bool) -> Completion | None:
        """Classify an HTTP error: a refusal (returned as an empty answer), a rejected parameter that can be
        switched (None: switched, ask again), a transient error (_Retry) or a stop (BackendError)."""
        status, error = exc.status_code, exc.body
        message = _error_message(error)
        code = str(error.get("code") or "") if isinstance(error, dict) else ""
        inner = error.get("innererror") if isinstance(error, dict) else None
        inner_code = str(inner.get("code") or "") if isinstance(inner, dict) else ""
        said = f"{self._where()} answered HTTP {status}: {_snippet(message)}"
        if status in RETRY_STATUS or status >= 500:
            raise _Retry(said, _retry_after(exc.response.headers))
        # Wording counts only in a JSON error: an HTML error page may link to a content policy anywhere.
        worded = isinstance(error, dict) and REFUSAL_WORDS.search(message) is not None
        if {code.lower(), inner_code.lower()} & REFUSAL_CODES or worded:
            return Completion("", "content_filter", None, refusal=self._scrub(_snippet(message)) or f"HTTP {status}")
        param = str(error.get("param") or "") if isinstance(error, dict) else ""
        unsupported = status in (400, 422) and UNSUPPORTED_WORDS.search(message) is not None
        token, structured = sent
        with self._lock:
            if (self.token_param, self.structured) != sent:
                return None  # another request switched a parameter meanwhile: ask again with it
            if unsupported and self._learn_token_param and (param == token or token in message):
                self.token_param = "max_tokens" if token == "max_completion_tokens" else "max_completion_tokens"
                self._learn_token_param = False
                log.warning("%s rejects %s; using %s for the rest of the run", self._where(), token, self.token_param)
                return None
            if unsupported and had_format and (param == "response_format" or "response_format" in message
                                               or "json_schema" in message):
                # A server without (this) JSON schema support: JSON mode, then plain text; kept in backend.json.
                self.structured = STRUCTURED[STRUCTURED.index(structured) + 1]
                log.warning("%s rejects structured=%s (%s); using structured=%s for the rest of the run",
                            self._where(), structured, self._scrub(_snippet(message)), self.structured)
                return None
        raise BackendError(self._scrub(said))

    def _read(self, response) -> Completion:
        """The answer in a 2xx response, or a BackendError that says what is wrong with it."""
        text = response.text
        try:
            body = json.loads(text)
        except ValueError:
            kind = response.headers.get("content-type", "no content type")
            raise BackendError(self._scrub(f"{self._where()} answered with a body that is not JSON ({kind}): "
                                           f"{_snippet(text)!r}")) from None
        if not isinstance(body, dict):
            raise BackendError(self._scrub(f"{self._where()} answered JSON that is not an object: {_snippet(text)!r}"))
        if body.get("error"):
            raise BackendError(self._scrub(f"{self._where()} answered an error with HTTP {response.status_code}: "
                                           f"{_snippet(_error_message(body['error']))}"))
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise BackendError(self._scrub(f"{self._where()} answered without choices: {_snippet(text)!r}"))
        choice = choices[0]
        finish = choice.get("finish_reason")
        finish = FINISH_ALIASES.get(finish.lower(), finish) if isinstance(finish, str) else None
        usage = _usage(body.get("usage"))
        message = choice.get("message")
        if not isinstance(message, dict):
            raise BackendError(self._scrub(f"{self._where()} answered a choice without a message: {_snippet(text)!r}"))
        refusal = message.get("refusal")
        if finish == "content_filter" or (isinstance(refusal, str) and refusal):
            return Completion("", finish or "refusal", usage, refusal=self._scrub(str(refusal or "content filter")))
        content = _content_text(message.get("content"))
        if content is None:
            if finish == "length":  # a reasoning model spent the whole budget before answering
                return Completion("", finish, usage)
            raise BackendError(self._scrub(f"{self._where()} answered with null content (finish_reason "
                                           f"{finish!r}): {_snippet(text)!r}"))
        if not content.strip() and finish != "length":
            raise _Empty(f"{self._where()} answered an empty message (finish_reason {finish!r})",
                         Completion(content, finish, usage, empty=True))
        return Completion(content, finish, usage)

    def _where(self) -> str:
        return self.base_url or "the API"

    def _scrub(self, text: str) -> str:
        """``text`` without the API key (a server may echo it back in an error)."""
        return text.replace(self._key, "<api key>") if len(self._key) >= 4 else text

    # ------------------------------------------------------------------ the Backend interface

    def generate(self, prompts: Sequence[Messages], *, max_new_tokens: Sequence[int],
                 constraints: Sequence[dict[str, Any] | None] | None = None,
                 adapter: str | None = None, on_answers: Callable[[Arrived], None] | None = None) -> list[Completion]:
        """Answers in order, each handed to ``on_answers`` as it arrives. The first stopping error cancels the
        requests not yet sent and is raised with the answers that finished (``partial``) and the failing prompt's
        ``index``."""
        # An adapter served by `vllm serve --lora-modules NAME=PATH` is addressed by its name as the model.
        model = adapter or self.model
        constraints = constraints or [None] * len(prompts)
        answers: list[Completion | None] = [None] * len(prompts)
        failure: BackendError | None = None
        stopped = threading.Event()

        def complete(messages: Messages, budget: int, constraint: dict[str, Any] | None) -> Completion | None:
            if stopped.is_set():  # a request has failed: send no more
                return None
            try:
                return self._complete(messages, budget, constraint, model)
            except BackendError:
                stopped.set()
                raise

        pool = ThreadPoolExecutor(max_workers=self.concurrency)
        try:
            futures = {pool.submit(complete, p, n, c): i
                       for i, (p, n, c) in enumerate(zip(prompts, max_new_tokens, constraints))}
            for future in as_completed(futures):
                try:
                    answers[futures[future]] = future.result()
                except BackendError as exc:
                    if failure is None:
                        failure, failure.index = exc, futures[future]
                    continue
                if on_answers is not None and answers[futures[future]] is not None:
                    on_answers([(futures[future], answers[futures[future]])])
        finally:  # on an interrupt too: drop what is queued, wait only for the requests in flight
            pool.shutdown(wait=True, cancel_futures=True)
        if failure is not None:
            failure.partial = answers
            raise failure
        return answers  # type: ignore[return-value]


def _error_message(error: Any) -> str:
    """The server's own words from an error body (OpenAI's ``error.message``, FastAPI's ``detail``, text),
    whole: the classification reads all of it, messages quote its start."""
    if isinstance(error, dict):
        for key in ("message", "detail", "error"):
            value = error.get(key)
            if isinstance(value, str) and value:
                return value
            if isinstance(value, dict):
                return _error_message(value)
        return json.dumps(error, ensure_ascii=False, default=str)
    return str(error or "(empty body)")


def _snippet(text: str) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= SNIPPET else text[:SNIPPET] + " ..."


def _retry_after(headers) -> float | None:
    """The server's Retry-After (``retry-after-ms`` or ``retry-after`` in seconds), when it gives one."""
    for header, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(header)) / scale)
        except (TypeError, ValueError):
            continue
    return None


def _content_text(content: Any) -> str | None:
    """Message content as text: a string, or the text parts of a list of parts; None when absent."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
        return "".join(parts) if parts else None
    return None


def _usage(usage: Any) -> dict[str, int] | None:
    """Prompt, completion and reasoning token counts, when the server reports them."""
    if not isinstance(usage, dict):
        return None
    details = usage.get("completion_tokens_details")
    counts = {"prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
              "reasoning_tokens": details.get("reasoning_tokens") if isinstance(details, dict) else None}
    kept = {k: v for k, v in counts.items() if isinstance(v, int) and not isinstance(v, bool) and v >= 0}
    return kept or None
