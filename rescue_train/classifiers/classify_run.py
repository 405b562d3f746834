"""``rescue-train train recipe=rpp_cls strategy=NAME ...``: train ONE class-balanced classifier and keep it.

``rescue-train compare`` trains under many strategies and keeps only predictions; this trains one
(strategy, test fold, seed) with the same code (``compare.run_one``) and leaves a run folder:

* ``model.joblib`` (sklearn: ``{"pipeline", "labels", "logit_offset"}``) or ``model/`` (torch:
  ``save_pretrained`` of the model or LoRA adapter, the tokenizer, and ``classifier.json`` with the labels,
  the logit offset and the input length; ``classifier.encode_inputs`` makes a new row's input). Scores for new text: the model's logits placed in ``labels`` (sklearn:
  ``logreg.classes_`` index ``labels``), plus ``logit_offset`` (the strategy's post-fit shift and the
  post-hoc tau's adjustment), with every label outside the instance's candidates masked;
* ``config.yaml`` (resolved), ``provenance.json`` (versions, git commit, manifest hash, data fingerprints,
  seed, strategy, learner, fold units, tau);
* ``predictions.jsonl``: the test fold's predictions in the evaluator's prediction-record format (ranked
  candidates), and ``metrics.json``: ``rescue_train.scoring.metrics.aggregate`` of them.

Training uses the train folds of the grouped k-fold manifest; the validation fold (the next one) only
chooses post-hoc tau; the test fold is only predicted. ``check_no_leak`` verifies that on the rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from .. import rebalance
from ..settings import meaning
from ..tasks import DataConfig, get_task
from .classifier import BalanceSettings, LabelSpace, Split, TorchSettings, fold_splits, load_cls_rows
from .sklearn_path import SklearnSettings

# Recipe keys that only `compare` reads (a recipe serves both commands; its output_dir is the comparison's).
COMPARE_ONLY = ("strategies", "seeds", "test_folds", "output_dir", "plots", "evaluation")
# The metrics printed per scope, by the task's aggregation (``Task.metric``).
SUMMARY = {"binary": ("precision", "recall", "f1", "accuracy")}
SUMMARY_DEFAULT = ("accuracy", "macro_f1", "balanced_accuracy", "mrr")


@dataclass
class DataSettings(DataConfig):
    converted: Optional[str] = field(default=None, metadata=meaning(
        "an existing `rescue-train convert` folder (else converted into OUT/data)"))


@dataclass
class ClassifyConfig:
    kind: str = field(default="classifier", metadata=meaning("the recipe's kind: classifier (this config) or lora"))
    recipe: str = field(default="", metadata=meaning("a shipped recipe name or a YAML path (recipe=...)"))
    task: str = field(default="rpp", metadata=meaning("itp | rpp | stp | ssp"))
    learner: str = field(default="sklearn", metadata=meaning("sklearn | torch"))
    strategy: str = field(default="none", metadata=meaning(
        "one of rescue_train.rebalance.STRATEGIES that the learner supports"))
    seed: int = field(default=0, metadata=meaning("training seed (the split seed is data.split_seed)", low=0))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "default runs/<recipe>/<learner>-<strategy>/fold<test_fold>"))
    data: DataSettings = field(default_factory=DataSettings)
    sklearn: SklearnSettings = field(default_factory=SklearnSettings)
    torch: TorchSettings = field(default_factory=TorchSettings)
    balance: BalanceSettings = field(default_factory=BalanceSettings)


def check_task(task: str) -> None:
    from ..tasks import CLOSED_SET_TASKS

    if task not in CLOSED_SET_TASKS:
        raise ValueError(f"task {task!r} is not a closed-set task ({', '.join(CLOSED_SET_TASKS)})")


def read_config(schema: type, recipe: str | None, overrides: Sequence[str], what: str,
                ignore_in_recipe: Sequence[str] = ()):
    """Defaults <- the classifier recipe (``recipe``: a shipped name or a YAML path) <- key=value overrides, as an
    instance of ``schema``, with the task and learner checked. Shared by ``compare`` and the classifier ``train``;
    ``ignore_in_recipe`` drops recipe keys that the schema does not have."""
    from ..settings import compose, read_recipe, recipe_kind

    base: dict[str, Any] = {}
    if recipe:
        path, tree = read_recipe(recipe)
        if recipe_kind(tree) != "classifier":
            raise ValueError(f"recipe {recipe} is a {recipe_kind(tree)} recipe, not a classifier recipe")
        base = {**{k: v for k, v in tree.items() if k not in ignore_in_recipe}, "recipe": path.stem}
    config = compose(schema, overrides, what, base=base, groups={"data": "configs/data"},
                     shorthand={"data": "data.source"})
    check_task(config.task)
    if config.data.split != "kfold":
        raise ValueError(f"data.split={config.data.split}: classifiers train on grouped k-fold splits (data.split=kfold; "
                         "none keeps every sample for testing, leave_one_unit_out is the baselines' scheme)")
    if config.learner not in ("sklearn", "torch"):
        raise ValueError(f"learner must be sklearn or torch, got {config.learner!r}")
    return config


def prepare_data(config, out: Path):
    """The converted classification rows of ``config.task`` (converted into ``out/data`` unless
    ``config.data.converted`` names a folder), the split manifest, the data folder and convert's metadata."""
    from ..convert import ConvertConfig, convert
    from ..data.splits import SplitManifest
    from ..io import read_json

    data_dir = Path(config.data.converted) if config.data.converted else out / "data"
    if not config.data.converted and not (data_dir / config.task / "cls").exists():
        convert(ConvertConfig(data=DataConfig.own(config.data), output_dir=str(data_dir), tasks=[config.task]))
    manifest = SplitManifest.load(data_dir / "split_manifest.json")
    if manifest.scheme != "kfold":
        raise ValueError(f"{data_dir}: classifiers need a k-fold split manifest, found scheme {manifest.scheme!r}")
    meta_path = data_dir / "convert_meta.json"
    meta = read_json(meta_path, {}, "a conversion's metadata") if meta_path.exists() else {}
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


