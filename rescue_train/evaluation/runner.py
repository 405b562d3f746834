"""Run an evaluation: instances -> predictions -> judge and BERTScore -> aggregates -> results.json.

A run folder holds:

* ``run.json`` – the run's identity: the hash of everything that decides the predictions (config, model,
  adapter weights, data fingerprint, split manifest) and the hash of the scoring settings (judge, BERTScore);
* ``predictions.jsonl`` – one prediction record per finished instance, appended and fsynced as it arrives
  (an API answer at once, a local batch when it is done);
* ``scores.jsonl`` – judge and BERTScore results per instance, appended chunk by chunk (the judge's verdicts
  are cached in ``judge_cache.jsonl`` as they arrive);
* ``results.json`` – the final document (written atomically).

A killed run resumes from the two jsonl files without recomputing finished instances; a torn last line
(the kill came mid-write) is dropped. A folder holding another run's predictions is refused
(``overwrite=true`` starts over); changed scoring settings discard the old scores only.
"""

from __future__ import annotations

import os
from collections import Counter
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

from ..console import chatter_to
from ..data.splits import fold_notes
from ..inference.factory import backend_class, check_model
from ..folders import output_folder, own_folder
from ..provenance import config_hash
from .config import EvalConfig, to_dict
from .models import ModelSpec, backend_spec, problems_before_work, resolve_model
from .plan import Benchmark, check_training_data, variants
from .run_folder import scoring_identity
from .calibrate import calibrate
from .calibrate import check as check_calibration
from .prediction import LazyBackend, check_empty_answers, predict_sharded, predict_variant
from .protocols import predict
from .scorers import make_scorers, score_variant

# The files of a tokenizer folder that decide the prompts (tokenizer.json, tokenizer_config.json, vocab.json,
# merges.txt, special_tokens_map.json, added_tokens.json, chat_template.jinja, ...).
TOKENIZER_FILES = ("token", "vocab", "merges", "chat_template")


def run(cfg: EvalConfig, *, backend=None, judge_backend=None) -> list[dict]:
    """Evaluate every variant (base and/or adapters) of ``cfg``, each on its own test instances; returns the
    results documents. ``backend``/``judge_backend`` replace the configured ones (tests, or reuse of a started
    engine). Every component the run needs is checked before the first prediction, and before anything is
    written (a typo leaves no run folder)."""
    return run_together([cfg], backend=backend, judge_backend=judge_backend)


