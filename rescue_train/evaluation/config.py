"""The evaluation config: ``key=value`` overrides (OmegaConf), validation and the answer budgets. Model and
adapter resolution and the backend factory live in ``evaluation.models``.

``run=RUN_DIR`` (one or several training run folders) takes everything that decides the prompts from the
run: the whole data configuration (source, build options, mode, answer format, split, test fold and the
run's own split manifest), the base model and the adapter with its tokenizer and chat template. An
explicit ``data.*`` override that differs from the run is kept, with a warning naming the key.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..data.config import EVAL_RENAMED, DataConfig, from_mapping, source_shortcut
from ..settings import ConfigError, deprecated, dotlist, load, rename, rename_in
from ..tasks import TASKS
from .backends import BACKENDS

PROTOCOLS = ("sft", "paper", "rank")
VP_SCALES = ("likert5", "ref0to6")
TOKEN_PARAMS = ("auto", "max_completion_tokens", "max_tokens")
STRUCTURED = ("json_schema", "json_object", "none")

# Answer budgets for models that reason before answering (the reasoning tokens count against the budget):
# large enough not to cut a reasoning model short, still a bound on runaway answers. max_new_tokens
# overrides them (one number, or per task: max_new_tokens="{vp: 16000}").
REASONING_MAX_NEW_TOKENS = {"itp": 4096, "rpp": 8192, "stp": 4096, "ssp": 8192, "er": 4096, "vp": 8192}
REASONING_DEFAULT_TOKENS = 8192  # a task not in the table
JUDGE_MAX_NEW_TOKENS = {False: 256, True: 4096}  # by whether the judge reasons


@dataclass
class ApiOptions:
    """Keys shared by the model under test (``key=``) and the judge (``judge.key=``): the endpoint of
    ``backend=openai`` and whether the model reasons before answering (docs/evaluation.md)."""

    base_url: Optional[str] = None  # backend=openai: the server's URL (e.g. http://127.0.0.1:8000/v1)
    api_key_env: str = "OPENAI_API_KEY"  # backend=openai: the environment variable holding the key
    concurrency: int = 8  # backend=openai: requests in flight
    max_retries: int = 5  # for 408, 429, 5xx, timeouts and connection errors, with exponential backoff
    timeout: float = 600.0  # seconds to wait for the server (to connect, and for each part of its answer)
    token_param: str = "auto"  # auto | max_completion_tokens | max_tokens (auto: learnt from a rejection)
    temperature: Optional[float] = None  # sent only when set (reasoning APIs accept only their default)
    reasoning_effort: Optional[str] = None  # sent only when set (e.g. low, medium, high)
    extra_body: Any = None  # extra JSON fields of every request (e.g. {chat_template_kwargs: {enable_thinking: false}})
    structured: str = "json_schema"  # json_schema (strict) | json_object (JSON mode) | none
    reasoning: Optional[bool] = None  # budgets for reasoning models; None = true for backend=openai


@dataclass
class JudgeConfig(ApiOptions):
    backend: str = "none"  # none | hf | vllm | openai
    model: Optional[str] = None  # the judge model (a local path, a hub name, or the API model name)
    vp_scale: str = "likert5"  # the paper's 1-5 Likert; ref0to6 = the reference scripts' 0-2 + 0-4
    max_new_tokens: Optional[int] = None  # default 256, 4096 when the judge reasons
    batch_size: int = 8  # prompts per judge batch (hf)
    cache: bool = True  # verdicts kept in OUTPUT/judge_cache.jsonl by (judge model, prompt hash)


@dataclass
class BertScoreConfig:
    model: str = "distilbert-base-uncased"  # a name bert-score knows, a local folder, or none
    num_layers: Optional[int] = None  # None: bert-score's default for a known name (distilbert: 5)
    idf: bool = False
    rescale: bool = False
    batch_size: int = 64
    device: Optional[str] = None


@dataclass
class EngineOptions:
    """Keys of the local backends (hf, vllm), shared by eval and the audit's judge."""

    dtype: str = "auto"  # auto | bfloat16 | float16 | float32
    device: Optional[str] = None  # hf: cpu, cuda, cuda:1 (default: a GPU when there is one)
    max_model_len: Optional[int] = None  # vllm: context length (default: the model's)
    gpu_memory_utilization: float = 0.9  # vllm: share of GPU memory the engine takes
    tensor_parallel_size: int = 1  # vllm: GPUs per model
    engine_args: Any = None  # extra keyword arguments for vllm.LLM


