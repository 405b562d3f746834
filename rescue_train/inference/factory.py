"""The one way to start a backend: a small :class:`BackendSpec` (which engine, which model, its options) in, a
:class:`~rescue_train.inference.base.Backend` out. Eval, its judge, the audit's judge and the scripts all
start backends here, each from its own settings."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..settings import ConfigError
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


def looks_local(name: str) -> bool:
    """Whether a model name can only be a folder: a Hugging Face id is NAME or OWNER/NAME, never a path that
    starts with ``/``, ``.`` or ``~`` or has more than one slash."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1


def check_model(name: str, key: str = "model") -> None:
    """Refuse, naming ``key``, a model that is neither a folder here nor a model id the Hugging Face Hub (or its
    local cache, offline) knows: checked before a command writes anything, so that a typo leaves no run
    folder behind. A path-like name that does not exist is "no such folder"."""
    if name == "tiny" or Path(name).expanduser().exists():
        return
    if looks_local(name):
        raise ConfigError(f"{key}={name}: no such folder (current directory: {Path.cwd()})")
    from huggingface_hub import is_offline_mode
    from huggingface_hub.errors import HFValidationError
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name)
    except (OSError, HFValidationError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if is_offline_mode() and not isinstance(exc, HFValidationError):  # the cause is offline mode, not the name
            raise ConfigError(f"{key}={name}: not in the Hugging Face cache, and offline mode (HF_HUB_OFFLINE=1) "
                              f"downloads nothing: fetch it once online with `hf download {name}`, or unset "
                              "HF_HUB_OFFLINE") from None
        raise ConfigError(f"{key}={name}: no such folder here, and no model of that name on the Hugging Face Hub "
                          f"(or in its cache, offline): {first}") from None
    except ValueError:  # a model transformers reads only with options (remote code): the loader will say
        return


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


def backend_problems(backend: str, api: ApiOptions | None = None, prefix: str = "", *,
                     separate_process: bool = False) -> list[str]:
    """What would stop ``backend`` from starting, found before any work starts (each one line): vLLM missing from
    this environment (``separate_process``: also try importing it in a fresh interpreter, as the runs that will
    use it do), an OpenAI-compatible endpoint without a key or that does not answer."""
    if backend == "vllm":
        from .vllm import INSTALL_HINT

        problem = None
        if importlib.util.find_spec("vllm") is None:
            problem = "it is not installed"
        elif separate_process:
            tried = subprocess.run([sys.executable, "-c", "import vllm"], capture_output=True, text=True, timeout=600)
            if tried.returncode != 0:
                problem = "importing it fails: " + (tried.stderr.strip().splitlines() or ["?"])[-1]
        return [f"{prefix}backend=vllm needs vLLM in this environment ({sys.executable}), and {problem}; "
                f"{INSTALL_HINT}"] if problem else []
    if backend == "openai":
        from .openai import endpoint_problem

        problem = endpoint_problem(api or ApiOptions(), prefix)
        return [problem] if problem else []
    return []
