"""The evaluation config (``key=value`` overrides, OmegaConf), model and adapter resolution, backend choice.

``adapter`` accepts a bare PEFT folder (``adapter_config.json`` inside) or a training run folder whose
``provenance.json`` names the base model and which holds the adapter somewhere below it. With no ``model``
given, the base model comes from the run's provenance or the adapter's own config.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..tasks import MODES, TASKS
from ..tasks.base import RSG_CONDITIONS
from .backends import BACKENDS

PROTOCOLS = ("sft", "paper", "rank")
VP_SCALES = ("likert5", "ref0to6")


@dataclass
class JudgeConfig:
    backend: str = "none"  # none | hf | vllm | openai
    model: Optional[str] = None
    base_url: Optional[str] = None
    api_key_env: str = "OPENAI_API_KEY"
    vp_scale: str = "likert5"  # the paper's 1-5 Likert; ref0to6 = the reference scripts' 0-2 + 0-4
    max_new_tokens: int = 256
    batch_size: int = 8


@dataclass
class BertScoreConfig:
    model: str = "distilbert-base-uncased"  # a name bert-score knows, a local folder, or none
    num_layers: Optional[int] = None  # None: bert-score's default for a known name (distilbert: 5)
    idf: bool = False
    rescale: bool = False
    batch_size: int = 64
    device: Optional[str] = None


@dataclass
class EvalConfig:
    model: Optional[str] = None  # a local path, a hub name, 'tiny', or the API model name (backend=openai)
    adapter: Any = None  # one folder or a list: PEFT folders or training run folders
    tokenizer: Optional[str] = None  # default: the adapter's own tokenizer files, else the model's
    include_base: bool = False  # with adapters: also evaluate the base model
    backend: str = "hf"
    tasks: Any = field(default_factory=lambda: list(TASKS))
    protocol: str = "sft"
    context: Optional[int] = None  # -1 all prior rows, 0 none, k the last k (default per task)
    mode: str = "dialogue"
    data: str = "bundled"
    split: str = "none"  # none = the whole benchmark as test (as the paper); kfold = a test fold; run = the
    # adapter's own training run's manifest and test fold (leak-free evaluation of a fold's adapter)
    manifest: Optional[str] = None  # split_manifest.json (from convert or a training run); made if absent
    folds: int = 5
    test_fold: int = 0
    seed: int = 0
    rpp_definition: str = "D"
    stp_targets: str = "collapse"
    ssp_target_emotion: bool = False
    rsg_condition: str = "none"  # none | target | target_strategy: what RSG gives beyond the conversation
    rsg_min_words: int = 5
    rsg_per_sample: int = 0  # > 0: at most this many evenly spaced RSG turns per sample
    limit: Optional[int] = None  # at most this many instances per task (smoke runs)
    output: str = "runs/eval"
    overwrite: bool = False  # start over when the output holds a run with another config
    max_new_tokens: Optional[int] = None  # default per task and answer format
    batch_size: int = 8
    chunk: Optional[int] = None  # instances per resumable step (default: hf batch, 1024 vllm, 64 openai)
    constrained: bool = True  # structured outputs where the backend has them (vllm; json mode for openai)
    rank_score: str = "sum"  # sum = log P(answer and end of turn); mean = per token
    dtype: str = "auto"
    device: Optional[str] = None
    max_model_len: Optional[int] = None
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    engine_args: Any = None  # extra keyword arguments for vllm.LLM
    base_url: Optional[str] = None  # backend=openai
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    max_retries: int = 5
    progress: bool = True
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)


# Keys that change how fast a run goes, not what it computes: left out of the run hash.
RUNTIME_KEYS = ("output", "overwrite", "batch_size", "chunk", "progress", "concurrency", "max_retries",
                "gpu_memory_utilization", "include_base", "adapter")


def _shortcuts(argv: list[str]) -> list[str]:
    """``judge=none`` / ``bertscore=none`` switch a whole section off."""
    out = []
    for arg in argv:
        key, _, value = arg.partition("=")
        if key in ("judge", "bertscore") and value.lower() in ("none", "null", "off", "false"):
            out.append(f"{key}.{'backend' if key == 'judge' else 'model'}=none")
        else:
            out.append(arg)
    return out


def load_config(argv: list[str]) -> EvalConfig:
    """Defaults, then ``config=FILE.yaml`` if given, then the ``key=value`` overrides; validated."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    bad = [a for a in argv if "=" not in a]
    if bad:
        raise ValueError(f"expected key=value arguments, got {bad[0]!r} (e.g. model=tiny tasks=[itp,rpp])")
    argv = _shortcuts(argv)
    files = [a.split("=", 1)[1] for a in argv if a.startswith("config=")]
    try:
        merged = OmegaConf.structured(EvalConfig)
        for path in files:
            merged = OmegaConf.merge(merged, OmegaConf.load(path))
        merged = OmegaConf.merge(merged, OmegaConf.from_dotlist([a for a in argv if not a.startswith("config=")]))
        cfg: EvalConfig = OmegaConf.to_object(merged)  # type: ignore[assignment]
    except (OmegaConfBaseException, OSError) as exc:
        raise ValueError(f"bad eval config: {exc}".split("\n    full_key")[0]) from None
    validate(cfg)
    return cfg


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def validate(cfg: EvalConfig) -> None:
    def choose(key: str, value: Any, allowed) -> None:
        if value not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(map(str, allowed))}, got {value!r}")

    choose("backend", cfg.backend, BACKENDS)
    choose("protocol", cfg.protocol, PROTOCOLS)
    choose("mode", cfg.mode, MODES)
    choose("split", cfg.split, ("none", "kfold", "run"))
    choose("rsg_condition", cfg.rsg_condition, RSG_CONDITIONS)
    choose("rank_score", cfg.rank_score, ("sum", "mean"))
    choose("judge.backend", cfg.judge.backend, ("none", *BACKENDS))
    choose("judge.vp_scale", cfg.judge.vp_scale, VP_SCALES)
    cfg.tasks = [t.lower() for t in as_list(cfg.tasks)]
    for task in cfg.tasks:
        choose("tasks", task, tuple(TASKS))
    if not cfg.tasks:
        raise ValueError("tasks is empty")
    if cfg.protocol == "rank" and cfg.backend == "openai":
        raise ValueError("protocol=rank needs the log-likelihood of given text: use backend=hf or vllm")
    if cfg.judge.backend != "none" and not cfg.judge.model:
        raise ValueError("judge.model is required when judge.backend is set (e.g. judge.model=gpt-5.4)")
    if cfg.limit is not None and cfg.limit < 1:
        raise ValueError(f"limit must be a positive count, got {cfg.limit}")