@dataclass
class EvalConfig(ApiOptions, EngineOptions):
    model: Optional[str] = None  # a local path, a hub name, 'tiny', or the API model name (backend=openai)
    adapter: Any = None  # one folder or a list: PEFT folders or training run folders
    tokenizer: Optional[str] = None  # default: the adapter's own tokenizer files, else the model's
    include_base: bool = False  # with adapters: also evaluate the base model
    backend: str = "hf"  # hf | vllm | openai
    run: Any = None  # training run folders: their model, adapter, tokenizer and whole data configuration
    tasks: Any = field(default_factory=lambda: list(TASKS))
    protocol: str = "sft"  # sft: the training prompts and answer format; paper: zero-shot JSON; rank: log-lik
    data: DataConfig = field(default_factory=lambda: DataConfig(split="none"))  # split none: all is test
    seed: int = 0  # the backend's sampling seed (the split seed is data.split_seed)
    limit: Optional[int] = None  # at most this many instances per task (smoke runs)
    output_dir: Optional[str] = None  # default runs/eval/<model>[+<adapter>]/<protocol>
    overwrite: bool = False  # start over when the output holds a run with another config
    max_new_tokens: Any = None  # one number or {task: number}; default per task and answer format
    batch_size: int = 8  # prompts per generation batch (hf)
    chunk: Optional[int] = None  # instances per resumable step (default: hf batch, 1024 vllm, 64 openai)
    constrained: bool = True  # structured outputs where the backend has them (vllm; json mode for openai)
    rank_score: str = "sum"  # sum = log P(answer and end of turn); mean = per token
    progress: bool = True  # progress bars
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig)


# Keys that change how fast a run goes, not what it computes: left out of the run hash.
RUNTIME_KEYS = ("output_dir", "overwrite", "batch_size", "chunk", "progress", "concurrency", "max_retries",
                "timeout", "token_param", "gpu_memory_utilization", "include_base", "adapter")


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


# eval's own old spellings (the data.* ones are in rescue_train.data.config.EVAL_RENAMED)
RENAMED = {**EVAL_RENAMED, "output": "output_dir", "config": "recipe"}


def load_config(argv: list[str]) -> EvalConfig:
    """Defaults, then ``recipe=NAME|FILE.yaml`` if given, then what ``run=`` inherits, then the ``key=value``
    overrides; validated."""
    from omegaconf import OmegaConf

    from ..settings import recipe_path

    argv = _repeated(rename(source_shortcut(_shortcuts(list(argv)), warn=True), RENAMED), ("run", "adapter"))
    if "data.split=run" in argv:  # the old way to name the adapters' own training runs
        deprecated("split=run is deprecated; use run=RUN_DIR (instead of adapter=RUN_DIR)")
        argv = [a for a in argv if a != "data.split=run"]
        argv = [f"run={a.split('=', 1)[1]}" if a.startswith("adapter=") else a for a in argv]
    cli = dotlist(argv, "eval")
    splits = (cli.get("data") or {}).get("split") in ("kfold", "holdout")
    if "seed" in cli and splits and "split_seed" not in cli["data"]:  # seed= used to seed the split too
        deprecated("seed= now only seeds the backend; the split seed is data.split_seed (set to the same here)")
        cli.setdefault("data", {})["split_seed"] = cli["seed"]
    layers: list[dict] = []
    recipe = cli.pop("recipe", None)
    if recipe:
        path = recipe_path(str(recipe), "eval")
        tree = rename_in(OmegaConf.to_container(OmegaConf.load(path)), RENAMED, str(path))
        if tree.get("data", {}).get("split") == "run":
            deprecated(f"{path}: split: run is deprecated; give run=RUN_DIR")
            tree["data"].pop("split")
        layers.append(tree)
    runs = as_list(cli.get("run")) or as_list(next((layer.get("run") for layer in layers if layer.get("run")), None))
    if runs:
        layers.append(inherited(runs, cli))
    cfg: EvalConfig = load(EvalConfig, [*layers, cli], "eval")
    validate(cfg)
    return cfg


