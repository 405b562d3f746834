"""The evaluation config: ``key=value`` overrides (OmegaConf), validation and the answer budgets. Model and
adapter resolution and the backend factory live in ``evaluation.models``.

``run=RUN_DIR`` (one or several training run folders) takes everything that decides the prompts from the
run: the whole data configuration (source, build options, mode, answer format, split, test fold and the
run's own split manifest), the base model and the adapter with its tokenizer and chat template. An
explicit ``data.*`` override that differs from the run is kept, with a warning naming the key.
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from ..data.config import DataConfig, from_mapping
from ..inference import BACKENDS
from ..inference.options import ApiOptions, EngineOptions, check_api, reasons
from ..io import read_json
from ..scoring.bertscore import BertScoreConfig
from ..scoring.judge import VP_SCALES, JudgeConfig
from ..scoring.metrics import JUDGE_ON_FAILURE
from ..settings import ConfigError, as_list, compose, dotlist, find_yaml, meaning, read_yaml
from ..tasks import TASKS

PROTOCOLS = ("sft", "paper", "rank")
SWITCHES = {"judge": {"backend": "none"}, "bertscore": {"model": "none"}}  # judge=none, bertscore=none

# Answer budgets for models that reason before answering (the reasoning tokens count against the budget):
# large enough not to cut a reasoning model short, still a bound on runaway answers. max_new_tokens
# overrides them (one number, or per task: max_new_tokens="{vp: 16000}").
REASONING_MAX_NEW_TOKENS = {"itp": 4096, "rpp": 8192, "stp": 4096, "ssp": 8192, "er": 4096, "vp": 8192}
REASONING_DEFAULT_TOKENS = 8192  # a task not in the table


@dataclass
class EvalConfig(ApiOptions, EngineOptions):
    model: Optional[str] = field(default=None, metadata=meaning(
        "a local path, a hub name, 'tiny', or the API model name (backend=openai)"))
    adapter: Any = field(default=None, metadata=meaning("one folder or a list: PEFT folders or training run folders"))
    tokenizer: Optional[str] = field(default=None, metadata=meaning(
        "default: the adapter's own tokenizer files, else the model's"))
    include_base: bool = field(default=False, metadata=meaning("with adapters: also evaluate the base model"))
    backend: str = field(default="hf", metadata=meaning("hf | vllm | openai"))
    run: Any = field(default=None, metadata=meaning(
        "training run folders: their model, adapter, tokenizer and whole data configuration"))
    tasks: Any = field(default_factory=lambda: list(TASKS))
    protocol: str = field(default="sft", metadata=meaning(
        "sft: the training prompts and answer format; paper: zero-shot JSON; rank: log-lik"))
    data: DataConfig = field(default_factory=lambda: DataConfig(split="none"), metadata=meaning(
        "split none: all is test"))
    seed: int = field(default=0, metadata=meaning(
        "the backend's sampling seed (the split seed is data.split_seed)", low=0))
    limit: Optional[int] = field(default=None, metadata=meaning(
        "at most this many instances per task (smoke runs)", low=1))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "default runs/eval/<model>[+<adapter>]/<protocol>"))
    overwrite: bool = field(default=False, metadata=meaning(
        "start over when the output holds a run with another config"))
    max_new_tokens: Any = field(default=None, metadata=meaning(
        "one number or {task: number}; default per task and answer format"))
    batch_size: int = field(default=8, metadata=meaning("prompts per generation batch (hf)", low=1))
    chunk: Optional[int] = field(default=None, metadata=meaning(
        "instances per resumable step (default: hf batch, 1024 vllm, 64 openai)", low=1))
    data_parallel: int = field(default=1, metadata=meaning(
        "vllm: engine processes, each on its own tensor_parallel_size GPUs (on CPU its share of the threads), "
        "each predicting a share of the instances into the one results folder", low=1))
    constrained: bool = field(default=True, metadata=meaning(
        "structured outputs where the backend has them (vllm; json mode for openai)"))
    rank_score: str = field(default="sum", metadata=meaning("sum = log P(answer and end of turn); mean = per token"))
    progress: bool = field(default=True, metadata=meaning("progress bars"))
    allow_empty_answers: bool = field(default=False, metadata=meaning(
        "score a run even when most server answers were empty (they count as failures, reason empty)"))
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)


# Keys that change how fast a run goes, not what it computes: left out of the run hash.
RUNTIME_KEYS = ("output_dir", "overwrite", "batch_size", "chunk", "progress", "concurrency", "max_retries",
                "timeout", "token_param", "gpu_memory_utilization", "include_base", "adapter", "data_parallel",
                "allow_empty_answers")


def _repeated(argv: list[str], keys: tuple[str, ...]) -> list[str]:
    """``run=a run=b`` (a key given several times) means the list ``run=[a,b]``."""
    out, merged = [], {}
    for arg in argv:
        key, _, value = arg.partition("=")
        if key in keys:
            if key not in merged:
                out.append(key)  # placeholder, keeps the position
            merged.setdefault(key, []).extend(as_list(value.strip("[]")))
        else:
            out.append(arg)
    return [f"{a}=[{','.join(merged[a])}]" if a in merged else a for a in out]


def load_config(overrides: Sequence[str]) -> EvalConfig:
    """Defaults <- ``recipe=NAME`` (an eval block, configs/eval/NAME.yaml, or your own YAML) <- what ``run=``
    inherits <- the ``key=value`` overrides; validated. ``judge=none`` and ``bertscore=none`` switch a section off
    (on the command line or in YAML); ``data=NAME`` merges a data block, ``data=PATH`` is ``data.source=PATH``."""
    overrides = _repeated(list(overrides), ("run", "adapter"))
    cli = dotlist(overrides, "eval")
    layers: list[dict] = []
    recipe = cli.pop("recipe", None)
    overrides = [a for a in overrides if a.split("=", 1)[0] != "recipe"]
    if recipe:
        layers.append(read_yaml(find_yaml(str(recipe), "configs/eval", "eval recipe")))
    runs = as_list(cli.get("run")) or as_list(next((layer.get("run") for layer in layers if layer.get("run")), None))
    if runs:
        layers.append(inherited(runs, cli))
    cfg: EvalConfig = compose(EvalConfig, overrides, "eval", base=layers, groups={"data": "configs/data"},
                              shorthand={"data": "data.source"}, off=SWITCHES)
    validate(cfg)
    return cfg


def inherited(runs: list[str], cli: dict) -> dict:
    """What ``run=`` folders fix: their data configuration (with the run's manifest), model and adapter.
    Explicit ``data.*`` overrides that differ from the runs' are kept with a warning naming the key."""
    datas, models, adapters = [], set(), []
    for entry in runs:
        folder = Path(entry).expanduser()
        if not (folder / "config.yaml").is_file() or not (folder / "provenance.json").is_file():
            raise ConfigError(f"run={entry}: not a training run folder (config.yaml and provenance.json expected)")
        saved = read_yaml(folder / "config.yaml")
        provenance = read_json(folder / "provenance.json", {}, "a training run's provenance")
        data = from_mapping(saved.get("data", {}))
        manifest = provenance.get("split_manifest")
        if manifest:
            data.manifest = str((folder / manifest).resolve())
        datas.append(data)
        if provenance.get("kind") == "classifier":  # no generative model to load: give model= for an LLM
            continue
        models.add(provenance.get("base_model"))
        adapters.append(str(folder.resolve()))
    first = asdict(datas[0])
    for other, entry in zip(datas[1:], runs[1:]):
        differ = [k for k, v in asdict(other).items() if first[k] != v and k != "manifest"]
        if differ:
            raise ConfigError(f"run={entry} was trained with data.{differ[0]}={asdict(other)[differ[0]]!r}, "
                              f"run={runs[0]} with {first[differ[0]]!r}: evaluate them separately")
    for key, value in (cli.get("data") or {}).items():
        if key in first and first[key] != value:
            warnings.warn(f"data.{key}={value!r} overrides the run's data.{key}={first[key]!r}: the evaluation "
                          "prompts or instances differ from the run's", UserWarning, stacklevel=3)
    layer: dict[str, Any] = {"data": first, "run": runs}
    if adapters:
        layer["adapter"] = adapters
        if len(models) == 1 and None not in models:
            layer["model"] = models.pop()
    return layer


def validate(cfg: EvalConfig) -> None:
    def choose(key: str, value: Any, allowed) -> None:
        if value not in allowed:
            raise ValueError(f"{key} must be one of {', '.join(map(str, allowed))}, got {value!r}")

    choose("backend", cfg.backend, BACKENDS)
    choose("protocol", cfg.protocol, PROTOCOLS)
    if cfg.data.split == "leave_one_unit_out":
        raise ValueError("data.split=leave_one_unit_out is for baselines; eval takes none, kfold or holdout")
    choose("rank_score", cfg.rank_score, ("sum", "mean"))
    choose("judge.backend", cfg.judge.backend, ("none", *BACKENDS))
    choose("judge.vp_scale", cfg.judge.vp_scale, VP_SCALES)
    choose("judge.on_failure", cfg.judge.on_failure, JUDGE_ON_FAILURE)
    if cfg.judge.retries is not None and cfg.judge.retries < 0:
        raise ValueError(f"judge.retries must be 0 or more, got {cfg.judge.retries}")
    check_api(cfg)
    check_api(cfg.judge, "judge.")
    cfg.tasks = [t.lower() for t in as_list(cfg.tasks)]
    cfg.run = as_list(cfg.run) or None
    for task in cfg.tasks:
        choose("tasks", task, tuple(TASKS))
    if not cfg.tasks:
        raise ValueError("tasks is empty")
    if cfg.data_parallel < 1 or (cfg.data_parallel > 1 and cfg.backend != "vllm"):
        raise ValueError(f"data_parallel={cfg.data_parallel}: it takes a count >= 1, and more than one engine only with "
                         "backend=vllm (hf: batch_size; openai: concurrency)")
    if cfg.protocol == "rank" and cfg.backend == "openai":
        raise ValueError("protocol=rank needs the log-likelihood of given text: use backend=hf or vllm")
    if cfg.judge.backend != "none" and not cfg.judge.model:
        raise ValueError("judge.model is required when judge.backend is set (e.g. judge.model=gpt-5.4)")
    budgets = cfg.max_new_tokens if isinstance(cfg.max_new_tokens, dict) else {"*": cfg.max_new_tokens}
    for task, budget in budgets.items():
        if task != "*" and task not in TASKS:
            raise ValueError(f"max_new_tokens: unknown task {task!r} (one of {', '.join(TASKS)}; YAML needs a space "
                             "after the colon: 'max_new_tokens={vp: 16000}')")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ValueError(f"max_new_tokens must be a positive number or {{task: number}}, "
                             f"got {cfg.max_new_tokens!r}")


def budget_override(cfg: EvalConfig) -> int | dict[str, int] | None:
    """``max_new_tokens`` for the prediction step: as given, on top of the reasoning budgets when the model
    reasons (None: the per-task defaults for short answers)."""
    if not reasons(cfg, cfg.backend) or isinstance(cfg.max_new_tokens, int):
        return cfg.max_new_tokens
    budgets = {task: REASONING_MAX_NEW_TOKENS.get(task, REASONING_DEFAULT_TOKENS) for task in cfg.tasks}
    return {**budgets, **(cfg.max_new_tokens or {})}


def to_dict(cfg: EvalConfig) -> dict[str, Any]:
    return asdict(cfg)
