"""``rescue-train compare``: rebalancing strategies x test folds x seeds, with statistics you can trust.

    rescue-train compare recipe=rpp_cls strategies=[none,inverse_freq,posthoc_la] seeds=[0,1] backend=sklearn

Each test fold of the grouped k-fold manifest takes its turn (validation = the next fold, train = the
rest). Every finished (strategy, fold, seed) run is one JSON file under ``OUT/runs/``, written atomically,
so an interrupted comparison resumes where it stopped; a hash of the settings that shape a run refuses to
mix runs made under other settings. Predictions of all test folds are pooled (each instance is predicted
once per seed by a model that never saw its unit), scored per seed and averaged over seeds.

Uncertainty: 95% percentile bootstrap intervals resample units (couples / families), not rows. Each
strategy is compared with ``none`` on the same instances by a paired permutation test over units (for
every unit a coin decides whether the two strategies' predictions are swapped; two-sided, add-one
p-value) and a paired bootstrap interval of the difference.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, List, Optional, Sequence

import numpy as np

from ..data.config import DataConfig
from . import balance
from .classifier import BalanceSettings, LabelSpace, TorchSettings, fold_splits, load_cls_rows
from .sklearn_path import SklearnSettings

HEADLINE = ("accuracy", "macro_f1", "balanced_accuracy", "weighted_f1", "mrr",
            "head_recall", "medium_recall", "tail_recall")
GROUPS = ("head", "medium", "tail")


# ------------------------------------------------------------------------------------------- config

@dataclass
class DataSettings(DataConfig):
    converted: Optional[str] = None  # an existing `rescue-train convert` folder (else converted into OUT/data)


@dataclass
class EvalSettings:
    bootstrap: int = 1000  # bootstrap resamples of units
    permutations: int = 1000  # paired permutation test draws
    confidence: float = 0.95  # interval level
    head_share: float = 0.20  # a class is "head" when it is >= 20% of its scenario's training instances,
    tail_share: float = 0.10  # "tail" when < 10%, "medium" in between
    stats_seed: int = 0  # seed of the bootstrap and permutation draws


@dataclass
class CompareConfig:
    recipe: str = ""  # a shipped recipe name or a YAML path (recipe=...)
    task: str = "rpp"  # itp | rpp | stp | ssp
    backend: str = "sklearn"  # sklearn | torch
    strategies: Any = "all"  # a list of names, or "all" (every strategy the backend supports)
    seeds: List[int] = field(default_factory=lambda: [0])  # training seeds
    test_folds: Optional[List[int]] = None  # test folds to run; null: every fold
    output_dir: Optional[str] = None  # default runs/compare/<recipe>-<backend>
    plots: bool = True  # write the PNG plots
    data: DataSettings = field(default_factory=DataSettings)
    sklearn: SklearnSettings = field(default_factory=SklearnSettings)
    torch: TorchSettings = field(default_factory=TorchSettings)
    balance: BalanceSettings = field(default_factory=BalanceSettings)
    evaluation: EvalSettings = field(default_factory=EvalSettings)


# Settings that do not change what a single run computes: they may differ when a comparison resumes.
NOT_HASHED = ("recipe", "strategies", "seeds", "test_folds", "output_dir", "plots", "evaluation")
# Old spellings of compare's own keys (the data.* ones are in rescue_train.data.config.RENAMED).
RENAMED = {"folds": "test_folds", "out_dir": "output_dir"}


def read_config(schema: type, argv: Sequence[str], what: str, ignore_in_recipe: Sequence[str] = ()):
    """Defaults <- recipe YAML <- key=value overrides (OmegaConf dot-list syntax, '+' prefixes allowed), as an
    instance of the dataclass ``schema``, with the task and backend checked. Shared by ``compare`` and the
    classifier ``train`` command; ``ignore_in_recipe`` drops recipe keys that the schema does not have."""
    from omegaconf import OmegaConf

    from .. import settings
    from ..data import config as data_config

    renamed = {**data_config.RENAMED, **RENAMED}
    cli = settings.dotlist(settings.rename(data_config.source_shortcut(list(argv)), renamed), what)
    layers = []
    recipe = cli.pop("recipe", None)
    if recipe:
        path = settings.recipe_path(str(recipe))
        tree = settings.rename_in(OmegaConf.to_container(OmegaConf.load(path)), renamed, str(path))
        for key in ignore_in_recipe:
            tree.pop(key, None)
        layers += [tree, {"recipe": path.stem}]
    config = settings.load(schema, [*layers, cli], what)
    from ..tasks import CLOSED_SET_TASKS

    if config.task not in CLOSED_SET_TASKS:
        raise ValueError(f"task {config.task!r} is not a closed-set task ({', '.join(CLOSED_SET_TASKS)})")
    if config.backend not in ("sklearn", "torch"):
        raise ValueError(f"backend must be sklearn or torch, got {config.backend!r}")
    return config


def load_config(argv: Sequence[str]) -> CompareConfig:
    config: CompareConfig = read_config(CompareConfig, argv, "compare")
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
    body.pop("torch" if config.backend == "sklearn" else "sklearn")  # the other backend's settings don't matter
    return body


# --------------------------------------------------------------------------------------------- runs

def prepare_data(config: CompareConfig, out: Path):
    from ..convert import ConvertConfig, convert
    from ..data.config import plain
    from ..data.splits import SplitManifest

    data_dir = Path(config.data.converted) if config.data.converted else out / "data"
    if not config.data.converted and not (data_dir / config.task / "cls").exists():
        convert(ConvertConfig(data=plain(config.data), out=str(data_dir), tasks=[config.task]))
    manifest = SplitManifest.load(data_dir / "split_manifest.json")
    if manifest.scheme != "kfold":
        raise ValueError(f"{data_dir}: classifiers need a k-fold split manifest, found scheme {manifest.scheme!r}")
    meta_path = data_dir / "convert_meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return load_cls_rows(data_dir, config.task), manifest, data_dir, meta


def _ranked(row: dict, scores: np.ndarray, space: LabelSpace) -> tuple[list[str], dict[str, float | None]]:
    """The instance's candidates ordered by score (ties keep candidate order) and the scores by label."""
    by_label = {name: float(scores[space.index(row["scenario"], name)]) for name in row["label_names"]}
    ranking = sorted(row["label_names"], key=lambda name: -by_label[name])
    return ranking, {k: (v if np.isfinite(v) else None) for k, v in by_label.items()}


