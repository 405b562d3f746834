"""The two training halves (``rescue_train.sft``, ``rescue_train.classifiers``) stay import-disjoint, only the
one ``train`` entry knows both, and the baselines do not import the command line."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rescue_train"
HALVES = ("sft", "classifiers")


def imported_modules(path: Path, package: str) -> set[str]:
    """The absolute names of the modules ``path`` (a file of the dotted ``package``) imports, relative imports
    resolved against it."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found |= {module} | {f"{module}.{alias.name}" for alias in node.names}
    return found


def half_imports(half: str) -> set[str]:
    """Everything the files of ``rescue_train.<half>`` import."""
    found = set()
    for path in (PACKAGE / half).rglob("*.py"):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        found |= imported_modules(path, package)
    return found


def test_resolves_relative_imports():
    path = PACKAGE / "sft" / "models.py"
    assert {"rescue_train.tiny", "rescue_train.devices"} <= imported_modules(path, "rescue_train.sft")


def test_lora_and_classifier_packages_do_not_import_each_other():
    for half, other in (HALVES, HALVES[::-1]):
        crossing = {m for m in half_imports(half) if m == f"rescue_train.{other}" or m.startswith(f"rescue_train.{other}.")}
        assert not crossing, (half, crossing)
    assert not (PACKAGE / "training").exists(), "the halves live in rescue_train/sft and rescue_train/classifiers"


def test_the_train_entry_dispatches_to_both_halves():
    imported = imported_modules(PACKAGE / "train_cli.py", "rescue_train")
    assert "rescue_train.sft.runner" in imported and "rescue_train.classifiers.classify_run" in imported


def test_baseline_modules_do_not_import_the_cli():
    for path in (ROOT / "baselines").glob("*.py"):
        if path.name != "cli.py":
            assert not {m for m in imported_modules(path, "baselines") if m.endswith(".cli") or m == "baselines.cli"}, \
                path.name
