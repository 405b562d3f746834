"""The cross-validation's settings: its own keys, the training overrides of every run, the eval settings of every
evaluation.

``rescue-train cv recipe=R [training overrides] [eval.KEY=VALUE ...] output_dir=OUT [folds=[0,2]]
[baseline=auto|zero_shot|none] [dry_run=true]``: the keys of :class:`CvConfig` are the experiment's; a word
``eval.KEY=VALUE`` is ``KEY=VALUE`` for every ``rescue-train eval`` it runs; every other word is a training override
of every run, composed with the recipe exactly as ``rescue-train train`` composes it (``model=qwen2.5-7b-instruct
data=/data/benchmark_191.jsonl train.max_steps=300``). Each run sets ``data.test_fold`` (its fold),
``data.manifest`` (the experiment's split manifest, ``OUT/split_manifest.json``: made once, or copied from
a ``data.manifest=FILE`` you give) and ``output_dir`` (``OUT/runs/fold<F>``) itself.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..inference.factory import BACKENDS, backend_class
from ..jobs import LaunchSettings, shaping_settings
from ..settings import ConfigError, compose, meaning, unhashed

BASELINES = ("auto", "zero_shot", "none")
EVAL_PREFIX = "eval."
# The experiment's own keys on the command line; every other word is a training override (or eval.KEY=VALUE).
CV_KEYS = ("output_dir", "folds", "baseline", "dry_run", "plots", "launch", "eval")
# Training keys every run sets itself.
PER_RUN = {"data.test_fold": "use folds=[...]"}
# Eval keys the experiment sets for every evaluation.
EVAL_FIXED = {"run": "each fold's run is evaluated on its own test fold", "model": "the runs' base model",
              "adapter": "each fold's own adapter", "tokenizer": "the runs' tokenizer and chat template",
              "tasks": "the recipe's tasks", "output_dir": "OUT/eval/fold<F> and OUT/eval/zero_shot",
              "include_base": "use baseline=zero_shot", "data": "the runs' data configuration",
              "limit": "every instance of a fold is predicted", "overwrite": "remove the evaluation folder instead"}
EVAL_PROTOCOLS = ("rank", "sft")  # a fine-tuned model is asked the prompts it trained on


@dataclass
class CvConfig:
    recipe: str = field(default="", metadata=meaning("a LoRA recipe (kind: lora): a shipped name or a YAML path"))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "default runs/cv/<recipe>/<model.name>: runs/, eval/, logs/, split_manifest.json, results.json, report.md"))
    folds: Optional[List[int]] = field(default=None, metadata=meaning(
        "test folds to run; null: every fold of data.folds (a subset pools only its folds' instances)", low=0))
    baseline: str = field(default="auto", metadata=meaning(
        "zero_shot: the base model on the same instances and prompts, with the paired differences; none; auto: "
        "zero_shot when the base model is on this machine (a folder, tiny, or in the Hugging Face cache; asked again "
        "after the training runs, which download it)", choices=BASELINES))
    dry_run: bool = field(default=False, metadata=meaning(
        "print the plan (runs, evaluations, judge calls) and a time estimate (after one fold, if none is finished)"))
    plots: bool = field(default=True, metadata=meaning("write the report's plots"))
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    eval: List[str] = field(default_factory=list, metadata=meaning(
        "the rescue-train eval settings of every evaluation, given as eval.KEY=VALUE (eval.protocol=rank|sft, "
        "eval.backend=vllm, eval.judge.backend=openai eval.judge.model=gpt-5.4, eval.bertscore=none)"))
    training: List[str] = field(default_factory=list, metadata=meaning(
        "(the other key=value words) the training overrides of every run"))
    # Resolved by load_config from the recipe and the words above.
    tasks: List[str] = field(default_factory=list, metadata=meaning("(from the recipe) the tasks trained and scored"))
    training_config: Dict[str, Any] = field(default_factory=dict, metadata=meaning(
        "(resolved) every run's training config, its fold and folders aside"))
    eval_config: Dict[str, Any] = field(default_factory=dict, metadata=meaning(
        "(resolved) every evaluation's config, its run and folders aside"))


def eval_arguments(config: CvConfig) -> list[str]:
    """The settings every evaluation gets (before its model or run, and its output folder)."""
    return ["protocol=rank", "progress=false", *config.eval, f"tasks=[{','.join(config.tasks)}]"]


def _split(overrides: Sequence[str]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(recipe=, the experiment's keys, eval.KEY=VALUE as KEY=VALUE, training overrides)."""
    recipe, mine, evals, training = [], [], [], []
    for arg in overrides:
        key = arg.lstrip("+").split("=", 1)[0]
        if key == "recipe":
            recipe.append(arg.split("=", 1)[1])
        elif key.startswith(EVAL_PREFIX):
            evals.append(arg.lstrip("+")[len(EVAL_PREFIX):])
        elif key.split(".")[0] in CV_KEYS:
            mine.append(arg)
        else:
            training.append(arg)
    return recipe, mine, evals, training


