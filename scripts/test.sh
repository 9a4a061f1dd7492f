#!/usr/bin/env bash
# The whole test suite: the normal build, then the deterministic simulation (which needs the madsim build).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
# RUSTFLAGS selects madsim. The root Cargo.toml optimises the simulator and madsim even in this (dev) profile: the
# seeds run about as fast as in a release build, which would take more than twice as long to build from scratch.
RUSTFLAGS="--cfg madsim" cargo test -p rollout-sim
