"""A real HTTP server on 127.0.0.1 that acts like a current reasoning-model chat API, for the tests of the
OpenAI-compatible backend and its error policy.

Rules, as GPT-5-class endpoints have them: the key must match (a wrong key gets a 401 that echoes it, as
some servers do); ``max_tokens`` is rejected in favour of ``max_completion_tokens`` (``accepts`` turns that
round for old servers); any ``temperature`` other than 1 is rejected; reasoning tokens are spent from the
budget before the answer (a budget too small gives ``finish_reason: length`` and empty content); usage is
reported. ``schemas=False`` rejects JSON-schema answers (JSON mode only); ``pydantic=True`` rejects an
unknown budget parameter as a FastAPI server does (422, ``detail`` list). ``think=True`` answers like a
local reasoning model: reasoning in ``<think>`` (holding decoy JSON) and the answer in a code fence.

Behaviours for particular requests are queued with ``plan(...)`` (popped one per request) or set for every
request with ``mode``: ``500``, ``429``, ``content_filter`` (Azure-style 400), ``filtered`` (200 with
finish_reason content_filter), ``safety`` (Gemini's SAFETY), ``empty_choices``, ``html``, ``null_content``,
``reject`` (a 400 no retry helps), ``garbage`` (unreadable text), ``empty`` (an empty message, finish_reason
stop: a broken server or model name), ``hang`` (never answers until the server
stops); anything else (``ok``) answers normally.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from evaluation_helpers import task_answer

CANARY_KEY = "sk-canary-7f3c1e9a2b4d6f80"


def _error(message: str, code: str | None = None, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


class ReasoningAPI:
    def __init__(self, key: str = CANARY_KEY, *, accepts: str = "max_completion_tokens", reasoning_tokens: int = 40,
                 think: bool = False, mode: str | None = None, schemas: bool = True, pydantic: bool = False):
        self.key, self.accepts, self.reasoning_tokens = key, accepts, reasoning_tokens
        self.think, self.mode = think, mode
        self.schemas, self.pydantic = schemas, pydantic
        self.requests: list[dict] = []
        self.answered = 0
        self._script: list[str] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with api._lock:
                    api.requests.append(body)
                    behaviour = api._script.pop(0) if api._script else api.mode
                status, payload, headers = api.respond(body, self.headers.get("Authorization"), behaviour)
                if status is None:
                    return
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def plan(self, *behaviours: str) -> None:
        with self._lock:
            self._script.extend(behaviours)

    def respond(self, body: dict, auth: str | None, behaviour: str | None):
        """(status, payload, headers) for one request; status None closes without answering."""
        if auth != f"Bearer {self.key}":
            given = (auth or "").removeprefix("Bearer ")
            return 401, _error(f"Incorrect API key provided: {given}.", "invalid_api_key"), {}
        if behaviour == "hang":
            self._release.wait(60)
            return None, None, {}
        if behaviour in ("500", "429"):
            return int(behaviour), _error("The server is overloaded, try again"), {"retry-after-ms": "10"}
        if behaviour == "content_filter":
            return 400, {"error": {"message": "The response was filtered due to the prompt triggering the content "
                                              "management policy.", "code": "content_filter", "param": "prompt",
                                   "innererror": {"code": "ResponsibleAIPolicyViolation"}}}, {}
        if behaviour == "reject":
            return 400, _error("This model's maximum context length is 128 tokens.", "context_length_exceeded",
                               "messages"), {}
        if behaviour == "html":
            return 200, b"<html><body><h1>502 Bad Gateway</h1></body></html>", {"Content-Type": "text/html"}
        for name in ("max_tokens", "max_completion_tokens"):
            if name in body and name != self.accepts:
                if self.pydantic:  # a FastAPI server validating the body with pydantic
                    return 422, {"detail": [{"type": "extra_forbidden", "loc": ["body", name],
                                             "msg": "Extra inputs are not permitted", "input": body[name]}]}, {}
                message = (f"Unsupported parameter: '{name}' is not supported with this model. Use "
                           f"'{self.accepts}' instead.")
                return 400, _error(message, "unsupported_parameter", name), {}
        if body.get("temperature", 1) != 1:
            message = (f"Unsupported value: 'temperature' does not support {body['temperature']} with this model. "
                       "Only the default (1) value is supported.")
            return 400, _error(message, "unsupported_value", "temperature"), {}
        fmt = body.get("response_format")
        if fmt and fmt.get("type") == "json_schema" and not self.schemas:
            return 400, _error("Unsupported value: 'response_format.type' does not support 'json_schema' with this "
                               "model.", "unsupported_value", "response_format"), {}
        if fmt and fmt.get("type") == "json_schema" and not (fmt["json_schema"].get("schema") is not None
                                                             and fmt["json_schema"].get("strict")):
            return 400, _error("response_format json_schema needs a schema", "invalid_value", "response_format"), {}
        return 200, self.completion(body, behaviour), {}

    def completion(self, body: dict, behaviour: str | None) -> dict:
        content = body["messages"][-1]["content"]
        answer = "I cannot say." if behaviour == "garbage" else task_answer(content)
        if self.think:
            answer = f'<think>Maybe {{"score": 1}} or {{"emotion": "decoy"}}.</think>\n```json\n{answer}\n```'
        spent = self.reasoning_tokens + len(answer) // 4 + 1
        finish = "stop"
        if spent > body.get(self.accepts, 10 ** 9):  # the budget ran out while reasoning
            answer, spent, finish = "", body[self.accepts], "length"
        message: dict = {"role": "assistant", "content": answer, "refusal": None}
        if behaviour in ("filtered", "safety"):
            message["content"], finish = None, "content_filter" if behaviour == "filtered" else "SAFETY"
        if behaviour == "null_content":
            message["content"] = None
        if behaviour == "empty":
            message["content"] = ""
        self.answered += 1
        choices = [] if behaviour == "empty_choices" else [{"index": 0, "finish_reason": finish, "message": message}]
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                "model": body["model"], "choices": choices,
                "usage": {"prompt_tokens": len(content) // 4, "completion_tokens": spent, "total_tokens": 0,
                          "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens}}}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self._release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
