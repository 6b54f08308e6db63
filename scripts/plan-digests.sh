#!/usr/bin/env bash
# Digests of the plan files and per-rank programs that `tofu plan` and
# `tofu run --save-programs` write for the zoo's benchmark models and the
# five torch.onnx exports at k = 1, 2, 8 (issue 36: a refactor must leave
# them byte-identical). `plan_seconds`, the one field that is a measurement,
# is zeroed before hashing, and the spec files' paths in programs are made
# relative to the checkout (they name where the binary found specs/).
#
#   bash scripts/plan-digests.sh TOFU_BIN            # print the digests
#   bash scripts/plan-digests.sh TOFU_BIN --check    # compare with tests/golden/plan-digests.txt
#   PLAN_DIGEST_MODELS="mlp-8-8192 onnx:gpt2" bash scripts/plan-digests.sh TOFU_BIN [--check]
#                                                    # only these models (check: their lines)
#
# The committed digests were made by the tofu of commit 6b9bd96 (before the
# `graph`/`program` crates and `BoundPlan`), built with `cargo build
# --release`. They are stale for mlp-8-8192, gpt-24-2048 and the five
# exports (issue 38: class-id losses; batch norm's running statistics in
# the training graph), and possibly for the programs of other models with
# pooling, softmax or layer norm (issue 37: codegen now runs a `let`
# statement's share locally, `codegen::local`). Before using --check as a
# refactor's oracle, re-make them with the old binary and splice the lines
# in. The whole list takes ~40 min on 2 cores (the LSTMs at
# k = 8 dominate).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${1:?usage: plan-digests.sh TOFU_BIN [--check]}")
mode=${2:-print}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
models=(mlp-8-8192 rnn-4-8k:512 rnn-10-8k wresnet-50-4 wresnet-152-10 gpt-24-2048
        onnx:gpt2 onnx:bert-base onnx:vit-b16 onnx:lstm-lm onnx:resnet50)
if [ -n "${PLAN_DIGEST_MODELS:-}" ]; then
  read -r -a models <<< "$PLAN_DIGEST_MODELS"
fi
out="$work/digests.txt"
for m in "${models[@]}"; do
  for k in 1 2 8; do
    case $m in
      onnx:*) name=${m#onnx:}; src=(onnx/tests/fixtures/exports/$name.onnx) ;;
      *:*) name=${m%%:*}; src=(--model "$name" --batch "${m#*:}") ;;
      *) name=$m; src=(--model "$name") ;;
    esac
    d="$work/$name-$k"
    mkdir -p "$d"
    "$bin" plan "${src[@]}" --workers "$k" -o "$d/plan.json" > /dev/null
    "$bin" run "$d/plan.json" --save-programs "$d/programs" --estimate h100 > /dev/null
    sed -E 's/"plan_seconds": [-0-9.eE+]+/"plan_seconds": 0/' "$d/plan.json" > "$d/plan.norm"
    echo "$m k=$k plan $(sha256sum < "$d/plan.norm" | cut -c1-64)" >> "$out"
    for p in $(ls "$d/programs" | sort -V); do
      # A program names the spec file each operator came from: `specs/NAME.tdl`
      # for the library built into the binary, a path under TOFU_SPECS when
      # that is set (and, before issue 43, the checkout's path): made relative.
      sed -E 's#"file": "[^"]*/specs/#"file": "specs/#g' "$d/programs/$p" > "$d/prog.norm"
      echo "$m k=$k $p $(sha256sum < "$d/prog.norm" | cut -c1-64)" >> "$out"
    done
  done
done
if [ "$mode" = --check ]; then
  golden="$work/golden.txt"
  for m in "${models[@]}"; do grep -F "$m k=" tests/golden/plan-digests.txt; done > "$golden" || true
  if diff -u "$golden" "$out"; then
    echo "plan files and programs byte-identical to tests/golden/plan-digests.txt ($(wc -l < "$out") files)"
  else
    echo "plan files or programs differ from tests/golden/plan-digests.txt" >&2
    exit 1
  fi
else
  cat "$out"
fi
