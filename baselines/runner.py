"""Run the baselines over grouped folds and score them with the evaluator's metric code.

``kfold``: for each test fold of the grouped manifest (``rescue_train.data.splits``), fit on the training
and validation units and predict the test fold. ``leave_one_unit_out``: leave one unit out (fit on every other unit,
predict the held-out one), so every instance is predicted, as in the paper's whole-benchmark evaluation.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, List, Optional

from threadpoolctl import threadpool_limits

from rescue_train.tasks import DataConfig
from rescue_train.data.load import load_benchmark
from rescue_train.data.splits import LeakageError, SplitManifest, make_manifest
from rescue_train.provenance import config_hash, git_commit, versions
from rescue_train.io import read_records
from rescue_train.scoring.metrics import RECORD_FIELDS, SCOPES, aggregate, table5_row, task_labels
from rescue_train.settings import meaning
from rescue_train.tasks import TASKS, build

from .registry import BASELINES

SPLITS = ("kfold", "leave_one_unit_out")
PREDICTION_FIELDS = {"id": str, **RECORD_FIELDS}  # records are matched to instances by id


@dataclass
class BaselineData(DataConfig):
    split: str = field(default="kfold", metadata=meaning(
        "kfold: fit on the training folds, predict each test fold | leave_one_unit_out: fit on every other unit, "
        "predict the held-out one (every instance predicted, as the paper's whole-benchmark evaluation)"))
    test_fold: Optional[int] = field(default=None, metadata=meaning(
        "kfold: score only this test fold (beside a model trained on that split); null: every fold", low=0))


@dataclass
class RunConfig:
    data: BaselineData = field(default_factory=BaselineData)
    tasks: List[str] = field(default_factory=lambda: list(TASKS), metadata=meaning("tasks: " + ", ".join(TASKS)))
    baselines: List[str] = field(default_factory=lambda: list(BASELINES), metadata=meaning(
        "baselines: " + ", ".join(BASELINES)))
    bertscore: Optional[str] = field(default=None, metadata=meaning(
        "a local model folder for BERTScore on ER/VP/RSG (left out when not given)"))
    bertscore_layers: Optional[int] = field(default=None, metadata=meaning(
        "the layer bert-score reads (needed with a folder)", low=1))
    judge_model: Optional[str] = field(default=None, metadata=meaning(
        "judge the ER/VP/RSG predictions with this model of an OpenAI-compatible server (the evaluator's rubrics; "
        "the key comes from $OPENAI_API_KEY)"))
    judge_url: Optional[str] = field(default=None, metadata=meaning("the judge server's base URL"))
    predictions: List[str] = field(default_factory=list, metadata=meaning(
        "NAME=PATH: one model's prediction records (a .jsonl file or one results folder) as a row; the baselines "
        "are then scored on exactly its instances"))
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "write results.json and predictions/<baseline>.jsonl here"))
    json: bool = field(default=False, metadata=meaning("print the results JSON instead of the tables"))

    def __post_init__(self):
        if self.data.split not in SPLITS:
            raise ValueError(f"data.split: the baselines take {' or '.join(SPLITS)}, got {self.data.split!r}")
        unknown = sorted(set(self.tasks) - set(TASKS)) + sorted(set(self.baselines) - set(BASELINES))
        if unknown:
            raise ValueError(f"unknown task or baseline: {', '.join(unknown)} (tasks: {', '.join(TASKS)}; "
                             f"baselines: {', '.join(BASELINES)})")
        if self.data.test_fold is not None and self.data.split != "kfold":
            raise ValueError("data.test_fold needs data.split=kfold")
        if self.bertscore and not self.bertscore_layers:
            raise ValueError("bertscore with a model folder needs bertscore_layers (bert-score cannot look a "
                             "local path up in its model table)")


@dataclass(frozen=True)
class Fold:
    name: str
    train_units: frozenset[str]
    test_units: frozenset[str]


def plan_folds(manifest: SplitManifest, split: str, test_fold: int | None = None) -> list[Fold]:
    units = frozenset(manifest.samples.values())
    if split == "leave_one_unit_out":
        folds = [Fold(f"unit:{u}", units - {u}, frozenset({u})) for u in sorted(units)]
    else:
        chosen = range(manifest.k) if test_fold is None else [test_fold]
        folds = []
        for f in chosen:
            roles = manifest.roles(f)
            folds.append(Fold(f"fold{f}", frozenset(u for u, r in roles.items() if r in ("train", "validation")),
                              frozenset(u for u, r in roles.items() if r == "test")))
    for fold in folds:
        assert_disjoint(fold)
    return folds


def assert_disjoint(fold: Fold) -> None:
    shared = sorted(fold.train_units & fold.test_units)
    if shared:
        raise LeakageError(f"{fold.name}: unit(s) {', '.join(shared)} are both training and test units")


def prediction_record(inst, prediction: Any, baseline: str, fold: str) -> dict[str, Any]:
    return {"id": inst.id, "task": inst.task, "scenario": inst.scenario, "unit": inst.unit,
            "sample_id": inst.sample_id, "gold": inst.gold, "prediction": prediction, "parse_status": "ok",
            "raw": None, "scores": {}, "baseline": baseline, "fold": fold}


def predict_all(samples, manifest: SplitManifest, config: RunConfig,
                only: set[str] | None = None) -> dict[str, list[dict]]:
    """baseline -> prediction records over every test fold of the run (``only``: just these instance ids, the
    instances of the models the baselines are compared with; each must be a test instance of the split)."""
    folds = plan_folds(manifest, config.data.split, config.data.test_fold)
    records: dict[str, list[dict]] = {name: [] for name in config.baselines}
    tested: set[str] = set()
    for task in config.tasks:
        instances = build(task, samples, config.data.build_options(), units=manifest.samples).instances
        for fold in folds:
            test = [i for i in instances if i.unit in fold.test_units and (only is None or i.id in only)]
            tested.update(i.id for i in test)
            if not test:
                continue
            train = [i for i in instances if i.unit in fold.train_units]
            if not train:
                raise ValueError(f"{fold.name}: no {task} training instances outside the test units, so no "
                                 f"baseline can be fitted (too few units for this split)")
            for name in config.baselines:
                if not BASELINES[name].covers(task):
                    continue
                baseline = BASELINES[name](task, seed=config.data.split_seed).fit(train)
                for inst, prediction in zip(test, baseline.predict(test)):
                    records[name].append(prediction_record(inst, prediction, name, fold.name))
    missing = sorted((only or set()) - tested)
    if missing:
        where = f"test fold {config.data.test_fold}" if config.data.test_fold is not None else "the split"
        raise ValueError(f"{len(missing)} of the {len(only)} instances of --predictions are not test instances of "
                         f"{where} for tasks {', '.join(config.tasks)} (e.g. {missing[0]}): give the baselines the "
                         "tasks, data settings and --test-fold the predictions were made with")
    return records


def add_bertscore(records: list[dict], model_path: str, num_layers: int) -> None:
    """BERTScore F1 of the records of tasks scored with it, in place, exactly as the evaluator computes it."""
    from rescue_train.scoring.bertscore import BertScore, texts

    chosen = [r for r in records if TASKS[r["task"]].bertscore]
    if not chosen:
        return
    pairs = [texts(r["task"], r["gold"], r["prediction"]) for r in chosen]
    f1 = BertScore(model_path, num_layers=num_layers, device="cpu").f1([c for c, _ in pairs], [g for _, g in pairs])
    for record, value in zip(chosen, f1):
        record.setdefault("scores", {})["bertscore_f1"] = value


def add_judge(records: list[dict], samples, config: RunConfig) -> None:
    """The evaluator's judge scores of the records of judged tasks, in place (the same rubrics and prompts)."""
    from rescue_train.scoring.judge import Judge, JudgeConfig, make_judge_backend

    chosen = [r for r in records if TASKS[r["task"]].judged]
    if not chosen:
        return
    instances = {i.id: i for task in sorted({r["task"] for r in chosen})
                 for i in build(task, samples, config.data.build_options()).instances}
    settings = JudgeConfig(backend="openai", model=config.judge_model, base_url=config.judge_url)
    judge = Judge(make_judge_backend(settings), model=config.judge_model, max_new_tokens=settings.max_new_tokens)
    for record, line in zip(chosen, judge.judge(chosen, instances)):
        record.setdefault("scores", {}).update({k: v for k, v in line.items() if k != "id"})


