"""The comparison's settings: defaults <- recipe YAML <- ``key=value`` overrides.

A classifier recipe (``conf/recipes/*_cls.yaml``) holds ``CompareConfig`` keys. A LoRA recipe
(``conf/recipes/*_lora.yaml``) is a Hydra training recipe: there, every argument that is not a comparison key
(``strategies``, ``seeds``, ``test_folds``, ``output_dir``, ``plots``, ``evaluation.*``, ``launch.*``,
``rank.*``, ``dry_run``) is a training override applied to every run, e.g. ``model=qwen2.5-7b-instruct
train.max_steps=300 train.max_length=4096 data.context=40``; the strategy sets ``balance.*``, the run sets
``seed``, ``data.test_fold`` and the run's own ``output_dir`` (a folder under the comparison's).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from .. import rebalance
from ..classifiers import balance  # noqa: F401  (registers the classifiers as learners)
from ..classifiers.classifier import BalanceSettings, TorchSettings
from ..classifiers.classify_run import DataSettings, check_task, read_config
from ..classifiers.sklearn_path import SklearnSettings
from ..inference.base import RANK_SCORES
from ..inference.factory import BACKENDS, backend_class
from ..jobs import LaunchSettings, shaping_settings
from ..settings import identity, meaning

LEARNERS = ("sklearn", "torch", "lora")


@dataclass
class EvalSettings:
    bootstrap: int = field(default=1000, metadata=meaning("bootstrap resamples of units (0: no intervals)", low=0))
    permutations: int = field(default=1000, metadata=meaning(
        "paired permutation test: exact over all 2^u unit swaps when 2^u <= this, else draws", low=1))
    confidence: float = field(default=0.95, metadata=meaning("interval level", above=0, below=1))
    head_share: float = field(default=0.20, metadata=meaning(
        "a class is \"head\" when it is >= 20% of its scenario's training instances,", above=0, below=1))
    tail_share: float = field(default=0.10, metadata=meaning(
        "\"tail\" when < 10%, \"medium\" in between", above=0, below=1))
    stats_seed: int = field(default=0, metadata=meaning("seed of the bootstrap and permutation draws", low=0))


@dataclass
class RankSettings:
    """How each LoRA run's test fold is evaluated (``rescue-train eval run=RUN protocol=rank``)."""

    backend: str = field(default="hf", metadata=meaning(" | ".join(n for n, b in BACKENDS.items() if b.can_rank)))
    batch_size: int = field(default=8, metadata=meaning("prompts per scoring batch (hf)", low=1))
    rank_score: str = field(default="sum", metadata=meaning(
        "sum = log P(answer and end of turn); mean = per token", choices=RANK_SCORES))
    args: List[str] = field(default_factory=list, metadata=meaning(
        "more `rescue-train eval` settings, e.g. [max_model_len=8192]"))


@dataclass
class CompareConfig:
    kind: str = field(default="classifier", metadata=meaning(
        "the recipe's kind: classifier, or lora (fine-tuned LLMs: every run is `accelerate launch ... train`)",
        hashed=False))
    recipe: str = field(default="", metadata=meaning("a shipped recipe name or a YAML path (recipe=...)", hashed=False))
    task: str = field(default="rpp", metadata=meaning("itp | rpp | stp | ssp"))
    learner: str = field(default="sklearn", metadata=meaning("sklearn | torch | lora (set by a LoRA recipe)"))
    strategies: Any = field(default="all", metadata=meaning(
        "a list of names, or \"all\" (every strategy the learner supports)", hashed=False))
    seeds: List[int] = field(default_factory=lambda: [0], metadata=meaning("training seeds", low=0, hashed=False))
    test_folds: Optional[List[int]] = field(default=None, metadata=meaning(
        "test folds to run; null: every fold", low=0, hashed=False))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "default runs/compare/<recipe>-<learner>", hashed=False))
    plots: bool = field(default=True, metadata=meaning("write the PNG plots", hashed=False))
    dry_run: bool = field(default=False, metadata=meaning(
        "print the number of runs and a time estimate (after one run, if none is finished)", hashed=False))
    data: DataSettings = field(default_factory=DataSettings)
    sklearn: SklearnSettings = field(default_factory=SklearnSettings)
    torch: TorchSettings = field(default_factory=TorchSettings)
    balance: BalanceSettings = field(default_factory=BalanceSettings)
    evaluation: EvalSettings = field(default_factory=EvalSettings, metadata={"hashed": False})
    # learner=lora: the training overrides given for every run, and the resolved training config they give
    training: List[str] = field(default_factory=list, metadata=meaning(
        "(lora) training overrides of every run", hashed=False))
    training_config: Dict[str, Any] = field(default_factory=dict, metadata=meaning(
        "(lora) the resolved training config"))
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    rank: RankSettings = field(default_factory=RankSettings)


# Sections that only one learner reads.
LEARNER_SECTIONS = {"sklearn": ("sklearn",), "torch": ("torch",),
                    "lora": ("training_config", "launch", "rank")}
# The comparison's own keys on the command line of a LoRA recipe; the rest are training overrides.
LORA_COMPARE_KEYS = ("strategies", "seeds", "test_folds", "output_dir", "plots", "evaluation", "launch", "rank",
                     "dry_run")
