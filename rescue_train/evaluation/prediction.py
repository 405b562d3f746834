"""The predictions of an evaluation: each variant's missing instances asked of its backend (started only when
one is missing) and appended as they arrive; with ``data_parallel=N``, shared out to N engine processes whose
shards are merged back. Answers that came back mostly empty are refused before anything is scored."""

from __future__ import annotations

import os
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..console import shown, shown_err
from ..inference import make_backend
from ..inference.factory import backend_class
from ..io import append_jsonl, read_json, read_jsonl, write_json_atomic
from ..provenance import config_hash
from .config import EvalConfig, budget_override
from .models import ModelSpec, backend_spec
from .plan import EvalData, Variant
from .protocols import predict
from .run_folder import RunFolder, prediction_identity, scoring_identity
from .usage import print_estimate



class EmptyAnswers(ValueError):
    """Most of a run's server answers were empty: its scores would measure the server, not the model."""


def chunks(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def progress(total: int, desc: str, enabled: bool):
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


def keep_scores(cfg: EvalConfig):
    """A calibrated run's records keep the candidates' scores without the dialogue, ranked raw: the
    calibration re-ranks them once every prediction is in (``evaluation.calibrate``)."""
    return (lambda record: record) if cfg.calibration != "none" else None


def predict_variant(cfg: EvalConfig, spec: ModelSpec, variant: Variant, data: EvalData,
                    backend: LazyBackend) -> Predicted:
    identity = prediction_identity(cfg, spec, variant, data)
    folder = RunFolder(variant.output, config_hash(identity), config_hash(scoring_identity(cfg)), cfg.overwrite,
                       identity)
    merge_shards(folder, config_hash(identity))
    done = folder.done_predictions()
    todo = [inst for task in cfg.tasks for inst in data.instances[task] if inst.id not in done]
    chunk = cfg.chunk or backend_class(cfg.backend).default_chunk or cfg.batch_size
    asked = [i for task in cfg.tasks for i in data.instances[task]]
    print_estimate(cfg, todo, asked, done, folder)
    if todo and len(todo) < len(asked):
        print(f"{variant.name}: reusing {len(asked) - len(todo)} finished predictions in {folder.path}; "
              f"{len(todo)} to predict", file=shown(), flush=True)
    if todo:
        backend.get()  # started before the progress bar, whose first estimate would count the engine's start
    with progress(len(todo), f"{variant.name}: predict", cfg.progress) as bar:
        def keep(records: list[dict]) -> None:  # on disk as they arrive: a kill re-asks nothing that came back
            append_jsonl(folder.predictions, records)
            done.update((r["id"], r) for r in records)
            bar.update(len(records))

        for part in chunks(todo, chunk):
            predict(backend.get(), part, protocol=cfg.protocol, mode=cfg.data.mode,
                    answer_format=cfg.data.answer_format, adapter=variant.adapter, max_tokens=budget_override(cfg),
                    constrained=cfg.constrained, rank_score=cfg.rank_score, on_records=keep,
                    calibrate=keep_scores(cfg))
    return Predicted(identity, folder, done, backend.describe(folder.path))


# ---------------------------------------------------------------- data-parallel engines (data_parallel=N)

SHARDS = ".shards-"  # RUN/.shards-<prediction hash>/shard<k>/: what engine k predicted, until it is merged
ENGINE = "import sys; from rescue_train.evaluation.prediction import predict_shard; predict_shard(sys.argv[1])"


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


def predict_sharded(spec: ModelSpec, planned: list[tuple[Variant, EvalData, ModelSpec]]) -> None:
    """What every variant still lacks, each on its own instances under its own settings (``variant.cfg``),
    predicted by ``data_parallel`` vLLM engine processes serving ``spec`` (the base model and every variant's
    adapter; each variant's run folder keeps the identity its own evaluation's model gives it), each on its own GPU group of ``tensor_parallel_size`` GPUs (on CPU, its share of the cores). Engine
    k is given the k-th contiguous share of every variant's instances (a dialogue's instances stay together for
    the prefix cache), and asks each share with that variant's own adapter. The engines are jobs of
    :func:`rescue_train.executor.run_jobs` (local). Each engine writes through :func:`predict_variant` into shard
    folders that are merged into the variants' own: a kill loses nothing that finished, and a rerun, with any
    ``data_parallel``, resumes. A failed engine is reported with its log's tail, after the others finish."""
    import math
    import pickle
    import sys
    from dataclasses import replace

    from ..devices import visible_gpus
    from ..executor import Job, Step, run_jobs
    from ..jobs import ExecutorSettings

    cfg = planned[0][0].cfg  # the engine settings, which every variant shares (runner.shared_spec)
    work = []
    for variant, data, own in planned:
        identity = prediction_identity(variant.cfg, own, variant, data)
        folder = RunFolder(variant.output, config_hash(identity), config_hash(scoring_identity(variant.cfg)),
                           variant.cfg.overwrite, identity)
        merge_shards(folder, config_hash(identity))
        done = folder.done_predictions()
        instances = [inst for task in variant.cfg.tasks for inst in data.instances[task]]
        work.append((folder, data, instances, config_hash(identity), {i.id for i in instances if i.id not in done}))
    total = sum(len(todo) for *_, todo in work)
    if not total:
        return
    engines = min(cfg.data_parallel, max(len(instances) for _, _, instances, _, _ in work))
    outputs = [variant.output for variant, _, _ in planned]
    logs = (outputs[0] if len(outputs) == 1 else Path(os.path.commonpath(outputs))) / "data_parallel"
    logs.mkdir(parents=True, exist_ok=True)
    jobs, written = [], []
    for k in range(engines):
        shares = []
        for (variant, _, _), (_, data, instances, prediction_hash, todo) in zip(planned, work):
            size = math.ceil(len(instances) / engines)
            mine = {i.id for i in instances[k * size:(k + 1) * size]} & todo
            if mine:
                shard = Variant(variant.name, variant.adapter, variant.output / f"{SHARDS}{prediction_hash}" /
                                f"shard{k}", variant.provenance)
                shard.cfg = replace(variant.cfg, data_parallel=1, progress=False, overwrite=False)
                shares.append((shard, replace(data, instances={t: [i for i in data.instances[t] if i.id in mine]
                                                               for t in variant.cfg.tasks})))
                written.append(shard.output / "predictions.jsonl")
        if not shares:
            continue
        request = logs / f"engine{k}.pickle"
        request.write_bytes(pickle.dumps((replace(cfg, data_parallel=1, progress=False), spec, shares)))
        jobs.append(Job(f"data-parallel engine {k}", [Step([sys.executable, "-c", ENGINE, str(request)],
                                                           logs / f"engine{k}.log")],
                        ranks=cfg.tensor_parallel_size))
    launch = ExecutorSettings("local", engines, cfg.tensor_parallel_size if visible_gpus() else 0)
    with progress(total, f"predict ({len(jobs)} engines)", cfg.progress) as bar, _counting(bar, written):
        outcomes = run_jobs(jobs, launch, logs, title="data-parallel engines", progress=False)
    for folder, _, _, prediction_hash, _ in work:
        merge_shards(folder, prediction_hash)
    failed = [outcome.message for outcome in outcomes if outcome.state == "failed"]
    if failed:
        raise ValueError("; ".join(failed) + "\nFinished instances are kept: rerun to resume.")
    for job in jobs:
        Path(job.steps[0].argv[-1]).unlink(missing_ok=True)


@contextmanager
def _counting(bar, outputs: list[Path]) -> Iterator[None]:
    """While the block runs, ``bar`` follows the lines the engines have written to ``outputs`` (once a second)."""
    import threading

    def count() -> None:
        bar.update(sum(path.read_bytes().count(b"\n") for path in outputs if path.exists()) - bar.n)

    stop = threading.Event()

    def follow() -> None:
        while not stop.wait(1.0):
            count()

    thread = threading.Thread(target=follow, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        count()


def predict_shard(request: str) -> None:
    """One data-parallel engine, in the process :func:`predict_sharded` started: its share of every variant,
    each under its own settings and adapter, predicted through :func:`predict_variant` into that variant's shard folder (the code of one engine)."""
    import pickle

    with open(request, "rb") as handle:
        cfg, spec, jobs = pickle.load(handle)
    lazy = LazyBackend(cfg, spec)
    try:
        for variant, data in jobs:
            predict_variant(variant.cfg, spec, variant, data, lazy)
    finally:
        lazy.close()


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
