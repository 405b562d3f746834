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

from ..classifiers import balance
from ..classifiers.classifier import BalanceSettings, TorchSettings
from ..classifiers.classify_run import DataSettings, check_task, read_config
from ..classifiers.sklearn_path import SklearnSettings
from ..settings import meaning

BACKENDS = ("sklearn", "torch", "lora")


@dataclass
class EvalSettings:
    bootstrap: int = field(default=1000, metadata=meaning("bootstrap resamples of units"))
    permutations: int = field(default=1000, metadata=meaning(
        "paired permutation test: exact over all 2^u unit swaps when 2^u <= this, else draws"))
    confidence: float = field(default=0.95, metadata=meaning("interval level"))
    head_share: float = field(default=0.20, metadata=meaning(
        "a class is \"head\" when it is >= 20% of its scenario's training instances,"))
    tail_share: float = field(default=0.10, metadata=meaning("\"tail\" when < 10%, \"medium\" in between"))
    stats_seed: int = field(default=0, metadata=meaning("seed of the bootstrap and permutation draws"))


@dataclass
class LaunchSettings:
    """How each LoRA run is started: ``accelerate launch [--config_file F] ARGS -m rescue_train train ...``."""

    config_file: Optional[str] = field(default=None, metadata=meaning(
        "an accelerate config (configs/accelerate/*.yaml or your own)"))
    args: str = field(default="", metadata=meaning(
        "more launch flags, one string: 'launch.args=--num_processes 2 --mixed_precision bf16'"))
    keep_checkpoints: bool = field(default=False, metadata=meaning(
        "trainer checkpoints only serve resuming a run; removed once it is recorded"))


@dataclass
class RankSettings:
    """How each LoRA run's test fold is evaluated (``rescue-train eval run=RUN protocol=rank``)."""

    backend: str = field(default="hf", metadata=meaning("hf | vllm"))
    batch_size: int = field(default=8, metadata=meaning("prompts per scoring batch (hf)"))
    rank_score: str = field(default="sum", metadata=meaning("sum = log P(answer and end of turn); mean = per token"))
    args: List[str] = field(default_factory=list, metadata=meaning(
        "more `rescue-train eval` settings, e.g. [max_model_len=8192]"))


@dataclass
class CompareConfig:
    recipe: str = field(default="", metadata=meaning("a shipped recipe name or a YAML path (recipe=...)"))
    task: str = field(default="rpp", metadata=meaning("itp | rpp | stp | ssp"))
    backend: str = field(default="sklearn", metadata=meaning("sklearn | torch | lora (set by a *_lora recipe)"))
    strategies: Any = field(default="all", metadata=meaning(
        "a list of names, or \"all\" (every strategy the backend supports)"))
    seeds: List[int] = field(default_factory=lambda: [0], metadata=meaning("training seeds"))
    test_folds: Optional[List[int]] = field(default=None, metadata=meaning("test folds to run; null: every fold"))
    output_dir: Optional[str] = field(default=None, metadata=meaning("default runs/compare/<recipe>-<backend>"))
    plots: bool = field(default=True, metadata=meaning("write the PNG plots"))
    dry_run: bool = field(default=False, metadata=meaning(
        "print the number of runs and a time estimate (after one run, if none is finished)"))
    data: DataSettings = field(default_factory=DataSettings)
    sklearn: SklearnSettings = field(default_factory=SklearnSettings)
    torch: TorchSettings = field(default_factory=TorchSettings)
    balance: BalanceSettings = field(default_factory=BalanceSettings)
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    # backend=lora: the training overrides given for every run, and the resolved training config they give
    training: List[str] = field(default_factory=list, metadata=meaning("(lora) training overrides of every run"))
    training_config: Dict[str, Any] = field(default_factory=dict, metadata=meaning(
        "(lora) the resolved training config"))
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    rank: RankSettings = field(default_factory=RankSettings)


# Settings that do not change what a single run computes: they may differ when a comparison resumes.
NOT_HASHED = ("recipe", "strategies", "seeds", "test_folds", "output_dir", "plots", "evaluation", "dry_run",
              "training")
# Old spellings of compare's own keys (the data.* ones are in rescue_train.data.config.RENAMED).
RENAMED = {"folds": "test_folds", "out_dir": "output_dir"}
# Sections that only one backend reads.
BACKEND_SECTIONS = {"sklearn": ("sklearn",), "torch": ("torch",),
                    "lora": ("training_config", "launch", "rank")}
# The comparison's own keys on the command line of a LoRA recipe; the rest are training overrides.
LORA_COMPARE_KEYS = ("strategies", "seeds", "test_folds", "output_dir", "plots", "evaluation", "launch", "rank",
                     "dry_run")
# Training keys that every run sets itself (output_dir is the comparison's folder, each run a folder in it).
LORA_PER_RUN = {"balance": "the strategy sets balance.*", "seed": "use seeds=[...]",
                "data.test_fold": "use test_folds=[...]", "name": "the recipe's name",
                "tasks": "compare one task at a time"}