# Training keys that every run sets itself (output_dir is the comparison's folder, each run a folder in it).
LORA_PER_RUN = {"balance": "the strategy sets balance.*", "seed": "use seeds=[...]",
                "data.test_fold": "use test_folds=[...]", "name": "the recipe's name",
                "tasks": "compare one task at a time"}
# ... and of a classifier comparison (its balance.* are the strategies' parameters, shared by every run).
CLASSIFIER_PER_RUN = {"data.test_fold": "use test_folds=[...]"}


def refuse_per_run(overrides: Sequence[str], fixed: dict[str, str]) -> None:
    """Refuse a setting that every run of the comparison sets itself (it would be ignored)."""
    for arg in overrides:
        key = arg.split("=", 1)[0].lstrip("+")
        for name, why in fixed.items():
            if key == name or key.startswith(name + "."):
                raise ValueError(f"{arg}: every run of the comparison sets {name} itself ({why})")


def lora_strategies() -> list[str]:
    from ..sft.weighting import LORA  # registers LoRA runs as a learner

    return rebalance.strategies_for(LORA.name)


def strategies_for(learner: str) -> list[str]:
    """The strategy names (rescue_train.rebalance) whose parts a learner implements: the classifiers' or LoRA's
    (``balance.strategy`` of the training recipe); one name, one idea."""
    return lora_strategies() if learner == "lora" else rebalance.strategies_for(learner)


def strategy_summary(name: str, learner: str) -> str:
    return rebalance.STRATEGIES[name].summary


def load_lora_config(recipe: str, overrides: Sequence[str]) -> CompareConfig:
    """A LoRA comparison: the comparison's own keys, and every other key a training override of each run."""
    from ..settings import compose
    from ..sft.config import load_config as load_training_config

    mine = [a for a in overrides if a.split("=", 1)[0].split(".")[0] in LORA_COMPARE_KEYS]
    training = [a for a in overrides if a not in mine]
    refuse_per_run(training, LORA_PER_RUN)
    config: CompareConfig = compose(CompareConfig, mine, "compare")
    resolved = load_training_config(recipe, training)
    tasks = list(resolved.tasks)
    if len(tasks) != 1:
        raise ValueError(f"recipe {recipe} trains {len(tasks)} tasks ({', '.join(tasks)}); compare one closed-set "
                         f"task at a time (itp_lora, rpp_lora, stp_lora, ssp_lora)")
    check_task(tasks[0])
    if resolved.data.answer_format != "label":
        raise ValueError("data.answer_format must be label: the rank protocol scores each candidate's bare label")
    if resolved.data.split != "kfold":
        raise ValueError(f"data.split must be kfold: the comparison runs every test fold (got {resolved.data.split!r})")
    if not backend_class(config.rank.backend, "rank.backend").can_rank:
        able = " or ".join(n for n, b in BACKENDS.items() if b.can_rank)
        raise ValueError(f"rank.backend must be {able} (the rank protocol needs log-likelihoods), "
                         f"got {config.rank.backend!r}")
    training_config = asdict(resolved)
    for per_run in ("output_dir", "seed", "balance"):
        training_config.pop(per_run)
    training_config["data"].pop("test_fold")
    config.kind, config.recipe, config.task, config.learner = "lora", recipe, tasks[0], "lora"
    config.training, config.training_config = training, training_config
    config.data = DataSettings(**asdict(resolved.data))  # the runs' data config (eval run= inherits it)
    return config


def load_config(overrides: Sequence[str]) -> CompareConfig:
    """The comparison of ``recipe=`` (a classifier recipe, or a LoRA recipe: see load_lora_config)."""
    from ..settings import read_recipe, recipe_kind

    recipes = [a.split("=", 1)[1] for a in overrides if a.split("=", 1)[0] == "recipe"]
    rest = [a for a in overrides if a.split("=", 1)[0] != "recipe"]
    if recipes and recipe_kind(read_recipe(recipes[-1])[1]) == "lora":
        config = load_lora_config(recipes[-1], rest)
    else:
        refuse_per_run(rest, CLASSIFIER_PER_RUN)
        config = read_config(CompareConfig, recipes[-1] if recipes else None, rest, "compare")
    names = config.strategies
    if names == "all" or names == ["all"]:
        names = strategies_for(config.learner)
    elif isinstance(names, str):
        names = [names]
    known = strategies_for(config.learner)
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"strategies {unknown} do not apply to learner={config.learner}; it takes: {', '.join(known)}")
    config.strategies = list(dict.fromkeys(names))
    if "none" not in config.strategies:
        config.strategies.insert(0, "none")  # the reference every strategy is tested against
    if config.learner != "lora" and asdict(config.launch) != asdict(LaunchSettings()):
        raise ValueError("launch.* applies to LoRA comparisons (recipe=*_lora), whose runs are processes; a "
                         "classifier comparison trains in this process")
    config.output_dir = config.output_dir or f"runs/compare/{config.recipe or config.task}-{config.learner}"
    return config


def run_settings(config: CompareConfig) -> dict:
    """The part of the config that shapes each run's result (hashed to refuse mixing)."""
    body = identity(config)  # what may differ when a comparison resumes is declared hashed=False
    for learner, sections in LEARNER_SECTIONS.items():
        if learner != config.learner:  # the other learners' settings don't matter
            for section in sections:
                body.pop(section)
    if config.learner == "lora":
        body.pop("balance")  # the classifiers' strategy parameters
        body["launch"] = shaping_settings(config.launch)
    return body
