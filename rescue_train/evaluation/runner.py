"""Run an evaluation: instances -> predictions -> judge and BERTScore -> aggregates -> results.json.

A run folder holds:

* ``run.json`` – the run's identity: the hash of everything that decides the predictions (config, model,
  adapter weights, data fingerprint, split manifest) and the hash of the scoring settings (judge, BERTScore);
* ``predictions.jsonl`` – one prediction record per finished instance, appended and fsynced as it arrives
  (an API answer at once, a local batch when it is done);
* ``scores.jsonl`` – judge and BERTScore results per instance, appended chunk by chunk (the judge's verdicts
  are cached in ``judge_cache.jsonl`` as they arrive);
* ``results.json`` – the final document (written atomically).

A killed run resumes from the two jsonl files without recomputing finished instances; a torn last line
(the kill came mid-write) is dropped. A folder holding another run's predictions is refused
(``overwrite=true`` starts over); changed scoring settings discard the old scores only.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import warnings
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..console import chatter_to, shown, shown_err
from ..data import load_benchmark
from ..data.splits import SplitManifest, assign_units, check_leakage, make_manifest, spread_sample
from ..executor import executor_info
from ..inference import make_backend
from ..inference.factory import check_model
from ..io import append_jsonl, output_folder, own_folder, read_json, read_jsonl, write_json_atomic
from ..provenance import config_hash, git_commit, versions, weights_digest
from ..scoring.judge import judge_budget, judge_retries, make_judge_backend, needs_judging
from ..scoring.metric_uncertainty import result_uncertainty
from ..scoring.metrics import RECORD_FIELDS, aggregate, table5_row, task_labels
from ..settings import flatten
from ..tasks import TASKS, Instance, build
from .config import RUNTIME_KEYS, EvalConfig, budget_override, to_dict
from .models import ModelSpec, backend_spec, model_name, problems_before_work, resolve_model
from .trained import SPLIT_KEYS, TrainingRun
from .protocols import decoding, predict
from .usage import print_estimate, usage_totals

RESULTS_FORMAT = "rescue-train/eval-results/v1"
DEFAULT_CHUNK = {"hf": None, "vllm": 1024, "openai": 64}
# What the evaluator's records hold, read back: the metrics', and what the judge, the report and the audit read.
PREDICTION_FIELDS = {**RECORD_FIELDS, "id": str, "unit": str, "sample_id": str, "parse_status": str,
                     "scores": dict}
SCORE_FIELDS = {"id": str}
RUN_FILES = ("run.json",)  # what marks a run folder made before output folders carried their marker


class EmptyAnswers(ValueError):
    """Most of a run's server answers were empty: its scores would measure the server, not the model."""


@dataclass
class EvalData:
    instances: dict[str, list[Instance]]
    source: str
    fingerprint: str
    notes: list[str]
    split: dict[str, Any]
    config: dict[str, Any]  # the data configuration the instances were selected under


class Benchmark:
    """The benchmark and every instance of the requested tasks, loaded and built once per evaluation; each
    model evaluated takes its own test units from it (``select``)."""

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg
        self.bench = load_benchmark(cfg.data.source)
        units = assign_units(self.bench.samples)
        self.built = {task: build(task, self.bench.samples, cfg.data.build_options(), units).instances
                      for task in cfg.tasks}

    def manifest(self, data) -> SplitManifest:
        if data.split == "none":
            return make_manifest(self.bench.samples, "none")
        path = Path(data.manifest) if data.manifest else None
        if path is not None and path.exists():
            manifest = SplitManifest.load(path)
            check_leakage(self.bench.samples, manifest)
            return manifest
        manifest = make_manifest(self.bench.samples, data.split, data.folds, data.split_seed)
        if path is not None:
            manifest.save(path)
        return manifest

    def select(self, data, folds: Sequence[int] | None = None) -> EvalData:
        """The test instances under ``data``'s split: the whole benchmark (split none), the test split of a
        holdout, or the union of the test ``folds`` (default: ``data.test_fold``, else fold 0)."""
        manifest = self.manifest(data)
        keep = None
        if manifest.scheme == "kfold":
            folds = list(folds) if folds else [0 if data.test_fold is None else data.test_fold]
            keep = {unit for fold in folds for unit, role in manifest.roles(fold).items() if role == "test"}
        elif manifest.scheme != "none":
            folds, keep = None, {unit for unit, role in manifest.roles().items() if role == "test"}
        else:
            folds = None
        limit, sample = self.cfg.limit, self.cfg.sample
        instances = {task: [i for i in built if keep is None or i.unit in keep][:limit]
                     for task, built in self.built.items()}
        if sample:
            instances = {task: spread_sample(chosen, sample, self.cfg.seed) for task, chosen in instances.items()}
        split = {"scheme": manifest.scheme, "manifest_hash": manifest.hash, "seed": manifest.seed, "k": manifest.k,
                 "test_fold": folds[0] if folds and len(folds) == 1 else None, "test_folds": folds,
                 "manifest_notes": manifest.notes}
        return EvalData(instances, self.bench.source, self.bench.fingerprint, self.bench.notes, split,
                        dataclasses.asdict(data))


