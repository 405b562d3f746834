"""The evaluation config: ``key=value`` overrides (OmegaConf), validation and the answer budgets. Model and
adapter resolution and the backend factory live in ``evaluation.models``.

``run=RUN_DIR`` (one or several training run folders) takes everything that decides the prompts from the
run: the whole data configuration (source, build options, mode, answer format, split, test fold and the
run's own split manifest), the tasks it trained, the base model and the adapter with its tokenizer and chat
template. An explicit ``data.*`` or ``tasks=`` setting wins, with a warning naming a data key that differs.
A model trained by a run found otherwise (``adapter=RUN_DIR``, a served ``adapter=NAME=RUN_DIR``, a merged
``model=``) takes the run's split (``evaluation.trained``); runs on different test folds are each evaluated on
their own.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

from ..tasks import DataConfig
from ..inference import BACKENDS
from ..inference.base import RANK_SCORES
from ..inference.factory import backend_class, reasons
from ..inference.options import ApiOptions, EngineOptions, check_api
from ..scoring.bertscore import BertScoreConfig
from ..scoring.calibration import CALIBRATIONS
from ..scoring.judge import JudgeConfig
from ..settings import ConfigError, as_list, compose, dotlist, find_yaml, meaning, read_yaml
from ..tasks import TASKS
from .trained import SPLIT_KEYS, TrainingRun, adapter_runs, read_run, run_of_model

PROTOCOLS = ("sft", "paper", "rank")
SWITCHES = {"judge": {"backend": "none"}, "bertscore": {"model": "none"}}  # judge=none, bertscore=none



@dataclass
class EvalData(DataConfig):
    split: str = field(default="none", metadata=meaning(
        "none: every sample is test (the whole benchmark, as the paper) | kfold | holdout; a trained model's "
        "default is its run's split"))
    test_fold: Optional[int] = field(default=None, metadata=meaning(
        "the test fold (data.split=kfold); null: each trained model's own test fold, fold 0 for other models",
        low=0))


@dataclass
class EvalConfig(ApiOptions, EngineOptions):
    model: Optional[str] = field(default=None, metadata=meaning(
        "a preset of configs/model (tiny, smollm2, ...), a local folder, a hub id, or the served model's name (a "
        "remote backend such as openai)"))
    adapter: Any = field(default=None, metadata=meaning(
        "one folder or a list: PEFT folders or training run folders", hashed=False))
    tokenizer: Optional[str] = field(default=None, metadata=meaning(
        "default: the adapter's own tokenizer files, else the model's"))
    include_base: bool = field(default=False, metadata=meaning(
        "with adapters: also evaluate the base model", hashed=False))
    backend: str = field(default="hf", metadata=meaning(" | ".join(BACKENDS), choices=BACKENDS))
    run: Any = field(default=None, metadata=meaning(
        "training run folders: their model, adapter, tokenizer and whole data configuration"))
    tasks: Any = field(default_factory=lambda: list(TASKS))
    protocol: str = field(default="sft", metadata=meaning(
        "sft: the training prompts and answer format; paper: zero-shot JSON; rank: log-lik", choices=PROTOCOLS))
    data: EvalData = field(default_factory=EvalData)
    allow_training_data: bool = field(default=False, metadata=meaning(
        "score a trained model on samples its run trained or validated on (results then say 'includes "
        "training data')", hashed=False))
    seed: int = field(default=0, metadata=meaning(
        "the backend's sampling seed, and sample='s draw (the split seed is data.split_seed)", low=0))
    limit: Optional[int] = field(default=None, metadata=meaning(
        "at most this many instances per task, the first ones (smoke runs)", low=1, hashed=False))
    sample: Optional[int] = field(default=None, metadata=meaning(
        "this many instances per task spread over the units, drawn with seed (a small representative run)", low=1,
        hashed=False))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "default runs/eval/<model>[+<adapter>]/<protocol>", hashed=False))
    overwrite: bool = field(default=False, metadata=meaning(
        "start over when the output holds a run with another config", hashed=False))
    max_new_tokens: Any = field(default=None, metadata=meaning(
        "one number or {task: number}; default per task and answer format"))
    batch_size: int = field(default=8, metadata=meaning("prompts per generation batch (hf)", low=1, hashed=False))
    chunk: Optional[int] = field(default=None, metadata=meaning(
        "instances per resumable step (default: hf batch, 1024 vllm, 64 openai)", low=1, hashed=False))
    data_parallel: int = field(default=1, metadata=meaning(
        "vllm: engine processes, each on its own tensor_parallel_size GPUs (on CPU its share of the threads), "
        "each predicting a share of the instances into the one results folder", low=1, hashed=False))
    constrained: bool = field(default=True, metadata=meaning(
        "answers held to the candidate labels or JSON schema (hf, vllm; openai: JSON only); false: free"))
    rank_score: str = field(default="sum", metadata=meaning(
        "sum = log P(answer and end of turn); mean = per token", choices=RANK_SCORES))
    calibration: str = field(default="none", metadata=meaning(
        "protocol=rank: none | contextual (divide by the answer probabilities without the dialogue; Zhao et al. "
        "2021) | pmi (minus the log-lik after the task question alone; Holtzman et al. 2021) | prior (minus "
        "tau x log of the training fold's class prior; a trained run). Any but none keeps every method's scores, "
        "so report --calibration re-ranks the result without the model", choices=CALIBRATIONS, hashed=False))
    calibration_tau: Optional[float] = field(default=None, metadata=meaning(
        "calibration=prior: tau; null: chosen on the run's validation fold by balanced accuracy", low=0,
        hashed=False))
    progress: bool = field(default=True, metadata=meaning("progress bars", hashed=False))
    verbose: bool = field(default=False, metadata=meaning(
        "the engine's own output on the console too (default: in the run folder's eval.log)", hashed=False))
    allow_empty_answers: bool = field(default=False, metadata=meaning(
        "score a run even when most server answers were empty (they count as failures, reason empty)", hashed=False))
    # The scorers decide the scores, not the predictions: they have their own identity (scoring_identity).
    judge: JudgeConfig = field(default_factory=JudgeConfig, metadata={"hashed": False})
    bertscore: BertScoreConfig = field(default_factory=BertScoreConfig, metadata={"hashed": False})


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
    """Defaults <- ``recipe=NAME`` (an eval block, configs/eval/NAME.yaml, or your own YAML) <- what the training
    runs fix (``run=``: data, tasks, model, adapter; a trained adapter or merged model: its split) <- the
    ``key=value`` overrides; validated. ``judge=none`` and ``bertscore=none`` switch a section off (on the
    command line or in YAML); ``data=NAME`` merges a data block, ``data=PATH`` is ``data.source=PATH``."""
    overrides = _repeated(list(overrides), ("run", "adapter"))
    cli = dotlist(overrides, "eval")
    layers: list[dict] = []
    recipe = cli.pop("recipe", None)
    overrides = [a for a in overrides if a.split("=", 1)[0] != "recipe"]
    if recipe:
        layers.append(read_yaml(find_yaml(str(recipe), "configs/eval", "eval recipe")))
    given = _given(layers, cli)
    runs = as_list(given.get("run"))
    if runs:
        layers.append(inherited(runs, given))
    else:
        backend = backend_class(str(given.get("backend", EvalConfig.backend)))
        trained = adapter_runs(as_list(given.get("adapter")), backend)
        trained += [r for r in [run_of_model(given.get("model"))] if r is not None]
        if trained:
            layers.append(split_of(trained, given))
    cfg: EvalConfig = compose(EvalConfig, overrides, "eval", base=layers, groups={"data": "configs/data"},
                              shorthand={"data": "data.source"}, off=SWITCHES)
    validate(cfg)
    return cfg


def _given(layers: Sequence[dict], cli: dict) -> dict:
    """What the recipe and the command line set themselves (``data=PATH`` read as ``data.source``)."""
    given: dict[str, Any] = {}
    for layer in [*layers, cli]:
        for key, value in layer.items():
            if key == "data":
                value = {"source": value} if isinstance(value, str) else dict(value or {})
                given["data"] = {**given.get("data", {}), **value}
            else:
                given[key] = value
    return given


def _same(runs: Sequence[TrainingRun], entries: Sequence[str], keys: Sequence[str]) -> dict:
    """The runs' common values of the data ``keys``; runs that differ in one are refused together."""
    first = asdict(runs[0].data)
    for run, entry in zip(runs[1:], entries[1:]):
        other = asdict(run.data)
        differ = [k for k in keys if first[k] != other[k]]
        if differ:
            raise ConfigError(f"{entry} was trained with data.{differ[0]}={other[differ[0]]!r}, {entries[0]} with "
                              f"{first[differ[0]]!r}: evaluate them separately")
    return {k: first[k] for k in keys}


