#!/usr/bin/env bash
# The whole test suite: the normal build, then the deterministic simulation (which needs the madsim build).
# Ends with one summary line, "N passed, M failed", over every test binary that ran.
set -euo pipefail
cd "$(dirname "$0")/.."

# kubectl and promtool, installed from Debian's packages when missing (see scripts/tools.sh).
source scripts/tools.sh
ensure_tools

log=$(mktemp)
trap 'rm -f "$log"' EXIT

cargo test --workspace 2>&1 | tee -a "$log"
# The simulator's own profile settings (Cargo.toml) optimise it and the code it runs; RUSTFLAGS selects madsim.
RUSTFLAGS="--cfg madsim" cargo test -p rollout-sim 2>&1 | tee -a "$log"

summarise_test_log "$log"
