"""``rescue-train compare merge=[DIR,DIR,...] output_dir=DIR``: finished comparisons of one task in one table.

Each folder is a finished comparison (``results.json`` and its ``runs/``), e.g. the classifiers'
(``recipe=ssp_cls``) and the fine-tuned LLMs' (``recipe=ssp_lora``). They must share the task, the split
manifest and the label set; the folds and seeds common to all are used. Strategy names get their
comparison's backend as a prefix (``sklearn:inverse_freq``, ``lora:sqrt_sampling``; the folder name when
two folders share a backend), and each strategy is tested against the ``none`` of its own comparison. The
statistics are computed afresh from the run records, so intervals, tests and Holm's correction cover the
merged table.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

from ..classifiers.classifier import LabelSpace
from .config import CompareConfig, EvalSettings

MERGE_KEYS = ("merge", "output_dir", "plots", "evaluation")


def _load(folder: Path) -> dict:
    path = folder / "results.json"
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: merge needs finished comparisons (run `rescue-train "
                                f"compare` into {folder} first)")
    return json.loads(path.read_text())


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
    backends = [r["backend"] for r in loaded]
    prefixes = [b if backends.count(b) == 1 else Path(f).name for b, f in zip(backends, folders)]
    if len(set(prefixes)) < len(prefixes):
        raise ValueError(f"merge: two comparisons share the backend and the folder name {prefixes}; rename one folder")
    records, references, summaries = [], {}, {}
    for folder, result, prefix in zip(folders, loaded, prefixes):
        for name, strategy in result["strategies"].items():
            merged_name = f"{prefix}:{name}"
            summaries[merged_name] = strategy["summary"]
            if name != "none":
                references[merged_name] = f"{prefix}:none"
            for run_file in strategy["runs"]:
                record = json.loads((Path(folder) / run_file).read_text())
                if record["fold"] in folds and record["seed"] in seeds:
                    records.append({**record, "strategy": merged_name, "file": str(Path(folder) / run_file)})
    config = CompareConfig(task=loaded[0]["task"], backend="+".join(prefixes), strategies=list(summaries),
                           seeds=seeds, test_folds=folds, output_dir=str(out), evaluation=evaluation)
    space = LabelSpace([tuple(name.split(":", 1)) for name in loaded[0]["labels"]])
    try:
        results, confusions = summarise(config, records, space, references, summaries)
    except KeyError as exc:
        raise ValueError(f"merge: instance {exc} is missing from some comparison's predictions; were they built "
                         f"with other data settings (data.*)?") from None
    results["provenance"] = {
        "merged": [{"folder": str(f), "backend": r["backend"], "prefix": p, "run_hash": r["provenance"]["run_hash"],
                    "config": r["provenance"]["config"]} for f, r, p in zip(folders, loaded, prefixes)],
        "evaluation": asdict(evaluation), "manifest_hash": manifests.pop(), "versions": versions(),
        "git_commit": git_commit(), "stats": STATS_NOTE}
    out.mkdir(parents=True, exist_ok=True)
    write_report(out, results, space, confusions, with_plots)
    return results


def merge_main(argv: Sequence[str]) -> int:
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from ..settings import rename
    from .config import RENAMED

    overrides = rename([a.lstrip("+") for a in argv], RENAMED)
    unknown = [a for a in overrides if a.split("=", 1)[0].split(".")[0] not in MERGE_KEYS]
    if unknown:
        raise ValueError(f"compare merge takes {', '.join(MERGE_KEYS)}; got {unknown}")
    try:
        cfg = OmegaConf.from_dotlist(overrides)
        evaluation = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(EvalSettings),
                                                         cfg.get("evaluation", {})))
    except OmegaConfBaseException as exc:
        raise ValueError(f"bad compare merge setting: {exc}".splitlines()[0]) from exc
    folders = [Path(str(f)) for f in (cfg.merge if not isinstance(cfg.merge, str) else [cfg.merge])]
    if len(folders) < 2 or not cfg.get("output_dir"):
        raise ValueError("usage: rescue-train compare merge=[DIR,DIR,...] output_dir=DIR (two or more comparisons)")
    out = Path(str(cfg.output_dir))
    results = merge(folders, out, evaluation, bool(cfg.get("plots", True)))
    print((out / "results.md").read_text())
    print(f"wrote {out}/results.json, results.md" + "".join(f", {p}" for p in results.get("plots", [])))
    return 0