def score(records: Iterable[dict]) -> dict[str, Any]:
    """Aggregates per task (the evaluator's metrics) and the Table 5-style row per scope."""
    by_task: dict[str, list[dict]] = {}
    for record in records:
        by_task.setdefault(record["task"], []).append(record)
    aggregates = {task: aggregate(task, chosen, task_labels(task)) for task, chosen in by_task.items()}
    rows = {}
    for scope in SCOPES:
        if any(scope in agg for agg in aggregates.values()):
            row = table5_row(aggregates, scope)
            row["er_s_int"] = aggregates.get("er", {}).get(scope, {}).get("s_int")
            rows[scope] = row
    return {"aggregates": aggregates, "table": rows}


def run(config: RunConfig, only: set[str] | None = None) -> tuple[dict[str, Any], dict[str, list[dict]]]:
    """(results with provenance, baseline -> prediction records); ``only``: score the baselines on just these
    instance ids (those of the models they are compared with)."""
    benchmark = load_benchmark(config.data.source)
    scheme = "none" if config.data.split == "leave_one_unit_out" else "kfold"
    manifest = make_manifest(benchmark.samples, scheme, k=config.data.folds, seed=config.data.split_seed)
    # The fits are small: one BLAS thread is faster, and multi-threaded OpenBLAS spins badly on a busy machine.
    with threadpool_limits(limits=1):
        records = predict_all(benchmark.samples, manifest, config, only)
    if config.bertscore:
        for chosen in records.values():
            add_bertscore(chosen, config.bertscore, config.bertscore_layers)
    if config.judge_model:
        for chosen in records.values():
            add_judge(chosen, benchmark.samples, config)
    resolved = asdict(config)
    results = {
        "config": resolved,
        "provenance": {"config_hash": config_hash(resolved), "data_fingerprint": benchmark.fingerprint,
                       "split_manifest_hash": manifest.hash, "seed": config.data.split_seed, "git_commit": git_commit(),
                       "versions": versions(), "notes": manifest.notes + benchmark.notes},
        "folds": [{"name": f.name, "train_units": sorted(f.train_units), "test_units": sorted(f.test_units)}
                  for f in plan_folds(manifest, config.data.split, config.data.test_fold)],
        "baselines": {name: score(chosen) for name, chosen in records.items() if chosen},
        "instances": "the instances of --predictions" if only is not None else "every test instance of the split",
    }
    return results, records