def _fold(runs: Sequence[TrainingRun]) -> dict:
    """One test fold and manifest when every run shares them; else none: each is evaluated on its own."""
    if len(runs) == 1 or len({(r.data.test_fold, r.manifest.hash) for r in runs}) == 1:
        return {"test_fold": runs[0].data.test_fold, "manifest": runs[0].data.manifest}
    return {"test_fold": None, "manifest": None}


def inherited(runs: list[str], given: dict) -> dict:
    """What ``run=`` folders fix: their data configuration (with the run's manifest), their tasks, the model
    and the adapter. Explicit ``data.*`` settings that differ from the runs' are kept with a warning naming
    the key; explicit ``tasks=`` replace the runs' tasks."""
    trained = [read_run(entry) for entry in runs]
    keys = [f.name for f in dataclasses.fields(DataConfig) if f.name not in ("test_fold", "manifest")]
    data = {**_same(trained, [f"run={r}" for r in runs], keys), **_fold(trained)}
    for key, value in given.get("data", {}).items():
        if key in data and data[key] != value:
            warnings.warn(f"data.{key}={value!r} overrides the run's data.{key}={data[key]!r}: the evaluation "
                          "prompts or instances differ from the run's", UserWarning, stacklevel=3)
    layer: dict[str, Any] = {"data": data, "run": runs}
    trained_tasks = {task for run in trained for task in run.tasks}
    if "tasks" not in given and trained_tasks:
        layer["tasks"] = [task for task in TASKS if task in trained_tasks]
    models = {run.provenance.get("base_model") for run in trained if not run.is_classifier}
    adapters = [str(run.folder) for run in trained if not run.is_classifier]
    if adapters:  # a classifier run has no generative model to load: give model= for an LLM
        layer["adapter"] = adapters
        if len(models) == 1 and None not in models:
            layer["model"] = models.pop()
    return layer


