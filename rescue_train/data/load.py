"""Load RESCUE-Bench from any of its layouts into validated :class:`Sample` records.

Accepted sources (``load_samples``):

* ``bundled`` – the synthetic mini-benchmark shipped with the package;
* a ``.jsonl`` file – the release's ``benchmark_191.jsonl``, one sample per line;
* a ``.json`` file – one sample object (or a list of them);
* a directory of per-sample ``.json`` files – the layout the authors' scripts read; the sample id is the
  relative path without ``.json`` and the scenario is inferred from the ``Family`` label; ``.jsonl`` files
  in the tree are read line by line like the released file; extensions match in any case, symbolic links
  are followed; every path that is not read (another extension, a hidden file, a broken or looping link,
  an empty file, a ``manifest.json`` without rows) is named in a note;
* a directory written by ``datasets.Dataset.save_to_disk`` (one record per sample);
* a Hugging Face dataset id such as ``tomhu/relation_therapy`` (needs network access).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

try:
    import orjson
except ImportError:  # not on every machine (the lent GPU's image lacks it): the standard library reads the same
    orjson = None

from .fields import DataError, HugeNumber, Location
from .schema import Sample, parse_sample

BUNDLED = "bundled"
SAMPLE_SUFFIXES = (".json", ".jsonl")
# A JSON escape of half a UTF-16 pair: valid in pairs (an emoji written ASCII-only), an error alone.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass
class Benchmark:
    """Samples plus where they came from: the source, a content fingerprint and load notes."""

    samples: list[Sample]
    source: str
    fingerprint: str
    notes: list[str] = field(default_factory=list)


def bundled_path() -> Path:
    return Path(__file__).parent / "sample" / "mini_benchmark.jsonl"


def _read_bytes(path: Path, where: Location) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataError(where, f"cannot read the file: {exc.strerror or exc}") from None


def _decode(data: bytes, where: Location, notes: list[str]) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Never fail on odd encodings: latin-1 maps every byte; say so instead of hiding it.
        notes.append(f"{where}: not valid UTF-8 ({exc.reason} at byte {exc.start}); read as latin-1")
        return data.decode("latin-1")


def _keep_digits(digits: str) -> int | HugeNumber:
    return HugeNumber(digits) if len(digits) > 4000 else int(digits)


def _parse(data: bytes, where: Location, notes: list[str], line_is_known: bool = True) -> Any:
    """The JSON value in ``data``. orjson, where installed, parses well-formed UTF-8 JSON about twice as fast;
    whatever it refuses (bad bytes, a byte-order mark, NaN, huge numbers, lone surrogates, deep nesting,
    broken JSON) takes the standard library's path, which reads or locates each of these exactly, and
    gives the same values."""
    if orjson is not None:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return _json(_decode(data, where, notes), where, line_is_known)


def _json(text: str, where: Location, line_is_known: bool = True) -> Any:
    """Parse ``text``; every failure is a DataError at ``where`` (a whole file gets the failing line)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        at = where if line_is_known else where.at(line=exc.lineno)
        hint = ("; a .json file holds one sample or a list of them, one sample per line is a .jsonl file"
                if exc.msg == "Extra data" and not line_is_known else "")
        raise DataError(at, f"invalid JSON: {exc.msg} at column {exc.colno}{hint}") from None
    except RecursionError:
        raise DataError(where, "lists or objects nested too deeply to read (Python's limit is about "
                               "1000 levels)") from None
    except ValueError:  # an integer over Python's 4300-digit limit: keep its digits for the field check
        value = json.loads(text, parse_int=_keep_digits)
    if _SURROGATE_ESCAPE.search(text):
        _check_surrogates(value, where)
    return value


def _check_surrogates(value: Any, where: Location) -> None:
    """A lone surrogate cannot be written as UTF-8 later (convert, datasets): name the field now."""
    stack: list[tuple[Any, tuple]] = [(value, ())]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise DataError(_located(value, path, where), f"text holds a lone surrogate "
                                f"\\u{ord(item[exc.start]):04x} at character {exc.start + 1} (half of a UTF-16 "
                                f"pair: not valid Unicode)") from None
        elif isinstance(item, dict):
            stack.extend((v, (*path, k)) for k, v in reversed(item.items()))
            stack.extend((k, path) for k in item)
        elif isinstance(item, list):
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(item))))


