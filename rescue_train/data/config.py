"""The one data configuration: where the benchmark comes from, how instances are built and shown, and how
samples are split. ``convert``, ``stats``, ``train`` (LoRA and classifiers), ``compare``, ``eval`` and
``baselines`` all read it: ``data.<field>=...`` on the key=value commands, ``--<field-with-dashes>`` on the
flag commands. A training run saves it in ``config.yaml``; ``eval run=RUN_DIR`` reads it back, so the
evaluation prompts are the training prompts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional

from ..settings import meaning

ANSWER_FORMATS = ("label", "json")
MODES = ("dialogue", "audio", "visual", "audiovisual")
RSG_CONDITIONS = ("none", "target", "target_strategy")

# What each RPP gold definition reads (rescue_train.tasks.rpp.DEFINITIONS holds the rules themselves).
RPP_DEFINITIONS = {
    "D": "therapist rows, relation_cycle_state else relation_pattern",
    "A": "therapist rows, relation_cycle_state only (the reference scripts)",
    "B": "any row, relation_cycle_state",
    "C": "any row, relation_pattern (the paper's wording)",
    "BC": "any row, relation_cycle_state else relation_pattern",
}
SPLITS = {
    "kfold": "grouped k-fold: data.test_fold is the test fold, the next one validation, the rest training",
    "holdout": "grouped holdout: about a fifth of the units test, a fifth validation, the rest training",
    "none": "no split: every sample is test (the paper's whole-benchmark evaluation)",
    "leave_one_unit_out": "baselines only: fit on every other unit, predict the held-out one, for each unit",
}
STP_TARGETS = ("collapse", "set")
# The settings that decide the text a model sees (a change makes the prompts differ from training).
PROMPT_KEYS = ("source", "context", "rpp_definition", "rpp_include_current", "stp_targets", "ssp_target_emotion",
               "rsg_condition", "mode", "answer_format")


@dataclass(frozen=True)
class BuildOptions:
    """Construction choices. ``context`` None means each task's own default window."""

    context: int | None = None
    rpp_definition: str = "D"
    rpp_include_current: bool = False
    stp_targets: str = "collapse"
    ssp_target_emotion: bool = False
    checkpoints_per_sample: int = 5
    er_min_words: int = 5
    er_discard_fraction: float = 0.3
    itp_cap_per_class: int = 0
    rsg_min_words: int = 5
    rsg_condition: str = "none"
    rsg_per_sample: int = 0

    def __post_init__(self):
        if self.context is not None and self.context < -1:
            raise ValueError(f"context must be -1 (all prior rows), 0 (none) or a positive count, got {self.context}")
        if self.stp_targets not in STP_TARGETS:
            raise ValueError(f"stp_targets must be 'collapse' or 'set', got {self.stp_targets!r}")
        if self.rsg_condition not in RSG_CONDITIONS:
            raise ValueError(f"rsg_condition must be one of {', '.join(RSG_CONDITIONS)}, got {self.rsg_condition!r}")
        if self.rsg_min_words < 0 or self.rsg_per_sample < 0:
            raise ValueError("rsg_min_words and rsg_per_sample must be >= 0 (rsg_per_sample 0 keeps every turn)")



@dataclass
class DataConfig:
    source: str = field(default="bundled", metadata=meaning(
        "benchmark_191.jsonl, a per-sample folder, a saved dataset, a hub id, or 'bundled' (the shipped sample)"))
    context: Optional[int] = field(default=None, metadata=meaning(
        "rows of context: -1 all prior rows, 0 none, k the last k; null: each task's default", low=-1))
    rpp_definition: str = field(default="D", metadata=meaning(
        "RPP gold rows: " + "; ".join(f"{k} = {v}" for k, v in RPP_DEFINITIONS.items())))
    rpp_include_current: bool = field(default=False, metadata=meaning("show the labelled RPP turn itself"))
    stp_targets: str = field(default="collapse", metadata=meaning(
        "multi-person STP targets: collapse to the group label, or set (keep the exact sets)"))
    ssp_target_emotion: bool = field(default=False, metadata=meaning("give SSP the target's latest emotion"))
    rsg_condition: str = field(default="none", metadata=meaning(
        "what RSG gives beyond the conversation: none, target (whom the turn addresses) or target_strategy"))
    rsg_min_words: int = field(default=5, metadata=meaning(
        "RSG keeps therapist turns of at least this many words", low=0))
    rsg_per_sample: int = field(default=0, metadata=meaning(
        "RSG keeps at most this many evenly spaced turns per sample (0: all)", low=0))
    mode: str = field(default="dialogue", metadata=meaning(f"which cues the prompt shows: {' | '.join(MODES)}"))
    answer_format: str = field(default="label", metadata=meaning(
        "label: the bare label; json: the paper's JSON answers"))
    split: str = field(default="kfold", metadata=meaning(
        "kfold (grouped folds) | holdout | none (every sample is test: the whole benchmark) | leave_one_unit_out "
        "(baselines only); LoRA training takes kfold or holdout, classifiers and compare kfold"))
    folds: int = field(default=5, metadata=meaning("number of grouped folds (data.split=kfold)", low=2))
    split_seed: int = field(default=0, metadata=meaning("seed of the split manifest", low=0))
    test_fold: int = field(default=0, metadata=meaning("the held-out fold (data.split=kfold)", low=0))
    manifest: Optional[str] = field(default=None, metadata=meaning(
        "a split_manifest.json to use (from convert or a run); made and saved there when absent"))

    def __post_init__(self):
        validate(self)

    def build_options(self) -> BuildOptions:
        return BuildOptions(context=self.context, rpp_definition=self.rpp_definition,
                            rpp_include_current=self.rpp_include_current, stp_targets=self.stp_targets,
                            ssp_target_emotion=self.ssp_target_emotion, rsg_condition=self.rsg_condition,
                            rsg_min_words=self.rsg_min_words, rsg_per_sample=self.rsg_per_sample)


def validate(data: DataConfig, prefix: str = "data.") -> None:
    def choose(key: str, allowed) -> None:
        value = getattr(data, key)
        if value not in allowed:
            raise ValueError(f"{prefix}{key}: expected one of {', '.join(map(str, allowed))}, got {value!r}")

    choose("rpp_definition", RPP_DEFINITIONS)
    choose("stp_targets", STP_TARGETS)
    choose("rsg_condition", RSG_CONDITIONS)
    choose("mode", MODES)
    choose("answer_format", ANSWER_FORMATS)
    choose("split", SPLITS)
    if data.context is not None and data.context < -1:
        raise ValueError(f"{prefix}context: expected -1, 0 or a positive count, got {data.context}")
    if data.split == "kfold" and data.folds < 2:
        raise ValueError(f"{prefix}folds: k-fold needs at least 2 folds, got {data.folds}")
    if data.split == "kfold" and data.test_fold is not None and not 0 <= data.test_fold < data.folds:
        raise ValueError(f"{prefix}test_fold: expected a fold in 0..{data.folds - 1}, got {data.test_fold}")


def plain(data: DataConfig) -> DataConfig:
    """Only the DataConfig fields of ``data`` (a command's subclass may add its own)."""
    return DataConfig(**{f.name: getattr(data, f.name) for f in dataclasses.fields(DataConfig)})


def from_mapping(tree: Any) -> DataConfig:
    """A saved ``data`` section (of a run's config.yaml) as a DataConfig; keys of a command's own subclass (a
    classifier run's ``converted``) are left out."""
    from ..settings import load

    known = {f.name for f in dataclasses.fields(DataConfig)}
    return load(DataConfig, [{k: v for k, v in dict(tree or {}).items() if k in known}], "data")
