#!/usr/bin/env bash
# Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of everything a stranger controls: see fuzz/fuzz_targets/.
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS]     each target for SECONDS (default 180), all targets by default
#
# Environment: FUZZ_RUNS=N stops a target after N executions instead (SECONDS still bounds it); FUZZ_SANITIZER=none
# builds without AddressSanitizer (faster; Rust's own checks and libFuzzer's limits still apply); FUZZ_JOBS=N runs
# N targets at once (default 1: the machine has two cores, shared with other builds); FUZZ_PROFILE=dev builds without
# optimisations (a build several times faster, runs several times slower: what the CI smoke uses).
#
# The corpus grows in fuzz/corpus/TARGET (not committed) from the seeds in fuzz/seeds/TARGET, and is minimised
# (libFuzzer's -merge=1, as `cargo fuzz cmin` does) after each run of a minute or more. Prints, per target: executions, coverage
# (libFuzzer's cov: edges, ft: features), corpus size and findings (crash-, timeout-, oom- and leak- files in fuzz/artifacts/TARGET, each reproducible with
# `cargo fuzz run TARGET FILE`). Exits 1 if any target found something.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(webhook_bytes webhook_review dump annotation_values statefulset_view health_check cli_args)
target=${1:-all}
seconds=${2:-180}
sanitizer=${FUZZ_SANITIZER:-address}

if [[ "$target" == all ]]; then
    targets=("${all_targets[@]}")
elif [[ " ${all_targets[*]} " == *" $target "* ]]; then
    targets=("$target")
else
    echo "unknown target $target: expected one of ${all_targets[*]} or all" >&2
    exit 2
fi

if ! command -v cargo-fuzz >/dev/null 2>&1; then
    echo "installing cargo-fuzz" >&2
    cargo install cargo-fuzz --locked >&2
fi

# cargo-fuzz passes -Z flags (the sanitizer, coverage instrumentation): the stable compiler accepts them this way.
export RUSTC_BOOTSTRAP=1
cd fuzz
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

build_args=(-s "$sanitizer")
# The binaries are run directly, not through `cargo fuzz run`, so that edits to the tree during a long run do not
# rebuild under it.
bin=target/x86_64-unknown-linux-gnu/release
if [[ "${FUZZ_PROFILE:-release}" == dev ]]; then
    build_args+=(--dev)
    bin=target/x86_64-unknown-linux-gnu/debug
fi
((${#targets[@]} == 1)) && build_args+=("${targets[0]}")
if ! nice -n 10 cargo fuzz build "${build_args[@]}" >"$logs/build.log" 2>&1; then
    cat "$logs/build.log" >&2
    exit 2
fi

run_one() {
    local t=$1 log="$logs/$1.log"
    mkdir -p "corpus/$t" "artifacts/$t"
    local seeds=()
    [[ -d "seeds/$t" ]] && seeds=("seeds/$t")
    local limits=(-max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1)
    [[ -n "${FUZZ_RUNS:-}" ]] && limits+=(-runs="$FUZZ_RUNS")
    ls "artifacts/$t" >"$logs/$t.before"
    nice -n 10 "$bin/$t" -artifact_prefix="artifacts/$t/" "${limits[@]}" "corpus/$t" "${seeds[@]}" >"$log" 2>&1 || true
    # Keep only the inputs that add coverage (what `cargo fuzz cmin` does); a smoke run adds too little to bother.
    ((seconds < 60)) && return 0
    local merged="corpus/$t.merged"
    rm -rf "$merged" && mkdir -p "$merged"
    if nice -n 10 "$bin/$t" -merge=1 -rss_limit_mb=2048 -timeout=10 "$merged" "corpus/$t" >"$logs/$t.cmin" 2>&1; then
        rm -rf "corpus/$t" && mv "$merged" "corpus/$t"
    else
        rm -rf "$merged"
    fi
}

jobs=${FUZZ_JOBS:-1}
for t in "${targets[@]}"; do
    run_one "$t" &
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
done
wait

found=0
printf '%-18s %12s %8s %8s %8s  %s\n' target executions cov ft corpus findings
for t in "${targets[@]}"; do
    log="$logs/$t.log"
    execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | awk '{print $2}')
    # The final `#N DONE cov: ... ft: ... corp: ...` line, or the last status line before a finding.
    done_line=$(grep -E '^#[0-9]+.* cov: ' "$log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
    corpus=$(find "corpus/$t" -type f | wc -l)
    new=$(comm -13 "$logs/$t.before" <(ls "artifacts/$t") | grep -E '^(crash|timeout|oom|leak|slow-unit)-' || true)
    if [[ -n "$new" ]] || grep -qE '^==[0-9]+== ?ERROR|panicked at|deadly signal' "$log"; then
        found=1
        printf '%-18s %12s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" \
            "$(echo "${new:-see log}" | tr '\n' ' ')"
        grep -m1 -A3 -E 'panicked at|ERROR: libFuzzer|ERROR: AddressSanitizer' "$log" | sed 's/^/    /' || true
    else
        printf '%-18s %12s %8s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$corpus" none
    fi
done
exit "$found"