def _refuse(args: Sequence[str], fixed: dict[str, str], prefix: str, what: str) -> None:
    for arg in args:
        key = arg.lstrip("+").split("=", 1)[0]
        for name, why in fixed.items():
            if key == name or key.startswith(name + "."):
                raise ConfigError(f"{prefix}{arg}: {what} sets {name} itself ({why})")


def load_config(overrides: Sequence[str]) -> CvConfig:
    """The cross-validation of ``recipe=`` with its training and eval settings, resolved and checked."""
    from ..evaluation.config import load_config as load_eval_config
    from ..settings import read_recipe, recipe_kind, recipe_names
    from ..sft.config import load_config as load_training_config
    from ..tasks import TASKS, get_task

    recipes, mine, evals, training = _split(overrides)
    if not recipes:
        raise ConfigError(f"give recipe=NAME (a LoRA recipe: {', '.join(recipe_names('lora'))}) or recipe=PATH.yaml")
    recipe = recipes[-1]
    if recipe_kind(read_recipe(recipe)[1]) != "lora":
        raise ConfigError(f"recipe {recipe} is not a LoRA recipe (kind: lora); cv fine-tunes an LLM per fold")
    _refuse(training, PER_RUN, "", "every run of the cross-validation")
    _refuse(evals, EVAL_FIXED, EVAL_PREFIX, "every evaluation of the cross-validation")
    config: CvConfig = compose(CvConfig, mine, "cv")
    config.recipe, config.training, config.eval = recipe, training, [*config.eval, *evals]
    resolved = load_training_config(recipe, training)
    if resolved.data.split != "kfold":
        raise ConfigError(f"data.split={resolved.data.split}: cross-validation needs kfold (one run per test fold)")
    trained = {get_task(t).name for t in resolved.tasks}
    config.tasks = [t for t in TASKS if t in trained]
    k = resolved.data.folds
    chosen = list(range(k)) if config.folds is None else list(config.folds)
    bad = [f for f in chosen if not 0 <= f < k]
    if bad or not chosen or len(set(chosen)) != len(chosen):
        raise ConfigError(f"folds={config.folds}: expected distinct folds in 0..{k - 1} (data.folds={k})")
    config.folds = sorted(chosen)
    evaluation = load_eval_config(eval_arguments(config))
    if evaluation.protocol not in EVAL_PROTOCOLS:
        raise ConfigError(f"eval.protocol={evaluation.protocol}: a fine-tuned model is asked the prompts it trained "
                          f"on; use eval.protocol=rank (closed-set tasks ranked, the others generated) or sft")
    if backend_class(evaluation.backend, "eval.backend").remote:
        local = " or ".join(n for n, b in BACKENDS.items() if not b.remote)
        raise ConfigError(f"eval.backend={evaluation.backend}: the fold adapters are loaded locally ({local})")
    training_config = asdict(resolved)
    training_config.pop("output_dir")
    for per_run in ("test_fold", "manifest"):
        training_config["data"].pop(per_run)
    config.training_config = training_config
    eval_config = asdict(evaluation)
    for fixed in ("run", "model", "adapter", "tokenizer", "tasks", "output_dir", "include_base", "data", "limit",
                  "overwrite"):
        eval_config.pop(fixed)
    config.eval_config = eval_config
    config.output_dir = config.output_dir or f"runs/cv/{resolved.name}/{resolved.model.name}"
    return config


def settings(config: CvConfig) -> dict[str, Any]:
    """What shapes the experiment's results (hashed: a rerun into the same output_dir must match it). Folds,
    the baseline, the dry run, plots and the evaluations' unhashed keys (batch sizes, progress, ...) may change;
    the scorers' sections count whole."""
    from ..evaluation.config import EvalConfig

    runtime = unhashed(EvalConfig)
    return {"recipe": config.recipe, "training": config.training_config,
            "eval": {k: v for k, v in config.eval_config.items() if k not in runtime},
            "launch": shaping_settings(config.launch)}