def load_instances(cfg: EvalConfig, spec: ModelSpec | None = None) -> EvalData:
    """The test instances of every requested task: the whole benchmark, or the test fold of a manifest (a
    trained model's own; with a base model beside adapters, the adapter's)."""
    chosen = variants(cfg, spec or resolve_model(cfg))[-1]
    return Benchmark(cfg).select(chosen.cfg.data, chosen.folds)


# ---------------------------------------------------------------- one run folder

@dataclass
class Variant:
    """One model to evaluate: the base (adapter None) or one loaded adapter, with the run that trained it and
    the settings it is evaluated under (its own test fold)."""

    name: str
    adapter: str | None
    output: Path
    provenance: dict[str, Any] = field(default_factory=dict)
    run: TrainingRun | None = None
    cfg: EvalConfig | None = None
    folds: list[int] | None = None  # the test folds asked (several for a base beside adapters of several folds)
    training_data: dict[str, Any] | None = None  # what of its own training data it is scored on (allowed)


def default_output(cfg: EvalConfig, spec: ModelSpec) -> Path:
    """runs/eval/<model>[+<adapter>...]/<protocol>: a second model or adapter does not land in the same folder."""
    return Path("runs/eval", "+".join([model_name(spec.model), *spec.adapters]), cfg.protocol)


def variants(cfg: EvalConfig, spec: ModelSpec) -> list[Variant]:
    out = Path(cfg.output_dir) if cfg.output_dir else default_output(cfg, spec)
    names = list(spec.adapters)
    chosen = ([None] if (cfg.include_base or not names) else []) + names
    found = [Variant(name or "base", name, out if len(chosen) == 1 else out / (name or "base"),
                     spec.provenance.get(name or "", {}) if name else getattr(spec.base_run, "provenance", {}),
                     spec.runs.get(name) if name else spec.base_run)
             for name in chosen]
    for variant in found:
        variant.cfg = own_split(cfg, variant.run)
    trained = [v for v in found if v.run is not None and v.cfg.data.split == "kfold"]
    for variant in found:
        if variant.run is None and variant.cfg.data.split == "kfold" and variant.cfg.data.test_fold is None:
            variant.folds = shared_folds(trained)  # beside trained models: the union of their test folds
            if variant.folds and len(trained) and variant.cfg.data.manifest is None:
                variant.cfg.data.manifest = trained[0].cfg.data.manifest
    return found


def own_split(cfg: EvalConfig, run: TrainingRun | None) -> EvalConfig:
    """``cfg`` with a trained model's own test fold and split manifest where the split is its run's and no
    test fold or manifest is given."""
    data = cfg.data
    if run is not None and data.split == run.data.split and all(
            getattr(data, k) == getattr(run.data, k) for k in SPLIT_KEYS):
        data = dataclasses.replace(data, test_fold=run.data.test_fold if data.test_fold is None else data.test_fold,
                                   manifest=data.manifest or run.data.manifest)
    return dataclasses.replace(cfg, data=dataclasses.replace(data))