@dataclass
class ModelSpec:
    """The base model, the adapters (name -> folder) and the tokenizer, as resolved from the config."""

    model: str
    adapters: dict[str, str]
    tokenizer: str | None
    provenance: dict[str, dict[str, Any]]  # adapter name -> its training provenance.json, when found
    run_dirs: dict[str, str] = field(default_factory=dict)  # adapter name -> its training run folder


def find_adapter(folder: Path) -> tuple[Path, dict[str, Any]]:
    """The PEFT folder inside ``folder`` (itself, or the shallowest one below a run folder) and the run's
    provenance (empty for a bare adapter)."""
    if not folder.is_dir():
        raise ValueError(f"adapter {folder}: no such folder")
    provenance_file = folder / "provenance.json"
    provenance = json.loads(provenance_file.read_text()) if provenance_file.exists() else {}
    if (folder / "adapter_config.json").exists():
        return folder, provenance
    named = folder / str(provenance.get("adapter", ""))
    if provenance.get("adapter") and (named / "adapter_config.json").exists():
        return named, provenance
    found = sorted(folder.rglob("adapter_config.json"), key=lambda p: (len(p.parts), str(p)))
    if not found:
        raise ValueError(f"adapter {folder}: no adapter_config.json in it or below it (is it a LoRA run?)")
    return found[0].parent, provenance


def _base_of(adapter_dir: Path, provenance: dict[str, Any]) -> str | None:
    for key in ("base_model", "model"):
        if isinstance(provenance.get(key), str):
            return provenance[key]
    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    return config.get("base_model_name_or_path")


