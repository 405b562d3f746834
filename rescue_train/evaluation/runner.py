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

from collections import Counter
from contextlib import ExitStack

from ..console import chatter_to
from ..data.splits import fold_notes
from ..inference.factory import backend_class, check_model
from ..folders import output_folder, own_folder
from ..provenance import config_hash
from .config import EvalConfig, to_dict
from .models import problems_before_work, resolve_model
from .plan import Benchmark, EvalData, Variant, check_training_data, variants
from .calibrate import calibrate
from .calibrate import check as check_calibration
from .prediction import LazyBackend, check_empty_answers, predict_sharded, predict_variant
from .protocols import predict
from .scorers import make_scorers, score_variant


def run(cfg: EvalConfig, *, backend=None, judge_backend=None) -> list[dict]:
    """Evaluate every variant (base and/or adapters) of ``cfg``, each on its own test instances; returns the
    results documents. ``backend``/``judge_backend`` replace the configured ones (tests, or reuse of a started
    engine). Every component the run needs is checked before the first prediction, and before anything is
    written (a typo leaves no run folder)."""
    found = problems_before_work(cfg, model=backend is None, judge=judge_backend is None)
    if found:
        raise ValueError("; ".join(found))
    spec = resolve_model(cfg)
    if backend is None and not backend_class(cfg.backend).remote:
        check_model(spec.model, "model")
    if judge_backend is None and cfg.judge.on and not backend_class(cfg.judge.backend).remote:
        check_model(cfg.judge.model, "judge.model")
    benchmark = Benchmark(cfg)
    planned = []
    for variant in variants(cfg, spec):
        data = benchmark.select(variant.cfg.data, variant.folds)
        variant.training_data = check_training_data(variant.cfg, variant, data)
        check_calibration(variant.cfg, variant)
        if variant.run is not None and data.split["test_folds"]:  # a trained model: what its fold trained on
            data.split["fold_notes"] = fold_notes(benchmark.manifest(variant.cfg.data), data.split["test_folds"],
                                                  Counter(i.unit for built in benchmark.built.values() for i in built))
        planned.append((variant, data))
    with ExitStack() as held:  # one writer per run folder
        chosen = [variant for variant, _ in planned]
        if len(chosen) > 1:
            own_folder(chosen[0].output.parent, "eval")
        for variant in chosen:
            held.enter_context(output_folder(variant.output, "eval"))
        scorers = make_scorers(cfg, judge_backend)
        try:
            for scorer in scorers:
                scorer.check([task for task in cfg.tasks if scorer.applies(task)])
            lazy = LazyBackend(cfg, spec, backend)
            log = (chosen[0].output if len(chosen) == 1 else chosen[0].output.parent) / "eval.log"
            with chatter_to(log, verbose=cfg.verbose or not backend_class(cfg.backend).chatty):
                try:
                    if cfg.data_parallel > 1 and backend is None:
                        for same, data in _same_instances(planned):
                            predict_sharded(same[0].cfg, spec, same, data)
                    predicted = [(v, d, predict_variant(v.cfg, spec, v, d, lazy)) for v, d in planned]
                    for variant, data, done in predicted:
                        ids = [i.id for task in cfg.tasks for i in data.instances[task]]
                        records = [done.records[i] for i in ids]
                        variant.calibration = calibrate(variant.cfg, records, variant, benchmark.built,
                                                        lambda asked, v=variant: predict(
                                                            lazy.get(), asked, protocol="rank", mode=v.cfg.data.mode,
                                                            adapter=v.adapter, rank_score=v.cfg.rank_score,
                                                            answer_format=v.cfg.data.answer_format))
                        done.records.update(zip(ids, records))
                finally:
                    lazy.close()  # every prediction is made: free the device before a local judge model or engine starts
            for variant, data, done in predicted:
                check_empty_answers(variant.cfg, variant, [done.records[i.id] for task in cfg.tasks
                                                           for i in data.instances[task]])
            return [score_variant(v.cfg, spec, v, d, p, scorers) for v, d, p in predicted]
        finally:
            for scorer in scorers:
                scorer.close()


def _same_instances(planned: list[tuple[Variant, EvalData]]) -> list[tuple[list[Variant], EvalData]]:
    """The variants grouped by what they predict (the same instances under the same settings): one set of
    data-parallel engines serves each group."""
    groups: dict[str, tuple[list[Variant], EvalData]] = {}
    for variant, data in planned:
        key = config_hash({"config": to_dict(variant.cfg), "ids": [i.id for t in sorted(data.instances)
                                                                     for i in data.instances[t]]})
        groups.setdefault(key, ([], data))[0].append(variant)
    return list(groups.values())
