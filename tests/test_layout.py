"""The two training halves stay import-disjoint, and the baselines do not import the command line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "rescue_train" / "training"
LORA = {"config", "data", "sft", "trainer", "models", "merge", "weighting"}
CLASSIFIERS = {"balance", "classifier", "sklearn_path", "compare", "classify_run"}


def sibling_imports(path: Path, level: int = 1) -> set[str]:
    """The modules of the same package that ``path`` imports (``from . import x``, ``from .x import y``; with
    ``level`` 2, of the parent package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == level:
            found |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
    return found


def training_imports(name: str) -> set[str]:
    """The ``rescue_train.training`` modules that module or package ``name`` imports (a package's files reach
    them with ``from .. import x``)."""
    if (TRAINING / f"{name}.py").exists():
        return sibling_imports(TRAINING / f"{name}.py")
    found = set()
    for path in (TRAINING / name).glob("*.py"):
        found |= sibling_imports(path, level=2)
    return found


def test_lora_and_classifier_modules_do_not_import_each_other():
    for name in LORA:
        assert not training_imports(name) & CLASSIFIERS, name
    for name in CLASSIFIERS:
        assert not training_imports(name) & LORA, name


def test_baseline_modules_do_not_import_the_cli():
    for path in (ROOT / "baselines").glob("*.py"):
        if path.name != "cli.py":
            assert "cli" not in sibling_imports(path), path.name
