"""The data layer's keys of the one data configuration: where the benchmark comes from, how instances are shown,
and how samples are split. The configuration itself, ``rescue_train.tasks.DataConfig``, adds ``context`` and the
options each task declares (``rescue_train.tasks.options``). ``convert``, ``stats``, ``train`` (LoRA and
classifiers), ``compare``, ``eval`` and ``baselines`` all read it: ``data.<field>=...`` on the key=value
commands, ``--<field-with-dashes>`` on the flag commands. A training run saves it in ``config.yaml``; ``eval run=RUN_DIR`` reads it back, so the
evaluation prompts are the training prompts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from ..settings import check_values, meaning

ANSWER_FORMATS = ("label", "json")
MODES = ("dialogue", "audio", "visual", "audiovisual")
SPLITS = {
    "kfold": "grouped k-fold: data.test_fold is the test fold, the next one validation, the rest training",
    "holdout": "grouped holdout: about a fifth of the units test, a fifth validation, the rest training",
    "none": "no split: every sample is test (the paper's whole-benchmark evaluation)",
    "leave_one_unit_out": "baselines only: fit on every other unit, predict the held-out one, for each unit",
}


@dataclass
class DataFields:
    """The data layer's keys (``prompt``: a change makes the prompts differ from training)."""

    source: str = field(default="bundled", metadata=meaning(
        "benchmark_191.jsonl, a per-sample folder, a saved dataset, a hub id, or 'bundled' (the shipped sample)",
        prompt=True))
    mode: str = field(default="dialogue", metadata=meaning(f"which cues the prompt shows: {' | '.join(MODES)}",
                                                           choices=MODES, prompt=True))
    answer_format: str = field(default="label", metadata=meaning(
        "label: the bare label; json: the paper's JSON answers", choices=ANSWER_FORMATS, prompt=True))
    split: str = field(default="kfold", metadata=meaning(
        "kfold (grouped folds) | holdout | none (every sample is test: the whole benchmark) | leave_one_unit_out "
        "(baselines only); LoRA training takes kfold or holdout, classifiers and compare kfold", choices=SPLITS))
    folds: int = field(default=5, metadata=meaning("number of grouped folds (data.split=kfold)", low=2))
    split_seed: int = field(default=0, metadata=meaning("seed of the split manifest", low=0))
    test_fold: int = field(default=0, metadata=meaning("the held-out fold (data.split=kfold)", low=0))
    manifest: Optional[str] = field(default=None, metadata=meaning(
        "a split_manifest.json to use (from convert or a run); made and saved there when absent"))


def validate(data: Any, prefix: str = "data.") -> None:
    """Every key's allowed values and range, then what ties keys together."""
    check_values(data, prefix)
    if data.split == "kfold" and data.folds < 2:
        raise ValueError(f"{prefix}folds: k-fold needs at least 2 folds, got {data.folds}")
    if data.split == "kfold" and data.test_fold is not None and not 0 <= data.test_fold < data.folds:
        raise ValueError(f"{prefix}test_fold: expected a fold in 0..{data.folds - 1}, got {data.test_fold}")
