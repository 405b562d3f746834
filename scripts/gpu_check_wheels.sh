#!/usr/bin/env bash
# Fetch the wheels of scripts/gpu_check_wheels.txt into .whl/ (ignored by git) for the device tool's GPU
# machine: its Python is 3.12 on x86-64, it has no network, and every call carries .whl (docs/training.md).
# Packages published only as a source archive (antlr4-python3-runtime, pure Python) are built into wheels here.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
mapfile -t wanted < <(grep -v '^#' scripts/gpu_check_wheels.txt | awk 'NF {print $1}')
rm -rf .whl && mkdir .whl   # one version of each: two would stop the install there
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64; do
  platforms+=(--platform "$p")
done
for requirement in "${wanted[@]}"; do
  if ! "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${platforms[@]}" -d .whl "$requirement" 2>/dev/null; then
    "$PY" -m pip wheel -q --no-deps -w .whl "$requirement"
  fi
done
for wheel in .whl/*.whl; do   # a wheel built here must run anywhere: pure Python only
  case "$wheel" in *-none-any.whl|*cp312*|*py312*) ;; *) echo "not for Python 3.12 on x86-64: $wheel" >&2; exit 1 ;; esac
done
ls .whl | wc -l | xargs echo "wheels:" && du -sh .whl
