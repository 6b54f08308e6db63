#!/usr/bin/env bash
# CPU benchmark (issue 24): tofu's k = 1 training step on the CPU backend
# against PyTorch eager on the CPU, the same models in one run. Prints a table
# of tofu's first step, the median of its other steps, PyTorch's median (the
# first step dropped too) and the tofu/PyTorch ratio; one JSON line per model;
# then each model's top five operators in tofu (the runs are made with
# TOFU_PROFILE=1: a timer around each instruction, little next to the
# operators; the first step, with its start-up, left out).
# fp32, momentum SGD (lr 0.1, momentum 0.9: tofu plan's default optimizer).
#
# Usage: scripts/bench-cpu.sh [TOFU_BINARY] [MODEL ...]
#   TOFU_BINARY  default target/release/tofu (a plain release build)
#   MODEL        mlp-4-4096 (batch 256), resnet50 (the export
#                onnx/tests/fixtures/exports/resnet50.onnx, batch 8),
#                gpt-2-256 (batch 2, sequence 1024), bert-base (the export
#                bert-base.onnx, batch 2, sequence 128); default: all four, or
#                the list in TOFU_BENCH_CPU_MODELS (e.g. "mlp-4-4096 gpt-2-256")
# Environment:
#   TOFU_BENCH_CPU_STEPS    steps per run (default 4)
#   TOFU_BENCH_CPU_TIMEOUT  seconds per run, tofu's or PyTorch's (default
#                           1800); a run past it shows `timeout` in the table
#   TOFU_TORCH_CACHE        PyTorch's venv (default ~/.cache/tofu/torch-cpu)
#   TOFU_TORCH_VERSION, TOFU_TORCHVISION_VERSION (default 2.15.0, 0.29.2)
#
# PyTorch: torch_baseline.py (the zoo models op for op, torchvision's
# ResNet-50, BERT-base op for op) with torch.set_num_threads(nproc).
# scripts/install-torch-cpu.sh installs torch and torchvision into a venv in
# TOFU_TORCH_CACHE, outside the tree, once (PyPI's CUDA wheel with stub CUDA
# libraries: see that script). Not run in CI.
set -euo pipefail
TOFU=target/release/tofu
if [ $# -gt 0 ]; then
    TOFU=$(realpath -- "$1")
    shift
fi
cd "$(dirname "$0")/.."
MODELS=${*:-${TOFU_BENCH_CPU_MODELS:-mlp-4-4096 resnet50 gpt-2-256 bert-base}}
STEPS=${TOFU_BENCH_CPU_STEPS:-4}
TIMEOUT=${TOFU_BENCH_CPU_TIMEOUT:-1800}
NPROC=$(nproc)
# config MODEL: its batch and what tofu plans (a zoo name or an ONNX file).
config() {
    case $1 in
        mlp-4-4096) batch=256 src=(--model mlp-4-4096) ;;
        gpt-2-256) batch=2 src=(--model gpt-2-256) ;;
        resnet50) batch=8 src=(onnx/tests/fixtures/exports/resnet50.onnx) ;;
        bert-base) batch=2 src=(onnx/tests/fixtures/exports/bert-base.onnx) ;;
        *) echo "bench-cpu: unknown model $1 (mlp-4-4096, resnet50, gpt-2-256, bert-base)" >&2; exit 1 ;;
    esac
}
for model in $MODELS; do config "$model"; done
[ -x "$TOFU" ] || { echo "bench-cpu: no tofu binary at $TOFU (cargo build --release)" >&2; exit 1; }