def shared_folds(trained: Sequence[Variant]) -> list[int] | None:
    """The test folds of the trained variants, which must share one split manifest."""
    if not trained:
        return None
    hashes = {v.run.manifest.hash for v in trained}
    if len(hashes) > 1:
        raise ValueError("the adapters were trained on different split manifests "
                         f"({', '.join(sorted(hashes))}): evaluate them separately")
    return sorted({v.cfg.data.test_fold for v in trained if v.cfg.data.test_fold is not None})


def check_training_data(cfg: EvalConfig, variant: Variant, data: EvalData) -> dict[str, Any] | None:
    """Refuse to score a trained model on samples its run trained or validated on, unless
    ``allow_training_data``; returns what was included (None: nothing)."""
    if variant.run is None:
        return None
    asked = [inst for task in cfg.tasks for inst in data.instances[task]]
    seen = variant.run.seen(asked)
    if not seen:
        return None
    units = sorted({inst.unit for inst in seen})
    if not cfg.allow_training_data:
        raise ValueError(
            f"{variant.name} was trained on {variant.run.describe()}: {len(seen)} of the {len(asked)} instances asked "
            f"come from samples it trained or validated on (units {', '.join(units[:3])}"
            f"{', ...' if len(units) > 3 else ''}). Leave data.split and data.test_fold unset to evaluate it on its "
            "own test fold, or add allow_training_data=true to score them anyway (its results then say 'includes "
            "training data')")
    print(f"warning: {variant.name}: {len(seen)} of the {len(asked)} instances are from samples it trained or "
          f"validated on (allow_training_data=true): its results say 'includes training data'")
    return {"instances": len(seen), "of": len(asked), "units": units, "run": str(variant.run.folder)}


def prediction_identity(cfg: EvalConfig, spec: ModelSpec, variant: Variant, data: EvalData) -> dict[str, Any]:
    config = {k: v for k, v in to_dict(cfg).items() if k not in (*RUNTIME_KEYS, "limit", "judge", "bertscore")}
    adapter_path = spec.adapters.get(variant.adapter) if variant.adapter else None
    return {"config": config, "model": spec.model, "tokenizer": spec.tokenizer, "adapter": adapter_path,
            "adapter_weights": weights_digest(adapter_path) if adapter_path and Path(adapter_path).is_dir() else None,
            "data_fingerprint": data.fingerprint, "manifest_hash": data.split["manifest_hash"],
            "test_folds": data.split["test_folds"]}


def scoring_identity(cfg: EvalConfig) -> dict[str, Any]:
    # retries and on_failure decide neither a verdict nor which are kept: a changed one keeps the scores
    # (unreadable verdicts are asked again anyway; on_failure only changes the aggregates)
    judge = {k: v for k, v in to_dict(cfg)["judge"].items()
             if k not in ("batch_size", "cache", "retries", "on_failure", *RUNTIME_KEYS)}
    bert = {k: v for k, v in to_dict(cfg)["bertscore"].items() if k not in ("batch_size", "device")}
    return {"judge": judge, "bertscore": bert}


def differing_keys(old: dict, new: dict) -> list[str]:
    """The dotted keys whose values differ between two identities."""
    a, b = flatten(old), flatten(new)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


class RunFolder:
    def __init__(self, path: Path, prediction_hash: str, scoring_hash: str, overwrite: bool,
                 identity: dict | None = None):
        self.path = path
        self.predictions = path / "predictions.jsonl"
        self.scores = path / "scores.jsonl"
        path.mkdir(parents=True, exist_ok=True)
        run_file = path / "run.json"
        if run_file.exists():
            known = read_json(run_file, {"prediction_hash": str}, "an evaluation's run.json")
            if known.get("prediction_hash") != prediction_hash:
                if not overwrite:
                    differ = differing_keys(known.get("identity") or {}, identity or {}) if known.get("identity") \
                        else []
                    shown = "; ".join(f"{k}: {flatten(known['identity']).get(k)!r} there, "
                                      f"{flatten(identity or {}).get(k)!r} here" for k in differ[:3])
                    shown = shown or f"hash {known.get('prediction_hash')}, this one {prediction_hash}"
                    raise ValueError(f"{path} holds a run with another configuration ({shown}); pass overwrite=true "
                                     "to start over, or choose another output_dir=")
                for stale in (self.predictions, self.scores, path / "results.json"):
                    stale.unlink(missing_ok=True)
            elif known.get("scoring_hash") != scoring_hash and self.scores.exists():
                print(f"note: judge/BERTScore settings changed; the old scores in {self.scores} are discarded")
                self.scores.unlink()
        write_json_atomic(run_file, {"format": RESULTS_FORMAT, "prediction_hash": prediction_hash,
                                     "scoring_hash": scoring_hash, "identity": identity})

    def done_predictions(self) -> dict[str, dict]:
        return {r["id"]: r for r in read_jsonl(self.predictions, PREDICTION_FIELDS, "a prediction record")}

    def done_scores(self) -> dict[str, dict]:
        merged: dict[str, dict] = {}
        for line in read_jsonl(self.scores, SCORE_FIELDS, "a score line"):
            merged.setdefault(line["id"], {}).update({k: v for k, v in line.items() if k != "id"})
        return merged