def _located(sample: Any, path: tuple, where: Location) -> Location:
    """``where`` narrowed to the sample, row and field at ``path`` (keys and list positions) in ``sample``."""
    if isinstance(sample, list) and path:  # a .json file holding a list of samples: item n is "line" n
        sample, path, where = sample[path[0]], path[1:], where.at(line=path[0] + 1)
    if isinstance(sample, dict) and isinstance(sample.get("sample_id"), str) and where.sample_id is None:
        where = where.at(sample_id=sample["sample_id"])
    if len(path) >= 2 and path[0] == "rows" and isinstance(path[1], int):
        where, path = where.at(row_index=path[1] + 1), path[2:]
    if not path:
        return where
    name = str(path[0]) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path[1:])
    return where.at(field=name)


Found = Iterator[tuple[Location, Sample]]


def _read_jsonl(path: Path, data: bytes, notes: list[str]) -> Found:
    for number, line in enumerate(data.split(b"\n"), start=1):
        if not line or line.isspace():
            continue
        where = Location(file=str(path), line=number)
        yield where, parse_sample(_parse(line, where, notes), where, notes=notes)


def _read_json_file(path: Path, data: bytes, notes: list[str]) -> Found:
    """A single ``.json`` file: one sample object, or a list of them."""
    where = Location(file=str(path))
    raw = _parse(data, where, notes, line_is_known=False)
    for number, item in enumerate(raw if isinstance(raw, list) else [raw], start=1):
        at = where.at(line=number) if isinstance(raw, list) else where
        yield at, parse_sample(item, at, notes=notes)


def _tree_files(root: Path, notes: list[str]) -> list[Path]:
    """Every readable sample file under ``root`` (links followed); each other path is named in a note."""
    inside = os.path.realpath(root)
    folders_read = {inside}
    candidates: list[Path] = []

    def cannot_list(exc: OSError) -> None:
        raise DataError(Location(file=exc.filename), f"cannot list the folder: {exc.strerror or exc}")

    for folder, subfolders, names in os.walk(root, onerror=cannot_list, followlinks=True):
        here = Path(folder)
        kept = []
        for name in sorted(subfolders):
            path, real = here / name, os.path.realpath(here / name)
            if name.startswith("."):
                notes.append(f"{path}: skipped (a hidden folder)")
            elif real in folders_read or path.is_symlink() and _is_within(real, inside):
                notes.append(f"{path}: skipped (a link to a folder inside this tree: {real}; it is read under "
                             f"its own path, and following the link would read it twice or loop)")
            else:
                folders_read.add(real)
                kept.append(name)
        subfolders[:] = kept
        for name in sorted(names):
            path = here / name
            if path.is_symlink() and not path.exists():
                notes.append(f"{path}: skipped (a symbolic link to nothing: {os.readlink(path)} is missing or "
                             f"loops)")
            elif not path.is_file():
                notes.append(f"{path}: skipped (not a regular file)")
            elif name.startswith("."):
                notes.append(f"{path}: skipped (a hidden file)")
            elif path.suffix.lower() not in SAMPLE_SUFFIXES:
                notes.append(f"{path}: skipped (not a .json or .jsonl file)")
            else:
                candidates.append(path)
    files_read: dict[str, Path] = {}
    for path in sorted(candidates, key=lambda p: (p.is_symlink(), p)):  # a file's own path before links to it
        real = os.path.realpath(path)
        if real in files_read:
            notes.append(f"{path}: skipped (the same file as {files_read[real]})")
        else:
            files_read[real] = path
    return sorted(files_read.values())


def _is_within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _read_tree(root: Path, notes: list[str], digest) -> Found:
    for path in _tree_files(root, notes):
        where = Location(file=str(path))
        data = _read_bytes(path, where)
        relative = path.relative_to(root)
        digest.update(relative.as_posix().encode("utf-8", "surrogateescape") + b"\0" + data + b"\0")
        if not data.strip():
            notes.append(f"{path}: skipped (an empty file)")
            continue
        if path.suffix.lower() == ".jsonl":
            yield from _read_jsonl(path, data, notes)
            continue
        raw = _parse(data, where, notes, line_is_known=False)
        if path.name.lower() == "manifest.json" and not (isinstance(raw, dict) and "rows" in raw):
            notes.append(f"{path}: skipped (a manifest without rows, not a sample)")
            continue
        sample_id = relative.with_suffix("").as_posix()
        yield where, parse_sample(raw, where, sample_id=sample_id, notes=notes)


