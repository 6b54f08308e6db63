#!/usr/bin/env bash
# Install PyTorch (CPU use) into a venv outside the tree, once, and print the
# venv's python. Used by scripts/bench-cpu.sh and scripts/byom-torch.sh; not
# run in CI.
#
#   bash scripts/install-torch-cpu.sh [EXTRA_PACKAGE...]   # prints the python path
#
#   TOFU_TORCH_CACHE   the venv's directory (default ~/.cache/tofu/torch-cpu)
#   TOFU_TORCH_VERSION, TOFU_TORCHVISION_VERSION (default 2.15.0, 0.29.2)
#
# PyPI's Linux torch wheel is the CUDA build: its dependencies are several GB
# of nvidia-* libraries, and without them its libraries (libtorch_cpu.so too)
# do not load. So the wheels are installed with --no-deps plus torch's
# pure-Python dependencies, and scripts/torch_cpu_stubs.py writes into
# torch/lib one stub library per missing CUDA library (functions returning
# "no device"): torch then imports, reports no CUDA device and runs its CPU
# kernels (MKL, oneDNN) as the full install would. The install is checked
# with a CPU matmul. EXTRA_PACKAGEs (e.g. onnx onnxscript) are pip-installed
# into the same venv when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${TOFU_TORCH_CACHE:-$HOME/.cache/tofu/torch-cpu}
TORCH=${TOFU_TORCH_VERSION:-2.15.0}
VISION=${TOFU_TORCHVISION_VERSION:-0.29.2}
PY=$CACHE/venv/bin/python
if [ "$(cat "$CACHE/installed" 2>/dev/null)" != "torch==$TORCH torchvision==$VISION" ]; then
    echo "install-torch-cpu: installing torch $TORCH (CPU use) into $CACHE" >&2
    rm -rf "$CACHE/venv" "$CACHE/installed"
    python3 -m venv "$CACHE/venv"
    "$PY" -m pip install -q --disable-pip-version-check --no-deps "torch==$TORCH" "torchvision==$VISION" \
        filelock typing-extensions sympy mpmath networkx jinja2 MarkupSafe fsspec 'setuptools>=77' numpy pillow >&2
    "$PY" scripts/torch_cpu_stubs.py "$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/torch" >&2
    "$PY" -c 'import torch; torch.randn(2, 2) @ torch.randn(2, 2)'
    echo "torch==$TORCH torchvision==$VISION" > "$CACHE/installed"
fi
for pkg in "$@"; do
    mod=${pkg%%[=<>]*}
    if ! "$PY" -c "import ${mod//-/_}" 2> /dev/null; then
        "$PY" -m pip install -q --disable-pip-version-check "$pkg" >&2
    fi
done
echo "$PY"