def _chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="inst", disable=not enabled or total == 0, file=shown_err())


class LazyBackend:
    """The backend, started only when a prediction is actually missing (a resumed run that only needs
    judging or a report never starts an engine)."""

    def __init__(self, cfg: EvalConfig, spec: ModelSpec, backend=None):
        self.cfg, self.spec, self.backend, self.owned = cfg, spec, backend, backend is None

    def get(self):
        if self.backend is None:
            self.backend = make_backend(backend_spec(self.cfg, self.spec))
        return self.backend

    def describe(self, folder: Path) -> dict[str, Any]:
        """The backend's description, kept beside the predictions it made."""
        saved = folder / "backend.json"
        if self.backend is not None:
            write_json_atomic(saved, self.backend.describe())
        return read_json(saved, {"backend": str}, "a backend description") if saved.exists() \
            else {"backend": self.cfg.backend}

    def close(self) -> None:
        if self.owned and self.backend is not None:
            self.backend.close()


@dataclass
class Predicted:
    """One variant's finished predictions, waiting for the judge and BERTScore."""

    identity: dict
    folder: RunFolder
    records: dict[str, dict]  # by instance id
    backend_info: dict


def predict_variant(cfg: EvalConfig, spec: ModelSpec, variant: Variant, data: EvalData,
                    backend: LazyBackend) -> Predicted:
    identity = prediction_identity(cfg, spec, variant, data)
    folder = RunFolder(variant.output, config_hash(identity), config_hash(scoring_identity(cfg)), cfg.overwrite,
                       identity)
    merge_shards(folder, config_hash(identity))
    done = folder.done_predictions()
    todo = [inst for task in cfg.tasks for inst in data.instances[task] if inst.id not in done]
    chunk = cfg.chunk or DEFAULT_CHUNK[cfg.backend] or cfg.batch_size
    asked = [i for task in cfg.tasks for i in data.instances[task]]
    print_estimate(cfg, todo, asked, done, folder)
    if todo and len(todo) < len(asked):
        print(f"{variant.name}: reusing {len(asked) - len(todo)} finished predictions in {folder.path}; "
              f"{len(todo)} to predict", file=shown(), flush=True)
    if todo:
        backend.get()  # started before the progress bar, whose first estimate would count the engine's start
    with _progress(len(todo), f"{variant.name}: predict", cfg.progress) as bar:
        def keep(records: list[dict]) -> None:  # on disk as they arrive: a kill re-asks nothing that came back
            append_jsonl(folder.predictions, records)
            done.update((r["id"], r) for r in records)
            bar.update(len(records))

        for part in _chunks(todo, chunk):
            predict(backend.get(), part, protocol=cfg.protocol, mode=cfg.data.mode,
                    answer_format=cfg.data.answer_format, adapter=variant.adapter, max_tokens=budget_override(cfg),
                    constrained=cfg.constrained, rank_score=cfg.rank_score, on_records=keep)
    return Predicted(identity, folder, done, backend.describe(folder.path))


# ---------------------------------------------------------------- data-parallel engines (data_parallel=N)

SHARDS = ".shards-"  # RUN/.shards-<prediction hash>/shard<k>/: what engine k predicted, until it is merged
ENGINE = "import sys; from rescue_train.evaluation.runner import predict_shard; predict_shard(sys.argv[1])"