def inherited(runs: list[str], cli: dict) -> dict:
    """What ``run=`` folders fix: their data configuration (with the run's manifest), model and adapter.
    Explicit ``data.*`` overrides that differ from the runs' are kept with a warning naming the key."""
    from omegaconf import OmegaConf

    datas, models, adapters = [], set(), []
    for entry in runs:
        folder = Path(entry).expanduser()
        if not (folder / "config.yaml").is_file() or not (folder / "provenance.json").is_file():
            raise ConfigError(f"run={entry}: not a training run folder (config.yaml and provenance.json expected)")
        saved = OmegaConf.to_container(OmegaConf.load(folder / "config.yaml"))
        provenance = json.loads((folder / "provenance.json").read_text())
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
    if cfg.data.split == "leave_one_unit_out":
        raise ValueError("data.split=leave_one_unit_out is for baselines; eval takes none, kfold or holdout")
    choose("rank_score", cfg.rank_score, ("sum", "mean"))
    choose("judge.backend", cfg.judge.backend, ("none", *BACKENDS))
    choose("judge.vp_scale", cfg.judge.vp_scale, VP_SCALES)
    for prefix, section in (("", cfg), ("judge.", cfg.judge)):
        choose(f"{prefix}token_param", section.token_param, TOKEN_PARAMS)
        choose(f"{prefix}structured", section.structured, STRUCTURED)
        if section.timeout <= 0 or section.max_retries < 0 or section.concurrency < 1:
            raise ValueError(f"{prefix}timeout must be > 0, {prefix}max_retries >= 0 and {prefix}concurrency >= 1")
        if section.extra_body is not None and not isinstance(section.extra_body, dict):
            raise ValueError(f"{prefix}extra_body must be a mapping, e.g. '{prefix}extra_body={{top_k: 20}}'")
    cfg.tasks = [t.lower() for t in as_list(cfg.tasks)]
    cfg.run = as_list(cfg.run) or None
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
    budgets = cfg.max_new_tokens if isinstance(cfg.max_new_tokens, dict) else {"*": cfg.max_new_tokens}
    for task, budget in budgets.items():
        if task != "*" and task not in TASKS:
            raise ValueError(f"max_new_tokens: unknown task {task!r} (one of {', '.join(TASKS)}; YAML needs a space "
                             "after the colon: 'max_new_tokens={vp: 16000}')")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int) or budget < 1):
            raise ValueError(f"max_new_tokens must be a positive number or {{task: number}}, "
                             f"got {cfg.max_new_tokens!r}")


def reasons(section: ApiOptions, backend: str) -> bool:
    """Whether the model (or judge) gets reasoning budgets: ``reasoning`` if set, else true for API models,
    whose budget bounds only what they use."""
    return section.reasoning if section.reasoning is not None else backend == "openai"


def budget_override(cfg: EvalConfig) -> int | dict[str, int] | None:
    """``max_new_tokens`` for the prediction step: as given, on top of the reasoning budgets when the model
    reasons (None: the per-task defaults for short answers)."""
    if not reasons(cfg, cfg.backend) or isinstance(cfg.max_new_tokens, int):
        return cfg.max_new_tokens
    budgets = {task: REASONING_MAX_NEW_TOKENS.get(task, REASONING_DEFAULT_TOKENS) for task in cfg.tasks}
    return {**budgets, **(cfg.max_new_tokens or {})}


def judge_budget(judge: JudgeConfig) -> int:
    return judge.max_new_tokens or JUDGE_MAX_NEW_TOKENS[reasons(judge, judge.backend)]


def to_dict(cfg: EvalConfig) -> dict[str, Any]:
    return asdict(cfg)
