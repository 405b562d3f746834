"""Inference backends: ``hf`` (transformers), ``vllm`` (offline engine) and ``openai`` (any compatible API),
each a :class:`Backend` class that says what it can do, registered by name in ``BACKENDS``; their shared options,
what ``model=`` loads (``presets``), and the factory that starts one from a :class:`BackendSpec`."""

from .base import Arrivals, Backend, BackendError, ChatEncoder, Completion, Messages, Scored, as_completion
from .factory import BACKENDS, BackendSpec, make_backend
from .options import ApiOptions, EngineOptions

__all__ = ["BACKENDS", "ApiOptions", "Arrivals", "Backend", "BackendError", "BackendSpec", "ChatEncoder", "Completion",
           "EngineOptions", "Messages", "Scored", "as_completion", "make_backend"]
