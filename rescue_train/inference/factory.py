"""The one way to start a backend: a small :class:`BackendSpec` (which engine, which model, its options) in, a
:class:`~rescue_train.inference.base.Backend` out. Eval, its judge, the audit's judge and the scripts all
start backends here, each from its own settings."""

from __future__ import annotations

from dataclasses import dataclass, field

from .base import Backend
from .options import ApiOptions, EngineOptions

BACKENDS = ("hf", "vllm", "openai")


@dataclass
class BackendSpec:
    backend: str  # hf | vllm | openai
    model: str  # a local path, a hub name, 'tiny', or the served/API model name
    adapters: dict[str, str] = field(default_factory=dict)  # name -> PEFT folder (openai: name -> served name)
    tokenizer: str | None = None  # default: the model's
    engine: EngineOptions = field(default_factory=EngineOptions)  # hf, vllm
    api: ApiOptions = field(default_factory=ApiOptions)  # openai
    batch_size: int = 8  # prompts per batch (hf)
    seed: int = 0  # sampling seed (vllm)
    progress: bool = True  # progress bars (vllm)


def local_model(model: str) -> str:
    """``tiny`` is the offline tiny chat model, built on first use; any other name is kept as given."""
    if model == "tiny":
        from ..tiny import tiny_model_path

        return str(tiny_model_path())
    return model


def make_backend(spec: BackendSpec) -> Backend:
    if spec.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {spec.backend!r}")
    if spec.backend == "openai":
        from .openai import OpenAIBackend

        options = {name: getattr(spec.api, name) for name in ApiOptions.__dataclass_fields__ if name != "reasoning"}
        return OpenAIBackend(spec.model, **{**options, "extra_body": dict(spec.api.extra_body or {})})
    engine, model = spec.engine, local_model(spec.model)
    if spec.backend == "hf":
        from .hf import HFBackend

        return HFBackend(model, adapters=spec.adapters, tokenizer=spec.tokenizer, dtype=engine.dtype,
                         device=engine.device, batch_size=spec.batch_size)
    from .vllm import VLLMBackend

    return VLLMBackend(model, adapters=spec.adapters, tokenizer=spec.tokenizer, dtype=engine.dtype,
                       max_model_len=engine.max_model_len, gpu_memory_utilization=engine.gpu_memory_utilization,
                       tensor_parallel_size=engine.tensor_parallel_size, seed=spec.seed,
                       engine_args=dict(engine.engine_args or {}), progress=spec.progress)