def merge_shards(folder: RunFolder, prediction_hash: str) -> None:
    """Append what the data-parallel engines of this run predicted (its hash's shard folders) to its predictions,
    once per instance, then remove the shard folders; those of another hash are stale and only removed."""
    import shutil

    for root in sorted(folder.path.glob(SHARDS + "*")):
        if root.name == SHARDS + prediction_hash:
            done = set(folder.done_predictions())
            new = []
            for record in (r for shard in sorted(root.glob("shard*")) for r in read_jsonl(shard / "predictions.jsonl")):
                if record["id"] not in done:
                    done.add(record["id"])
                    new.append(record)
            append_jsonl(folder.predictions, new)
            described = sorted(root.glob("shard*/backend.json"))
            if described:
                write_json_atomic(folder.path / "backend.json",
                                  {**read_json(described[0], {}, "an engine's backend description"),
                                   "data_parallel": len(described)})
        shutil.rmtree(root, ignore_errors=True)


def predict_sharded(cfg: EvalConfig, spec: ModelSpec, chosen: list[Variant], data: EvalData) -> None:
    """What every variant still lacks, predicted by ``cfg.data_parallel`` vLLM engine processes, each on its own
    GPU group of ``tensor_parallel_size`` GPUs (on CPU, its share of the cores) and each given a contiguous share
    of the instances (a dialogue's instances stay together for the prefix cache). Each engine writes through
    :func:`predict_variant` into shard folders that are merged into the variants' own: a kill loses nothing that
    finished, and a rerun, with any ``data_parallel``, resumes. A failed engine is reported with its log's tail,
    after the others finish."""
    import math
    import os
    import pickle
    import subprocess
    import sys
    import time
    from dataclasses import replace

    from ..executor import local_slots, visible_gpus

    instances = [inst for task in cfg.tasks for inst in data.instances[task]]
    work = []
    for variant in chosen:
        identity = prediction_identity(cfg, spec, variant, data)
        folder = RunFolder(variant.output, config_hash(identity), config_hash(scoring_identity(cfg)), cfg.overwrite,
                           identity)
        merge_shards(folder, config_hash(identity))
        done = folder.done_predictions()
        work.append((variant, folder, config_hash(identity), {i.id for i in instances if i.id not in done}))
    total = sum(len(todo) for *_, todo in work)
    if not total:
        return
    engines = min(cfg.data_parallel, len(instances))
    size = math.ceil(len(instances) / engines)
    slots = local_slots(engines, cfg.tensor_parallel_size if visible_gpus() else 0)
    logs = (chosen[0].output if len(chosen) == 1 else chosen[0].output.parent) / "data_parallel"
    logs.mkdir(parents=True, exist_ok=True)
    shard_cfg = replace(cfg, data_parallel=1, progress=False, overwrite=False)
    started, outputs = [], []
    for k, slot in enumerate(slots):
        part = {i.id for i in instances[k * size:(k + 1) * size]}
        jobs = []
        for variant, _, prediction_hash, todo in work:
            mine = part & todo
            if mine:
                shard = Variant(variant.name, variant.adapter, variant.output / f"{SHARDS}{prediction_hash}" /
                                f"shard{k}", variant.provenance)
                jobs.append((shard, replace(data, instances={t: [i for i in data.instances[t] if i.id in mine]
                                                             for t in cfg.tasks})))
                outputs.append(shard.output / "predictions.jsonl")
        if not jobs:
            continue
        request = logs / f"engine{k}.pickle"
        request.write_bytes(pickle.dumps((shard_cfg, spec, jobs)))
        with open(logs / f"engine{k}.log", "w", encoding="utf-8") as log:
            started.append((k, subprocess.Popen([sys.executable, "-c", ENGINE, str(request)], stdout=log,
                                                stderr=subprocess.STDOUT,
                                                env={**os.environ, **slot.env(cfg.tensor_parallel_size)})))
    try:
        with _progress(total, f"predict ({len(started)} engines)", cfg.progress) as bar:
            while True:
                running = any(process.poll() is None for _, process in started)
                count = sum(path.read_bytes().count(b"\n") for path in outputs if path.exists())
                bar.update(count - bar.n)
                if not running:
                    break
                time.sleep(1.0)
    except BaseException:  # stop the engines; what they finished is merged on the next run
        for _, process in started:
            process.terminate()
        raise
    for _, folder, prediction_hash, _ in work:
        merge_shards(folder, prediction_hash)
    failed = [(k, process.returncode) for k, process in started if process.returncode != 0]
    if failed:
        from ..executor import log_tail

        raise ValueError("; ".join(f"data-parallel engine {k} failed (exit status {status}); the end of "
                                   f"{logs / f'engine{k}.log'}:\n{log_tail(logs / f'engine{k}.log')}"
                                   for k, status in failed) + "\nFinished instances are kept: rerun to resume.")
    for k, _ in started:
        (logs / f"engine{k}.pickle").unlink(missing_ok=True)


