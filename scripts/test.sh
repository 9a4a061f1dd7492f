#!/usr/bin/env bash
# The whole test suite: the normal build, then the deterministic simulation (which needs the madsim build).
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --workspace
# The simulator's own profile settings (Cargo.toml) optimise it and the code it runs; RUSTFLAGS selects madsim.
RUSTFLAGS="--cfg madsim" cargo test -p rollout-sim --release
