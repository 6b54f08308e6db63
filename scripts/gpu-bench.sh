#!/usr/bin/env bash
# GPU benchmark (issue 11): tofu's k = 1 training step on the CUDA backend
# against PyTorch eager on the same GPU, in one call. Prints a table of
# median step times (the first step, which includes allocation and warm-up,
# is dropped) and tofu/PyTorch ratios, and one JSON line per model.
#
# Usage: scripts/gpu-bench.sh [TOFU_BINARY] [STEPS]
# Needs: a CUDA GPU, a tofu built with `--features cuda`, python3 with torch.
set -euo pipefail
cd "$(dirname "$0")/.."
TOFU=${1:-target/release/tofu}
STEPS=${2:-6}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
median() { python3 -c 'import json,sys,statistics; t=json.load(sys.stdin)["step_seconds"]; print(statistics.median(t[1:] or t))'; }
printf '%-12s %6s %12s %12s %8s\n' model batch tofu_ms torch_ms ratio
for cfg in "mlp-4-4096 256" "mlp-8-8192 512" "gpt-12-768 8"; do
    set -- $cfg
    "$TOFU" plan --model "$1" --batch "$2" --workers 1 -o "$TMP/plan.json" > /dev/null
    t=$("$TOFU" run "$TMP/plan.json" --backend cuda --steps "$STEPS" --json | median)
    p=$(python3 scripts/torch_baseline.py "$1" "$2" "$STEPS" | median)
    r=$(python3 -c "print(f'{$t/$p:.2f}')")
    printf '%-12s %6s %12.2f %12.2f %8s\n' "$1" "$2" "$(python3 -c "print($t*1e3)")" "$(python3 -c "print($p*1e3)")" "$r"
    echo "{\"model\":\"$1\",\"batch\":$2,\"tofu_seconds\":$t,\"torch_seconds\":$p,\"ratio\":$r}"
done
