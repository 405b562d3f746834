"""The audit config: ``key=value`` overrides (OmegaConf, as for eval), validated; the judge backend."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional

from ..evaluation.backends import BACKENDS
from .criteria import CRITERIA, EXPLORATORY_KEYS, IF_KEYS, OS_KEY
from .split import MODES as SPLITTERS

CRITERIA_SETS = ("auto", "relate")
BOOTSTRAP_SEED = 20260913  # the RELATE analysis seed


@dataclass
class AuditConfig:
    # The judge: any backend, as for eval.
    backend: str = "hf"  # hf | vllm | openai
    model: Optional[str] = None  # a local path, a hub name, 'tiny', or the served/API model name
    tokenizer: Optional[str] = None
    base_url: Optional[str] = None  # backend=openai
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    max_retries: int = 5
    batch_size: int = 8
    dtype: str = "auto"
    device: Optional[str] = None
    max_model_len: Optional[int] = None
    gpu_memory_utilization: float = 0.9
    tensor_parallel_size: int = 1
    engine_args: Any = None
    max_new_tokens: int = 256  # raise for reasoning judges (RELATE gave its R1 judge 2048)
    constrained: bool = True  # JSON-schema outputs where the backend has them
    # What is audited.
    splitter: str = "default"  # default | relate
    criteria: Any = "auto"  # auto: RELATE's five, plus our exploratory pair on multi-party turns; relate: the five
    context: int = -1  # rows/messages of prior dialogue shown to the judge: -1 all (as RELATE), k the last k
    data: str = "bundled"  # the benchmark for INPUT=reference
    reference_rows: str = "all"  # all therapist turns, or matched: only the rows the audited models answered
    limit: Optional[int] = None  # at most this many turns per INPUT
    # Statistics and output.
    bootstrap: int = 10000
    seed: int = BOOTSTRAP_SEED
    output: str = "runs/audit"
    overwrite: bool = False
    chunk: int = 256  # requests per resumable step
    plots: bool = True
    progress: bool = True
    dry_run: bool = False


# Keys that change how fast the judge runs, not what it answers: left out of the cache identity.
RUNTIME_KEYS = ("concurrency", "max_retries", "batch_size", "gpu_memory_utilization", "tensor_parallel_size",
                "chunk", "progress", "output", "overwrite", "dry_run", "plots", "limit", "bootstrap", "seed",
                "splitter", "criteria", "context", "data", "reference_rows", "device", "engine_args")


def load_config(argv: list[str]) -> AuditConfig:
    """Defaults, then ``config=FILE.yaml`` if given, then the ``key=value`` overrides; validated."""
    from ..evaluation.config import merge_overrides

    cfg: AuditConfig = merge_overrides(AuditConfig, argv, "audit")
    validate(cfg)
    return cfg


def chosen_criteria(cfg: AuditConfig) -> tuple[str, ...]:
    from ..evaluation.config import as_list

    if isinstance(cfg.criteria, str) and cfg.criteria in CRITERIA_SETS:
        return (*IF_KEYS, OS_KEY) + (EXPLORATORY_KEYS if cfg.criteria == "auto" else ())
    keys = as_list(cfg.criteria)
    return tuple(k for k in CRITERIA if k in keys)


def validate(cfg: AuditConfig) -> None:
    from ..evaluation.config import as_list

    for key, allowed in (("backend", BACKENDS), ("splitter", SPLITTERS), ("reference_rows", ("all", "matched"))):
        if getattr(cfg, key) not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(allowed)}, got {getattr(cfg, key)!r}")
    if not cfg.model and not cfg.dry_run:
        raise ValueError("model= names the judge (a local path, a hub name, 'tiny', or the served model's name)")
    if not (isinstance(cfg.criteria, str) and cfg.criteria in CRITERIA_SETS):
        listed = as_list(cfg.criteria)
        if not listed or any(k not in CRITERIA for k in listed):
            raise ValueError(f"criteria must be auto, relate, or a list of {', '.join(CRITERIA)}; got {cfg.criteria!r}")
    if cfg.limit is not None and cfg.limit < 1:
        raise ValueError(f"limit must be a positive count of turns, got {cfg.limit}")
    if cfg.bootstrap < 100:
        raise ValueError(f"bootstrap must be at least 100 resamples, got {cfg.bootstrap}")


def judge_identity(cfg: AuditConfig) -> dict[str, Any]:
    """What decides a judge answer besides the prompt: labels cached under another identity are not reused."""
    return {k: v for k, v in asdict(cfg).items() if k not in RUNTIME_KEYS}


def make_judge(cfg: AuditConfig):
    """The judge backend, made through the evaluation's backend factory."""
    from ..evaluation.config import EvalConfig, make_backend, resolve_model

    eval_cfg = EvalConfig(model=cfg.model, tokenizer=cfg.tokenizer, backend=cfg.backend, base_url=cfg.base_url,
                          api_key_env=cfg.api_key_env, concurrency=cfg.concurrency, max_retries=cfg.max_retries,
                          batch_size=cfg.batch_size, dtype=cfg.dtype, device=cfg.device,
                          max_model_len=cfg.max_model_len, gpu_memory_utilization=cfg.gpu_memory_utilization,
                          tensor_parallel_size=cfg.tensor_parallel_size, engine_args=cfg.engine_args,
                          constrained=cfg.constrained, progress=cfg.progress)
    return make_backend(eval_cfg, resolve_model(eval_cfg))