def _read_records(records: Iterable[Any], source: str, notes: list[str]) -> Found:
    for number, record in enumerate(records, start=1):
        where = Location(file=source, line=number)
        if isinstance(record, dict) and isinstance(record.get("rows"), str):
            record = {**record, "rows": _json(record["rows"], where.at(field="rows"))}
        yield where, parse_sample(record, where, notes=notes)


def _is_saved_dataset(path: Path) -> bool:
    return (path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()


def _load_saved_dataset(path: Path) -> list[Any]:
    import datasets

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:  # the library raises many kinds for a damaged folder; the user needs one line
        raise DataError(Location(file=str(path)), f"cannot read this saved dataset: {_first_line(exc)}") from None
    if isinstance(loaded, datasets.DatasetDict):
        return [r for split in loaded for r in loaded[split]]
    return list(loaded)


def _load_hub(dataset_id: str) -> list[Any]:
    import datasets

    try:
        loaded = datasets.load_dataset(dataset_id)
    except Exception as exc:  # offline, unknown id, no access: one message, not the library's traceback
        raise DataError(Location(file=dataset_id), f"not a file or folder in {os.getcwd()}, and loading it as "
                        f"the Hugging Face dataset {dataset_id!r} failed: {_first_line(exc)}") from None
    return [r for split in loaded for r in loaded[split]]


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def looks_like_hub_id(text: str) -> bool:
    """A bare ``owner/name``: one slash, no file extension, not starting with '.', '/' or '~'."""
    return bool(_HUB_ID.fullmatch(text)) and not Path(text).suffix


def load_benchmark(source: str | Path) -> Benchmark:
    """Load every sample of ``source``; raise :class:`DataError` on the first malformed value."""
    notes: list[str] = []
    text = str(source)
    path = bundled_path() if text == BUNDLED else Path(text).expanduser()
    digest = hashlib.sha256()
    if path.is_file():
        data = _read_bytes(path, Location(file=text))
        digest.update(data)
        reader = _read_json_file if path.suffix.lower() == ".json" else _read_jsonl
        found = list(reader(path, data, notes))
        del data
    elif path.is_dir():
        if (path / "convert_meta.json").is_file():
            raise DataError(Location(file=text), "this is an output folder of `rescue-train convert`, not a "
                            "benchmark: point at the source it was converted from (see its convert_meta.json)")
        if _is_saved_dataset(path):
            found = list(_read_records(_load_saved_dataset(path), str(path), notes))
        else:
            found = list(_read_tree(path, notes, digest))
    elif path.exists():
        raise DataError(Location(file=text), "not a regular file or folder")
    elif looks_like_hub_id(text):
        found = list(_read_records(_load_hub(text), text, notes))
    else:
        raise DataError(Location(file=text), f"no such file or folder (current directory: {os.getcwd()}); "
                        f"expected a .jsonl or .json file, a folder, 'bundled' or a Hugging Face dataset id "
                        f"like 'tomhu/relation_therapy'")
    if not found:
        skipped = f" ({len(notes)} path(s) skipped: see the notes)" if notes else ""
        raise DataError(Location(file=text), f"no samples: the input is empty{skipped}" +
                        "".join(f"\n  note: {n}" for n in notes[:20]))
    first_seen: dict[str, Location] = {}
    for where, sample in found:
        if sample.sample_id in first_seen:
            raise DataError(where.at(sample_id=sample.sample_id, row_index=None, field=None),
                            f"duplicate sample_id (also at {first_seen[sample.sample_id]})")
        first_seen[sample.sample_id] = where.at(sample_id=None)
    samples = [sample for _, sample in found]
    if path.is_dir() and _is_saved_dataset(path) or not (path.is_file() or path.is_dir()):
        for sample in samples:  # records from a library: fingerprint what was read
            digest.update(repr(sample).encode("utf-8", "surrogatepass"))
    return Benchmark(samples, "bundled" if text == BUNDLED else text, digest.hexdigest(), notes)


def load_samples(source: str | Path) -> list[Sample]:
    """The samples of ``source`` in file order (see the module docstring for the accepted sources)."""
    return load_benchmark(source).samples
