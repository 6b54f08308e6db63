#!/usr/bin/env bash
# One command for a GPU machine (issue 25, item 7). A GPU machine lent to a
# session has CUDA, NCCL and PyTorch but no Rust toolchain, so this works in
# two halves:
#
#   bash scripts/gpu-check.sh prepare [DIR]   # here, with cargo
#       builds tofu and the CUDA test executable with `--features cuda`
#       (release; GPU_CHECK_PROFILE=test for the test profile) and copies
#       them, with this script and the benchmark scripts, into DIR (the
#       operator specs are built into both)
#       (default target/gpu-check, which git ignores: name it in the device
#       tool's `carry`).
#
#   bash DIR/gpu-check.sh run [DIR]           # on the GPU machine
#       runs, in order, each step under a time limit (20 minutes in all):
#         1. nvidia-smi and which CUDA libraries load (libcuda, NVRTC,
#            cuBLAS, NCCL; from the system or PyTorch's wheels), and where
#            cuDNN is (optional: exported as TOFU_CUDNN_LIBRARY for the
#            steps after; without it convolutions run as generated kernels);
#         2. the CUDA test executable with TOFU_REQUIRE_GPU=1, its tests at once (every op
#            against the interpreter; the tiny zoo × every search × k on one
#            GPU, host-staged; NCCL with world size 1);
#         3. `tofu launch --nproc-per-node 1 -- run … --backend cuda`, and
#            cnn-8-64's steps verified against the CPU backend, the step's
#            name saying whether its convolutions went through cuDNN;
#         4. the GPU benchmark against PyTorch (scripts/gpu-bench.sh) and a
#            per-operator profile (TOFU_PROFILE=1) of mlp-4-4096;
#       and prints one summary table (step, status, seconds); the limits
#       are cut to GPU_CHECK_BUDGET seconds in all (default 1200), the
#       test step's to GPU_CHECK_TEST_LIMIT (default 600). Exit 0 when
#       every step passed, 1 when one failed, 2 without a GPU (it says so
#       and runs nothing).
set -uo pipefail
MODE=${1:-}
HERE=$(cd "$(dirname "$0")" && pwd)

# The executable cargo reports for target NAME, from its JSON messages.
executable() {
    python3 -c 'import json,sys
for l in sys.stdin:
    try: m=json.loads(l)
    except ValueError: continue
    if m.get("reason")=="compiler-artifact" and m["target"]["name"]==sys.argv[1] and m.get("executable"): print(m["executable"])' "$1"
}

prepare() {
    set -e
    local root dir profile tofu tests
    root=$(cd "$HERE/.." && pwd)
    dir=${1:-$root/target/gpu-check}
    profile=${GPU_CHECK_PROFILE:-release}
    cd "$root"
    # The whole workspace's feature set, as the test suite builds it: under
    # the test profile both come from the suite's own build (seconds, not a
    # second build of every crate with `-p`'s narrower feature set).
    tofu=$(cargo build --profile "$profile" --workspace --locked --features tofu/cuda \
        --bin tofu --message-format=json | executable tofu)
    tests=$(cargo test --profile "$profile" --workspace --locked --features tofu/cuda \
        --test cuda --no-run --message-format=json | executable cuda)
    if [[ -z "$tofu" || -z "$tests" ]]; then
        echo "gpu-check prepare: cargo did not report the tofu binary and the CUDA test executable" >&2
        exit 1
    fi
    rm -rf "$dir"
    mkdir -p "$dir/scripts"
    cp "$tofu" "$dir/tofu"
    cp "$tests" "$dir/cuda-tests"
    # Symbols off: the device tool carries at most 64 MiB.
    strip --strip-debug "$dir/tofu" "$dir/cuda-tests" 2> /dev/null || true
    cp scripts/gpu-check.sh "$dir/gpu-check.sh"
    cp scripts/gpu-bench.sh scripts/torch_baseline.py "$dir/scripts/"
    {
        echo "tofu $(git rev-parse --short HEAD 2>/dev/null || echo unknown) profile $profile"
        (cd "$dir" && sha256sum tofu cuda-tests)
    } > "$dir/MANIFEST"
    echo "gpu-check: prepared $dir (run \`bash $dir/gpu-check.sh run\` on the GPU machine)"
}

have_gpu() {
    command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L 2> /dev/null | grep -q '^GPU '
}

