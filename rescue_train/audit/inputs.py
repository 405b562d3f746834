"""What the audit reads: supporter turns in their dialogue context, from three kinds of INPUT.

* an eval results folder (``results.json``, or a folder of variant folders holding one each) of a generation
  task whose predictions are turns of text (the next-turn task ``rsg``): each generated turn, in the real
  dialogue before it. The context comes from the benchmark the run recorded (its data fingerprint must match).
  Tasks whose predictions are not text (the closed-set tasks, ER's emotion object, VP's viewpoint list) are
  left out (a run of those alone is refused); predictions that did not parse are listed, not audited;
* a jsonl of dialogues, one per line: ``{"messages": [{"role": "user"|"assistant"|"system", "content": ...}],
  "id": optional, "system" (or "model"): optional label of the supporter}`` (RELATE's single-user setting;
  system messages are not shown to the judge);
* ``reference``: the benchmark's real therapist turns, each with the rows before it.

Every assistant or therapist turn becomes a :class:`Turn`; ``turn_id`` counts the supporter's turns in the
dialogue from 1, as RELATE does. ``unit`` is what the bootstrap resamples: for benchmark turns the split unit
of their sample (rescue_train.data.splits.assign_units: segments of one couple or family share people, so
they are drawn together, as every other statistic of the project draws them), for a dialogue file the
dialogue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..data import load_benchmark
from ..data.schema import Sample
from ..data.splits import assign_units

REFERENCE = "reference"


@dataclass
class Turn:
    system: str  # the supporter being audited: a model's label, 'reference', or a dialogue file's label
    dialogue_id: str
    turn_id: int  # the supporter's turn number in the dialogue, from 1
    setting: str  # single (one user and an assistant) or multi (a therapist and several clients)
    prior: list[tuple[str, str]]  # (speaker or role, text) of everything before the turn
    text: str
    origin: str  # where the turn came from, for messages: file:line or results record id
    unit: str  # what the bootstrap resamples: the sample's split unit, or a dialogue file's dialogue
    row_index: int | None = None  # the benchmark row the turn stands at (reference and eval inputs)


@dataclass
class Loaded:
    turns: list[Turn]
    sources: list[dict[str, Any]]  # per INPUT: kind, path, system, counts, data fingerprint
    skipped: list[dict[str, Any]]  # records not audited, with the reason


def therapist_turn_ids(sample: Sample) -> dict[int, int]:
    """Row index -> the therapist's turn number up to that row."""
    ids, count = {}, 0
    for row in sample.rows:
        count += row.is_therapist
        ids[row.row_index] = count
    return ids


def _prior(sample: Sample, row_index: int) -> list[tuple[str, str]]:
    return [(r.speaker, r.dialogue) for r in sample.rows[:row_index - 1]]


def load_reference(data: str) -> tuple[list[Turn], dict[str, Any]]:
    bench = load_benchmark(data)
    units = assign_units(bench.samples)
    turns = []
    for sample in bench.samples:
        ids = therapist_turn_ids(sample)
        for row in sample.rows:
            if row.is_therapist and row.dialogue.strip():
                turns.append(Turn(REFERENCE, sample.sample_id, ids[row.row_index], "multi",
                                  _prior(sample, row.row_index), row.dialogue,
                                  f"{bench.source}, sample {sample.sample_id!r}, row {row.row_index}",
                                  units[sample.sample_id], row.row_index))
    return turns, {"kind": "reference", "path": bench.source, "system": REFERENCE,
                   "data_fingerprint": bench.fingerprint}


def load_dialogues(path: Path, label: str | None = None) -> tuple[list[Turn], dict[str, Any]]:
    """Assistant turns of a jsonl of dialogues; any malformed line is an error naming file, line and field."""
    turns = []
    system_default = label or path.stem
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            raise ValueError(f"{where}: expected an object with a 'messages' list")
        dialogue_id = str(record.get("id", record.get("dialogue_id", f"{path.stem}:{number}")))
        system = str(record.get("system") or record.get("model") or system_default)
        if (system, dialogue_id) in seen:
            raise ValueError(f"{where}: dialogue id {dialogue_id!r} repeats line {seen[(system, dialogue_id)]}")
        seen[(system, dialogue_id)] = number
        prior: list[tuple[str, str]] = []
        turn_id = 0
        for i, message in enumerate(record["messages"]):
            field = f"{where}: dialogue {dialogue_id!r}: messages[{i}]"
            if not isinstance(message, dict) or not isinstance(message.get("content"), str):
                raise ValueError(f"{field}: expected an object with a string 'content'")
            role = message.get("role")
            if role not in ("user", "assistant", "system"):
                raise ValueError(f"{field}.role: expected user, assistant or system, got {role!r}")
            if role == "assistant":
                turn_id += 1
                if message["content"].strip():
                    turns.append(Turn(system, dialogue_id, turn_id, "single", list(prior), message["content"],
                                      f"{where}, messages[{i}]", dialogue_id))
            if role != "system":
                prior.append((role, message["content"]))
    return turns, {"kind": "dialogues", "path": str(path), "system": system_default}


def _is_text(value: Any) -> bool:
    """A turn of text: a string, or an object holding exactly one string (e.g. {"response": ...})."""
    return isinstance(value, str) or (isinstance(value, dict) and len(value) == 1
                                      and isinstance(next(iter(value.values())), str))


def prediction_text(record: dict[str, Any], origin: str) -> str:
    """The generated turn of a prediction record."""
    value = record.get("prediction")
    if not _is_text(value):
        raise ValueError(f"{origin}: the prediction of task {record.get('task')!r} is not a turn of text "
                         f"({type(value).__name__}); audit the results of a next-turn task such as rsg")
    return value if isinstance(value, str) else next(iter(value.values()))


