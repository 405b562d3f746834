"""Inference backends: ``hf`` (transformers), ``vllm`` (offline engine) and ``openai`` (any compatible API)."""

from .base import Backend, BackendError, ChatEncoder, Completion, Messages, Scored, as_completion

BACKENDS = ("hf", "vllm", "openai")

__all__ = ["BACKENDS", "Backend", "BackendError", "ChatEncoder", "Completion", "Messages", "Scored", "as_completion"]
