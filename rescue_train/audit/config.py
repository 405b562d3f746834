"""The audit config: typed ``key=value`` settings (rescue_train.settings, as for eval: unknown keys are
refused with a suggestion, ``--help`` and ``--cfg`` come from the schema), validated; the judge backend."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional

from ..inference import BACKENDS
from ..inference.factory import reasons
from ..inference.options import ApiOptions, EngineOptions, check_api
from ..scoring.judge import JUDGE_MAX_NEW_TOKENS
from ..settings import identity, meaning
from .criteria import CRITERIA, EXPLORATORY_KEYS, GATE_KEY, IF_KEYS, OS_KEY
from .split import MODES as SPLITTERS

REFERENCE_ROWS = ("all", "matched")

CRITERIA_SETS = ("auto", "relate")
BOOTSTRAP_SEED = 20260913  # the RELATE analysis seed


@dataclass
class AuditData:
    source: str = field(default="bundled", metadata=meaning(
        "the benchmark of INPUT=reference: benchmark_191.jsonl, a per-sample folder, a saved dataset, a hub id, "
        "or 'bundled'"))


@dataclass
class AuditConfig(ApiOptions, EngineOptions):
    # The judge: any backend, as for eval; the API keys (base_url, token_param, structured, reasoning...) and
    # the local-engine keys (dtype, device, max_model_len...) are eval's own classes.
    backend: str = field(default="hf", metadata=meaning(" | ".join(BACKENDS), choices=BACKENDS))
    model: Optional[str] = field(default=None, metadata=meaning(
        "a preset of configs/model (tiny, smollm2, ...), a local folder, a hub id, or the served/API model name"))
    tokenizer: Optional[str] = field(default=None, metadata=meaning("default: the model's"))
    batch_size: int = field(default=8, metadata=meaning("prompts per generation batch (hf)", low=1, hashed=False))
    max_new_tokens: Optional[int] = field(default=None, metadata=meaning(
        "default 256, 4096 when the judge reasons (as eval's judge)", low=1))
    constrained: bool = field(default=True, metadata=meaning(
        "JSON-schema outputs where the backend has them (vllm; openai: see structured)"))
    # What is audited.
    inputs: List[str] = field(default_factory=list, metadata=meaning(
        "what to audit: eval results folders of rsg, .jsonl files of dialogues, or reference (the real turns)",
        hashed=False))
    splitter: str = field(default="default", metadata=meaning("default | relate", hashed=False, choices=SPLITTERS))
    criteria: Any = field(default="auto", metadata=meaning(
        "auto: RELATE's five, our referent gate, and our exploratory pair on multi-party turns; relate: the five, "
        "as published; or a list of keys", hashed=False))
    context: int = field(default=-1, metadata=meaning(
        "rows/messages of prior dialogue shown to the judge: -1 all (as RELATE), k the last k", low=-1, hashed=False))
    data: AuditData = field(default_factory=AuditData, metadata={"hashed": False})
    reference_rows: str = field(default="all", metadata=meaning(
        "all therapist turns, or matched: only the rows the audited models answered",
        hashed=False, choices=REFERENCE_ROWS))
    limit: Optional[int] = field(default=None, metadata=meaning(
        "at most this many turns per INPUT", low=1, hashed=False))
    # Statistics and output.
    bootstrap: int = field(default=10000, metadata=meaning(
        "bootstrap resamples of split units (couples, families; a dialogue file's dialogues) for the CIs and "
        "comparisons", low=100, hashed=False))
    seed: int = field(default=BOOTSTRAP_SEED, metadata=meaning("seed of the bootstrap", low=0, hashed=False))
    output_dir: str = field(default="runs/audit", metadata=meaning("labels, results, report and plots", hashed=False))
    overwrite: bool = field(default=False, metadata=meaning(
        "start over when the output holds labels of another judge configuration", hashed=False))
    chunk: int = field(default=256, metadata=meaning("requests per resumable step", low=1, hashed=False))
    plots: bool = field(default=True, metadata=meaning(
        "write rates.png, composition.png, trajectories.png", hashed=False))
    progress: bool = field(default=True, metadata=meaning("progress bars", hashed=False))
    dry_run: bool = field(default=False, metadata=meaning(
        "count sentences and requests, estimate tokens, send nothing (also --dry-run)", hashed=False))


def load_config(overrides: list[str], inputs: list[str] = ()) -> AuditConfig:
    """Defaults <- ``recipe=NAME`` (an audit block of configs/audit, or your own YAML) <- the ``key=value``
    overrides; validated. ``data=PATH`` is ``data.source=PATH`` (the benchmark of INPUT=reference)."""
    from ..settings import compose, dotlist, find_yaml, read_yaml

    recipe = dotlist(overrides, "audit").get("recipe")
    layers = [read_yaml(find_yaml(str(recipe), "configs/audit", "audit recipe"))] if recipe else []
    rest = [a for a in overrides if a.split("=", 1)[0] != "recipe"]
    layers += [{"inputs": list(inputs)}] if inputs else []
    cfg: AuditConfig = compose(AuditConfig, rest, "audit", base=layers, groups={"data": "configs/data"},
                               shorthand={"data": "data.source"})
    validate(cfg)
    return cfg


def chosen_criteria(cfg: AuditConfig) -> tuple[str, ...]:
    from ..settings import as_list

    if isinstance(cfg.criteria, str) and cfg.criteria in CRITERIA_SETS:
        return (*IF_KEYS, OS_KEY) + ((GATE_KEY, *EXPLORATORY_KEYS) if cfg.criteria == "auto" else ())
    keys = as_list(cfg.criteria)
    return tuple(k for k in CRITERIA if k in keys)


def validate(cfg: AuditConfig) -> None:
    from ..settings import as_list

    check_api(cfg)
    if not cfg.model and not cfg.dry_run:
        raise ValueError("model= names the judge (a local path, a hub name, 'tiny', or the served model's name)")
    if not (isinstance(cfg.criteria, str) and cfg.criteria in CRITERIA_SETS):
        listed = as_list(cfg.criteria)
        if not listed or any(k not in CRITERIA for k in listed):
            raise ValueError(f"criteria must be auto, relate, or a list of {', '.join(CRITERIA)}; got {cfg.criteria!r}")


def answer_budget(cfg: AuditConfig) -> int:
    """Output tokens per judge answer: ``max_new_tokens``, else eval's judge default for a judge that does (or
    does not) reason."""
    return cfg.max_new_tokens or JUDGE_MAX_NEW_TOKENS[reasons(cfg, cfg.backend)]


def judge_identity(cfg: AuditConfig) -> dict[str, Any]:
    """What decides a judge answer besides the prompt: labels cached under another identity are not reused. What
    the audit reads and reports (inputs, criteria, bootstrap...) and the engine's numerics are not part of it."""
    return {**identity(cfg, exact=False), "max_new_tokens": answer_budget(cfg)}


def make_judge(cfg: AuditConfig):
    """The judge backend, started by the inference factory from the audit's own settings."""
    from ..inference import BackendSpec, make_backend
    from ..inference.options import pick

    return make_backend(BackendSpec(backend=cfg.backend, model=cfg.model, tokenizer=cfg.tokenizer,
                                    engine=pick(EngineOptions, cfg), api=pick(ApiOptions, cfg),
                                    batch_size=cfg.batch_size, progress=cfg.progress))