def _overrides(argv: Sequence[str]) -> list[str]:
    """The ``key=value`` arguments with old spellings renamed (a warning names the new one)."""
    from ..data import config as data_config
    from ..settings import ConfigError, rename

    overrides = [a.lstrip("+") for a in argv]
    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise ConfigError(f"arguments must be key=value, got {bad[0]!r} (see rescue-train compare --help)")
    return rename(overrides, {**data_config.RENAMED, **RENAMED})


def is_lora_recipe(argv: Sequence[str]) -> bool:
    """A ``recipe=NAME`` naming a LoRA training recipe (one whose YAML has a Hydra defaults list)."""
    from omegaconf import OmegaConf

    from ..settings import recipe_path

    names = [a.lstrip("+").split("=", 1)[1] for a in argv if a.lstrip("+").split("=", 1)[0] == "recipe"]
    if not names:
        return False
    return "defaults" in OmegaConf.load(recipe_path(names[-1]))


def lora_training_config(recipe: str, training: Sequence[str]) -> dict:
    """The recipe composed with the comparison's training overrides, as a plain dict: what ``rescue-train train
    ... --cfg`` prints, asked of that public entry point (the comparison runs the LoRA half of training only
    through its commands, so the two halves stay import-disjoint)."""
    import subprocess
    import sys

    from omegaconf import OmegaConf

    command = [sys.executable, "-m", "rescue_train", "train", f"recipe={recipe}", *training, "--cfg"]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        why = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        raise ValueError(f"recipe {recipe}: bad training override: {why.removeprefix('rescue-train train: error: ')}")
    return OmegaConf.to_container(OmegaConf.create(done.stdout), resolve=True)


def load_lora_config(argv: Sequence[str]) -> CompareConfig:
    from ..settings import dotlist, load

    overrides = _overrides(argv)
    recipe = [a.split("=", 1)[1] for a in overrides if a.split("=", 1)[0] == "recipe"][-1]
    mine = [a for a in overrides if a.split("=", 1)[0].split(".")[0] in LORA_COMPARE_KEYS]
    training = [a for a in overrides if a not in mine and a.split("=", 1)[0] != "recipe"]
    for arg in training:
        key = arg.split("=", 1)[0]
        for fixed, why in LORA_PER_RUN.items():
            if key == fixed or key.startswith(fixed + "."):
                raise ValueError(f"{arg}: every run of the comparison sets {fixed} itself ({why})")
    config: CompareConfig = load(CompareConfig, [dotlist(mine, "compare")], "compare")
    resolved = lora_training_config(recipe, training)
    tasks = list(resolved["tasks"])
    if len(tasks) != 1:
        raise ValueError(f"recipe {recipe} trains {len(tasks)} tasks ({', '.join(tasks)}); compare one closed-set "
                         f"task at a time (itp_lora, rpp_lora, stp_lora, ssp_lora)")
    check_task(tasks[0])
    data = resolved["data"]
    if data["answer_format"] != "label":
        raise ValueError("data.answer_format must be label: the rank protocol scores each candidate's bare label")
    if data["split"] != "kfold":
        raise ValueError(f"data.split must be kfold: the comparison runs every test fold (got {data['split']!r})")
    if config.rank.backend not in ("hf", "vllm"):
        raise ValueError(f"rank.backend must be hf or vllm (the rank protocol needs log-likelihoods), "
                         f"got {config.rank.backend!r}")
    for per_run in ("output_dir", "seed"):
        resolved.pop(per_run)
    resolved["data"].pop("test_fold")
    resolved.pop("balance")
    config.recipe, config.task, config.backend = recipe, tasks[0], "lora"
    config.training, config.training_config = training, resolved
    config.data = DataSettings(**data)  # the training data config (eval run= inherits it, prompts included)
    return config


def load_config(argv: Sequence[str]) -> CompareConfig:
    if is_lora_recipe(argv):
        config = load_lora_config(argv)
    else:
        config = read_config(CompareConfig, argv, "compare")
    names = config.strategies
    if names == "all" or names == ["all"]:
        names = balance.strategies_for(config.backend)
    elif isinstance(names, str):
        names = [names]
    balance.check_strategies(names, config.backend)
    config.strategies = list(dict.fromkeys(names))
    if "none" not in config.strategies:
        config.strategies.insert(0, "none")  # the reference every strategy is tested against
    config.output_dir = config.output_dir or f"runs/compare/{config.recipe or config.task}-{config.backend}"
    return config


def run_settings(config: CompareConfig) -> dict:
    """The part of the config that shapes each run's result (hashed to refuse mixing)."""
    body = {k: v for k, v in asdict(config).items() if k not in NOT_HASHED}
    for backend, sections in BACKEND_SECTIONS.items():
        if backend != config.backend:  # the other backends' settings don't matter
            for section in sections:
                body.pop(section)
    if config.backend == "lora":
        body.pop("balance")  # the classifiers' strategy parameters
        body["launch"].pop("keep_checkpoints")
    return body