def run_classifier(config, splits: dict, space: LabelSpace, strategy_name: str, fold: int, seed: int,
                   work_dir: Path, cache: dict, keep_model: bool = False) -> dict:
    """Train and predict one (strategy, fold, seed) with the ``config.learner`` classifier (``config``: a
    classifier run's or a comparison's settings); returns the JSON-ready run record. With ``keep_model`` the
    record also holds the fitted model under "fitted" (not JSON; for a caller that saves it)."""
    strategy = rebalance.STRATEGIES[strategy_name]
    started = time.time()
    if config.learner == "sklearn":
        from ..classifiers.sklearn_path import fit_predict_sklearn

        out = fit_predict_sklearn(splits, space, strategy, config.sklearn, config.balance, seed, cache, keep_model)
    else:
        from ..classifiers.classifier import fit_predict_torch

        out = fit_predict_torch(splits, space, strategy, config.torch, config.balance, seed, work_dir, keep_model)
    test_logits, val_logits = out.pop("test"), out.pop("validation")
    fitted = out.pop("fitted", None)
    counts = splits["train"].counts(len(space))
    record: dict[str, Any] = {"strategy": strategy_name, "fold": fold, "seed": seed, "tau": None}
    if strategy.posthoc != rebalance.NONE:
        offset, adjustment = rebalance.POSTHOC[strategy.posthoc](val_logits, splits["validation"].y, counts,
                                                                 config.balance)
        test_logits = test_logits + offset
        record.update(adjustment)
        if fitted is not None:
            fitted["posthoc_offset"] = offset
    predictions = []
    for row, scores in zip(splits["test"].rows, test_logits):
        ranking, by_label = _ranked(row, scores, space)
        predictions.append({"id": row["id"], "task": row["task"], "scenario": row["scenario"], "unit": row["unit"],
                            "sample_id": row["sample_id"], "gold": row["label"], "prediction": ranking,
                            "parse_status": "ok", "raw": None, "label_scores": by_label})
    record.update(seconds=round(time.time() - started, 3), train_counts=dict(zip(space.names, counts.tolist())),
                  sizes={role: len(s) for role, s in splits.items()}, learner_info=out, predictions=predictions)
    if keep_model:
        record["fitted"] = fitted
    return record