def fold_data(rows, manifest, space: LabelSpace, fold: int) -> dict:
    """train / validation / test splits of test fold ``fold`` (validation = the next fold)."""
    splits = fold_splits(rows, manifest.roles(fold), space)
    if not len(splits["train"]) or not len(splits["test"]):
        raise ValueError(f"test fold {fold}: {len(splits['train'])} training and {len(splits['test'])} test "
                         f"instances; every fold needs both (use fewer folds: data.folds=...)")
    return splits


def run_one(config: CompareConfig, splits: dict, space: LabelSpace, strategy_name: str, fold: int, seed: int,
            work_dir: Path, cache: dict, keep_model: bool = False) -> dict:
    """Train and predict one (strategy, fold, seed); returns the JSON-ready run record. With ``keep_model``
    the record also holds the fitted model under "fitted" (not JSON; for a caller that saves it)."""
    strategy = balance.STRATEGIES[strategy_name]
    started = time.time()
    if config.backend == "sklearn":
        from .sklearn_path import fit_predict_sklearn

        out = fit_predict_sklearn(splits, space, strategy, config.sklearn, config.balance, seed, cache, keep_model)
    else:
        from .classifier import fit_predict_torch

        out = fit_predict_torch(splits, space, strategy, config.torch, config.balance, seed, work_dir, keep_model)
    test_logits, val_logits = out.pop("test"), out.pop("validation")
    fitted = out.pop("fitted", None)
    counts = splits["train"].counts(len(space))
    record: dict[str, Any] = {"strategy": strategy_name, "fold": fold, "seed": seed, "tau": None}
    if strategy.posthoc == "tuned":
        prior = balance.log_prior(counts)
        if len(splits["validation"]):
            tau, scores = balance.choose_tau(val_logits, splits["validation"].y, prior, config.balance.tau_grid)
            record.update(tau=tau, tau_scores=scores)
        else:
            tau = config.balance.tau
            record.update(tau=tau, tau_note="empty validation fold: fixed balance.tau used")
        test_logits = balance.posthoc_adjust(test_logits, prior, tau)
    predictions = []
    for row, scores in zip(splits["test"].rows, test_logits):
        ranking, by_label = _ranked(row, scores, space)
        predictions.append({"id": row["id"], "task": row["task"], "scenario": row["scenario"], "unit": row["unit"],
                            "sample_id": row["sample_id"], "gold": row["label"], "prediction": ranking,
                            "parse_status": "ok", "raw": None, "label_scores": by_label})
    record.update(seconds=round(time.time() - started, 3), train_counts=dict(zip(space.names, counts.tolist())),
                  sizes={role: len(s) for role, s in splits.items()}, backend_info=out, predictions=predictions)
    if keep_model:
        record["fitted"] = fitted
    return record


