"""Every JSON and JSONL read and write of the toolkit.

``read_json`` / ``read_jsonl`` name the file (and line) of whatever they cannot read: broken JSON, or a record of
the wrong shape (``fields``: the keys a record must have, and their types). ``read_jsonl`` and ``append_jsonl``
keep append-only record files whose last line a kill may have torn (it is dropped on the next read). Writes name
the file they failed on (a full disk) and leave no temporary file behind. The folders these files go in, one
writer each, complete or absent: :mod:`rescue_train.folders`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping


# ------------------------------------------------------------------------------------------ reading

def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _kind(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {str: "a string", dict: "an object", list: "a list", int: "an integer", float: "a number",
             bool: "true or false", type(None): "null"}
    return " or ".join(dict.fromkeys(names.get(k, k.__name__) for k in kinds if not (k is int and float in kinds)))


def check_record(record: Any, fields: Mapping[str, Any], where: str, what: str) -> None:
    """Stop with ``where: ...`` unless ``record`` is an object holding every key of ``fields`` with a value of
    its type (``object``: any value; a tuple: any of those types; numbers are never booleans)."""
    if not isinstance(record, dict):
        holding = f" with {', '.join(fields)}" if fields else ""
        raise ValueError(f"{where}: expected {what} (an object{holding}), got {_shown(record)}")
    missing = [key for key in fields if key not in record]
    if missing:
        raise ValueError(f"{where}: {what} lacks {', '.join(repr(k) for k in missing)}")
    for key, kind in fields.items():
        value = record[key]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        boolean_as_number = isinstance(value, bool) and bool not in kinds and object not in kinds
        if boolean_as_number or not isinstance(value, kinds):
            raise ValueError(f"{where}: {what} field {key!r}: expected {_kind(kind)}, got {_shown(value)}")


def read_json(path: str | Path, fields: Mapping[str, Any] | None = None, what: str = "a JSON object") -> Any:
    """A JSON file's content; broken JSON (a file cut short) or, with ``fields``, a document of another shape is
    an error naming the file."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}); "
                         "the file is cut short or damaged") from None
    if fields is not None:
        check_record(data, fields, str(path), what)
    return data


def iter_jsonl(path: str | Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSONL file someone gave us; broken JSON stops with the file
    and line."""
    path = Path(path)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from None


def read_records(path: str | Path, fields: Mapping[str, Any], what: str = "a record") -> list[dict]:
    """The records of a JSONL file someone gave us (never rewritten): broken JSON, or a record not of the shape
    ``fields`` gives, stops with the file and line."""
    records = []
    for number, record in iter_jsonl(path):
        check_record(record, fields, f"{path}:{number}", what)
        records.append(record)
    return records


def read_jsonl(path: Path, fields: Mapping[str, Any] | None = None, what: str = "a record") -> list[dict]:
    """The records of one of our append-only files (none when it does not exist). A last line torn by a kill is
    dropped (and the file rewritten without it); any other broken line, or a record not of the shape ``fields``
    gives, stops with the file and line."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number >= len(lines) - 1:  # the last line, cut by a kill mid-write: drop it and go on
                write_jsonl_atomic(path, records)
                break
            raise ValueError(f"{path}:{number}: corrupt record ({exc.msg}); delete the run folder or the line") from None
        if fields is not None:
            check_record(record, fields, f"{path}:{number}", what)
        records.append(record)
    if lines[-1]:  # the crash also cost the last record its newline: end the line, or the next append joins it
        write_jsonl_atomic(path, records)
    return records


# ------------------------------------------------------------------------------------------ writing

def _failed_write(exc: OSError, path: Path, tmp: Path | None = None) -> OSError:
    """The error of a failed write, naming the file (a full disk says only "[Errno 28] No space left on device")."""
    if tmp is not None:
        tmp.unlink(missing_ok=True)
    return OSError(exc.errno, f"cannot write it ({exc.strerror or exc})", str(path))


def write_text_atomic(path: str | Path, text: str) -> None:
    """Write text through a temporary file and a rename, so a crash never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        # backslashreplace: a lone surrogate (from a model answer) is written as its JSON escape and reads back.
        tmp.write_text(text, encoding="utf-8", errors="backslashreplace")
        tmp.replace(path)
    except OSError as exc:
        raise _failed_write(exc, path, tmp) from None


def write_json_atomic(path: str | Path, data: Any) -> None:
    """Write JSON through a temporary file and a rename, so a crash never leaves half a file."""
    write_text_atomic(path, json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False, default=str) + "\n")


def _lines(records: Iterable[dict]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


# A lone surrogate (a model answer's escaped "\\ud800") cannot be written as UTF-8: backslashreplace writes
# it as the JSON escape it came from (it only occurs inside JSON strings), so every line reads back.
def write_jsonl_atomic(path: Path, records: Iterable[dict]) -> None:
    write_text_atomic(path, _lines(records))


def append_jsonl(path: Path, records: Iterable[dict]) -> None:
    """Append records and make them durable before returning (a kill right after keeps them)."""
    text = _lines(records)
    if not text:
        return
    try:
        with Path(path).open("a", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        raise _failed_write(exc, Path(path)) from None