def predict_shard(request: str) -> None:
    """One data-parallel engine, in the process :func:`predict_sharded` started: its share of every variant,
    predicted through :func:`predict_variant` into that variant's shard folder (the code of one engine)."""
    import pickle

    with open(request, "rb") as handle:
        cfg, spec, jobs = pickle.load(handle)
    lazy = LazyBackend(cfg, spec)
    try:
        for variant, data in jobs:
            predict_variant(cfg, spec, variant, data, lazy)
    finally:
        lazy.close()


def score_variant(cfg: EvalConfig, spec: ModelSpec, variant: Variant, data: EvalData, predicted: Predicted,
                  scorers: list) -> dict:
    folder = predicted.folder
    instances = {inst.id: inst for task in cfg.tasks for inst in data.instances[task]}
    records = [predicted.records[i] for i in instances]
    scores = folder.done_scores()
    for scorer in scorers:
        scorer.folder = folder.path
        todo_records = [r for r in records if scorer.applies(r["task"]) and scorer.pending(scores.get(r["id"], {}))]
        with _progress(len(todo_records), f"{variant.name}: {scorer.name}", cfg.progress) as bar:
            for part in _chunks(todo_records, scorer.chunk):
                lines = scorer.score(part, instances, records)
                append_jsonl(folder.scores, lines)
                for line in lines:
                    scores.setdefault(line["id"], {}).update({k: v for k, v in line.items() if k != "id"})
                bar.update(len(part))
    for record in records:
        record["scores"] = {**record.get("scores", {}), **scores.get(record["id"], {})}
    return write_results(cfg, spec, variant, data, predicted.backend_info, predicted.identity, folder, records)


class BertScoreStage:
    name, chunk, folder = "bertscore", 256, None

    @staticmethod
    def applies(task: str) -> bool:
        return TASKS[task].bertscore

    @staticmethod
    def pending(scores: dict) -> bool:
        return "bertscore_f1" not in scores

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg.bertscore
        self.metric = None

    def check(self, tasks: Sequence[str]) -> None:
        from ..scoring.bertscore import check_model

        if tasks:
            check_model(self.cfg.model, self.cfg.num_layers)

    def score(self, part: list[dict], instances: dict, records: list[dict]) -> list[dict]:
        from ..scoring.bertscore import BertScore, texts

        if self.metric is None:  # loaded on first use; idf weights come from all references of the run
            refs = [texts(r["task"], r["gold"], r["prediction"])[1] for r in records if self.applies(r["task"])]
            self.metric = BertScore(self.cfg.model, self.cfg.num_layers, self.cfg.idf, self.cfg.rescale,
                                    self.cfg.batch_size, self.cfg.device, idf_sentences=refs)
        # A failed answer scores 0 whatever part of it parsed (the one failure rule, metrics.py).
        pairs = [texts(r["task"], r["gold"], r["prediction"] if r["parse_status"] == "ok" else None) for r in part]
        values = self.metric.f1([c for c, _ in pairs], [ref for _, ref in pairs])
        return [{"id": r["id"], "bertscore_f1": v, "bertscore_model": self.metric.settings["model"]}
                for r, v in zip(part, values)]

    def close(self) -> None:
        self.metric = None