def run_all(config: CompareConfig, out: Path, rows, manifest, space: LabelSpace, run_hash: str) -> list[dict]:
    from tqdm.auto import tqdm

    from ..provenance import write_json_atomic

    folds = config.test_folds if config.test_folds is not None else list(range(manifest.k))
    jobs = [(s, f, seed) for s in config.strategies for f in folds for seed in config.seeds]
    records, cache = [], {}
    for strategy, fold, seed in tqdm(jobs, desc=f"compare {config.task} ({config.backend})", unit="run"):
        path = out / "runs" / strategy / f"fold{fold}_seed{seed}.json"
        if path.exists():
            record = json.loads(path.read_text())
            if record.get("run_hash") != run_hash:
                raise ValueError(f"{path} was made with other settings (hash {record.get('run_hash')}, now "
                                 f"{run_hash}); use another output_dir")
        else:
            splits = fold_data(rows, manifest, space, fold)
            record = {"run_hash": run_hash, **run_one(config, splits, space, strategy, fold, seed, out / "work", cache)}
            write_json_atomic(path, record)
        records.append(record)
    return records


# ------------------------------------------------------------------------------------------ metrics

def frequency_groups(train_counts: dict[str, int], space: LabelSpace, head: float, tail: float) -> dict[str, str]:
    """class name -> head | medium | tail, by its share of its scenario's training instances."""
    groups = {}
    for scenario in sorted({s for s, _ in space.classes}):
        names = [n for (s, _), n in zip(space.classes, space.names) if s == scenario]
        total = sum(train_counts.get(n, 0) for n in names) or 1
        for n in names:
            share = train_counts.get(n, 0) / total
            groups[n] = "head" if share >= head else "tail" if share < tail else "medium"
    return groups


def metrics_from_confusion(conf: np.ndarray, reciprocal_rank_sum: np.ndarray, group_of: np.ndarray
                           ) -> dict[str, np.ndarray]:
    """Headline metrics for a batch of confusion matrices ``conf[b, gold, predicted]`` (weighted counts)
    and the sums of the gold's reciprocal ranks. Macro scores average over the classes present in the
    gold, as metrics.aggregate does; a frequency group without test instances gives nan."""
    support, predicted = conf.sum(2), conf.sum(1)
    hits = np.diagonal(conf, axis1=1, axis2=2)
    total = support.sum(1)
    present = support > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(present, hits / support, 0.0)
        precision = np.where(predicted > 0, hits / predicted, 0.0)
        f1 = np.where(precision + recall > 0, 2 * precision * recall / (precision + recall), 0.0)
        out = {"accuracy": hits.sum(1) / total, "macro_f1": (f1 * present).sum(1) / present.sum(1),
               "balanced_accuracy": (recall * present).sum(1) / present.sum(1),
               "weighted_f1": (f1 * support).sum(1) / total, "mrr": reciprocal_rank_sum / total}
        for code, group in enumerate(GROUPS):
            chosen = present & (group_of == code)[None, :]
            out[f"{group}_recall"] = (recall * chosen).sum(1) / chosen.sum(1)  # nan when the group is absent
    return out


