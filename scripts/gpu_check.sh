#!/usr/bin/env bash
# One command for the GPU paths (see scripts/gpu_check.py): under 8 minutes on one H100/H200, no network.
#   bash scripts/gpu_check.sh [--cpu-smoke] [--out DIR] [--work DIR] [--vllm-python PATH] [--time-limit S] ...
# Each step runs in its own process on the first visible GPU (the two-process step on the first two);
# the visible GPUs are counted by torch, so CUDA_VISIBLE_DEVICES is honoured.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
exec "$PY" scripts/gpu_check.py "$@"
