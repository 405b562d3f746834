"""Settings of the backends that every caller shares: the API keys of ``backend=openai`` (the model under test,
eval's judge and the audit's judge alike) and the keys of the local engines (hf, vllm)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Optional, TypeVar

from ..settings import meaning

TOKEN_PARAMS = ("auto", "max_completion_tokens", "max_tokens")
STRUCTURED = ("json_schema", "json_object", "none")


@dataclass
class ApiOptions:
    """Keys shared by the model under test (``key=``) and the judge (``judge.key=``): the endpoint of
    ``backend=openai`` and whether the model reasons before answering (docs/evaluation.md)."""

    base_url: Optional[str] = field(default=None, metadata=meaning(
        "backend=openai: the server's URL (e.g. http://127.0.0.1:8000/v1)"))
    api_key_env: str = field(default="OPENAI_API_KEY", metadata=meaning(
        "backend=openai: the environment variable holding the key"))
    concurrency: int = field(default=8, metadata=meaning("backend=openai: requests in flight", low=1, hashed=False))
    max_retries: int = field(default=5, metadata=meaning(
        "for 408, 429, 5xx, timeouts and connection errors, with exponential backoff", low=0, hashed=False))
    timeout: float = field(default=600.0, metadata=meaning(
        "seconds to wait for the server (to connect, and for each part of its answer)", above=0, hashed=False))
    token_param: str = field(default="auto", metadata=meaning(
        "auto | max_completion_tokens | max_tokens (auto: learnt from a rejection)",
        hashed=False, choices=TOKEN_PARAMS))
    temperature: Optional[float] = field(default=None, metadata=meaning(
        "sent only when set (reasoning APIs accept only their default)", low=0))
    reasoning_effort: Optional[str] = field(default=None, metadata=meaning(
        "sent only when set (e.g. low, medium, high)"))
    extra_body: Any = field(default=None, metadata=meaning(
        "extra JSON fields of every request (e.g. {chat_template_kwargs: {enable_thinking: false}})"))
    structured: str = field(default="json_schema", metadata=meaning(
        "json_schema (strict) | json_object (JSON mode) | none", choices=STRUCTURED))
    reasoning: Optional[bool] = field(default=None, metadata=meaning(
        "budgets for reasoning models; None = true for backend=openai"))


@dataclass
class EngineOptions:
    """Keys of the local backends (hf, vllm), shared by eval and the audit's judge."""

    dtype: str = field(default="auto", metadata=meaning("auto | bfloat16 | float16 | float32"))
    device: Optional[str] = field(default=None, metadata=meaning(
        "hf: cpu, cuda, cuda:1 (default: a GPU when there is one)", hashed="exact"))
    max_model_len: Optional[int] = field(default=None, metadata=meaning(
        "vllm: context length (default: the model's)", low=1))
    gpu_memory_utilization: float = field(default=0.9, metadata=meaning(
        "vllm: share of GPU memory the engine takes", above=0, high=1, hashed=False))
    tensor_parallel_size: int = field(default=1, metadata=meaning("vllm: GPUs per model", low=1, hashed="exact"))
    engine_args: Any = field(default=None, metadata=meaning("extra keyword arguments for vllm.LLM", hashed="exact"))


def check_api(options: ApiOptions, prefix: str = "") -> None:
    """The API keys' values, checked before any work (``prefix``: where they sit, e.g. ``judge.``)."""
    if options.extra_body is not None and not isinstance(options.extra_body, dict):
        raise ValueError(f"{prefix}extra_body must be a mapping, e.g. '{prefix}extra_body={{top_k: 20}}'")


Options = TypeVar("Options", ApiOptions, EngineOptions)


def pick(kind: type[Options], settings: Any) -> Options:
    """The ``kind`` fields of a command's settings (eval's and the audit's configs inherit both classes)."""
    return kind(**{f.name: getattr(settings, f.name) for f in fields(kind)})