def run_together(cfgs: list[EvalConfig], *, backend=None, judge_backend=None) -> list[dict]:
    """Several evaluations of one base model (a cross-validation's folds and its zero-shot baseline) as one: each
    is exactly the evaluation ``run(cfg)`` makes (its variants, test instances, run folder, records and resume),
    but one engine serves them all, the base model loaded once with every adapter (vLLM: one ``LoRARequest`` per
    request; hf: peft's named adapters), or with ``data_parallel=N`` one set of N engines. The evaluations must
    agree on everything that starts an engine or scores (they differ in their adapters and instances)."""
    for cfg in cfgs:
        found = problems_before_work(cfg, model=backend is None, judge=judge_backend is None)
        if found:
            raise ValueError("; ".join(found))
    specs = [resolve_model(cfg) for cfg in cfgs]
    shared = shared_spec(cfgs, specs)
    cfg = cfgs[0]
    if backend is None and not backend_class(cfg.backend).remote:
        check_model(shared.model, "model")
    if judge_backend is None and cfg.judge.on and not backend_class(cfg.judge.backend).remote:
        check_model(cfg.judge.model, "judge.model")
    benchmarks: dict[str, Benchmark] = {}  # one per data configuration (a baseline's prompts are the runs')
    planned = []
    built = {}  # each variant's benchmark instances (calibration draws from them)
    for one, spec in zip(cfgs, specs):
        benchmark = benchmarks.setdefault(
            config_hash({"data": to_dict(one)["data"], "tasks": one.tasks, "limit": one.limit}), Benchmark(one))
        for variant in variants(one, spec):
            data = benchmark.select(variant.cfg.data, variant.folds)
            variant.training_data = check_training_data(variant.cfg, variant, data)
            check_calibration(variant.cfg, variant)
            if variant.run is not None and data.split["test_folds"]:  # a trained model: what its fold trained on
                data.split["fold_notes"] = fold_notes(
                    benchmark.manifest(variant.cfg.data), data.split["test_folds"],
                    Counter(i.unit for instances in benchmark.built.values() for i in instances))
            built[id(variant)] = benchmark.built
            planned.append((variant, data, spec))
    with ExitStack() as held:  # one writer per run folder
        for spec in specs:
            chosen = [v for v, _, s in planned if s is spec]
            if len(chosen) > 1:
                own_folder(chosen[0].output.parent, "eval")
        for variant, _, _ in planned:
            held.enter_context(output_folder(variant.output, "eval"))
        scorers = make_scorers(cfg, judge_backend)
        try:
            for scorer in scorers:
                scorer.check([task for task in cfg.tasks if scorer.applies(task)])
            lazy = LazyBackend(cfg, shared, backend)
            log = Path(os.path.commonpath([v.output for v, _, _ in planned])) / "eval.log"
            with chatter_to(log, verbose=cfg.verbose or not backend_class(cfg.backend).chatty):
                try:
                    if cfg.data_parallel > 1 and backend is None:
                        predict_sharded(shared, planned)
                    predicted = [(v, d, s, predict_variant(v.cfg, s, v, d, lazy)) for v, d, s in planned]
                    for variant, data, _, done in predicted:
                        ids = [i.id for task in variant.cfg.tasks for i in data.instances[task]]
                        records = [done.records[i] for i in ids]
                        variant.calibration = calibrate(variant.cfg, records, variant, built[id(variant)],
                                                        lambda asked, v=variant: predict(
                                                            lazy.get(), asked, protocol="rank", mode=v.cfg.data.mode,
                                                            adapter=v.adapter, rank_score=v.cfg.rank_score,
                                                            answer_format=v.cfg.data.answer_format))
                        done.records.update(zip(ids, records))
                finally:
                    lazy.close()  # every prediction is made: free the device before a local judge model or engine starts
            for variant, data, _, done in predicted:
                check_empty_answers(variant.cfg, variant, [done.records[i.id] for task in variant.cfg.tasks
                                                           for i in data.instances[task]])
            return [score_variant(v.cfg, s, v, d, p, scorers) for v, d, s, p in predicted]
        finally:
            for scorer in scorers:
                scorer.close()


def shared_spec(cfgs: list[EvalConfig], specs: list[ModelSpec]) -> ModelSpec:
    """The one engine's model: the base model with every evaluation's adapters by name. Refuses evaluations
    that one engine cannot serve alike: another base model, backend or engine setting, scoring setting, an
    adapter name given to two folders, or tokenizers whose files differ."""
    first, spec = cfgs[0], specs[0]
    for cfg, other in zip(cfgs[1:], specs[1:]):
        differ = [what for what, a, b in (
            ("model", other.model, spec.model),
            ("backend and engine settings", replace(backend_spec(cfg, other), adapters={}, tokenizer=None),
             replace(backend_spec(first, spec), adapters={}, tokenizer=None)),
            ("judge and BERTScore settings", scoring_identity(cfg), scoring_identity(first)),
            ("data_parallel", cfg.data_parallel, first.data_parallel),
            ("tokenizer files", _tokenizer_files(other.tokenizer), _tokenizer_files(spec.tokenizer))) if a != b]
        if differ:
            raise ValueError(f"these evaluations differ in their {differ[0]}: one engine cannot serve them all; "
                             "evaluate them separately")
    adapters: dict[str, str] = {}
    for other in specs:
        for name, path in other.adapters.items():
            if adapters.setdefault(name, path) != path:
                raise ValueError(f"two adapters are named {name!r} ({adapters[name]} and {path}): evaluate them "
                                 "separately")
    return replace(spec, adapters=adapters)


def _tokenizer_files(folder: str | None) -> dict[str, bytes] | None:
    """What of a tokenizer folder (an adapter's, beside its weights and training files) decides the prompts: its
    tokenizer files and chat template."""
    if folder is None or not Path(folder).is_dir():
        return None if folder is None else {"name": folder.encode()}
    return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())
            if p.is_file() and any(word in p.name for word in TOKENIZER_FILES)}