def _results_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if (path / "results.json").exists():
        return [path / "results.json"]
    return sorted(path.glob("*/results.json"))


def load_eval_results(path: Path) -> tuple[list[Turn], list[dict[str, Any]], list[dict]]:
    files = _results_files(path)
    if not files:
        raise ValueError(f"{path}: no results.json in it or in its subfolders (run rescue-train eval first)")
    turns, sources, skipped = [], [], []
    benches: dict[str, Any] = {}
    for file in files:
        results = json.loads(file.read_text(encoding="utf-8"))
        if "records" not in results or "config" not in results:
            raise ValueError(f"{file}: not an evaluation results file (no records/config)")
        data = results["config"].get("data") or {}
        data = data.get("source", "bundled") if isinstance(data, dict) else data  # a plain path before data.*
        if data not in benches:
            loaded = load_benchmark(data)
            benches[data] = (loaded, assign_units(loaded.samples))
        bench, units = benches[data]
        recorded = (results.get("data") or {}).get("fingerprint")
        if recorded and recorded != bench.fingerprint:
            raise ValueError(f"{file}: the run's data {data!r} has changed since the run (fingerprint {recorded}, "
                             f"now {bench.fingerprint}); the dialogue context cannot be rebuilt")
        samples = {s.sample_id: s for s in bench.samples}
        system = str(results.get("label") or file.parent.name)
        while any(source["system"] == system for source in sources):  # two runs of one model: keep them apart
            system += f" ({file.parent.name})"
        audited = {r.get("task") for r in results["records"] if r.get("parse_status", "ok") == "ok"
                   and _is_text(r.get("prediction"))}
        tasks = sorted({str(r.get("task")) for r in results["records"]})
        if not audited:
            raise ValueError(f"{file}: no task with turns of text as predictions (tasks: {', '.join(tasks)}); "
                             "audit the results of a next-turn task such as rsg")
        count = 0
        for record in results["records"]:
            if record.get("task") not in audited:
                continue
            origin = f"{file}: record {record.get('id')!r}"
            if record.get("parse_status", "ok") != "ok":
                skipped.append({"system": system, "id": record.get("id"), "reason": "the prediction did not parse"})
                continue
            text = prediction_text(record, origin)
            if not text.strip():
                skipped.append({"system": system, "id": record.get("id"), "reason": "empty prediction"})
                continue
            sample = samples.get(record.get("sample_id"))
            if sample is None:
                raise ValueError(f"{origin}: sample {record.get('sample_id')!r} is not in the data {data!r}")
            row_index = _therapist_row(sample, int(record["row_index"]), origin)
            turns.append(Turn(system, sample.sample_id, therapist_turn_ids(sample)[row_index], "multi",
                              _prior(sample, row_index), text, origin, units[sample.sample_id], row_index))
            count += 1
        sources.append({"kind": "eval", "path": str(file), "system": system, "tasks": sorted(audited),
                        "ignored_tasks": [t for t in tasks if t not in audited], "data": data,
                        "data_fingerprint": bench.fingerprint, "turns": count})
    return turns, sources, skipped


def _therapist_row(sample: Sample, row_index: int, origin: str) -> int:
    """The row the generated turn stands for: the record's row when it is the therapist's, else the row just
    after it (a record may point at the last row of its context)."""
    if not 1 <= row_index <= len(sample.rows):
        raise ValueError(f"{origin}: row_index {row_index} is outside sample {sample.sample_id!r}")
    if sample.row(row_index).is_therapist:
        return row_index
    if row_index < len(sample.rows) and sample.row(row_index + 1).is_therapist:
        return row_index + 1
    raise ValueError(f"{origin}: neither row {row_index} of sample {sample.sample_id!r} nor the next is the "
                     "therapist's; cannot place the generated turn")


def load_inputs(inputs: list[str], *, data: str = "bundled", reference_rows: str = "all",
                limit: int | None = None) -> Loaded:
    """The turns of every INPUT, at most ``limit`` per INPUT (in dialogue order)."""
    turns: list[Turn] = []
    sources: list[dict[str, Any]] = []
    skipped: list[dict] = []
    reference = None
    for entry in inputs:
        if entry == REFERENCE:
            reference = len(sources)
            got, source = load_reference(data)
            found, new = got, [source]
        else:
            path = Path(entry)
            if not path.exists():
                raise FileNotFoundError(f"{entry}: no such file or folder (expected an eval results folder, a "
                                        ".jsonl of dialogues, or 'reference')")
            if path.suffix == ".jsonl":
                found, source = load_dialogues(path)
                new = [source]
            else:
                found, new, more = load_eval_results(path)
                skipped += more
        if limit:
            found = found[:limit]
        for source in new:
            source["turns"] = sum(t.system == source["system"] for t in found)
        turns += found
        sources += new
    if reference is not None and reference_rows == "matched":
        places = {(t.dialogue_id, t.row_index) for t in turns if t.system != REFERENCE and t.row_index}
        if not places:
            raise ValueError("reference_rows=matched needs an eval results INPUT whose rows the reference turns match")
        turns = [t for t in turns if t.system != REFERENCE or (t.dialogue_id, t.row_index) in places]
        sources[reference]["turns"] = sum(t.system == REFERENCE for t in turns)
    if not turns:
        raise ValueError("no turns to audit in " + ", ".join(inputs))
    return Loaded(turns, sources, skipped)
