#!/usr/bin/env bash
# Set up .venv (training and vLLM in one environment) and the local SLURM cluster, then lint and run the whole suite.
# Arguments go to pytest (e.g. `bash scripts/test.sh tests/test_executor.py -x`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/slurm_local.sh  # needs root and apt-get; elsewhere the SLURM tests skip and say why
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1
export RESCUE_TRAIN_CACHE="${RESCUE_TRAIN_CACHE:-$PWD/.cache/rescue_train}"
.venv/bin/ruff check .   # lint settings: [tool.ruff] in pyproject.toml
# Two workers (pytest-xdist; TEST_WORKERS=1 runs one after another), each test file whole in one of them: a file's
# module fixtures (a trained run, a comparison) are made once. One OpenMP thread per process: tiny models run
# fastest on one, and threads of two workers competing for two cores spin; the executor gives the runs that
# compare and cv launch their own share of the cores.
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}" MKL_NUM_THREADS="${MKL_NUM_THREADS:-1}"
.venv/bin/python -m pytest -q -n "${TEST_WORKERS:-2}" --dist loadfile "$@"