def resolve_model(cfg: EvalConfig) -> ModelSpec:
    adapters: dict[str, str] = {}
    provenance: dict[str, dict[str, Any]] = {}
    run_dirs: dict[str, str] = {}
    bases = []
    if cfg.backend == "openai":  # adapters are served models, addressed by name (vllm serve --lora-modules)
        if not cfg.model:
            raise ValueError("backend=openai needs model=<the served model's name>")
        return ModelSpec(cfg.model, {a: a for a in as_list(cfg.adapter)}, None, {})
    for entry in as_list(cfg.adapter):
        folder = Path(entry).expanduser()
        adapter_dir, prov = find_adapter(folder)
        name = folder.resolve().name
        while name in adapters:
            name += "_"
        adapters[name] = str(adapter_dir.resolve())
        provenance[name] = prov
        if prov:
            run_dirs[name] = str(folder.resolve())
        bases.append(_base_of(adapter_dir, prov))
    model = cfg.model or next((b for b in bases if b), None)
    if not model:
        raise ValueError("model is required (a local path, a hub name, or 'tiny'), unless an adapter names its base")
    if model == "tiny":
        from ..training.tiny import tiny_model_path

        model = str(tiny_model_path())
    tokenizer = cfg.tokenizer
    if tokenizer is None and cfg.backend != "openai":
        tokenizer = next((p for p in adapters.values() if (Path(p) / "tokenizer_config.json").exists()), None)
    return ModelSpec(model, adapters, tokenizer, provenance, run_dirs)


def use_run_split(cfg: EvalConfig, spec: ModelSpec) -> None:
    """split=run: evaluate on the test fold the adapter's training run held out, with its manifest."""
    from omegaconf import OmegaConf

    runs = {(spec.provenance[n].get("split_manifest"), d) for n, d in spec.run_dirs.items()}
    if not runs:
        raise ValueError("split=run needs adapter= to be a training run folder (with provenance.json)")
    folds = set()
    for manifest, run_dir in runs:
        run_config = Path(run_dir) / "config.yaml"
        if not manifest or not run_config.exists():
            raise ValueError(f"split=run: {run_dir} lacks a split manifest or config.yaml")
        data = OmegaConf.load(run_config).get("data", {})
        folds.add((str(Path(run_dir) / manifest), data.get("test_fold", 0), data.get("scheme", "kfold")))
    if len({(f[1], f[2]) for f in folds}) > 1:
        raise ValueError(f"split=run: the adapters were trained with different test folds {sorted(folds)}; "
                         "evaluate them separately")
    manifest, fold, scheme = sorted(folds)[0]
    if scheme != "kfold":
        raise ValueError(f"split=run: the run used split scheme {scheme!r}; only kfold runs hold out a test fold")
    cfg.split, cfg.manifest, cfg.test_fold = "kfold", manifest, int(fold)


def make_backend(cfg: EvalConfig, spec: ModelSpec):
    if cfg.backend == "hf":
        from .backends.hf import HFBackend

        return HFBackend(spec.model, adapters=spec.adapters, tokenizer=spec.tokenizer, dtype=cfg.dtype,
                         device=cfg.device, batch_size=cfg.batch_size)
    if cfg.backend == "vllm":
        from .backends.vllm import VLLMBackend

        return VLLMBackend(spec.model, adapters=spec.adapters, tokenizer=spec.tokenizer, dtype=cfg.dtype,
                           max_model_len=cfg.max_model_len, gpu_memory_utilization=cfg.gpu_memory_utilization,
                           tensor_parallel_size=cfg.tensor_parallel_size, seed=cfg.seed,
                           engine_args=dict(cfg.engine_args or {}), progress=cfg.progress)
    from .backends.openai import OpenAIBackend

    return OpenAIBackend(spec.model, base_url=cfg.base_url, api_key_env=cfg.api_key_env,
                         max_retries=cfg.max_retries, concurrency=cfg.concurrency, json_mode=cfg.constrained)


def to_dict(cfg: EvalConfig) -> dict[str, Any]:
    return asdict(cfg)
