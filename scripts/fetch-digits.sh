#!/usr/bin/env bash
# Fetch the 8×8 handwritten digits set for `tofu ssp mlp --data digits` and
# the ssp tests (issue 12).
#
# Downloads the scikit-learn==1.5.2 wheel for this platform from PyPI
# (`pip download --no-deps`; every platform's wheel ships the same
# `sklearn/datasets/data/digits.csv.gz`: 1,797 images of 64 pixels 0–16
# and a label 0–9 per line, comma-separated) and unpacks the decompressed
# `digits.csv` into ${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/sklearn-digits/,
# outside the repository: third-party data is never committed.
#
# Idempotent: does nothing when the file is already there (the marker
# `.complete` is written last). Prints the cache path.
set -euo pipefail

VERSION=1.5.2
CACHE="${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/sklearn-digits"

if [[ -f "$CACHE/.complete" ]]; then
    echo "digits: cached in $CACHE"
    exit 0
fi

PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-digits: python3 is needed (for pip and unzipping the wheel)" >&2
    exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "digits: downloading scikit-learn==$VERSION from PyPI into $CACHE"
"$PY" -m pip download --quiet --no-deps --only-binary=:all: "scikit-learn==$VERSION" -d "$TMP"
WHEEL=$(ls "$TMP"/scikit_learn-"$VERSION"-*.whl | head -n1)

mkdir -p "$CACHE"
"$PY" - "$WHEEL" "$CACHE" <<'PYEOF'
import gzip, os, sys, zipfile
wheel, cache = sys.argv[1], sys.argv[2]
name = "sklearn/datasets/data/digits.csv.gz"
with zipfile.ZipFile(wheel) as z:
    data = gzip.decompress(z.read(name))
with open(os.path.join(cache, "digits.csv"), "wb") as out:
    out.write(data)
lines = data.count(b"\n")
print(f"digits: unpacked {name} ({len(data)} bytes, {lines} lines)")
PYEOF
touch "$CACHE/.complete"
echo "digits: cached in $CACHE"
