"""The training data of a run: the converter's SFT rows for one fold, plus balancing columns.

Prompts come from ``rescue_train.convert`` unchanged (written into ``RUN_DIR/data``), so the evaluator
renders exactly what training saw. Only the ``train`` and ``validation`` splits of ``data.test_fold`` are
read; the test split is never loaded.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..convert import ConvertConfig, convert
from ..data.splits import SplitManifest, fold_notes
from ..io import read_json, read_records
from ..tasks import get_task
from .config import LoraRunConfig
from .weighting import STRATEGIES, class_key, class_weights, sampling_weights

KEEP = ("prompt", "completion", "chat_template_kwargs", "id", "task", "scenario")


@dataclass
class TrainData:
    train: Any  # datasets.Dataset
    validation: Any | None
    meta: dict[str, Any] = field(default_factory=dict)


def convert_config(cfg: LoraRunConfig, out: Path) -> ConvertConfig:
    return ConvertConfig(data=cfg.data, output_dir=str(out), tasks=[get_task(t).name for t in cfg.tasks])


def _instances(task_dir: Path) -> list[dict[str, Any]]:
    return read_records(task_dir / "instances.jsonl", {"id": str, "gold": object, "unit": str}, "an instance")


def _split(folder: Path, split: str):
    """One split of a task's SFT DatasetDict (its keys are the roles of the converted ``test_fold``)."""
    import datasets

    loaded = datasets.load_from_disk(str(folder))
    if split not in loaded:
        return None
    part = loaded[split]
    if set(part["split"]) != {split}:
        raise ValueError(f"{folder}: rows of split {split!r} are marked {sorted(set(part['split']))}")
    return part


def load_fold(cfg: LoraRunConfig, data_dir: Path, meta: dict[str, Any]) -> TrainData:
    """Read the converted train/validation rows of every task of the recipe and add balancing columns."""
    import datasets

    parts: dict[str, list] = {"train": [], "validation": []}
    per_unit: Counter = Counter()
    for task in cfg.tasks:
        name = get_task(task).name
        records = _instances(data_dir / name)
        per_unit.update(r["unit"] for r in records)
        golds = {r["id"]: r["gold"] for r in records}
        for split in parts:
            ds = _split(data_dir / name / "sft", split)
            if ds is None or len(ds) == 0:
                continue
            keys = [class_key(name, golds[i]) for i in ds["id"]]
            ds = ds.select_columns(list(KEEP)).add_column("class_key", [k or "" for k in keys])
            parts[split].append(ds)
    if not parts["train"]:
        raise ValueError(f"no training instances for tasks {list(cfg.tasks)} in fold {cfg.data.test_fold} of "
                         f"{cfg.data.source} (see {data_dir / 'convert_meta.json'}: too few samples for "
                         f"data.folds={cfg.data.folds}?)")
    train = datasets.concatenate_datasets(parts["train"])
    validation = datasets.concatenate_datasets(parts["validation"]) if parts["validation"] else None
    train = add_balance_columns(train, cfg)
    return TrainData(train, validation, {
        "source": meta["source"], "source_fingerprint": meta["source_fingerprint"],
        "manifest_hash": meta["manifest_hash"], "test_fold": cfg.data.test_fold,
        "train_instances": len(train), "validation_instances": len(validation) if validation is not None else 0,
        "data_fingerprint": fingerprint(train, validation), "convert": meta["tasks"],
        "fold_notes": fold_notes(SplitManifest.load(data_dir / "split_manifest.json"), cfg.data.test_fold, per_unit),
    })


def add_balance_columns(train, cfg: LoraRunConfig):
    tasks = train["task"]
    classes = [k or None for k in train["class_key"]]
    mixing = {get_task(t).name: float(w) for t, w in cfg.tasks.items()}
    strategy = STRATEGIES[cfg.balance.strategy]
    if strategy.sampling != "none" or len(mixing) > 1:
        train = train.add_column("sample_weight", sampling_weights(tasks, classes, mixing, strategy.sampling))
    if strategy.class_weights != "none":
        train = train.add_column("class_weight", class_weights(tasks, classes, strategy.class_weights))
    return train


def fingerprint(train, validation) -> str:
    """Hash of exactly what the model trains and validates on (ids, prompts and answers, in order)."""
    digest = hashlib.sha256()
    for ds in (train, validation):
        if ds is None:
            continue
        for row_id, prompt, completion in zip(ds["id"], ds["prompt"], ds["completion"]):
            digest.update(json.dumps([row_id, prompt + completion], ensure_ascii=False).encode())
    return digest.hexdigest()[:16]


def prepare(cfg: LoraRunConfig, run_dir: Path, is_main: bool, barrier) -> TrainData:
    """Convert into ``RUN_DIR/data`` on the main process (others wait), then load the fold everywhere."""
    data_dir = run_dir / "data"
    if is_main:
        convert(convert_config(cfg, data_dir))
    barrier()
    meta = read_json(data_dir / "convert_meta.json", {"source": str, "source_fingerprint": str, "manifest_hash": str,
                                                      "tasks": dict}, "a conversion's metadata")
    return load_fold(cfg, data_dir, meta)
