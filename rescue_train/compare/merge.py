"""``rescue-train compare merge=[DIR,DIR,...] output_dir=DIR``: finished comparisons of one task in one table.

Each folder is a finished comparison (``results.json`` and its ``runs/``), e.g. the classifiers'
(``recipe=ssp_cls``) and the fine-tuned LLMs' (``recipe=ssp_lora``). They must share the task, the split
manifest and the label set; the folds and seeds common to all are used. Strategy names get their
comparison's learner as a prefix (``sklearn:inverse_freq``, ``lora:sqrt_sampling``; the folder name when
two folders share a learner), and each strategy is tested against the ``none`` of its own comparison. The
statistics are computed afresh from the run records, so intervals, tests and Holm's correction cover the
merged table.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

from ..classifiers.classifier import LabelSpace
from ..io import read_json
from ..settings import meaning
from .config import CompareConfig, EvalSettings
from .runner import RUN_RECORD_FIELDS



def _load(folder: Path) -> dict:
    path = folder / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: merge needs finished comparisons (run `rescue-train "
                                f"compare` into {folder} first)")
    return read_json(path, {"task": str, "learner": str, "strategies": dict, "folds": list, "seeds": list,
                            "labels": list, "provenance": dict}, "a comparison's results")


def _common(values: list[list[int]]) -> list[int]:
    return sorted(set(values[0]).intersection(*values[1:]))


def merge(folders: Sequence[Path], out: Path, evaluation: EvalSettings, with_plots: bool = True) -> dict:
    from ..provenance import git_commit, versions
    from .runner import STATS_NOTE, write_report
    from .stats import summarise

    loaded = [_load(folder) for folder in folders]
    for key in ("task", "labels"):
        if len({json.dumps(r[key]) for r in loaded}) > 1:
            raise ValueError(f"merge: the comparisons differ in {key}: " + ", ".join(
                f"{f} ({r[key] if key == 'task' else len(r[key])})" for f, r in zip(folders, loaded)))
    manifests = {r["provenance"]["manifest_hash"] for r in loaded}
    if len(manifests) > 1:
        raise ValueError(f"merge: the comparisons use different split manifests {sorted(manifests)}: their test "
                         f"folds hold different units")
    folds, seeds = _common([r["folds"] for r in loaded]), _common([r["seeds"] for r in loaded])
    if not folds or not seeds:
        raise ValueError(f"merge: no fold and seed common to all comparisons (folds {[r['folds'] for r in loaded]}, "
                         f"seeds {[r['seeds'] for r in loaded]})")
    learners = [r["learner"] for r in loaded]
    prefixes = [b if learners.count(b) == 1 else Path(f).name for b, f in zip(learners, folders)]
    if len(set(prefixes)) < len(prefixes):
        raise ValueError(f"merge: two comparisons share the learner and the folder name {prefixes}; rename one folder")
    records, references, summaries = [], {}, {}
    for folder, result, prefix in zip(folders, loaded, prefixes):
        for name, strategy in result["strategies"].items():
            merged_name = f"{prefix}:{name}"
            summaries[merged_name] = strategy["summary"]
            if name != "none":
                references[merged_name] = f"{prefix}:none"
            for run_file in strategy["runs"]:
                record = read_json(Path(folder) / run_file, RUN_RECORD_FIELDS, "a comparison run's record")
                if record["fold"] in folds and record["seed"] in seeds:
                    records.append({**record, "strategy": merged_name, "file": str(Path(folder) / run_file)})
    config = CompareConfig(task=loaded[0]["task"], learner="+".join(prefixes), strategies=list(summaries),
                           seeds=seeds, test_folds=folds, output_dir=str(out), evaluation=evaluation)
    space = LabelSpace([tuple(name.split(":", 1)) for name in loaded[0]["labels"]])
    try:
        results, confusions = summarise(config, records, space, references, summaries)
    except KeyError as exc:
        raise ValueError(f"merge: instance {exc} is missing from some comparison's predictions; were they built "
                         f"with other data settings (data.*)?") from None
    results["provenance"] = {
        "merged": [{"folder": str(f), "learner": r["learner"], "prefix": p, "run_hash": r["provenance"]["run_hash"],
                    "config": r["provenance"]["config"]} for f, r, p in zip(folders, loaded, prefixes)],
        "evaluation": asdict(evaluation), "manifest_hash": manifests.pop(), "versions": versions(),
        "git_commit": git_commit(), "stats": STATS_NOTE}
    out.mkdir(parents=True, exist_ok=True)
    write_report(out, results, space, confusions, with_plots)
    return results


@dataclass
class MergeConfig:
    merge: List[str] = field(default_factory=list, metadata=meaning("two or more finished comparison folders"))
    output_dir: Optional[str] = field(default=None, metadata=meaning("the merged results.json, results.md, plots"))
    plots: bool = field(default=True, metadata=meaning("write the PNG plots"))
    evaluation: EvalSettings = field(default_factory=EvalSettings)


def load_merge_config(overrides: Sequence[str]) -> MergeConfig:
    from ..settings import compose

    config: MergeConfig = compose(MergeConfig, overrides, "compare merge")
    if len(config.merge) < 2 or not config.output_dir:
        raise ValueError("usage: rescue-train compare merge=[DIR,DIR,...] output_dir=DIR (two or more comparisons)")
    return config