run() {
    local dir=${1:-$HERE}
    dir=$(cd "$dir" && pwd) # gpu-bench.sh changes directory
    if ! have_gpu; then
        echo "gpu-check: no NVIDIA GPU here (nvidia-smi is missing or lists no device):" \
            "run \`bash scripts/gpu-check.sh prepare\` on a machine with cargo, then" \
            "\`bash DIR/gpu-check.sh run\` on the GPU machine" >&2
        exit 2
    fi
    for f in tofu cuda-tests; do
        if [[ ! -e "$dir/$f" ]]; then
            echo "gpu-check: $dir/$f is missing: run \`bash scripts/gpu-check.sh prepare $dir\` first" >&2
            exit 1
        fi
    done
    local tmp summary failed=0
    tmp=$(mktemp -d)
    summary="$tmp/summary"
    # GPU_CHECK_BUDGET: seconds for all steps together (default 1200, the
    # 20 minutes above); a step's limit is cut to what is left, and a step
    # with under 5 s left is not started, so a short lease still ends with
    # the summary table.
    local budget=${GPU_CHECK_BUDGET:-1200} began
    began=$(date +%s)
    step() { # name, limit (s), command...
        local name=$1 limit=$2 t0 rc left
        shift 2
        left=$((budget - ($(date +%s) - began)))
        ((left < limit)) && limit=$left
        if ((limit < 5)); then
            printf '%-44s %-10s %8s\n' "$name" "NOBUDGET" "0.0" >> "$summary"
            failed=1
            return
        fi
        echo "== $name (limit ${limit} s)"
        t0=$(date +%s.%N)
        timeout -k 5 "$limit" "$@"
        rc=$?
        local took
        took=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.1f}')")
        local status=PASS
        if [[ $rc -eq 124 || $rc -eq 137 ]]; then
            status=TIMEOUT
        elif [[ $rc -ne 0 ]]; then
            status="FAIL($rc)"
        fi
        [[ $status != PASS ]] && failed=1
        printf '%-44s %-10s %8s\n' "$name" "$status" "$took" >> "$summary"
    }
    step "nvidia-smi" 30 nvidia-smi
    step "CUDA libraries load" 60 python3 - << 'EOF'
import ctypes, glob, os, site
dirs = [p for s in site.getsitepackages() for p in glob.glob(os.path.join(s, "nvidia", "*", "lib"))]
ok = True
for lib in ["libcuda.so.1", "libnvrtc.so.13", "libcublas.so.13", "libnccl.so.2"]:
    found = None
    for cand in [lib] + [os.path.join(d, lib) for d in dirs]:
        try:
            ctypes.CDLL(cand)
            found = cand
            break
        except OSError:
            pass
    print(f"{lib:18} {found or 'NOT FOUND'}")
    ok = ok and found is not None
raise SystemExit(0 if ok else 1)
EOF
    # cuDNN, from the system or PyTorch's wheel (optional).
    if [[ -z "${TOFU_CUDNN_LIBRARY:-}" ]]; then
        TOFU_CUDNN_LIBRARY=$(python3 - << 'EOF'
import ctypes, glob, os, site
dirs = [p for s in site.getsitepackages() for p in glob.glob(os.path.join(s, "nvidia", "cudnn", "lib"))]
for cand in ["libcudnn.so.9"] + [os.path.join(d, "libcudnn.so.9") for d in dirs]:
    try:
        ctypes.CDLL(cand)
        print(cand)
        break
    except OSError:
        pass
EOF
        )
        export TOFU_CUDNN_LIBRARY
    fi
    echo "cuDNN: ${TOFU_CUDNN_LIBRARY:-NOT FOUND (convolutions run as generated kernels)}"
    step "CUDA tests (TOFU_REQUIRE_GPU=1)" "${GPU_CHECK_TEST_LIMIT:-600}" env TOFU_REQUIRE_GPU=1 "$dir/cuda-tests" --nocapture
    "$dir/tofu" plan --model mlp-3-256 --batch 64 --workers 1 -o "$tmp/plan.json" > /dev/null
    step "tofu launch -- run --backend cuda" 120 \
        "$dir/tofu" launch --nproc-per-node 1 -- run "$tmp/plan.json" --backend cuda --steps 3 --json
    "$dir/tofu" plan --model cnn-8-64 --batch 64 --workers 1 -o "$tmp/cnn.json" > /dev/null
    timeout 120 "$dir/tofu" run "$tmp/cnn.json" --backend cuda --steps 3 --verify --json \
        > "$tmp/cnn.out" 2> "$tmp/cnn.err"
    local via="generated kernels"
    grep -q "through cuDNN (" "$tmp/cnn.err" && via="cuDNN"
    step "cnn-8-64 --verify, convs: $via" 10 grep -q '"verified": *true' "$tmp/cnn.out"
    step "GPU benchmark vs PyTorch" 300 bash "$dir/scripts/gpu-bench.sh" "$dir/tofu"
    "$dir/tofu" plan --model mlp-4-4096 --batch 256 --workers 1 -o "$tmp/mlp.json" > /dev/null
    step "per-op profile mlp-4-4096 b256" 120 \
        env TOFU_PROFILE=1 "$dir/tofu" run "$tmp/mlp.json" --backend cuda --steps 6
    echo
    echo "== gpu-check summary ($(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1))"
    printf '%-44s %-10s %8s\n' step status seconds
    cat "$summary"
    rm -rf "$tmp"
    exit $failed
}

case "$MODE" in
    prepare) shift; prepare "$@" ;;
    run) shift; run "$@" ;;
    *)
        echo "usage: gpu-check.sh prepare [DIR]   (here, with cargo)" >&2
        echo "       gpu-check.sh run [DIR]       (on the GPU machine)" >&2
        exit 64
        ;;
esac
