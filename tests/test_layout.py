"""The layers of docs/design.md, enforced on every import statement of the package (function-level ones too):
a part imports only its own layer or lower ones, no two applications import each other, and nothing imports in
a cycle. Only the command line parses arguments."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {
    0: ("__init__", "io", "folders", "provenance", "devices", "paper", "settings", "chat", "console"),
    1: ("data",),
    2: ("tasks",),
    3: ("inference", "scoring", "convert", "stats", "tiny", "model_card", "executor", "jobs", "rebalance"),
    4: ("evaluation", "sft", "classifiers", "audit", "baselines"),
    5: ("compare", "cv", "export"),
    6: ("cli", "__main__"),
}
LAYER_OF = {part: layer for layer, parts in LAYERS.items() for part in parts}
APPLICATIONS = LAYERS[4]


def package_files() -> dict[str, Path]:
    """Module name -> file, for the package and the top-level baselines/ (installed as rescue_train.baselines)."""
    files = {}
    for folder, package in ((ROOT / "rescue_train", ("rescue_train",)), (ROOT / "baselines", ("rescue_train", "baselines"))):
        for path in folder.rglob("*.py"):
            parts = (*package, *path.relative_to(folder).with_suffix("").parts)
            files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return files


FILES = package_files()


def imports(module: str, path: Path) -> set[str]:
    """The package modules ``module`` imports (relative imports resolved; ``from X import name`` counts as X.name
    when that is a module)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join([*base, *([node.module] if node.module else [])])
            names = [f"{target}.{a.name}" if f"{target}.{a.name}" in FILES else target for a in node.names]
        else:
            continue
        found |= {name for name in names if name in FILES}
    return found - {module}


GRAPH = {module: imports(module, path) for module, path in FILES.items()}


def part(module: str) -> str:
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def test_resolves_relative_and_function_level_imports():
    assert {"rescue_train.tiny", "rescue_train.settings"} <= GRAPH["rescue_train.inference.presets"]
    assert "rescue_train.scoring.judge" in GRAPH["rescue_train.evaluation.scorers"]


def test_every_part_has_a_layer():
    assert {part(m) for m in FILES} <= set(LAYER_OF), sorted({part(m) for m in FILES} - set(LAYER_OF))


@pytest.mark.parametrize("module", sorted(FILES))
def test_no_upward_import_and_no_import_between_applications(module):
    mine = part(module)
    for target in sorted(GRAPH[module]):
        theirs = part(target)
        assert LAYER_OF[theirs] <= LAYER_OF[mine], f"{module} (layer {LAYER_OF[mine]}) imports {target} " \
                                                   f"(layer {LAYER_OF[theirs]})"
        assert not (mine in APPLICATIONS and theirs in APPLICATIONS and mine != theirs), \
            f"application {mine} imports application {theirs} ({module} -> {target}); move what they share down"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_between_modules():
    assert cycles(GRAPH) == []


def test_no_import_cycle_between_parts():
    parts: dict[str, set[str]] = defaultdict(set)
    for module, targets in GRAPH.items():
        parts[part(module)] |= {part(t) for t in targets} - {part(module)}
    assert cycles(parts) == []


@pytest.mark.parametrize("module", sorted(m for m in FILES if part(m) not in ("cli", "__main__")))
def test_only_the_command_line_parses_arguments(module):
    tree = ast.parse(FILES[module].read_text(encoding="utf-8"))
    assert "argparse" not in {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main"], module


def test_the_wheel_lists_every_package_and_data_folder():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    packages = {m for m, p in FILES.items() if p.name == "__init__.py"}
    data = {"rescue_train.data.sample", "rescue_train.recipes", "rescue_train.configs",
            *(f"rescue_train.configs.{d.name}" for d in (ROOT / "configs").iterdir() if d.is_dir())}
    assert set(setuptools["packages"]) == packages | data
    assert setuptools["package-dir"] == {"rescue_train.baselines": "baselines", "rescue_train.recipes": "recipes",
                                         "rescue_train.configs": "configs"}


def test_importing_the_package_changes_nothing_process_wide():
    """Importing any library module leaves the warning filters and format, the garbage collector and torch's
    threads as they were (the third-party libraries the modules use are imported first: their own effects are
    theirs)."""
    import subprocess
    import sys

    modules = sorted(m for m in FILES if part(m) not in ("cli", "__main__"))
    script = f"""
import gc, importlib, warnings
import torch, transformers, datasets, peft, trl, accelerate, sklearn, scipy, statsmodels.api, matplotlib, openai
import bert_score, huggingface_hub, omegaconf, tqdm, numpy
def state():
    return (list(warnings.filters), warnings.formatwarning, warnings.showwarning, gc.isenabled(),
            gc.get_freeze_count(), gc.get_threshold(), torch.get_num_threads())
before = state()
for name in {modules!r}:
    importlib.import_module(name)
after = state()
assert after == before, [(b, a) for b, a in zip(before, after) if a != b]
print("unchanged", len({modules!r}))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "unchanged" in done.stdout, done.stderr[-3000:]
