"""scripts/gpu_check.sh: its CPU smoke (every step with tiny shapes, each in its own process, so the GPU run
meets no typo), how it hands GPUs to its steps, its preflight, and the wheels docs/training.md carries to
the device tool's GPU machine, checked against what the check imports."""

from __future__ import annotations

import ast
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
from importlib import metadata

import pytest
from sft_helpers import ROOT


def _load_script():
    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "scripts" / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gpu_check = _load_script()


def _names(path) -> set[str]:
    """The distribution names a file lists (comments left out), normalised."""
    words = [w for line in path.read_text().splitlines() if not line.startswith("#") for w in line.split()]
    return {re.sub(r"[-_.]+", "-", w.split("==")[0]).lower() for w in words}


CARRIED = _names(ROOT / "scripts" / "gpu_check_wheels.txt")
ON_IMAGE = _names(ROOT / "scripts" / "device_image_packages.txt")


def test_visible_gpus_follow_cuda_visible_devices():
    """torch's count in a fresh process honours CUDA_VISIBLE_DEVICES; the steps get its entries, not the
    machine's GPUs (nvidia-smi -L would list both GPUs of a machine where only one is visible)."""
    assert gpu_check.visible_gpus(None, 2) == ["0", "1"]
    assert gpu_check.visible_gpus("0", 1) == ["0"]
    assert gpu_check.visible_gpus("2,3", 2) == ["2", "3"]
    assert gpu_check.visible_gpus("GPU-aa, GPU-bb,", 1) == ["GPU-aa"]  # torch stops at an entry it cannot use
    assert gpu_check.visible_gpus(None, 0) == []


def test_steps_get_the_first_visible_gpu_and_ddp_the_first_two(tmp_path):
    args = gpu_check.argparse.Namespace(out=tmp_path, work=None, peak_tflops=989.0, eval_limit=2, batch_size=8,
                                        cpu_smoke=False, vllm_python="none")
    report = {"steps": [{"step": "weighted", "status": "ok", "figures": {"run_dir": "RUN"}}]}
    (sft,) = gpu_check.step_processes("sft", args, ["2", "3"], report)
    (ddp,) = gpu_check.step_processes("ddp", args, ["2", "3"], report)
    assert sft[1]["CUDA_VISIBLE_DEVICES"] == "2" and ddp[1]["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert sft[0][1:4] == [gpu_check.__file__, "--step", "sft"]
    runs = gpu_check.step_processes("eval", args, ["2", "3"], report)
    assert [cmd[-4:] for cmd, _ in runs] == [["--backend", "hf", "--adapter-run", "RUN"]]  # no vLLM here
    assert gpu_check.skip_reason("ddp", args, 1, report) == "1 GPU visible; needs 2"
    assert gpu_check.skip_reason("qlora", args, 0, report) == "needs CUDA"
    assert gpu_check.skip_reason("eval", args, 1, {"steps": []}) == "no adapter: the weighted step did not finish"
    earlier = tmp_path / "work" / "weighted"  # a rerun of --steps eval finds the finished run of an earlier check
    earlier.mkdir(parents=True)
    (earlier / "provenance.json").write_text(json.dumps({"status": "running"}))
    assert gpu_check.adapter_run({"steps": []}, args) is None
    (earlier / "provenance.json").write_text(json.dumps({"status": "finished"}))
    assert gpu_check.adapter_run({"steps": []}, args) == str(earlier)


def test_preflight_names_what_is_missing_or_too_old():
    problems, checked = gpu_check.requirement_problems(["trl", "no-such-distribution"], {"trl": ">=99"})
    assert problems[:2] == [f"rescue-train needs trl>=99, found {metadata.version('trl')}",
                            "rescue-train needs no-such-distribution, which is not installed"]
    assert checked > 10  # trl and what it requires, checked against their installed versions
    assert gpu_check.requirement_problems(gpu_check.TRAINING_STACK, gpu_check.project_pins())[0] == []
    assert "torch" not in gpu_check.project_pins()  # a GPU machine keeps its own CUDA build


def test_carried_wheels_are_the_tested_versions_and_bring_what_they_require():
    """Every wheel docs/training.md carries is the version installed here (what the tests ran with), and
    every distribution a carried wheel requires is carried too or on the machine's image."""
    pinned = [line.split() for line in (ROOT / "scripts" / "gpu_check_wheels.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")]
    assert {name: version for name, version in (p[0].split("==") for p in pinned)} == {
        name: metadata.version(name) for name in (p[0].split("==")[0] for p in pinned)}
    from packaging.requirements import Requirement

    required = {re.sub(r"[-_.]+", "-", Requirement(r).name).lower() for name in CARRIED
                for r in metadata.requires(name) or []
                if Requirement(r).marker is None or Requirement(r).marker.evaluate({"extra": ""})}
    assert required - CARRIED - ON_IMAGE - {"rescue-train"} == set()


def _third_party_imports() -> set[str]:
    """Top-level modules that the toolkit's own code (and the check's scripts) import anywhere."""
    files = [*(ROOT / "rescue_train").rglob("*.py"), ROOT / "scripts" / "gpu_check.py", ROOT / "train.py"]
    names = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name.partition(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.partition(".")[0])
    return names


@pytest.mark.slow
def test_cpu_smoke_of_the_gpu_check_runs_every_step(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--cpu-smoke", "--out", str(tmp_path),
                           "--vllm-python", "none"], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    assert (tmp_path / "gpu_check.md").read_text() == gpu_check.table(report) + "\n"
    assert report["preflight"]["problems"] == [] and report["gpus"] == 0 and report["visible_gpus"] == []
    steps = {s["step"]: s for s in report["steps"]}
    assert [s["step"] for s in report["steps"]] == ["sft", "weighted", "eval", "qlora", "ddp"]
    assert {name: s["status"] for name, s in steps.items()} == {
        "sft": "ok", "weighted": "ok", "qlora": "skipped", "ddp": "ok", "eval": "ok"}
    sft = steps["sft"]["figures"]
    assert sft["steps"] == 3 and sft["tokens_per_second"] > 0 and sft["max_length"] == 512
    assert "mfu_lora" not in sft  # no peak FLOP/s to divide by on a CPU
    weighted = steps["weighted"]["figures"]
    assert weighted["status"] == "finished" and weighted["global_step"] == 4 and math.isfinite(weighted["eval_loss"])
    assert steps["ddp"]["figures"]["global_step"] == 4 and steps["ddp"]["figures"]["processes"] == 2
    evaluation = steps["eval"]["figures"]
    assert evaluation["instances"] == 8 and evaluation["hf.rank"] > 0 and evaluation["hf.sft"] > 0
    assert evaluation["hf.sft_tokens_per_answer"] > 0
    assert evaluation["vllm"] == "not installed here (pass --vllm-python)"
    assert steps["qlora"]["reason"] == "needs CUDA"
    assert report["targets"]["sft.tokens_per_second"] == 10000.0 and report["cpu_smoke"] is True
    assert "| sft | ok | tokens_per_second |" in done.stdout
    # What the toolkit itself imports in these processes is on the GPU machine's image or carried there.
    imported = set().union(*(set(s.get(k, {})) for s in report["steps"] for k in s if k.startswith("imported")))
    owners = metadata.packages_distributions()
    ours = {re.sub(r"[-_.]+", "-", d).lower() for m in _third_party_imports() for d in owners.get(m, [])}
    assert {"torch", "trl", "datasets", "omegaconf", "orjson"} <= imported & ours
    assert (imported & ours) - ON_IMAGE - CARRIED - {"rescue-train"} == set()
