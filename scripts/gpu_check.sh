#!/usr/bin/env bash
# One command for the GPU paths (see scripts/gpu_check.py): about 8 minutes on one H100/H200, no network.
#   bash scripts/gpu_check.sh [--cpu-smoke] [--out DIR] [--vllm-python PATH] ...
# The driver itself sees one GPU (a single process on several would get nn.DataParallel); the two-process
# step is launched on two of them.
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
gpus=0
if [[ " $* " != *" --cpu-smoke "* ]] && command -v nvidia-smi >/dev/null; then
  gpus=$(nvidia-smi -L | grep -c '^GPU' || true)
fi
export GPU_CHECK_GPUS=$gpus
if [ "$gpus" -gt 0 ]; then
  export GPU_CHECK_ALL_GPUS="${CUDA_VISIBLE_DEVICES:-$(seq -s, 0 $((gpus - 1)))}"
  export CUDA_VISIBLE_DEVICES="${GPU_CHECK_ALL_GPUS%%,*}"
fi
exec "$PY" scripts/gpu_check.py "$@"
