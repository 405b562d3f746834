#!/usr/bin/env bash
# Set up both environments and run the whole test suite: everything in .venv, then the vLLM tests in .venv-vllm.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/setup_vllm.sh
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=1
export RESCUE_TRAIN_CACHE="${RESCUE_TRAIN_CACHE:-$PWD/.cache/rescue_train}"
.venv/bin/ruff check .   # lint settings: [tool.ruff] in pyproject.toml
.venv/bin/python -m pytest -q -m "not vllm" "$@"
.venv-vllm/bin/python -m pytest -q -m vllm "$@"