# PyTorch CPU into the cache (a no-op when there).
PY=$(bash scripts/install-torch-cpu.sh)
torch_version=$("$PY" -c 'import torch; torch.randn(2, 2) @ torch.randn(2, 2); print(torch.__version__)')

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# The row, JSON line and top operators of one model from its run files.
summarise() {
    python3 - "$@" <<'EOF'
import json, re, statistics, sys
model, batch, steps, d = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def read(name):
    try:
        return open(f"{d}/{name}").read()
    except FileNotFoundError:
        return ""

def reason(err):
    # miette's report: "  x message" wrapped over "  | ..." lines
    lines = [re.sub(r"^\s*(x|\||×|│)?\s*", "", l) for l in err.splitlines()]
    lines = [l for l in lines if l and not l.startswith("TOFU_PROFILE")]
    text = " ".join(lines[-3:])
    text = re.sub(r"(\w)- (\w)", r"\1-\2", text)
    return text.replace(d + "/", "")[-200:]

def result(who):
    rc = read(f"{who}.rc").strip()
    if rc == "":
        return "n/a", None, reason(read("plan.err"))
    if rc in ("124", "137"):
        return "timeout", None, None
    if rc != "0":
        return "n/a", None, reason(read(f"{who}.err"))
    return "ok", json.loads(read(f"{who}.json").strip().splitlines()[-1]), None

tofu_status, tofu, tofu_why = result("tofu")
torch_status, torch, torch_why = result("torch")
t = tofu and tofu["step_seconds"]
p = torch and torch["step_seconds"]
med = lambda s: statistics.median(s[1:] or s)
row = {
    "model": model, "batch": batch, "steps": steps,
    "tofu_first_seconds": t[0] if t else None,
    "tofu_seconds": med(t) if t else None,
    "torch_first_seconds": p[0] if p else None,
    "torch_seconds": med(p) if p else None,
    "ratio": round(med(t) / med(p), 2) if t and p else None,
    "tofu": tofu_status, "torch": torch_status,
}
if tofu_why:
    row["tofu_reason"] = tofu_why
if torch_why:
    row["torch_reason"] = torch_why
if tofu and tofu.get("op_seconds"):
    # TOFU_PROFILE leaves out the first step when there are several.
    profiled = max(len(t) - 1, 1)
    ops = sorted(tofu["op_seconds"], key=lambda o: -o[1])
    row["top_ops"] = [[n, s / profiled] for n, s in ops[:5]]
    row["op_seconds_total"] = sum(s for _, s in tofu["op_seconds"]) / profiled
fmt = lambda v, status: f"{v:.3f}" if v is not None else status
ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else (
    "timeout" if "timeout" in (tofu_status, torch_status) else "n/a")
print(f"{model:<12} {batch:>6} {fmt(row['tofu_first_seconds'], tofu_status):>13} "
      f"{fmt(row['tofu_seconds'], tofu_status):>14} {fmt(row['torch_seconds'], torch_status):>15} {ratio:>8}",
      flush=True)
with open(f"{d}/../json", "a") as f:
    f.write(json.dumps(row) + "\n")
with open(f"{d}/../notes", "a") as f:
    for who, why in (("tofu", tofu_why), ("PyTorch", torch_why)):
        if why:
            f.write(f"{model}: {who} n/a: {why}\n")
    for who, status in (("tofu", tofu_status), ("PyTorch", torch_status)):
        if status == "timeout":
            f.write(f"{model}: {who} did not finish {steps} steps within the timeout\n")
with open(f"{d}/../top", "a") as f:
    if "top_ops" in row:
        f.write(f"{model} (tofu, seconds per step over steps 2..{len(t)}, share of instruction time):\n")
        for n, s in row["top_ops"]:
            f.write(f"  {n:<32} {s:10.4f} {100 * s / row['op_seconds_total']:5.1f}%\n")
EOF
}

# run WHO COMMAND...: the command's stdout, stderr and exit status in $dir (TIMEOUT seconds at most).
run() {
    local who=$1
    shift
    set +e
    timeout -k 10 "$TIMEOUT" "$@" > "$dir/$who.json" 2> "$dir/$who.err"
    echo $? > "$dir/$who.rc"
    set -e
}

echo "# $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), nproc $NPROC, load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# tofu $TOFU: k = 1 (one rank), CPU backend, TOFU_PROFILE=1; PyTorch $torch_version eager CPU, torch.set_num_threads($NPROC)"
echo "# fp32, momentum SGD; $STEPS steps, medians drop the first; timeout ${TIMEOUT} s per run"
printf '%-12s %6s %13s %14s %15s %8s\n' model batch tofu_first_s tofu_median_s torch_median_s ratio
for model in $MODELS; do
    config "$model"
    dir=$TMP/$model
    mkdir -p "$dir"
    if "$TOFU" plan "${src[@]}" --batch "$batch" --workers 1 -o "$dir/plan.json" > /dev/null 2> "$dir/plan.err"; then
        run tofu env TOFU_PROFILE=1 "$TOFU" run "$dir/plan.json" --steps "$STEPS" --json
    fi
    run torch "$PY" scripts/torch_baseline.py "$model" "$batch" "$STEPS" --device cpu --threads "$NPROC"
    summarise "$model" "$batch" "$STEPS" "$dir"
done
echo "# load average at end $(cut -d' ' -f1-3 /proc/loadavg) (other processes on these cores slow PyTorch's threads most)"
[ -s "$TMP/notes" ] && { echo; cat "$TMP/notes"; }
echo
cat "$TMP/json"
[ -s "$TMP/top" ] && { echo; echo "top operators"; cat "$TMP/top"; }
exit 0
