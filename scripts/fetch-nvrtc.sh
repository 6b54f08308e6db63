#!/usr/bin/env bash
# Fetch NVRTC and ptxas of CUDA 13.0 (issue 25, item 1) from PyPI wheels, so
# `runner/tests/cuda_compile.rs` compiles every generated kernel without a
# GPU or a CUDA installation:
#   nvidia-cuda-nvrtc==13.0.88 → lib/libnvrtc.so.13 (and a libnvrtc.so link),
#                                lib/libnvrtc-builtins.so.13.0
#   nvidia-cuda-nvcc==13.0.88  → bin/ptxas   (register spills per kernel)
# into the cache directory ${TOFU_CUDA_CACHE:-$HOME/.cache/tofu/cuda-13.0},
# outside the repository: third-party binaries are never committed
# (~127 MB downloaded, ~150 MB unpacked; x86-64 Linux wheels).
#
# Idempotent: does nothing when the cache is complete (the marker file
# `.complete` is written last). Uses `pip download --no-deps`. Prints the
# cache path.
set -euo pipefail

VERSION=13.0.88
CACHE="${TOFU_CUDA_CACHE:-$HOME/.cache/tofu/cuda-13.0}"

if [[ -f "$CACHE/.complete" ]]; then
    echo "cuda nvrtc/ptxas: cached in $CACHE"
    exit 0
fi

PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-nvrtc: python3 is needed (for pip and unzipping the wheels)" >&2
    exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "cuda nvrtc/ptxas: downloading nvidia-cuda-nvrtc and nvidia-cuda-nvcc==$VERSION from PyPI into $CACHE"
# The wheels are `py3-none-manylinux…_x86_64`: any Python 3 on x86-64 Linux
# takes them as they are.
"$PY" -m pip download --quiet --no-deps --only-binary=:all: \
    "nvidia-cuda-nvrtc==$VERSION" "nvidia-cuda-nvcc==$VERSION" -d "$TMP"

mkdir -p "$CACHE"
"$PY" - "$CACHE" "$TMP"/nvidia_cuda_nvrtc-"$VERSION"-*.whl "$TMP"/nvidia_cuda_nvcc-"$VERSION"-*.whl <<'PYEOF'
import os, stat, sys, zipfile
cache, wheels = sys.argv[1], sys.argv[2:]
# Only what the test needs (the wheels also carry nvcc, nvlink, headers and
# the `alt` NVRTC build).
wanted = {
    "nvidia/cu13/lib/libnvrtc.so.13": "lib/libnvrtc.so.13",
    "nvidia/cu13/lib/libnvrtc-builtins.so.13.0": "lib/libnvrtc-builtins.so.13.0",
    "nvidia/cu13/bin/ptxas": "bin/ptxas",
}
found = set()
for wheel in wheels:
    with zipfile.ZipFile(wheel) as z:
        for info in z.infolist():
            rel = wanted.get(info.filename)
            if rel is None:
                continue
            dest = os.path.join(cache, rel)
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with z.open(info) as src, open(dest + ".part", "wb") as out:
                out.write(src.read())
            os.chmod(dest + ".part", 0o755)
            os.replace(dest + ".part", dest)
            found.add(info.filename)
missing = sorted(set(wanted) - found)
if missing:
    sys.exit(f"fetch-nvrtc: the wheels lack {missing}")
print(f"cuda nvrtc/ptxas: unpacked {len(found)} files")
PYEOF
# cudarc tries `libnvrtc.so` before `libnvrtc.so.13`: with this link, the
# wheel's library wins over any other NVRTC the system's loader knows.
ln -sfn libnvrtc.so.13 "$CACHE/lib/libnvrtc.so"
touch "$CACHE/.complete"
echo "cuda nvrtc/ptxas: cached in $CACHE"