def split_of(trained: list[TrainingRun], given: dict) -> dict:
    """The split a trained adapter or merged model is evaluated on by default: its run's (each run's own test
    fold), for the keys the recipe and the command line leave unset."""
    data = {k: v for k, v in _same(trained, [r.name for r in trained], SPLIT_KEYS).items()
            if k not in given.get("data", {})}
    return {"data": data}


def validate(cfg: EvalConfig) -> None:
    if cfg.data.split == "leave_one_unit_out":
        raise ValueError("data.split=leave_one_unit_out is for baselines; eval takes none, kfold or holdout")
    if cfg.calibration != "none" and cfg.protocol != "rank":
        raise ValueError(f"calibration={cfg.calibration} re-ranks candidates' log-likelihoods: it needs protocol=rank "
                         f"(protocol={cfg.protocol} generates answers, which have no scores to calibrate)")
    if cfg.calibration_tau is not None and cfg.calibration != "prior":
        raise ValueError(f"calibration_tau={cfg.calibration_tau} weighs the class prior of calibration=prior; "
                         f"calibration={cfg.calibration} has no tau")
    if cfg.judge.retries is not None and cfg.judge.retries < 0:
        raise ValueError(f"judge.retries must be 0 or more, got {cfg.judge.retries}")
    check_api(cfg)
    check_api(cfg.judge, "judge.")
    cfg.tasks = [t.lower() for t in as_list(cfg.tasks)]
    cfg.run = as_list(cfg.run) or None
    for task in cfg.tasks:  # a list, or one comma-separated string: checked once read
        if task not in TASKS:
            raise ValueError(f"tasks must be one of {', '.join(TASKS)}, got {task!r}")
    if not cfg.tasks:
        raise ValueError("tasks is empty")
    backend = backend_class(cfg.backend)
    if cfg.data_parallel < 1 or (cfg.data_parallel > 1 and not backend.data_parallel):
        able = ", ".join(f"backend={n}" for n, b in BACKENDS.items() if b.data_parallel)
        raise ValueError(f"data_parallel={cfg.data_parallel}: it takes a count >= 1, and more than one engine only with "
                         f"{able} (hf: batch_size; openai: concurrency)")
    if cfg.protocol == "rank" and not backend.can_rank:
        able = " or ".join(n for n, b in BACKENDS.items() if b.can_rank)
        raise ValueError(f"protocol=rank needs the log-likelihood of given text: use backend={able}")
    if cfg.judge.on and not cfg.judge.model:
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
    """``max_new_tokens`` for the prediction step: as given (one number, or per task: ``max_new_tokens="{vp:
    16000}"``), on top of each task's reasoning budget when the model reasons (None: the per-task defaults for
    short answers)."""
    if not reasons(cfg, cfg.backend) or isinstance(cfg.max_new_tokens, int):
        return cfg.max_new_tokens
    budgets = {task: TASKS[task].reasoning_max_new_tokens for task in cfg.tasks}  # Task.reasoning_max_new_tokens
    return {**budgets, **(cfg.max_new_tokens or {})}


def to_dict(cfg: EvalConfig) -> dict[str, Any]:
    return asdict(cfg)