def batch_metrics(gold: np.ndarray, preds: np.ndarray, ranks: np.ndarray, weights: np.ndarray, n_classes: int,
                  group_of: np.ndarray) -> dict[str, np.ndarray]:
    """Metrics for R variants at once, averaged over seeds: ``preds``/``ranks`` are seeds x R x instances
    (or broadcastable to it), ``weights`` R x instances (bootstrap multiplicities, or ones)."""
    n_variants = weights.shape[0]
    offsets = np.arange(n_variants)[:, None] * n_classes ** 2
    per_seed = []
    for pred, rank in zip(preds, ranks):
        cells = (gold[None, :] * n_classes + np.broadcast_to(pred, weights.shape) + offsets).ravel()
        conf = np.bincount(cells, weights=weights.ravel(), minlength=n_variants * n_classes ** 2)
        reciprocal = (weights / np.broadcast_to(rank, weights.shape)).sum(1)
        per_seed.append(metrics_from_confusion(conf.reshape(n_variants, n_classes, n_classes), reciprocal, group_of))
    return {k: np.mean([m[k] for m in per_seed], axis=0) for k in HEADLINE}


@dataclass
class Predictions:
    """One strategy's pooled test predictions as arrays: seeds x instances (instances in a fixed order)."""

    gold: np.ndarray
    pred: np.ndarray
    rank: np.ndarray


def as_arrays(records: list[dict], space: LabelSpace, order: list[str], seeds: list[int]) -> Predictions:
    by_seed: dict[int, dict[str, dict]] = {s: {} for s in seeds}
    for record in records:
        for p in record["predictions"]:
            by_seed[record["seed"]][p["id"]] = p
    first = by_seed[seeds[0]]
    gold = np.array([space.index(first[i]["scenario"], first[i]["gold"]) for i in order])
    pred = np.array([[space.index(by_seed[s][i]["scenario"], by_seed[s][i]["prediction"][0]) for i in order]
                     for s in seeds])
    rank = np.array([[by_seed[s][i]["prediction"].index(by_seed[s][i]["gold"]) + 1 for i in order] for s in seeds])
    return Predictions(gold, pred, rank)