class JudgeStage:
    name, folder = "judge", None

    @staticmethod
    def applies(task: str) -> bool:
        return TASKS[task].judged

    @staticmethod
    def pending(scores: dict) -> bool:
        """Never judged, or a verdict that stayed unreadable: a rerun asks exactly those again (the cache
        serves the record's readable verdicts)."""
        return needs_judging(scores)

    def __init__(self, cfg: EvalConfig, backend=None):
        from ..scoring.judge import Judge

        self.cfg = cfg.judge
        self.chunk = 64
        self._backend = backend
        self._judge_cls = Judge
        self.judge = None

    def check(self, tasks: Sequence[str]) -> None:
        from ..scoring.judge import check_judge

        if tasks and self._backend is None:
            check_judge(self.cfg)

    def score(self, part: list[dict], instances: dict, records: list[dict]) -> list[dict]:
        from ..scoring.judge import JudgeCache

        if self.judge is None:
            self.judge = self._judge_cls(self._backend or make_judge_backend(self.cfg), model=self.cfg.model,
                                         vp_scale=self.cfg.vp_scale, max_new_tokens=judge_budget(self.cfg),
                                         retries=judge_retries(self.cfg))
        cache = self.folder / "judge_cache.jsonl" if self.cfg.cache and self.folder else None
        if self.judge.cache.path != cache:  # one cache file per run folder
            self.judge.cache = JudgeCache(cache)
        return self.judge.judge(part, instances)

    def close(self) -> None:
        if self.judge is not None and self._backend is None:  # a judge backend given to run() stays open
            self.judge.backend.close()


def make_scorers(cfg: EvalConfig, judge_backend=None) -> list:
    scorers: list = []
    if cfg.bertscore.model.lower() != "none":
        scorers.append(BertScoreStage(cfg))
    if cfg.judge.backend != "none" or judge_backend is not None:
        scorers.append(JudgeStage(cfg, judge_backend))
    return scorers


def scored(tasks: list[str], records: list[dict], judge_on_failure: str) -> dict[str, Any]:
    """What a results document says of its ``records``: counts, token usage, aggregates, uncertainty and the
    report's rows (also the pooled results of ``rescue-train cv``)."""
    by_task = {task: [r for r in records if r["task"] == task] for task in tasks}
    aggregates = {task: aggregate(task, by_task[task], task_labels(task), judge_on_failure) for task in tasks}
    uncertainty = {task: result_uncertainty(task, by_task[task], task_labels(task), aggregates[task])
                   for task in tasks}
    return {
        "counts": {task: {scope: {k: agg[k] for k in ("n", "parse_failures", "truncated", "refused", "empty", "judge_failures")
                                  if k in agg}
                          for scope, agg in aggregates[task].items()} for task in tasks},
        "usage": usage_totals(records),
        "aggregates": aggregates,
        # Every numeric metric's SE and 95% interval per task and scope, units as clusters (scoring/uncertainty.py).
        "uncertainty": uncertainty,
        "table5": {scope: table5_row(aggregates, scope) for scope in ("couple", "family", "both")},
        # The same columns for the gold answers themselves, where a task scores them (RSG's real turns).
        "human_reference": {scope: table5_row(aggregates, scope, source="human") for scope in ("couple", "family", "both")},
    }


def write_results(cfg, spec, variant, data, backend_info, identity, folder, records) -> dict:
    results = {
        "format": RESULTS_FORMAT,
        "label": variant.name if variant.adapter else model_name(spec.model),
        "output_dir": str(folder.path),
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "config": to_dict(cfg),
        "prediction_hash": config_hash(identity),
        "scoring_hash": config_hash(scoring_identity(cfg)),
        "model": {"base": spec.model, "name": model_name(spec.model), "tokenizer": spec.tokenizer,
                  "adapter": identity["adapter"], "adapter_weights": identity["adapter_weights"],
                  "training_run": str(variant.run.folder) if variant.run else None,
                  "training_provenance": variant.provenance},
        # Scored on samples its training run trained or validated on (allow_training_data=true): which, how many.
        "includes_training_data": variant.training_data is not None,
        "training_data": variant.training_data,
        "backend": backend_info,
        "decoding": decoding(cfg.protocol, cfg.constrained, backend_info, cfg.data.answer_format),
        "versions": versions(),
        "git_commit": git_commit(),
        "executor": executor_info(),
        "seed": cfg.seed,
        "data": {"source": data.source, "fingerprint": data.fingerprint, "notes": data.notes},
        "split": data.split,
        **scored(cfg.tasks, records, cfg.judge.on_failure),
        "records": records,
    }
    write_json_atomic(folder.path / "results.json", results)
    return results


