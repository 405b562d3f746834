"""The scoring of an evaluation's predictions: BERTScore and the judge, each a stage that scores what is still
pending in chunks and appends its lines to ``scores.jsonl`` (a rerun resumes), then the results document."""

from __future__ import annotations

from typing import Sequence

from ..io import append_jsonl
from ..scoring.judge import judge_budget, judge_retries, make_judge_backend, needs_judging
from ..tasks import TASKS
from .config import EvalConfig
from .models import ModelSpec
from .plan import EvalData, Variant
from .prediction import Predicted, chunks, progress
from .results import write_results


def score_variant(cfg: EvalConfig, spec: ModelSpec, variant: Variant, data: EvalData, predicted: Predicted,
                  scorers: list) -> dict:
    folder = predicted.folder
    instances = {inst.id: inst for task in cfg.tasks for inst in data.instances[task]}
    records = [predicted.records[i] for i in instances]
    scores = folder.done_scores()
    for scorer in scorers:
        scorer.folder = folder.path
        todo_records = [r for r in records if scorer.applies(r["task"]) and scorer.pending(scores.get(r["id"], {}))]
        with progress(len(todo_records), f"{variant.name}: {scorer.name}", cfg.progress) as bar:
            for part in chunks(todo_records, scorer.chunk):
                lines = scorer.score(part, instances, records)
                append_jsonl(folder.scores, lines)
                for line in lines:
                    scores.setdefault(line["id"], {}).update({k: v for k, v in line.items() if k != "id"})
                bar.update(len(part))
    for record in records:
        record["scores"] = {**record.get("scores", {}), **scores.get(record["id"], {})}
    return write_results(cfg, spec, variant, data, predicted.backend_info, predicted.identity, folder, records)


class BertScoreStage:
    name, chunk, folder = "bertscore", 256, None

    @staticmethod
    def applies(task: str) -> bool:
        return TASKS[task].bertscore

    @staticmethod
    def pending(scores: dict) -> bool:
        return "bertscore_f1" not in scores

    def __init__(self, cfg: EvalConfig):
        self.cfg = cfg.bertscore
        self.metric = None

    def check(self, tasks: Sequence[str]) -> None:
        from ..scoring.bertscore import check_model

        if tasks:
            check_model(self.cfg.model, self.cfg.num_layers)

    def score(self, part: list[dict], instances: dict, records: list[dict]) -> list[dict]:
        from ..scoring.bertscore import BertScore, texts

        if self.metric is None:  # loaded on first use; idf weights come from all references of the run
            refs = [texts(r["task"], r["gold"], r["prediction"])[1] for r in records if self.applies(r["task"])]
            self.metric = BertScore(self.cfg.model, self.cfg.num_layers, self.cfg.idf, self.cfg.rescale,
                                    self.cfg.batch_size, self.cfg.device, idf_sentences=refs)
        # A failed answer scores 0 whatever part of it parsed (the one failure rule, metrics.py).
        pairs = [texts(r["task"], r["gold"], r["prediction"] if r["parse_status"] == "ok" else None) for r in part]
        values = self.metric.f1([c for c, _ in pairs], [ref for _, ref in pairs])
        return [{"id": r["id"], "bertscore_f1": v, "bertscore_model": self.metric.settings["model"]}
                for r, v in zip(part, values)]

    def close(self) -> None:
        self.metric = None


class JudgeStage:
    name, folder = "judge", None

    @staticmethod
    def applies(task: str) -> bool:
        return TASKS[task].judged

    @staticmethod
    def pending(scores: dict) -> bool:
        """Never judged, or a verdict that stayed unreadable: a rerun asks exactly those again (the cache
        serves the record's readable verdicts)."""
        return needs_judging(scores)

    def __init__(self, cfg: EvalConfig, backend=None):
        from ..scoring.judge import Judge

        self.cfg = cfg.judge
        self.chunk = 64
        self._backend = backend
        self._judge_cls = Judge
        self.judge = None

    def check(self, tasks: Sequence[str]) -> None:
        from ..scoring.judge import check_judge

        if tasks and self._backend is None:
            check_judge(self.cfg)

    def score(self, part: list[dict], instances: dict, records: list[dict]) -> list[dict]:
        from ..scoring.judge import JudgeCache

        if self.judge is None:
            self.judge = self._judge_cls(self._backend or make_judge_backend(self.cfg), model=self.cfg.model,
                                         vp_scale=self.cfg.vp_scale, max_new_tokens=judge_budget(self.cfg),
                                         retries=judge_retries(self.cfg))
        cache = self.folder / "judge_cache.jsonl" if self.cfg.cache and self.folder else None
        if self.judge.cache.path != cache:  # one cache file per run folder
            self.judge.cache = JudgeCache(cache)
        return self.judge.judge(part, instances)

    def close(self) -> None:
        if self.judge is not None and self._backend is None:  # a judge backend given to run() stays open
            self.judge.backend.close()


def make_scorers(cfg: EvalConfig, judge_backend=None) -> list:
    scorers: list = []
    if cfg.bertscore.model.lower() != "none":
        scorers.append(BertScoreStage(cfg))
    if cfg.judge.on or judge_backend is not None:
        scorers.append(JudgeStage(cfg, judge_backend))
    return scorers
