#!/usr/bin/env bash
# onnxruntime (the reference runtime of issue 26) with onnx, safetensors and
# numpy, pip-installed from PyPI into the venv ~/.cache/tofu/ort-venv
# (versions pinned in scripts/compare-onnxruntime.py), outside the tree; a
# no-op when the venv has them. tests/tests/run_onnx_weights.rs compares
# tofu's outputs with onnxruntime's through it: SKIPPED locally when the venv
# is missing, a failure under CI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-onnxruntime: python3 is needed (for venv and pip)" >&2
    exit 1
fi
"$PY" scripts/compare-onnxruntime.py --setup
