#!/usr/bin/env bash
# The project's test command (README's second set-up command; CI runs it).
# Runs every test of the workspace. Heavy cases are behind `--ignored`:
#   cargo test --workspace --release -- --ignored
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --locked