def _number(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _interval(values: np.ndarray, confidence: float) -> list[float] | None:
    kept = values[~np.isnan(values)]
    if not len(kept):
        return None
    alpha = (1 - confidence) / 2
    return [float(np.quantile(kept, alpha)), float(np.quantile(kept, 1 - alpha))]


def scope_statistics(arrays: dict[str, Predictions], units: np.ndarray, n_classes: int, group_of: np.ndarray,
                     settings: EvalSettings) -> dict[str, dict]:
    """Point estimates, unit-bootstrap intervals, and paired tests against ``none`` for one scope."""
    rng = np.random.default_rng(settings.stats_seed)
    unit_names, unit_index = np.unique(units, return_inverse=True)
    n_units, n = len(unit_names), len(units)
    # One set of unit resamples (and of unit swaps) shared by all strategies, so differences are paired.
    draws = rng.integers(0, n_units, (settings.bootstrap, n_units))
    unit_counts = np.stack([np.bincount(d, minlength=n_units) for d in draws]) if settings.bootstrap else \
        np.zeros((0, n_units))
    resample_weights = unit_counts[:, unit_index].astype(float)
    swaps = rng.integers(0, 2, (settings.permutations, n_units)).astype(bool)[:, unit_index]
    ones = np.ones((1, n))

    def metrics(p: Predictions, weights: np.ndarray) -> dict[str, np.ndarray]:
        return batch_metrics(p.gold, p.pred[:, None, :], p.rank[:, None, :], weights, n_classes, group_of)

    reference = arrays["none"]
    ref_estimate, ref_boot = metrics(reference, ones), metrics(reference, resample_weights)
    out = {}
    for name, p in arrays.items():
        estimate, boot = metrics(p, ones), metrics(p, resample_weights)
        result: dict[str, Any] = {"estimate": {k: _number(estimate[k][0]) for k in HEADLINE},
                                  "ci": {k: _interval(boot[k], settings.confidence) for k in HEADLINE}}
        if name != "none":
            swap = swaps[None, :, :]
            ones_r = np.ones((settings.permutations, n))
            a = batch_metrics(p.gold, np.where(swap, reference.pred[:, None], p.pred[:, None]),
                              np.where(swap, reference.rank[:, None], p.rank[:, None]), ones_r, n_classes, group_of)
            b = batch_metrics(p.gold, np.where(swap, p.pred[:, None], reference.pred[:, None]),
                              np.where(swap, p.rank[:, None], reference.rank[:, None]), ones_r, n_classes, group_of)
            result["vs_none"] = {}
            for k in HEADLINE:
                observed = estimate[k][0] - ref_estimate[k][0]
                extreme = int((np.abs(a[k] - b[k]) >= abs(observed) - 1e-12).sum())
                result["vs_none"][k] = {
                    "difference": _number(observed), "ci": _interval(boot[k] - ref_boot[k], settings.confidence),
                    "p_value": None if np.isnan(observed) else (extreme + 1) / (settings.permutations + 1)}
        out[name] = result
    return out


def per_class(p: Predictions, space: LabelSpace) -> dict[str, dict[str, float]]:
    """Recall and F1 per class (mean over seeds), for classes with test instances."""
    from sklearn.metrics import precision_recall_fscore_support

    present = sorted(set(p.gold.tolist()))
    scores = [precision_recall_fscore_support(p.gold, p.pred[s], labels=present, zero_division=0)
              for s in range(len(p.pred))]
    return {space.names[c]: {"recall": float(np.mean([sc[1][i] for sc in scores])),
                             "f1": float(np.mean([sc[2][i] for sc in scores])), "support": int(scores[0][3][i])}
            for i, c in enumerate(present)}


def confusion(p: Predictions, n_classes: int) -> list[list[float]]:
    """Confusion counts (gold rows, predicted columns), averaged over seeds."""
    mats = [np.bincount(p.gold * n_classes + p.pred[s], minlength=n_classes ** 2) for s in range(len(p.pred))]
    return np.mean(mats, axis=0).reshape(n_classes, n_classes).tolist()


# -------------------------------------------------------------------------------------------- report

def _cell(estimate: float | None, ci: list[float] | None) -> str:
    if estimate is None:
        return "–"
    return f"{100 * estimate:.1f}" + (f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else "")


def markdown(results: dict) -> str:
    cols = ("accuracy", "macro_f1", "balanced_accuracy", "weighted_f1", "mrr", "head_recall", "medium_recall",
            "tail_recall")
    lines = [f"# Rebalancing strategies: {results['task']} ({results['backend']})", "",
             f"Folds {results['folds']}, seeds {results['seeds']}; percent, 95% bootstrap interval over units in "
             f"brackets. Δ = difference from `none` (paired permutation test over units, p in parentheses). "
             f"Groups by share of the scenario's training instances: head ≥ {results['groups_rule']['head']:.0%}, "
             f"tail < {results['groups_rule']['tail']:.0%}.", ""]
    for scope, stats in results["scopes"].items():
        lines += [f"## {scope} ({stats['n']} instances, {stats['units']} units)", "",
                  "| strategy | " + " | ".join(cols) + " | Δ macro-F1 (p) | Δ tail recall (p) |",
                  "|---" * (len(cols) + 3) + "|"]
        for name, s in stats["strategies"].items():
            cells = [_cell(s["estimate"][c], s["ci"][c]) for c in cols]
            deltas = []
            for metric in ("macro_f1", "tail_recall"):
                test = s.get("vs_none", {}).get(metric)
                deltas.append("–" if not test or test["difference"] is None
                              else f"{100 * test['difference']:+.1f} (p={test['p_value']:.3f})")
            lines.append(f"| {name} | " + " | ".join(cells + deltas) + " |")
        lines.append("")
    lines += ["## Per-class recall (percent; head/medium/tail group, test support)", ""]
    names = list(results["per_class_recall_table"])
    strategies = list(results["strategies"])
    lines += ["| class | group | n | " + " | ".join(strategies) + " |", "|---" * (len(strategies) + 3) + "|"]
    for name in names:
        row = results["per_class_recall_table"][name]
        lines.append(f"| {name} | {row['group']} | {row['support']} | "
                     + " | ".join(f"{100 * row[s]:.1f}" for s in strategies) + " |")
    return "\n".join(lines) + "\n"


def plots(results: dict, space: LabelSpace, confusions: dict[str, list], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    strategies = list(results["strategies"])
    table = results["per_class_recall_table"]
    for scenario in sorted({s for s, _ in space.classes}):
        names = sorted((n for n in table if n.startswith(scenario + ":")), key=lambda n: -table[n]["support"])
        if not names:
            continue
        fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(names) * max(1, len(strategies) / 4)), 4.5))
        width = 0.8 / len(strategies)
        for i, s in enumerate(strategies):
            ax.bar(np.arange(len(names)) + i * width, [table[n][s] for n in names], width, label=s)
        ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2)
        ax.set_xticklabels([f"{n.split(':', 1)[1]}\n({table[n]['group']}, n={table[n]['support']})" for n in names],
                           rotation=30, ha="right", fontsize=8)
        ax.set_ylabel("recall")
        ax.set_ylim(0, 1)
        ax.set_title(f"{results['task']} {scenario}: per-class recall by strategy (classes from head to tail)")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        path = out / f"per_class_recall_{scenario}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path.name)
        idx = [space.names.index(n) for n in names]
        cols = min(4, len(strategies))
        rows_n = -(-len(strategies) // cols)
        fig, axes = plt.subplots(rows_n, cols, figsize=(3.2 * cols, 3.2 * rows_n), squeeze=False)
        for ax, s in zip(axes.flat, strategies):
            mat = np.array(confusions[s])[np.ix_(idx, idx)]
            norm = mat / np.maximum(mat.sum(1, keepdims=True), 1e-9)
            ax.imshow(norm, vmin=0, vmax=1, cmap="Blues")
            ax.set_title(s, fontsize=9)
            ax.set_xticks(range(len(idx)))
            ax.set_yticks(range(len(idx)))
            short = [n.split(":", 1)[1][:12] for n in names]
            ax.set_xticklabels(short, rotation=90, fontsize=6)
            ax.set_yticklabels(short, fontsize=6)
        for ax in list(axes.flat)[len(strategies):]:
            ax.axis("off")
        fig.suptitle(f"{results['task']} {scenario}: confusion (rows gold, normalised; columns predicted)")
        fig.tight_layout()
        path = out / f"confusion_{scenario}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path.name)
    return written


# ---------------------------------------------------------------------------------------------- main

def summarise(config: CompareConfig, records: list[dict], space: LabelSpace) -> tuple[dict, dict]:
    from ..evaluation.metrics import aggregate

    seeds = list(config.seeds)
    by_strategy = {s: [r for r in records if r["strategy"] == s] for s in config.strategies}
    reference = [r for r in by_strategy["none"] if r["seed"] == seeds[0]]
    train_counts: dict[str, int] = {}
    for r in reference:  # training counts summed over the evaluated folds
        for name, n in r["train_counts"].items():
            train_counts[name] = train_counts.get(name, 0) + n
    groups = frequency_groups(train_counts, space, config.evaluation.head_share, config.evaluation.tail_share)
    group_of = np.array([GROUPS.index(groups[n]) for n in space.names])
    test_rows = [p for r in reference for p in r["predictions"]]
    order = [p["id"] for p in test_rows]
    arrays = {s: as_arrays(by_strategy[s], space, order, seeds) for s in config.strategies}
    scenario = np.array([p["scenario"] for p in test_rows])
    units = np.array([p["unit"] for p in test_rows])
    label_spaces = {sc: [label for s, label in space.classes if s == sc] for sc in ("couple", "family")}
    scopes = {}
    for scope in ("couple", "family", "both"):
        keep = np.ones(len(order), dtype=bool) if scope == "both" else scenario == scope
        if not keep.any():
            continue
        sub = {s: Predictions(p.gold[keep], p.pred[:, keep], p.rank[:, keep]) for s, p in arrays.items()}
        scopes[scope] = {"n": int(keep.sum()), "units": int(len(set(units[keep]))),
                         "strategies": scope_statistics(sub, units[keep], len(space), group_of, config.evaluation)}
    strategies, confusions = {}, {}
    for s, p in arrays.items():
        records_s = by_strategy[s]
        strategies[s] = {
            "summary": balance.STRATEGIES[s].summary, "per_class": per_class(p, space),
            "paper_metrics_by_seed": {seed: aggregate(config.task, [x for r in records_s if r["seed"] == seed
                                                                   for x in r["predictions"]], label_spaces)
                                      for seed in seeds},
            "taus": [r["tau"] for r in records_s if r["tau"] is not None],
            "train_seconds": sum(r["seconds"] for r in records_s),
            "runs": [f"runs/{s}/fold{r['fold']}_seed{r['seed']}.json" for r in records_s]}
        confusions[s] = confusion(p, len(space))
    table = {}
    for name in strategies["none"]["per_class"]:
        table[name] = {"group": groups[name], "support": strategies["none"]["per_class"][name]["support"],
                       **{s: strategies[s]["per_class"][name]["recall"] for s in strategies}}
    results = {"task": config.task, "backend": config.backend, "folds": sorted({r["fold"] for r in reference}),
               "seeds": seeds, "labels": space.names, "groups": groups,
               "groups_rule": {"head": config.evaluation.head_share, "tail": config.evaluation.tail_share},
               "training_counts_over_folds": train_counts, "scopes": scopes, "strategies": strategies,
               "per_class_recall_table": table, "confusion_labels": space.names,
               "confusion": confusions}
    return results, confusions


def compare(config: CompareConfig) -> dict:
    from ..provenance import config_hash, git_commit, versions, write_json_atomic

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    settings = run_settings(config)
    run_hash = config_hash(settings)
    stamp = out / "compare_config.json"
    if stamp.exists():
        previous = json.loads(stamp.read_text())
        if previous["run_hash"] != run_hash:
            changed = sorted(k for k in settings if previous["settings"].get(k) != json.loads(
                json.dumps(settings[k], default=str)))
            raise ValueError(f"{out} holds a comparison made with other settings (changed: {changed}); "
                             f"use another output_dir or remove that folder")
    else:
        write_json_atomic(stamp, {"run_hash": run_hash, "settings": settings})
    rows, manifest, data_dir, meta = prepare_data(config, out)
    space = LabelSpace.from_rows(rows)
    records = run_all(config, out, rows, manifest, space, run_hash)
    results, confusions = summarise(config, records, space)
    results["provenance"] = {
        "config": asdict(config), "run_hash": run_hash, "versions": versions(), "git_commit": git_commit(),
        "manifest_hash": manifest.hash, "manifest_notes": manifest.notes, "data_dir": str(data_dir),
        "source": meta.get("source"), "source_fingerprint": meta.get("source_fingerprint"),
        "stats": {"interval": "percentile bootstrap over units", "test": "paired permutation test over units "
                  "(swap the two strategies' predictions unit by unit), two-sided, p=(extreme+1)/(R+1)"}}
    if config.plots:
        results["plots"] = plots(results, space, confusions, out)
    write_json_atomic(out / "results.json", results)
    (out / "results.md").write_text(markdown(results), encoding="utf-8")
    return results


USAGE = """usage: rescue-train compare recipe=NAME|PATH.yaml [key=value ...] [--cfg]

  recipe=rpp_cls|ssp_cls|stp_cls|itp_cls   a shipped recipe (or a path to your own YAML)
  backend=sklearn|torch                     TF-IDF + logistic regression, or a transformer classifier
  strategies=[none,inverse_freq,...]|all    rebalancing strategies (`none` is always added)
  seeds=[0,1]  test_folds=[0,1]             training seeds; test folds (default: all data.folds)
  output_dir=runs/compare/x                 results.json, results.md, PNG plots, runs/ (resumable)
  torch.model=tiny-bert|tiny|PATH|HUB_ID torch.steps=200 torch.lora=true balance.beta=0.999 ...
strategies: """ + ", ".join(balance.STRATEGIES)


def main(argv: list[str]) -> int:
    from ..settings import describe, plain_warnings, to_yaml

    plain_warnings()
    if not argv or any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE)
        print("\nkeys (key  type = default  meaning):\n" + "\n".join(describe(CompareConfig)))
        return 0
    config = load_config([a for a in argv if a != "--cfg"])
    if "--cfg" in argv:
        print(to_yaml(config))
        return 0
    results = compare(config)
    out = Path(config.output_dir)
    print((out / "results.md").read_text())
    print(f"wrote {out}/results.json, results.md" + "".join(f", {p}" for p in results.get("plots", [])))
    return 0
