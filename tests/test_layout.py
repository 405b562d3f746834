"""The two training halves stay import-disjoint, and the baselines do not import the command line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "rescue_train" / "training"
LORA = {"config", "data", "sft", "trainer", "templates", "models", "merge", "weighting"}
CLASSIFIERS = {"balance", "classifier", "sklearn_path", "compare", "classify_run"}


def sibling_imports(path: Path) -> set[str]:
    """The modules of the same package that ``path`` imports (``from . import x``, ``from .x import y``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            found |= {node.module.split(".")[0]} if node.module else {alias.name for alias in node.names}
    return found


def test_lora_and_classifier_modules_do_not_import_each_other():
    for name in LORA:
        assert not sibling_imports(TRAINING / f"{name}.py") & CLASSIFIERS, name
    for name in CLASSIFIERS:
        assert not sibling_imports(TRAINING / f"{name}.py") & LORA, name


def test_baseline_modules_do_not_import_the_cli():
    for path in (ROOT / "baselines").glob("*.py"):
        if path.name != "cli.py":
            assert "cli" not in sibling_imports(path), path.name
