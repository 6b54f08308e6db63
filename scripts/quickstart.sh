#!/usr/bin/env bash
# README's first set-up command: the whole job on a fresh machine, in a few
# minutes on 2 cores.
#   1. builds tofu (release);
#   2. plans the 4-layer, 8K-hidden LSTM of the Tofu paper's Figure 11 for 8
#      workers (`tofu plan`: per-worker memory, bytes per step, the operators
#      that communicate most, data parallelism's figures beside them);
#   3. fetches scikit-learn's 8×8 digits into the cache (scripts/fetch-digits.sh,
#      outside the tree) and trains the zoo MLP on them with a plan for 4
#      workers (`tofu train`: the plan's header, one line per epoch with the
#      training and held-out loss, the held-out accuracy at the end).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked
echo "== tofu plan --model rnn-4-8k --batch 512 --workers 8"
target/release/tofu plan --model rnn-4-8k --batch 512 --workers 8
echo
bash scripts/fetch-digits.sh
echo "== tofu train --model mlp-3-256 --workers 4 --data digits --epochs 30"
target/release/tofu train --model mlp-3-256 --workers 4 --data digits --epochs 30