def load_config(recipe: str | None, overrides: Sequence[str]) -> ClassifyConfig:
    config: ClassifyConfig = read_config(ClassifyConfig, recipe, overrides, "train", ignore_in_recipe=COMPARE_ONLY)
    rebalance.check_strategies([config.strategy], config.learner)
    config.output_dir = config.output_dir or (f"runs/{config.recipe or config.task}/{config.learner}-"
                                              f"{config.strategy}/fold{config.data.test_fold}")
    return config


def check_no_leak(splits: dict[str, Split], manifest, test_fold: int) -> None:
    """Fail unless every fitted row (train; validation, which picks tau) lies, by the manifest's own
    sample -> unit map, outside the test fold, and every test row inside it. The rows carry the unit they
    were converted with; this catches a converted folder (``data.converted``) at odds with its manifest."""
    from ..data.splits import LeakageError

    for role, split in splits.items():
        for row in split.rows:
            unit = manifest.samples.get(row["sample_id"])
            fold = manifest.assignment.get(unit)
            if unit != row["unit"] or (fold == test_fold) != (role == "test"):
                raise LeakageError(f"instance {row['id']} is in {role} with unit {row['unit']!r}, but split manifest "
                                   f"{manifest.hash} puts sample {row['sample_id']!r} in unit {unit!r}, fold {fold} "
                                   f"(test fold {test_fold})")


def data_fingerprint(splits: dict[str, Split]) -> str:
    """Hash of exactly what the model is fitted and tuned on (role, id, text, label, in order)."""
    digest = hashlib.sha256()
    for role in ("train", "validation"):
        for row in splits[role].rows:
            digest.update(json.dumps([role, row["id"], row["text"], row["label"]], ensure_ascii=False).encode())
    return digest.hexdigest()[:16]


def _check_folder(run_dir: Path, resolved: str) -> None:
    """A run folder holds one config: retraining with the same settings overwrites it, others are refused
    (its converted data and model would not match)."""
    from omegaconf import OmegaConf

    old_path = run_dir / "config.yaml"
    if old_path.exists() and old_path.read_text() != resolved:
        old = OmegaConf.to_container(OmegaConf.load(old_path))
        new = OmegaConf.to_container(OmegaConf.create(resolved))
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        raise ValueError(f"{run_dir} holds a run made with other settings (changed: {changed}); use another "
                         f"output_dir")


def _relative(path: Path, run_dir: Path) -> str:
    """``path`` relative to the run folder when inside it (the folder can move), else absolute."""
    try:
        return str(path.resolve().relative_to(run_dir.resolve()))
    except ValueError:
        return str(path.resolve())


def _save_model(config: ClassifyConfig, run_dir: Path, fitted: dict, labels: list[str], offset,
                learner_info: dict) -> str:
    if config.learner == "sklearn":
        import joblib

        joblib.dump({"pipeline": fitted["pipeline"], "labels": labels, "logit_offset": offset.tolist()},
                    run_dir / "model.joblib")
        return "model.joblib"
    folder = run_dir / "model"
    fitted["model"].save_pretrained(folder)  # a PeftModel saves its adapter and the trainable head
    fitted["tokenizer"].save_pretrained(folder)
    (folder / "classifier.json").write_text(json.dumps({
        "labels": labels, "logit_offset": offset.tolist(), "base_model": config.torch.model,
        "lora": config.torch.lora, "max_length": learner_info["inputs"]["max_length"],
        "input": "classifiers.classifier.encode_inputs of the rows' query and conversation"}, indent=2))
    return "model"


