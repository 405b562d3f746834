"""Load RESCUE-Bench from any of its layouts into validated :class:`Sample` records.

Accepted sources (``load_samples``):

* ``bundled`` – the synthetic mini-benchmark shipped with the package;
* a ``.jsonl`` file – the release's ``benchmark_191.jsonl``, one sample per line;
* a ``.json`` file – one sample object (or a list of them);
* a directory of per-sample ``.json`` files – the layout the authors' scripts read; the sample id is the
  relative path without ``.json`` and the scenario is inferred from the ``Family`` label; a
  ``manifest.json`` without rows is skipped (and reported);
* a directory written by ``datasets.Dataset.save_to_disk`` (one record per sample);
* a Hugging Face dataset id such as ``tomhu/relation_therapy`` (needs network access).
"""

from __future__ import annotations

import gc
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .schema import DataError, Location, Sample, parse_sample

BUNDLED = "bundled"


@dataclass
class Benchmark:
    """Samples plus where they came from: the source, a content fingerprint and load notes."""

    samples: list[Sample]
    source: str
    fingerprint: str
    notes: list[str] = field(default_factory=list)


def bundled_path() -> Path:
    return Path(__file__).parent / "sample" / "mini_benchmark.jsonl"


def _decode(data: bytes, where: Location, notes: list[str]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Never fail on odd encodings: latin-1 maps every byte; say so instead of hiding it.
        notes.append(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start}); read as latin-1")
        return data.decode("latin-1")


def _json(text: str, where: Location) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(where, f"invalid JSON: {exc.msg} at column {exc.colno}") from None


def _read_jsonl(path: Path, notes: list[str]) -> Iterable[Sample]:
    for number, line in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not line.strip():
            continue
        where = Location(file=str(path), line=number)
        yield parse_sample(_json(_decode(line, where, notes), where), where)


def _read_json_file(path: Path, notes: list[str]) -> Iterable[Sample]:
    """A single ``.json`` file: one sample object, or a list of them."""
    where = Location(file=str(path))
    raw = _json(_decode(path.read_bytes(), where, notes), where)
    for number, item in enumerate(raw if isinstance(raw, list) else [raw], start=1):
        yield parse_sample(item, where.at(line=number) if isinstance(raw, list) else where)


def _read_tree(root: Path, notes: list[str]) -> Iterable[Sample]:
    files = sorted(p for p in root.rglob("*.json") if p.is_file())
    if not files:
        raise DataError(Location(file=str(root)), "expected per-sample .json files under this folder, found none")
    for path in files:
        where = Location(file=str(path))
        data = path.read_bytes()
        raw = _json(_decode(data, where, notes), where) if data.strip() else None
        if path.name == "manifest.json" and not (isinstance(raw, dict) and "rows" in raw):
            notes.append(f"{path}: skipped (a manifest without rows, not a sample)")
            continue
        sample_id = path.relative_to(root).with_suffix("").as_posix()
        yield parse_sample(raw, where, sample_id=sample_id)


def _read_records(records: Iterable[Any], source: str) -> Iterable[Sample]:
    for number, record in enumerate(records, start=1):
        where = Location(file=source, line=number)
        if isinstance(record, dict) and isinstance(record.get("rows"), str):
            record = {**record, "rows": _json(record["rows"], where.at(field="rows"))}
        yield parse_sample(record, where)


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()


def _load_saved_dataset(path: Path) -> list[Any]:
    import datasets

    loaded = datasets.load_from_disk(str(path))
    if isinstance(loaded, datasets.DatasetDict):
        return [r for split in loaded for r in loaded[split]]
    return list(loaded)


def _load_hub(dataset_id: str) -> list[Any]:
    import datasets

    loaded = datasets.load_dataset(dataset_id)
    return [r for split in loaded for r in loaded[split]]


def _fingerprint(samples: list[Sample], raw_digest: str | None) -> str:
    if raw_digest is not None:
        return raw_digest
    digest = hashlib.sha256()
    for s in samples:
        digest.update(repr(s).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def load_benchmark(source: str | Path) -> Benchmark:
    """Load every sample of ``source``; raise :class:`DataError` on the first malformed value."""
    # The records are acyclic, so the cyclic collector only burns time while millions of tuples are made.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _load(source)
    finally:
        if collecting:
            gc.enable()


def _load(source: str | Path) -> Benchmark:
    notes: list[str] = []
    text = str(source)
    path = bundled_path() if text == BUNDLED else Path(source)
    raw_digest = None
    if path.is_file():
        raw_digest = hashlib.sha256(path.read_bytes()).hexdigest()
        reader = _read_json_file if path.suffix == ".json" else _read_jsonl
        samples = list(reader(path, notes))
    elif path.is_dir():
        if _is_saved_dataset(path):
            samples = list(_read_records(_load_saved_dataset(path), str(path)))
        else:
            samples = list(_read_tree(path, notes))
    elif "/" in text and not text.startswith((".", "/", "~")) and text.count("/") == 1:
        samples = list(_read_records(_load_hub(text), text))
    else:
        raise DataError(Location(file=text), "no such file or folder (expected a .jsonl file, a folder, "
                        "'bundled' or a Hugging Face dataset id like 'tomhu/relation_therapy')")
    seen: dict[str, str] = {}
    for sample in samples:
        if sample.sample_id in seen:
            raise DataError(Location(file=sample.source or text, sample_id=sample.sample_id),
                            "duplicate sample_id (first seen in " + seen[sample.sample_id] + ")")
        seen[sample.sample_id] = sample.source or text
    return Benchmark(samples, "bundled" if text == BUNDLED else text, _fingerprint(samples, raw_digest), notes)


def load_samples(source: str | Path) -> list[Sample]:
    """The samples of ``source`` in file order (see the module docstring for the accepted sources)."""
    return load_benchmark(source).samples
