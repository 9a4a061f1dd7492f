#!/usr/bin/env bash
# The larger model configurations and simulation sweeps that CI leaves out to keep the model and simulation suites
# under 3 minutes: every #[ignore = "larger suite ..."] test of rollout-model and rollout-sim (more seeds of the
# same worlds, the configurations that found a counterexample, one more eviction or minute). Together with
# scripts/test.sh, the whole model and simulation suite as the mutation run judges it (scripts/mutants.sh runs
# ignored tests too). About 2.5 minutes of tests on 2 cores. Ends with "N passed, M failed" over both suites.
set -euo pipefail
cd "$(dirname "$0")/.."

# The closing summary line (scripts/tools.sh).
source scripts/tools.sh

log=$(mktemp)
trap 'rm -f "$log"' EXIT

# Only the larger tests: every other test of these binaries runs in scripts/test.sh.
cargo test -p rollout-model -- --ignored 2>&1 | tee -a "$log"
RUSTFLAGS="--cfg madsim" cargo test -p rollout-sim -- --ignored 2>&1 | tee -a "$log"

summarise_test_log "$log"
