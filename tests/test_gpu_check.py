"""The CPU smoke of scripts/gpu_check.sh: every step of the GPU check runs with tiny shapes, so the GPU run
meets no typo; the figures land in one JSON file and one table."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
from sft_helpers import ROOT


@pytest.mark.slow
def test_cpu_smoke_of_the_gpu_check_runs_every_step(tmp_path):
    env = {**os.environ, "PYTHON": sys.executable}
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--cpu-smoke", "--out", str(tmp_path),
                           "--vllm-python", "none"], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads((tmp_path / "gpu_check.json").read_text())
    steps = {s["step"]: s for s in report["steps"]}
    assert {name: s["status"] for name, s in steps.items()} == {
        "sft": "ok", "weighted": "ok", "qlora": "skipped", "ddp": "ok", "eval": "ok"}
    sft = steps["sft"]["figures"]
    assert sft["steps"] == 3 and sft["tokens_per_second"] > 0 and sft["max_length"] == 512
    weighted = steps["weighted"]["figures"]
    assert weighted["status"] == "finished" and weighted["global_step"] == 4 and math.isfinite(weighted["eval_loss"])
    assert steps["ddp"]["figures"]["global_step"] == 4
    evaluation = steps["eval"]["figures"]
    assert evaluation["instances"] == 8 and evaluation["hf.rank"] > 0 and evaluation["hf.sft"] > 0
    assert report["targets"]["sft.tokens_per_second"] == 10000.0 and report["cpu_smoke"] is True
    assert "| sft | ok | tokens_per_second |" in done.stdout