def train(config: ClassifyConfig) -> tuple[Path, dict]:
    """Train, predict the test fold and write the run folder; returns it and the metrics."""
    from omegaconf import OmegaConf

    from ..data.splits import fold_notes
    from ..io import write_json_atomic
    from ..model_card import write_model_card
    from ..provenance import config_hash, git_commit, versions
    from ..scoring.metrics import aggregate, task_labels

    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # several accelerate processes would train copies
        raise ValueError("a classifier trains in one process; launch it with --num_processes 1")
    run_dir = Path(config.output_dir)
    resolved = OmegaConf.to_yaml(OmegaConf.structured(config))
    _check_folder(run_dir, resolved)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(resolved)
    rows, manifest, data_dir, meta = prepare_data(config, run_dir)
    space = LabelSpace.from_rows(rows)
    test_fold = config.data.test_fold
    splits = fold_data(rows, manifest, space, test_fold)
    check_no_leak(splits, manifest, test_fold)
    notes = fold_notes(manifest, test_fold, Counter(r["unit"] for r in rows))
    started = time.time()
    with tempfile.TemporaryDirectory() as work:  # trainer scratch space (nothing is checkpointed)
        record = run_classifier(config, splits, space, config.strategy, test_fold, config.seed, Path(work), {},
                                keep_model=True)
    fitted = record.pop("fitted")
    offset = fitted.get("logit_shift", np.zeros(len(space)))  # sklearn's logit_adjusted/balanced_softmax shift
    if "posthoc_offset" in fitted:
        offset = offset + fitted["posthoc_offset"]
    model_path = _save_model(config, run_dir, fitted, space.names, offset, record["learner_info"])
    predictions = record.pop("predictions")
    with open(run_dir / "predictions.jsonl", "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in predictions)
    metrics = aggregate(config.task, predictions, task_labels(config.task))
    write_json_atomic(run_dir / "metrics.json", metrics)
    write_json_atomic(run_dir / "provenance.json", {
        "kind": "classifier", "recipe": config.recipe, "task": config.task, "learner": config.learner,
        "strategy": config.strategy, "strategy_summary": rebalance.STRATEGIES[config.strategy].summary,
        "seed": config.seed, "test_fold": test_fold, "validation_fold": (test_fold + 1) % manifest.k,
        "model": model_path, "config_hash": config_hash(asdict(config)),
        "manifest_hash": manifest.hash, "split_manifest": _relative(data_dir / "split_manifest.json", run_dir),
        "manifest_notes": manifest.notes, "source": meta.get("source"),
        "source_fingerprint": meta.get("source_fingerprint"), "data_fingerprint": data_fingerprint(splits),
        "units": {role: sorted({r["unit"] for r in s.rows}) for role, s in splits.items()}, "fold_notes": notes,
        **{k: record[k] for k in ("sizes", "train_counts", "tau", "learner_info")},
        **({"tau_scores": record["tau_scores"]} if "tau_scores" in record else {}),
        "train_seconds": round(time.time() - started, 2), "git_commit": git_commit(), "versions": versions()})
    write_model_card(run_dir)
    return run_dir, metrics


def summary_lines(task: str, metrics: dict, predictions: list[dict]) -> list[str]:
    """The test fold's metrics per scope: the report's cells (value [low, high], its 95% interval, as
    report.md and eval's summary write them), then the classifier's other metrics in percent."""
    from ..scoring.cells import task_cells
    from ..scoring.metrics import table5_row

    results = {"aggregates": {task: metrics}, "records": predictions,
               "table5": {scope: table5_row({task: metrics}, scope) for scope in metrics}}
    keys = SUMMARY.get(get_task(task).metric, SUMMARY_DEFAULT)
    show = lambda v: "–" if v is None else f"{100 * v:.2f}%"  # noqa: E731
    return [f"{task} {scope}: n={m['n']} " + ", ".join(task_cells(results, task, scope)) + "; "
            + " ".join(f"{k}={show(m.get(k))}" for k in keys) for scope, m in metrics.items()]
