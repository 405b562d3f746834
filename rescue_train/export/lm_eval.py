"""``rescue-train export lm-eval``: the closed-set tasks as lm-evaluation-harness multiple-choice tasks.

Each instance becomes one document: the ``sft`` prompt rendered with the chosen model's chat template (the
text our rank protocol conditions on), every candidate's continuation (the answer plus the template's
end-of-turn markup, exactly what our rank protocol scores) and the gold candidate's index. With
``target_delimiter: ""`` the harness then scores the same strings as ``protocol=rank``, so its ``acc`` is our
Recall@1. The prompts depend on the chat template, so an export is made for one tokenizer (``model=``,
default ``tiny``) and is reused for every model that shares that template.

Only the user's local copy of the benchmark is read; the export stays on their machine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Sequence

from ..data.fields import DataError
from ..io import write_json_atomic
from ..provenance import versions

GROUP = "rescue"


def _task_yaml(task: str, meta: dict[str, Any]) -> str:
    # Written by hand: the !function tag is lm-eval's YAML extension, which yaml.safe_dump cannot emit.
    return "\n".join([
        f"task: {GROUP}_{task}",
        "custom_dataset: !function lm_eval_loader.load",
        f"dataset_kwargs: {{task: {task}}}",
        "test_split: test",
        "output_type: multiple_choice",
        "doc_to_text: prompt",
        "doc_to_choice: choices",
        "doc_to_target: gold_index",
        'target_delimiter: ""',
        "metric_list:",
        "  - metric: acc",
        "    aggregation: mean",
        "    higher_is_better: true",
        f"metadata: {json.dumps(meta, sort_keys=True)}",
        "",
    ])


def _group_yaml(tasks: Sequence[str]) -> str:
    return "\n".join([
        f"group: {GROUP}",
        f"task: [{', '.join(f'{GROUP}_{t}' for t in tasks)}]",
        "aggregate_metric_list:",
        "  - metric: acc",
        "    aggregation: mean",
        "    weight_by_size: true",
        "metadata: {version: 1.0}",
        "",
    ])


def documents(instances, encoder, mode: str, fmt: str = "label") -> list[dict[str, Any]]:
    """One harness document per instance, from the same prompt and continuations as ``protocol=rank``."""
    from ..evaluation.protocols import rank_request

    docs = []
    for inst in instances:
        if inst.gold not in inst.candidates:
            raise DataError(f"instance {inst.id}: gold {inst.gold!r} is not among its candidates")
        prompt, continuations = encoder.continuation_texts(*rank_request(inst, mode, fmt))
        docs.append({"id": inst.id, "scenario": inst.scenario, "prompt": prompt, "choices": continuations,
                     "candidates": list(inst.candidates), "gold_index": inst.candidates.index(inst.gold)})
    return docs


def export(cfg, out: Path) -> dict[str, Any]:
    """Write the task YAMLs, the data and ``export_meta.json`` to ``out``; returns the meta."""
    from transformers import AutoTokenizer

    from ..evaluation.models import resolve_model
    from ..evaluation.plan import load_instances
    from ..inference.base import ChatEncoder
    from ..tasks import TASKS

    tasks = [t for t in cfg.tasks if TASKS[t].closed_set]
    if not tasks:
        raise ValueError(f"tasks={list(cfg.tasks)} holds no closed-set task; lm-eval export covers "
                         f"{', '.join(t for t in TASKS if TASKS[t].closed_set)}")
    spec = resolve_model(cfg)
    encoder = ChatEncoder(AutoTokenizer.from_pretrained(spec.tokenizer or spec.model))
    data = load_instances(cfg, spec)
    meta = {"format": "rescue-train/lm-eval-export/v1", "tasks": {},
            "chat_template_of": cfg.tokenizer or cfg.model or "the run's adapter", "data_config": data.config,
            "data": {"source": data.source, "fingerprint": data.fingerprint, "notes": data.notes},
            "split": data.split, "versions": versions()}
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(Path(__file__).with_name("lm_eval_loader.py"), out / "lm_eval_loader.py")
    for task in tasks:
        docs = documents(data.instances[task], encoder, cfg.data.mode, cfg.data.answer_format)
        with open(out / f"{GROUP}_{task}.jsonl", "w", encoding="utf-8") as handle:
            handle.writelines(json.dumps(d, ensure_ascii=False) + "\n" for d in docs)
        (out / f"{GROUP}_{task}.yaml").write_text(_task_yaml(task, {"version": 1.0, "instances": len(docs)}),
                                                   encoding="utf-8")
        meta["tasks"][task] = len(docs)
    (out / f"{GROUP}.yaml").write_text(_group_yaml(tasks), encoding="utf-8")
    write_json_atomic(out / "export_meta.json", meta)
    return meta
