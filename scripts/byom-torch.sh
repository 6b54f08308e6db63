#!/usr/bin/env bash
# Bring your own model, against PyTorch (issue 38): three models written in
# PyTorch (a CNN with batch norm exported in training mode, an LSTM
# classifier, a causal transformer LM over bytes), exported with torch.onnx's
# TorchScript and dynamo exporters, trained by `tofu train MODEL.onnx
# --workers 2` and by PyTorch from the same initial weights on the same
# batches (scripts/byom_torch.py says what is compared). Fetches digits and
# KJV into the data cache and installs PyTorch (CPU), onnx, onnxscript and
# onnxruntime into a venv outside the tree (scripts/install-torch-cpu.sh).
# Not run in CI.
#
#   bash scripts/byom-torch.sh [TOFU_BIN] [--models cnn,lstm,lm] [--exporters torchscript,dynamo]
set -euo pipefail
cd "$(dirname "$0")/.."
TOFU=target/release/tofu
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    TOFU=$1
    shift
fi
bash scripts/fetch-digits.sh >&2
bash scripts/fetch-kjv.sh >&2
PY=$(bash scripts/install-torch-cpu.sh onnx onnxscript onnxruntime safetensors)
exec "$PY" scripts/byom_torch.py --tofu "$TOFU" "$@"
