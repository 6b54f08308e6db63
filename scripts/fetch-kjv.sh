#!/usr/bin/env bash
# Fetch a public-domain text corpus for `tofu train --data kjv` (issue 27):
# the King James Bible (public domain; Debian's bible-kjv-text holds it
# compressed for its own reader, Debian's bible-kjv). Downloads both
# packages (apt-get download: no install), unpacks them into a temporary
# directory and has the packaged `bible` program print every verse,
# Genesis 1:1 to Revelation 22:21 (4.3 MB of text), into
# ${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/kjv/kjv.txt, outside the
# repository: third-party data is never committed.
#
# Idempotent: does nothing when the file is already there (the marker
# `.complete` is written last). Prints the cache path.
set -euo pipefail

CACHE="${TOFU_DATA_CACHE:-$HOME/.cache/tofu}/kjv"
if [[ -f "$CACHE/.complete" ]]; then
    echo "kjv: cached in $CACHE"
    exit 0
fi
for tool in apt-get dpkg-deb; do
    if ! command -v "$tool" >/dev/null; then
        echo "fetch-kjv: $tool is needed (a Debian-based machine)" >&2
        exit 1
    fi
done
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && apt-get download -q bible-kjv bible-kjv-text 2>&1 | grep -v "^W: Download is performed unsandboxed" || true)
for p in bible-kjv bible-kjv-text; do
    DEB=$(ls "$TMP"/${p}_*.deb 2>/dev/null | head -1)
    if [[ -z "$DEB" ]]; then
        echo "fetch-kjv: apt-get download $p failed (run apt-get update?)" >&2
        exit 1
    fi
    dpkg-deb -x "$DEB" "$TMP/x"
done
mkdir -p "$CACHE"
"$TMP/x/usr/bin/bible" -p "$TMP/x/usr/lib" "Gen1:1-Rev22:21" > "$TMP/kjv.txt"
BYTES=$(wc -c < "$TMP/kjv.txt")
if [[ "$BYTES" -lt 4000000 ]]; then
    echo "fetch-kjv: the bible program printed only $BYTES bytes" >&2
    exit 1
fi
mv "$TMP/kjv.txt" "$CACHE/kjv.txt"
touch "$CACHE/.complete"
echo "kjv: cached in $CACHE ($BYTES bytes)"
