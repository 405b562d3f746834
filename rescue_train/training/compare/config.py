"""The comparison's settings: defaults <- recipe YAML <- ``key=value`` overrides.

A classifier recipe (``recipes/*_cls.yaml``) holds ``CompareConfig`` keys. A LoRA recipe
(``recipes/*_lora.yaml``) is a Hydra training recipe: there, every argument that is not a comparison key
(``strategies``, ``seeds``, ``folds``, ``out_dir``, ``plots``, ``evaluation.*``, ``launch.*``, ``rank.*``,
``dry_run``) is a training override applied to every run, e.g. ``model=qwen2.5-7b-instruct
train.max_steps=300 train.max_length=4096``; the strategy sets ``balance.*``, the run sets ``seed``,
``data.test_fold`` and ``output_dir``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from .. import balance
from ..classifier import BalanceSettings, TorchSettings
from ..sklearn_path import SklearnSettings

REPO_ROOT = Path(__file__).resolve().parents[3]
BACKENDS = ("sklearn", "torch", "lora")


@dataclass
class DataSettings:
    source: str = "bundled"
    converted: Optional[str] = None  # an existing `rescue-train convert` folder; else converted into OUT/data
    k: int = 5
    split_seed: int = 0
    build: Dict[str, Any] = field(default_factory=dict)  # BuildOptions fields, e.g. rpp_definition: D


@dataclass
class EvalSettings:
    bootstrap: int = 1000
    permutations: int = 1000  # the exact test over all 2^u unit swaps when 2^u <= this, else this many random swaps
    confidence: float = 0.95
    head_share: float = 0.20  # a class is "head" when it is >= 20% of its scenario's training instances,
    tail_share: float = 0.10  # "tail" when < 10%, "medium" in between
    stats_seed: int = 0


@dataclass
class LaunchSettings:
    """How each LoRA run is started: ``accelerate launch [--config_file F] ARGS -m rescue_train train ...``."""

    config_file: Optional[str] = None  # an accelerate config (configs/accelerate/*.yaml or your own)
    args: str = ""  # more launch flags, one string: 'launch.args=--num_processes 2 --mixed_precision bf16'
    keep_checkpoints: bool = False  # trainer checkpoints only serve resuming a run; removed once it is recorded


@dataclass
class RankSettings:
    """How each LoRA run's test fold is evaluated (``rescue-train eval protocol=rank split=run``)."""

    backend: str = "hf"  # hf | vllm
    batch_size: int = 8
    rank_score: str = "sum"  # sum = log P(answer and end of turn); mean = per token
    args: List[str] = field(default_factory=list)  # more `rescue-train eval` settings, e.g. [max_model_len=8192]


@dataclass
class CompareConfig:
    recipe: str = ""
    task: str = "rpp"
    backend: str = "sklearn"  # sklearn | torch | lora (set by a *_lora recipe)
    strategies: Any = "all"  # a list of names, or "all" (every strategy the backend supports)
    seeds: List[int] = field(default_factory=lambda: [0])
    folds: Optional[List[int]] = None  # test folds; None = all k
    out_dir: Optional[str] = None  # default runs/compare/<recipe>-<backend>
    plots: bool = True
    dry_run: bool = False  # print the number of runs and a time estimate (after one run, if none is finished)
    data: DataSettings = field(default_factory=DataSettings)
    sklearn: SklearnSettings = field(default_factory=SklearnSettings)
    torch: TorchSettings = field(default_factory=TorchSettings)
    balance: BalanceSettings = field(default_factory=BalanceSettings)
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    # backend=lora: the training overrides given for every run, and the resolved training config they give
    training: List[str] = field(default_factory=list)
    training_config: Dict[str, Any] = field(default_factory=dict)
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    rank: RankSettings = field(default_factory=RankSettings)


# Settings that do not change what a single run computes: they may differ when a comparison resumes.
NOT_HASHED = ("recipe", "strategies", "seeds", "folds", "out_dir", "plots", "evaluation", "dry_run", "training")
# Sections that only one backend reads.
BACKEND_SECTIONS = {"sklearn": ("sklearn",), "torch": ("torch",),
                    "lora": ("training_config", "launch", "rank")}
# The comparison's own keys on the command line of a LoRA recipe; the rest are training overrides.
LORA_COMPARE_KEYS = ("strategies", "seeds", "folds", "out_dir", "plots", "evaluation", "launch", "rank", "dry_run")
# Training keys that every run sets itself.
LORA_PER_RUN = {"balance": "the strategy sets balance.*", "seed": "use seeds=[...]",
                "data.test_fold": "use folds=[...]", "output_dir": "use out_dir=...",
                "name": "the recipe's name", "tasks": "compare one task at a time"}


def recipe_path(name: str) -> Path:
    given = Path(name)
    if given.suffix in (".yaml", ".yml"):
        if not given.exists():
            raise FileNotFoundError(f"recipe file {given} does not exist")
        return given
    for folder in (Path.cwd() / "recipes", REPO_ROOT / "recipes"):
        if (folder / f"{name}.yaml").exists():
            return folder / f"{name}.yaml"
    raise FileNotFoundError(f"no recipe {name!r}: looked for recipes/{name}.yaml in {Path.cwd()} and {REPO_ROOT}")