def check_empty_answers(cfg: EvalConfig, variant: Variant, records: list[dict]) -> None:
    """Refuse to score a run where most generated answers came back empty from the server (a broken server or
    model name, not the model's skill), unless ``allow_empty_answers``; warn about a few."""
    asked = [r for r in records if r.get("raw") is not None]  # ranked records have no answer text
    empty = sum(r.get("parse_error") == "empty" for r in asked)
    if not empty:
        return
    what = (f"{variant.output}: the server answered nothing to {empty} of {len(asked)} prompts, even when asked "
            f"again (max_retries={cfg.max_retries}); they count as parse failures with reason 'empty'")
    if 2 * empty > len(asked) and not cfg.allow_empty_answers:
        raise EmptyAnswers(f"{what}. Check the server (base_url, model); the answers are kept in predictions.jsonl: "
                           "pass allow_empty_answers=true to score them, or delete that file to ask again")
    warnings.warn(what, UserWarning, stacklevel=2)


def run(cfg: EvalConfig, *, backend=None, judge_backend=None) -> list[dict]:
    """Evaluate every variant (base and/or adapters) of ``cfg``, each on its own test instances; returns the
    results documents. ``backend``/``judge_backend`` replace the configured ones (tests, or reuse of a started
    engine). Every component the run needs is checked before the first prediction, and before anything is
    written (a typo leaves no run folder)."""
    found = problems_before_work(cfg, model=backend is None, judge=judge_backend is None)
    if found:
        raise ValueError("; ".join(found))
    spec = resolve_model(cfg)
    if backend is None and cfg.backend != "openai":
        check_model(spec.model, "model")
    if judge_backend is None and cfg.judge.backend in ("hf", "vllm"):
        check_model(cfg.judge.model, "judge.model")
    benchmark = Benchmark(cfg)
    planned = []
    for variant in variants(cfg, spec):
        data = benchmark.select(variant.cfg.data, variant.folds)
        variant.training_data = check_training_data(variant.cfg, variant, data)
        planned.append((variant, data))
    with ExitStack() as held:  # one writer per run folder
        chosen = [variant for variant, _ in planned]
        if len(chosen) > 1:
            own_folder(chosen[0].output.parent, "eval", [f"{v.output.name}/run.json" for v in chosen])
        for variant in chosen:
            held.enter_context(output_folder(variant.output, "eval", RUN_FILES))
        scorers = make_scorers(cfg, judge_backend)
        try:
            for scorer in scorers:
                scorer.check([task for task in cfg.tasks if scorer.applies(task)])
            lazy = LazyBackend(cfg, spec, backend)
            log = (chosen[0].output if len(chosen) == 1 else chosen[0].output.parent) / "eval.log"
            with chatter_to(log, verbose=cfg.verbose or cfg.backend != "vllm"):
                try:
                    if cfg.data_parallel > 1 and backend is None:
                        for same, data in _same_instances(planned):
                            predict_sharded(same[0].cfg, spec, same, data)
                    predicted = [(v, d, predict_variant(v.cfg, spec, v, d, lazy)) for v, d in planned]
                finally:
                    lazy.close()  # all predicted: free the device before a local judge model or engine starts
            for variant, data, done in predicted:
                check_empty_answers(variant.cfg, variant, [done.records[i.id] for task in cfg.tasks
                                                           for i in data.instances[task]])
            return [score_variant(v.cfg, spec, v, d, p, scorers) for v, d, p in predicted]
        finally:
            for scorer in scorers:
                scorer.close()


def _same_instances(planned: list[tuple[Variant, EvalData]]) -> list[tuple[list[Variant], EvalData]]:
    """The variants grouped by what they predict (the same instances under the same settings): one set of
    data-parallel engines serves each group."""
    groups: dict[str, tuple[list[Variant], EvalData]] = {}
    for variant, data in planned:
        key = config_hash({"config": to_dict(variant.cfg), "ids": [i.id for t in sorted(data.instances)
                                                                     for i in data.instances[t]]})
        groups.setdefault(key, ([], data))[0].append(variant)
    return list(groups.values())
