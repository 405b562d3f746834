"""The one way to start a backend: a small :class:`BackendSpec` (which engine, which model, its options) in, a
:class:`~rescue_train.inference.base.Backend` out. Eval, its judge, the audit's judge and the scripts all
start backends here, each from its own settings."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path

from ..settings import ConfigError
from .base import Backend
from .hf import HFBackend
from .openai import OpenAIBackend
from .options import ApiOptions, EngineOptions
from .presets import preset_path
from .vllm import VLLMBackend

# The backends by name: a new one is its module plus one entry here.
BACKENDS: dict[str, type[Backend]] = {b.name: b for b in (HFBackend, VLLMBackend, OpenAIBackend)}


@dataclass
class BackendSpec:
    backend: str  # a name in BACKENDS
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
    name = preset_path(name) or name  # a shipped preset: its weights (a GGUF package's: the loader checks it)
    if name == "tiny" or name.startswith("package:") or Path(name).expanduser().exists():
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


class BackendNames:
    """The registered backends' names (after ``extra`` words such as "none"), read when checked: the ``choices``
    of a backend key, current when a backend registers later."""

    def __init__(self, *extra: str):
        self.extra = extra

    def __iter__(self):
        return iter((*self.extra, *BACKENDS))

    def __contains__(self, name: object) -> bool:
        return name in self.extra or name in BACKENDS


def backend_class(name: str, key: str = "backend") -> type[Backend]:
    """The registered backend called ``name``; an unknown name is an error naming ``key`` and the known ones."""
    try:
        return BACKENDS[name]
    except KeyError:
        close = difflib.get_close_matches(str(name), BACKENDS, n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise ConfigError(f"{key}: expected one of {', '.join(BACKENDS)}, got {name!r}{hint}") from None


def make_backend(spec: BackendSpec) -> Backend:
    return backend_class(spec.backend).start(spec)


def backend_problems(backend: str, api: ApiOptions | None = None, prefix: str = "", *,
                     separate_process: bool = False) -> list[str]:
    """What would stop ``backend`` from starting, found before any work starts (each one line): vLLM missing from
    this environment (``separate_process``: also try importing it in a fresh interpreter, as the runs that will
    use it do), an OpenAI-compatible endpoint without a key or that does not answer."""
    return backend_class(backend, f"{prefix}backend").problems(api, prefix, separate_process=separate_process)


def reasons(section: ApiOptions, backend: str) -> bool:
    """Whether the model (or judge) gets reasoning budgets: ``reasoning`` if set, else the backend's default
    (true for API models, whose budget bounds only what they use)."""
    return section.reasoning if section.reasoning is not None else backend_class(backend).reasons
