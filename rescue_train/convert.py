"""Instances -> training and evaluation datasets on disk.

``convert`` writes, for each task, ``OUT/<task>/``:

* ``instances.jsonl`` – the contract read by trainers, the evaluator and outside checks (one line per
  instance with id, task, sample_id, unit, scenario, row_index, gold, plus its fold and split);
* ``sft/`` – a ``datasets.DatasetDict`` of conversational ``prompt`` (system, user) and ``completion``
  (the assistant answer) rows, with the ``chat_template_kwargs`` they are rendered with;
* ``cls/`` (ITP, RPP, STP, SSP) – query, conversation and text (``render_for_classifier``), label, label_id,
  label_names for sequence classifiers;
* ``gen/`` (ER, VP) – prompt messages and the gold answer for generation;

plus ``OUT/split_manifest.json`` (written once, then reused) and ``OUT/convert_meta.json`` (options,
counts, exclusions, load notes, source fingerprint, versions). Every dataset row carries ``fold`` and
``split`` so a trainer can pick any fold of the k-fold manifest; the DatasetDict's keys are the splits for
``test_fold``. ``OUT`` is complete or absent: it is written beside itself and renamed into place at the
end (:mod:`rescue_train.folders`).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, List, Optional

from .chat import TEMPLATE_KWARGS
from .data import load_benchmark
from .data.splits import SplitManifest, assign_units, load_or_make_manifest
from .tasks import DataConfig
from .folders import check_owner, complete_or_absent
from .io import write_json_atomic
from .provenance import versions
from .settings import meaning
from .tasks import TASKS, Instance, build, get_task, render, render_for_classifier

SPLIT_ORDER = ("train", "validation", "test")


@dataclass
class ConvertConfig:
    data: DataConfig = field(default_factory=DataConfig)
    output_dir: Optional[str] = field(default=None, metadata=meaning(
        "the output folder: instances, datasets and the split manifest (required)"))
    tasks: List[str] = field(default_factory=lambda: list(TASKS), metadata=meaning(
        "tasks to convert: " + ", ".join(TASKS)))


def manifest_for(samples, data: DataConfig, out: Path) -> SplitManifest:
    """The split manifest of ``data`` saved as ``out/split_manifest.json``: ``data.manifest`` when given (checked
    against the samples), else the one already there or a new one."""
    if data.split == "leave_one_unit_out":
        raise ValueError("data.split=leave_one_unit_out is for baselines; convert writes kfold, holdout or none")
    return load_or_make_manifest(samples, out / "split_manifest.json", data.split, data.folds, data.split_seed,
                                 data.manifest)


def sft_row(inst: Instance, mode: str, fmt: str) -> dict[str, Any]:
    """trl's conversational prompt/completion row: the loss falls on the completion, rendered with the model's
    own chat template (with the template arguments evaluation uses, see :mod:`rescue_train.chat`)."""
    answer = TASKS[inst.task].answer(inst, fmt)
    return {"prompt": render(inst, mode, fmt), "completion": [{"role": "assistant", "content": answer}],
            "chat_template_kwargs": dict(TEMPLATE_KWARGS)}


def cls_row(inst: Instance, mode: str) -> dict[str, Any]:
    """Classification input: the classifier's rendering of the question and context (the label list is in
    ``label_names``)."""
    return {**render_for_classifier(inst, mode), "label": inst.gold, "label_id": inst.candidates.index(inst.gold),
            "label_names": list(inst.candidates)}


def gen_row(inst: Instance, sft: dict[str, Any]) -> dict[str, Any]:
    """Generation input and reference: the SFT row's prompt and answer."""
    return {"prompt": sft["prompt"], "reference": sft["completion"][0]["content"],
            "gold_json": json.dumps(inst.gold, ensure_ascii=False)}


def _dataset_dict(rows: list[dict[str, Any]]):
    import datasets

    datasets.disable_progress_bars()
    by_split: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_split.setdefault(row["split"], []).append(row)
    return datasets.DatasetDict({s: datasets.Dataset.from_list(by_split[s]) for s in SPLIT_ORDER if s in by_split})


def convert(config: ConvertConfig) -> dict[str, Any]:
    """Write every requested task's datasets; returns the metadata also written to convert_meta.json."""
    data = config.data
    if not config.output_dir:
        raise ValueError("convert needs output_dir (--output-dir DIR)")
    unknown = [t for t in config.tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"tasks: unknown task {unknown[0]!r}; expected some of {', '.join(TASKS)}")
    out = Path(config.output_dir)
    if out.exists():  # the folder is replaced as a whole at the end: never take over one that holds something else
        check_owner(out, "convert")
    bench = load_benchmark(data.source)
    kept_manifest = out / "split_manifest.json"
    if kept_manifest.exists() and not data.manifest:  # checked in place first, so a mismatch names the user's file
        load_or_make_manifest(bench.samples, kept_manifest, data.split, data.folds, data.split_seed)
    with complete_or_absent(config.output_dir, "convert") as out:
        return _write(config, bench, out)


def _write(config: ConvertConfig, bench, out: Path) -> dict[str, Any]:
    data = config.data
    manifest = manifest_for(bench.samples, data, out)
    roles = manifest.roles(data.test_fold)
    units = assign_units(bench.samples)
    meta: dict[str, Any] = {
        "source": bench.source, "source_fingerprint": bench.fingerprint, "load_notes": bench.notes,
        # The output folder is left out so the same input gives byte-identical files wherever written.
        "config": {"data": asdict(data), "tasks": list(config.tasks)},
        "manifest_hash": manifest.hash,
        "manifest_notes": manifest.notes, "versions": versions(), "tasks": {},
    }
    for name in config.tasks:
        task = get_task(name)
        result = build(task.name, bench.samples, data.build_options(), units)
        records = []
        for inst in result.instances:
            fold = manifest.assignment[inst.unit]
            record = {**inst.to_record(), "fold": fold if isinstance(fold, int) else -1, "split": roles[inst.unit]}
            records.append(record)
        folder = out / task.name
        shutil.rmtree(folder, ignore_errors=True)  # an earlier conversion's files are hard links: never rewrite them
        folder.mkdir(parents=True)
        lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
        (folder / "instances.jsonl").write_text(lines, encoding="utf-8")
        keys = ("id", "task", "scenario", "unit", "sample_id", "fold", "split")
        base = [{k: r[k] for k in keys} for r in records]
        sft = [{**b, **sft_row(i, data.mode, data.answer_format)} for b, i in zip(base, result.instances)]
        _dataset_dict(sft).save_to_disk(str(folder / "sft"))
        if task.closed_set:
            _dataset_dict([{**b, **cls_row(i, data.mode)} for b, i in zip(base, result.instances)]
                          ).save_to_disk(str(folder / "cls"))
        else:
            _dataset_dict([{**b, **gen_row(i, s)} for b, i, s in zip(base, result.instances, sft)]
                          ).save_to_disk(str(folder / "gen"))
        meta["tasks"][task.name] = {
            "instances": dict(Counter(r["scenario"] for r in records)),
            "splits": dict(Counter(r["split"] for r in records)),
            "samples": dict(sorted(Counter(s for s, _ in {(r["scenario"], r["sample_id"]) for r in records}).items())),
            "excluded": {f"{sc}: {reason}": n for (sc, reason), n in sorted(result.excluded.items())},
        }
    write_json_atomic(out / "convert_meta.json", meta)
    return meta
