"""Run an audit: turns -> sentences -> one judge request per (sentence, criterion) -> labels -> results.

The output folder holds ``run.json`` (the judge's identity), ``judge.json`` (the backend's description),
``labels.jsonl`` (one line per answered request, keyed by the hash of the exact prompt, appended and fsynced
as each answer arrives), ``results.json``, ``report.md`` and the plots. A killed audit resumes without asking
again for any answer that came back; a later audit into the same folder (another model,
the reference turns again) reuses every answer whose prompt it has seen: the cache. A folder whose labels came
from another judge is refused unless ``overwrite=true``.

Requests are sent in (system message, INPUT, dialogue, turn, sentence, criterion) order: every request about
RELATE's five first, then every request about ours. The prompt puts what they share first (the system
message, then the dialogue), so a prefix cache (vLLM's, or an API's) serves each dialogue's requests.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from ..inference import Arrivals, BackendError, Completion, as_completion
from ..inference.factory import check_model
from ..folders import output_folder
from ..io import append_jsonl, read_json, read_jsonl, write_json_atomic
from ..provenance import config_hash, git_commit, versions
from .config import AuditConfig, answer_budget, chosen_criteria, judge_identity, make_judge
from .criteria import EXPLORATORY_KEYS, PARSE_FAIL, answer_schema, family, label_answer, messages, prompt_key
from .inputs import Loaded, Turn, load_inputs
from .split import split_sentences

RESULTS_FORMAT = "rescue-train/audit-results/v1"
BOOTSTRAP_UNIT = ("split unit: the couple or family of benchmark turns (reference, eval results), the dialogue of a "
                  "dialogue file")
CHARS_PER_TOKEN = 4  # rough English average, for the dry-run estimate only
LABEL_FIELDS = {"key": str, "criterion": str, "label": str}  # what a labels.jsonl line must hold to be reused


@dataclass
class Request:
    sentence: int  # index into the sentence list
    criterion: str
    key: str
    prompt: list[dict[str, str]]


def criteria_for(setting: str, chosen: tuple[str, ...]) -> tuple[str, ...]:
    """Our exploratory pair is asked only about multi-party turns."""
    return tuple(k for k in chosen if setting == "multi" or k not in EXPLORATORY_KEYS)


def ordered(turns: list[Turn]) -> list[Turn]:
    """Turns grouped by INPUT system and dialogue (first-seen order), then by turn number."""
    first: dict[tuple[str, str], int] = {}
    for t in turns:
        first.setdefault((t.system, t.dialogue_id), len(first))
    return sorted(turns, key=lambda t: (first[(t.system, t.dialogue_id)], t.turn_id))


def plan(turns: list[Turn], cfg: AuditConfig) -> tuple[list[dict[str, Any]], list[Request]]:
    """The sentences of every turn and the requests about them, in prefix-cache order."""
    chosen = chosen_criteria(cfg)
    sentences: list[dict[str, Any]] = []
    requests: list[Request] = []
    for turn in ordered(turns):
        criteria = criteria_for(turn.setting, chosen)
        parts = split_sentences(turn.text, cfg.splitter)
        prior = turn.prior if cfg.context < 0 else turn.prior[-cfg.context:] if cfg.context else []
        for number, text in enumerate(parts, start=1):
            sentences.append({"system": turn.system, "dialogue_id": turn.dialogue_id, "unit": turn.unit,
                              "turn_id": turn.turn_id, "sentence_id": number, "setting": turn.setting,
                              "row_index": turn.row_index, "text": text, "criteria": list(criteria)})
            for criterion in criteria:
                prompt = messages(turn.setting, prior, parts[:number - 1], text, criterion)
                requests.append(Request(len(sentences) - 1, criterion, prompt_key(prompt), prompt))
    # The requests under one system message go together; the stable sort keeps their dialogue order.
    return sentences, sorted(requests, key=lambda r: family(r.criterion) != "published")


class LabelStore:
    """labels.jsonl under a run.json that names the judge; answers keyed by prompt hash."""

    def __init__(self, folder: Path, identity_hash: str, overwrite: bool):
        self.folder = folder
        self.path = folder / "labels.jsonl"
        run_file = folder / "run.json"
        if run_file.exists():
            known = read_json(run_file, {"judge_hash": str}, "an audit's run.json")
            if known.get("judge_hash") != identity_hash:
                if not overwrite:
                    raise ValueError(f"{folder} holds labels from another judge configuration (hash "
                                     f"{known.get('judge_hash')}, this one {identity_hash}); pass overwrite=true to "
                                     "start over, or choose another output_dir=")
                self.path.unlink(missing_ok=True)
        self.identity_hash = identity_hash
        self.answers = {line["key"]: line for line in read_jsonl(self.path, LABEL_FIELDS, "an audit label")}

    def open(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.folder / "run.json", {"format": RESULTS_FORMAT, "judge_hash": self.identity_hash})

    def add(self, lines: list[dict[str, Any]]) -> None:
        append_jsonl(self.path, lines)
        self.answers.update((line["key"], line) for line in lines)


def estimate(requests: list[Request], store: LabelStore | None, max_new_tokens: int) -> dict[str, Any]:
    """Counts and a rough token estimate (about 4 characters a token) for a dry run."""
    todo = [r for r in requests if store is None or r.key not in store.answers]
    unique = {r.key: r for r in todo}
    texts = ["\n".join(m["content"] for m in r.prompt) for r in unique.values()]
    new_chars, previous = 0, ""
    for text in texts:  # what a prefix cache still has to read: the part not shared with the previous request
        new_chars += len(text) - len(os.path.commonprefix([text, previous]))
        previous = text
    return {"requests": len(requests), "cached": len(requests) - len(todo), "to_send": len(unique),
            "prompt_tokens": sum(map(len, texts)) // CHARS_PER_TOKEN,
            "prompt_tokens_after_prefix_cache": new_chars // CHARS_PER_TOKEN,
            "max_output_tokens": len(unique) * max_new_tokens}


def ask(store: LabelStore, requests: list[Request], sentences: list[dict[str, Any]], cfg: AuditConfig,
        backend=None) -> dict[str, Any]:
    """Send every request not yet answered, chunk by chunk; returns the judge's description, kept in
    ``judge.json`` beside the labels (a run answered wholly from the cache reads it back). The judge is started
    only when a request is missing, and closed here when made here. A stopping backend error (BackendError)
    keeps the answers that finished and names the request that failed."""
    saved = store.folder / "judge.json"
    todo = list({r.key: r for r in requests if r.key not in store.answers}.values())
    if not todo:
        return read_json(saved, {"backend": str}, "a judge description") if saved.exists() \
            else {"backend": cfg.backend, "model": cfg.model}
    from tqdm.auto import tqdm

    owned = backend is None
    backend = backend or make_judge(cfg)
    budget = answer_budget(cfg)
    try:
        write_json_atomic(saved, backend.describe())
        with tqdm(total=len(todo), desc="audit: judge", unit="call", disable=not cfg.progress) as bar:
            for start in range(0, len(todo), cfg.chunk):
                part = todo[start:start + cfg.chunk]

                def arrived(answers, part=part) -> None:  # on disk as they arrive: a kill re-asks none of them
                    store.add(label_lines([part[k] for k, _ in answers], [answer for _, answer in answers]))
                    bar.update(len(answers))

                arrivals = Arrivals(arrived)
                try:
                    constraints = [{"json": answer_schema(r.criterion)} if cfg.constrained else None for r in part]
                    answers = backend.generate([r.prompt for r in part], max_new_tokens=[budget] * len(part),
                                               constraints=constraints, on_answers=arrivals)
                except BackendError as stop:
                    arrivals.rest(stop.partial)
                    if stop.index is not None:
                        stop.where = "judging " + describe_request(part[stop.index], sentences)
                    raise
                arrivals.rest(answers)
        return backend.describe()
    finally:
        if owned:
            backend.close()


def label_lines(requests: list[Request], answers: list[str | Completion | None]) -> list[dict[str, Any]]:
    """labels.jsonl lines of the answered requests (None: not answered before a stop)."""
    lines = []
    for request, answer in zip(requests, answers):
        if answer is not None:
            answer = as_completion(answer)
            lines.append({"key": request.key, "criterion": request.criterion, **label_answer(answer),
                          "raw": answer.text, "finish_reason": answer.finish_reason, "usage": answer.usage})
    return lines


def describe_request(request: Request, sentences: list[dict[str, Any]]) -> str:
    s = sentences[request.sentence]
    return (f"{s['system']} dialogue {s['dialogue_id']!r} turn {s['turn_id']} sentence {s['sentence_id']}, "
            f"criterion {request.criterion}")


def attach_labels(sentences: list[dict[str, Any]], requests: list[Request], store: LabelStore) -> None:
    for s in sentences:
        s["labels"] = {}
    for r in requests:
        answer = store.answers.get(r.key)
        label = {"label": answer["label"], "span": answer.get("span"), "referent": answer.get("referent"),
                 "reason": answer.get("reason")} if answer else {"label": None}
        if answer and answer["label"] == PARSE_FAIL:
            label["error"] = answer.get("error")
        sentences[r.sentence]["labels"][r.criterion] = label


def run(inputs: list[str], cfg: AuditConfig, *, backend=None,
        on_results: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
    """Audit ``inputs``; returns the results document (or, with ``dry_run``, the plan's counts). ``on_results``
    is called with the results while the output folder is still this audit's alone (the command writes its
    report there)."""
    loaded: Loaded = load_inputs(inputs, data=cfg.data.source, reference_rows=cfg.reference_rows, limit=cfg.limit)
    sentences, requests = plan(loaded.turns, cfg)
    identity_hash = config_hash(judge_identity(cfg))
    folder = Path(cfg.output_dir)
    if cfg.dry_run:
        store = LabelStore(folder, identity_hash, cfg.overwrite)
        per_system: dict[str, dict[str, int]] = {}
        for s in sentences:
            counts = per_system.setdefault(s["system"], {"turns": 0, "sentences": 0, "requests": 0})
            counts["sentences"] += 1
            counts["requests"] += len(s["criteria"])
            counts["turns"] += s["sentence_id"] == 1
        return {"dry_run": True, "systems": per_system, "sentences": sentences, "skipped": loaded.skipped,
                **estimate(requests, store, answer_budget(cfg))}
    if backend is None:  # the judge this run will start: checked before anything is written
        from ..inference import ApiOptions
        from ..inference.factory import backend_class, backend_problems
        from ..inference.options import pick

        found = backend_problems(cfg.backend, pick(ApiOptions, cfg))
        if found:
            raise ValueError("; ".join(found))
        if not backend_class(cfg.backend).remote:  # a typo leaves no folder behind
            check_model(cfg.model, "model")
    with output_folder(folder, "audit"):  # the labels are read once no other audit writes them
        results = _audit(LabelStore(folder, identity_hash, cfg.overwrite), loaded, sentences, requests, cfg, backend)
        if on_results is not None:
            on_results(results)
        return results


def _audit(store: LabelStore, loaded: Loaded, sentences: list[dict[str, Any]], requests: list[Request],
           cfg: AuditConfig, backend) -> dict[str, Any]:
    store.open()
    described = ask(store, requests, sentences, cfg, backend)
    attach_labels(sentences, requests, store)
    from .stats import analyse

    results = {
        "format": RESULTS_FORMAT,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "inputs": loaded.sources,
        "skipped": loaded.skipped,
        "config": asdict(cfg),
        "criteria": list(chosen_criteria(cfg)),
        "judge_hash": store.identity_hash,
        "judge": described,
        "versions": versions(),
        "git_commit": git_commit(),
        "bootstrap": {"resamples": cfg.bootstrap, "seed": cfg.seed, "unit": BOOTSTRAP_UNIT},
        "analysis": analyse(sentences, cfg.bootstrap, cfg.seed),
        "sentences": sentences,
    }
    write_json_atomic(store.folder / "results.json", results)
    return results
