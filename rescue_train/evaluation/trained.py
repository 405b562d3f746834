"""What a model under evaluation was trained on: the training run behind an adapter, a served adapter or a
merged model, and which evaluation instances it has seen.

A training run folder (``rescue-train train``) holds ``config.yaml`` (its whole data configuration) and
``provenance.json`` (its split manifest and test fold). It is found from

* ``run=RUN_DIR`` and ``adapter=RUN_DIR`` (or ``adapter=RUN_DIR/adapter``, the folder the run names);
* ``adapter=NAME=RUN_DIR`` with ``backend=openai``: the adapter served under NAME, trained in RUN_DIR;
* ``model=MERGED`` where ``MERGED/merge.json`` (``rescue-train merge``) names the run.

Such a model is evaluated on its own test fold by default, and scoring it on units it trained or validated on
is refused unless ``allow_training_data=true`` (the results then say so).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable

from ..tasks import DataConfig
from ..data.splits import SplitManifest
from ..inference import Backend
from ..io import read_json
from ..provenance import unfinished_training_run
from ..settings import ConfigError, read_yaml

# The data keys that decide which samples are test: a trained model's defaults for them are its run's.
SPLIT_KEYS = ("source", "split", "folds", "split_seed")


@dataclass(frozen=True)
class TrainingRun:
    folder: Path
    provenance: dict[str, Any]
    data: DataConfig  # the run's data configuration, its manifest the run's own

    @property
    def name(self) -> str:
        return str(self.folder)

    @property
    def is_classifier(self) -> bool:
        return self.provenance.get("kind") == "classifier"

    @property
    def tasks(self) -> list[str]:
        return [self.provenance["task"]] if self.is_classifier else list(self.provenance.get("tasks", {}))

    @property
    def test_fold(self) -> int | None:
        return self.data.test_fold if self.data.split == "kfold" else None

    @cached_property
    def manifest(self) -> SplitManifest:
        if not self.data.manifest:
            raise ConfigError(f"{self.folder}: provenance.json names no split manifest")
        return SplitManifest.load(self.data.manifest)

    def seen_units(self) -> set[str]:
        """The units the run trained or validated on (every unit but those of its test split)."""
        roles = self.manifest.roles(self.data.test_fold if self.data.split == "kfold" else 0)
        return {unit for unit, role in roles.items() if role != "test"}

    def seen(self, instances: Iterable) -> list:
        """The instances whose sample the run trained or validated on (matched by sample id)."""
        seen, unit_of = self.seen_units(), self.manifest.samples
        return [inst for inst in instances if unit_of.get(inst.sample_id) in seen]

    def describe(self) -> str:
        split = f"test fold {self.data.test_fold}" if self.data.split == "kfold" else f"{self.data.split} split"
        return f"{self.folder} ({split} of manifest {self.manifest.hash})"


def read_run(folder: str | Path) -> TrainingRun:
    """The training run in ``folder``; a folder without config.yaml and provenance.json is an error."""
    folder = Path(folder).expanduser().resolve()
    if not is_run(folder):
        raise ConfigError(f"{folder}: not a training run folder (config.yaml and provenance.json expected)")
    provenance = read_json(folder / "provenance.json", {}, "a training run's provenance")
    unfinished_training_run(folder, provenance)
    data = DataConfig.from_mapping(read_yaml(folder / "config.yaml").get("data", {}))
    if provenance.get("split_manifest"):
        data.manifest = str((folder / provenance["split_manifest"]).resolve())
    return TrainingRun(folder, provenance, data)


def is_run(folder: Path) -> bool:
    return (folder / "config.yaml").is_file() and (folder / "provenance.json").is_file()


def run_of_adapter(entry: str) -> TrainingRun | None:
    """The training run an ``adapter=`` folder belongs to: the folder itself, or its parent when the folder is
    the adapter the parent's provenance names; None for a bare PEFT folder or a served name."""
    folder = Path(entry).expanduser()
    if not folder.is_dir():
        return None
    if is_run(folder):
        return read_run(folder)
    parent = folder.resolve().parent
    if is_run(parent):
        named = read_json(parent / "provenance.json", {}, "a training run's provenance").get("adapter")
        if named and (parent / named).resolve() == folder.resolve():
            return read_run(parent)
    return None


def run_of_model(model: str | None) -> TrainingRun | None:
    """The training run a merged model came from (``merge.json``, written by ``rescue-train merge``)."""
    if not model:
        return None
    folder = Path(model).expanduser()
    merge_file = folder / "merge.json"
    if not merge_file.is_file():
        return None
    named = Path(read_json(merge_file, {}, "a merged model's merge.json").get("run_dir") or "")
    for candidate in (named, folder.resolve().parent):  # the run as recorded, else the folder the merge sits in
        if is_run(candidate):
            return read_run(candidate)
    raise ConfigError(f"model={model}: merge.json names the training run {named}, which is gone; a merged model is "
                      "only evaluated knowing what it trained on (move the run back, or evaluate the run itself)")


def served_adapter(entry: str) -> tuple[str, TrainingRun | None]:
    """``backend=openai``: an adapter entry as (the name the server knows it by, its training run).
    ``NAME=RUN_DIR`` names both; an existing run folder is sent as written; any other word is a bare name."""
    name, sep, folder = entry.partition("=")
    if sep:
        run = run_of_adapter(folder)
        if run is None:
            raise ConfigError(f"adapter={entry}: {folder} is not a training run folder (provenance.json expected)")
        return name, run
    return entry, run_of_adapter(entry)


def adapter_runs(adapters: Iterable[str], backend: type[Backend]) -> list[TrainingRun]:
    runs = [served_adapter(a)[1] if backend.adapters_by_name else run_of_adapter(a) for a in adapters]
    return [r for r in runs if r is not None]
