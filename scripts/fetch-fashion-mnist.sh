#!/usr/bin/env bash
# Fetch Fashion-MNIST for `tofu train --data fashion-mnist` (issue 27).
#
# Downloads Debian's dataset-fashion-mnist package (apt-get download: no
# install, no root needed beyond apt's cache; the .deb carries Zalando's
# four IDX files: 60,000 training and 10,000 test 28×28 grey images and
# their labels 0–9, MIT-licensed) and unpacks the decompressed files into
# ${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/fashion-mnist/, outside the
# repository: third-party data is never committed.
#
# Idempotent: does nothing when the files are already there (the marker
# `.complete` is written last). Prints the cache path.
set -euo pipefail

CACHE="${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/fashion-mnist"
if [[ -f "$CACHE/.complete" ]]; then
    echo "fashion-mnist: cached in $CACHE"
    exit 0
fi
for tool in apt-get dpkg-deb gunzip; do
    if ! command -v "$tool" >/dev/null; then
        echo "fetch-fashion-mnist: $tool is needed (a Debian-based machine)" >&2
        exit 1
    fi
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && apt-get download -q dataset-fashion-mnist 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
DEB=$(ls "$TMP"/dataset-fashion-mnist_*.deb 2>/dev/null | head -1)
if [[ -z "$DEB" ]]; then
    echo "fetch-fashion-mnist: apt-get download dataset-fashion-mnist failed (run apt-get update?)" >&2
    exit 1
fi
dpkg-deb -x "$DEB" "$TMP/x"
mkdir -p "$CACHE"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    gunzip -c "$TMP/x/usr/share/datasets/fashion-mnist/$f.gz" > "$CACHE/$f"
done
touch "$CACHE/.complete"
echo "fashion-mnist: cached in $CACHE"
