#!/usr/bin/env bash
# Run one command with the CPU stand-in of the CUDA libraries (cpu-cuda/,
# test equipment: results under it are never GPU results).
#
#   bash scripts/cpu-cuda.sh [--no-build] -- COMMAND [ARGS…]
#
# Builds the stand-in (the workspace libraries under the test profile, as the
# test suite builds them, unless --no-build),
# links it in a fresh temporary directory under the names cudarc and
# tofu's NCCL loader open (libcuda.so, libcuda.so.1, libnvrtc.so,
# libcublas.so, libcudnn.so.9, libcudnn.so, libnccl.so.2, libnccl.so), puts
# that directory first on LD_LIBRARY_PATH and names it in TOFU_NCCL_LIBRARY
# and TOFU_CUDNN_LIBRARY for COMMAND only (TOFU_CPU_CUDA_NO_CUDNN=1 leaves
# cuDNN out, so the backend's generated convolutions run), runs
# COMMAND and removes the directory; exits with COMMAND's status. The real
# libraries are never touched or shadowed outside COMMAND.
#
# The stand-in reads (see cpu-cuda/README.md): TOFU_CPU_CUDA_DEVICES
# (default 2), TOFU_CPU_CUDA_MEMORY (per device, e.g. 2G; default 16G),
# TOFU_CPU_CUDA_SEED (random delays before copies, kernels and collectives;
# off when unset), TOFU_CPU_CUDA_DELAY_US (the largest delay, default 2000),
# TOFU_CPU_CUDA_CACHE (compiled kernels; default $TMPDIR/tofu-cpu-cuda-cache).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=1
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) BUILD=0; shift ;;
    --) shift; break ;;
    *) echo "usage: bash scripts/cpu-cuda.sh [--no-build] -- COMMAND [ARGS…]" >&2; exit 2 ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "usage: bash scripts/cpu-cuda.sh [--no-build] -- COMMAND [ARGS…]" >&2
  exit 2
fi
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
if [ "$BUILD" = 1 ]; then
  # The workspace's libraries under the test profile with the test suite's
  # features: inside the suite this builds the stand-in alone and reuses
  # every other artifact (a `-p` build would rebuild its dependencies with
  # a narrower feature set). The test profile's output folder is debug/.
  (cd "$ROOT" && cargo build --quiet --profile test --workspace --locked \
    --features tofu/cuda --lib) >&2
fi
LIB=$TARGET/debug/libtofu_cpu_cuda.so
if [ ! -f "$LIB" ]; then
  echo "cpu-cuda.sh: $LIB is missing (build it: bash scripts/cpu-cuda.sh -- true)" >&2
  exit 2
fi
DIR=$(mktemp -d "${TMPDIR:-/tmp}/tofu-cpu-cuda.XXXXXX")
trap 'rm -rf "$DIR"' EXIT
for name in libcuda.so libcuda.so.1 libnvrtc.so libcublas.so libnccl.so.2 libnccl.so; do
  ln -s "$LIB" "$DIR/$name"
done
if [ "${TOFU_CPU_CUDA_NO_CUDNN:-0}" = 1 ]; then
  CUDNN="$DIR/no-libcudnn.so.9"
else
  ln -s "$LIB" "$DIR/libcudnn.so.9"
  ln -s "$LIB" "$DIR/libcudnn.so"
  CUDNN="$DIR/libcudnn.so.9"
fi
set +e
LD_LIBRARY_PATH="$DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" TOFU_NCCL_LIBRARY="$DIR/libnccl.so.2" \
  TOFU_CUDNN_LIBRARY="$CUDNN" "$@"
status=$?
set -e
exit $status
