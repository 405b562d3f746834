"""Inference backends: ``hf`` (transformers), ``vllm`` (offline engine) and ``openai`` (any compatible API)."""

from .base import Backend, ChatEncoder, Messages, Scored

BACKENDS = ("hf", "vllm", "openai")

__all__ = ["BACKENDS", "Backend", "ChatEncoder", "Messages", "Scored"]