def _overrides(argv: Sequence[str]) -> list[str]:
    overrides = [a.lstrip("+") for a in argv]
    bad = [a for a in overrides if "=" not in a]
    if bad:
        raise ValueError(f"arguments must be key=value overrides, got {bad}")
    return overrides


def _check_task(task: str) -> None:
    from ...tasks import CLOSED_SET_TASKS

    if task not in CLOSED_SET_TASKS:
        raise ValueError(f"task {task!r} is not a closed-set task ({', '.join(CLOSED_SET_TASKS)})")


def read_config(schema: type, argv: Sequence[str], what: str, ignore_in_recipe: Sequence[str] = ()):
    """Defaults <- recipe YAML <- key=value overrides (OmegaConf dot-list syntax, '+' prefixes allowed), as an
    instance of the dataclass ``schema``, with the task and backend checked. Shared by ``compare`` and the
    classifier ``train`` command; ``ignore_in_recipe`` drops recipe keys that the schema does not have."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    cli = OmegaConf.from_dotlist(_overrides(argv))
    try:
        cfg = OmegaConf.structured(schema)
        if cli.get("recipe"):
            path = recipe_path(str(cli.recipe))
            recipe = OmegaConf.load(path)
            for key in ignore_in_recipe:
                recipe.pop(key, None)
            cfg = OmegaConf.merge(cfg, recipe)
            cfg.recipe = path.stem
        cfg = OmegaConf.merge(cfg, cli)
        config = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as exc:
        raise ValueError(f"bad {what} setting: {exc}".splitlines()[0]) from exc
    _check_task(config.task)
    if config.backend not in ("sklearn", "torch"):
        raise ValueError(f"backend must be sklearn or torch, got {config.backend!r}")
    return config


def is_lora_recipe(argv: Sequence[str]) -> bool:
    """A ``recipe=NAME`` naming a LoRA training recipe (one whose YAML has a Hydra defaults list)."""
    from omegaconf import OmegaConf

    names = [a.split("=", 1)[1] for a in _overrides(argv) if a.split("=", 1)[0] == "recipe"]
    if not names:
        return False
    return "defaults" in OmegaConf.load(recipe_path(names[-1]))


def lora_training_config(recipe: str, training: Sequence[str]) -> dict:
    """The recipe composed with the comparison's training overrides (Hydra), as a plain dict."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from ..config import compose

    try:
        return OmegaConf.to_container(compose(recipe, list(training)), resolve=True)
    except (HydraException, OmegaConfBaseException) as exc:
        raise ValueError(f"recipe {recipe}: bad training override: {exc}".splitlines()[0]) from exc


def load_lora_config(argv: Sequence[str]) -> CompareConfig:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    overrides = _overrides(argv)
    recipe = [a.split("=", 1)[1] for a in overrides if a.split("=", 1)[0] == "recipe"][-1]
    mine = [a for a in overrides if a.split("=", 1)[0].split(".")[0] in LORA_COMPARE_KEYS]
    training = [a for a in overrides if a not in mine and a.split("=", 1)[0] != "recipe"]
    for arg in training:
        key = arg.split("=", 1)[0]
        for fixed, why in LORA_PER_RUN.items():
            if key == fixed or key.startswith(fixed + "."):
                raise ValueError(f"{arg}: every run of the comparison sets {fixed} itself ({why})")
    try:
        cfg = OmegaConf.merge(OmegaConf.structured(CompareConfig), OmegaConf.from_dotlist(mine))
        config: CompareConfig = OmegaConf.to_object(cfg)  # type: ignore[assignment]
    except OmegaConfBaseException as exc:
        raise ValueError(f"bad compare setting: {exc}".splitlines()[0]) from exc
    resolved = lora_training_config(recipe, training)
    tasks = list(resolved["tasks"])
    if len(tasks) != 1:
        raise ValueError(f"recipe {recipe} trains {len(tasks)} tasks ({', '.join(tasks)}); compare one closed-set "
                         f"task at a time (itp_lora, rpp_lora, stp_lora, ssp_lora)")
    _check_task(tasks[0])
    data = resolved["data"]
    if data["answer_format"] != "label":
        raise ValueError("data.answer_format must be label: the rank protocol scores each candidate's bare label")
    if data["build"].get("rpp_include_current"):
        raise ValueError("data.build.rpp_include_current=true cannot be evaluated by `rescue-train eval`; "
                         "leave it false")
    if config.rank.backend not in ("hf", "vllm"):
        raise ValueError(f"rank.backend must be hf or vllm (the rank protocol needs log-likelihoods), "
                         f"got {config.rank.backend!r}")
    for per_run in ("output_dir", "seed"):
        resolved.pop(per_run)
    resolved["data"].pop("test_fold")
    resolved.pop("balance")
    config.recipe, config.task, config.backend = recipe, tasks[0], "lora"
    config.training, config.training_config = training, resolved
    config.data = DataSettings(source=str(data["source"]), k=int(data["k"]), split_seed=int(data["seed"]),
                               build={k: v for k, v in data["build"].items() if k != "rpp_include_current"})
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
    config.out_dir = config.out_dir or f"runs/compare/{config.recipe or config.task}-{config.backend}"
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