def load_records(path: str | Path) -> list[dict]:
    """Prediction records of one model: a .jsonl file, or the ``predictions.jsonl`` of one results folder (an
    evaluation run or a kept classifier; the folder itself or the one folder below it holding one), with the
    ``{id, score: value}`` lines of a ``scores.jsonl`` beside it merged into each record's ``scores``. A folder
    holding several models' results (an evaluation with include_base, several adapters) is refused: one row
    is one model."""
    path = Path(path)
    if path.is_file():
        return read_records(path, PREDICTION_FIELDS, "a prediction record")
    files = [path / "predictions.jsonl"] if (path / "predictions.jsonl").is_file() else \
        sorted(path.rglob("predictions.jsonl")) if path.is_dir() else []
    if not files:
        raise FileNotFoundError(f"{path}: expected a .jsonl file of prediction records or a results folder holding "
                                f"predictions.jsonl")
    if len(files) > 1:
        shown = ", ".join(str(f.parent.relative_to(path)) for f in files[:4]) + (", ..." if len(files) > 4 else "")
        raise ValueError(f"{path} holds the results of {len(files)} models ({shown}): give one per name, e.g. "
                         f"--predictions NAME={files[0].parent}")
    chosen = read_records(files[0], PREDICTION_FIELDS, "a prediction record")
    scores_file = files[0].with_name("scores.jsonl")
    if scores_file.is_file():
        by_id = {r["id"]: r for r in chosen}
        for line in read_records(scores_file, {"id": str}, "a score line"):
            if line["id"] in by_id:
                by_id[line["id"]].setdefault("scores", {}).update({k: v for k, v in line.items() if k != "id"})
    return chosen
