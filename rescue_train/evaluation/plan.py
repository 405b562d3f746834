"""Which instances each model of an evaluation is scored on: the benchmark and its instances, loaded once; the
variants (the base model and/or each adapter) with their own test folds; the refusal to score a trained model on
its own training data."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ..data import load_benchmark
from ..data.splits import SplitManifest, assign_units, load_or_make_manifest, make_manifest, spread_sample
from ..tasks import Instance, build
from .config import EvalConfig
from .models import ModelSpec, model_name, resolve_model
from .trained import SPLIT_KEYS, TrainingRun


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
        return load_or_make_manifest(self.bench.samples, None, data.split, data.folds, data.split_seed, data.manifest)

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
    calibration: dict[str, Any] | None = None  # how its rank scores were calibrated (evaluation.calibrate)


def default_output(cfg: EvalConfig, spec: ModelSpec) -> Path:
    """runs/eval/<model>[+<adapter>...]/<protocol>[-<calibration>]: a second model or adapter does not land in the same folder."""
    protocol = cfg.protocol if cfg.calibration == "none" else f"{cfg.protocol}-{cfg.calibration}"
    return Path("runs/eval", "+".join([model_name(spec.model), *spec.adapters]), protocol)


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
