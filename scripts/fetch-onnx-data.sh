#!/usr/bin/env bash
# Fetch ONNX's operator test suite and light model fixtures (issue 5).
#
# Downloads the onnx==1.22.0 wheel from PyPI (`pip download --no-deps`, the
# last release that ships the node test data) and unpacks
#   onnx/backend/test/data/node/   (operator test cases: model.onnx + test_data_set_0/*.pb)
#   onnx/backend/test/data/light/  (light_*.onnx: model-zoo structures, ConstantOfShape weights)
# into the cache directory ${TOFU_ONNX_CACHE:-$HOME/.cache/tofu/onnx-1.22.0},
# outside the repository: third-party data is never committed.
#
# Idempotent: does nothing when the cache already holds both folders (the
# marker file `.complete` is written last). Prints the cache path.
set -euo pipefail

VERSION=1.22.0
CACHE="${TOFU_ONNX_CACHE:-$HOME/.cache/tofu/onnx-$VERSION}"

if [[ -f "$CACHE/.complete" ]]; then
    echo "onnx test data: cached in $CACHE"
    exit 0
fi

PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-onnx-data: python3 is needed (for pip and unzipping the wheel)" >&2
    exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "onnx test data: downloading onnx==$VERSION from PyPI into $CACHE"
# Any platform's wheel carries the same data files; ask for a common one so
# the download works whatever this machine's Python is.
"$PY" -m pip download --quiet --no-deps --only-binary=:all: \
    --platform manylinux_2_17_x86_64 --python-version 3.12 \
    "onnx==$VERSION" -d "$TMP" \
  || "$PY" -m pip download --quiet --no-deps "onnx==$VERSION" -d "$TMP"
WHEEL=$(ls "$TMP"/onnx-"$VERSION"-*.whl | head -n1)

mkdir -p "$CACHE"
"$PY" - "$WHEEL" "$CACHE" <<'PYEOF'
import sys, zipfile, os
wheel, cache = sys.argv[1], sys.argv[2]
prefixes = ("onnx/backend/test/data/node/", "onnx/backend/test/data/light/")
n = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        for p in prefixes:
            if name.startswith(p) and not name.endswith("/"):
                rel = name[len("onnx/backend/test/data/"):]
                dest = os.path.join(cache, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with z.open(info) as src, open(dest, "wb") as out:
                    out.write(src.read())
                n += 1
print(f"onnx test data: unpacked {n} files")
PYEOF
touch "$CACHE/.complete"
echo "onnx test data: cached in $CACHE"
