#!/usr/bin/env bash
# Mutation testing of the decisions, judged by the model checker and the simulation ALONE.
#
# cargo-mutants (installed from crates.io when missing) lists the mutants of rollout-core and the decision-bearing
# shell modules, each with its diff; scripts/mutants_select.py applies them one at a time and judges each by the
# model and simulation tests only (`cargo test -p rollout-model -p rollout-sim`, built with RUSTFLAGS="--cfg madsim":
# the model does not use tokio and checks the same under that flag; the simulation needs it). Unit, property and
# shell tests are deliberately NOT run: the question is what the model and the simulation catch by themselves.
#
# Each mutant is judged only by the tests that can see it: those whose run of the UNMUTATED code executed a line of
# the mutated function (a mutant cannot change a deterministic test that never calls it). A coverage map of every
# model and simulation test, run alone with LLVM's instrumentation (llvm-tools, installed with rustup when missing),
# is built once per tree; it is also the baseline (it fails if a test fails unmutated). A mutant of code no test
# executes is missed at once, and listed in unexecuted.txt too. --full-suite turns the selection off (every mutant
# runs the whole suite, after a baseline run of it). cargo-mutants' own runner is not used: its --re filter does not
# hold back its struct-field deletions, and it gives every mutant the same test command.
#
# The mutants are split into sampled shards: shard K takes the mutants whose name hashes to K modulo N, so every
# shard samples every file, and a mutant stays in its shard when other code changes the list. With the default
# count (32 shards, 30-60 mutants each of about 1,450) a shard takes about 30-60 minutes on this 2-core machine:
# 10-25 s to rebuild per mutant, then its selected tests (the whole suite, about 150 s, only for code every test
# runs; a caught mutant stops at its first failing test: cargo is stopped as soon as libtest reports one).
#
#   scripts/mutants.sh --list [--crate core|shell|all]      list the mutants, counts per file and per crate
#   scripts/mutants.sh --shard K/N [--crate ...] [--timeout S] [--full-suite]   run shard K (0-based) of N
#   scripts/mutants.sh --summary                            combine every shard run so far (also printed after a run)
#   scripts/mutants.sh --recheck [--class C]                judge every mutant missed so far again, on this tree
#                                                           (with --class, only those survivors.tsv puts in class C,
#                                                           e.g. closed; "unclassified" for those it does not list;
#                                                           it resumes, keeping what it caught before)
#                                                           (after the suites gained what catches them)
#   scripts/mutants.sh --unjudged                           judge, on this tree, the mutants of its list no run has
#                                                           judged (mostly renamed by lines moved since their shard
#                                                           ran; target/mutants/out/unjudged.txt), as one
#                                                           resumable run
#
# Mutants are never applied to this tree: the script syncs the tracked and untracked-but-not-ignored files into a
# scratch copy (MUTANTS_SCRATCH, default target/mutants/src) whose build directory (MUTANTS_TARGET_DIR, default
# target/mutants/target) persists between shards, and mutates files there (each put back after its mutant; a
# killed run's leftover is undone by the next sync). Everything a run writes stays outside the source tree, under
# target/mutants/: working files in out/shard-K-of-N/ (MUTANTS_OUT, default target/mutants/out: the plan,
# outcomes.log with each mutant's build and test times), and each shard's outcome lists (caught, missed, timeout,
# unviable, and unexecuted among the missed) with the commit they were measured on in results/shard-K-of-N/
# (MUTANTS_RESULTS, default target/mutants/results), so a whole run can be spread over several sittings and resumed.
# The summary reads those and writes out/missed.txt and out/timeout.txt (all shards), and, against the judged
# survivors in mutants/survivors.tsv (the one file of the run kept in the repository), out/unclassified.txt.
set -euo pipefail
# Everything below is one compound command, read whole before it runs: editing this file while a shard runs does not
# change (or break) the running shard.
{
cd "$(dirname "$0")/.."
repo=$(pwd)
# Where runs write (never inside the source tree): working files, and the outcome lists runs resume from.
out_root=$(realpath -m "${MUTANTS_OUT:-$repo/target/mutants/out}")
results_root=$(realpath -m "${MUTANTS_RESULTS:-$repo/target/mutants/results}")

default_shards=32
crate=all
shard=""
timeout=420
mode=run
select=coverage

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --shard) shard="$2"; shift 2 ;;
    --shard=*) shard="${1#*=}"; shift ;;
    --crate) crate="$2"; shift 2 ;;
    --crate=*) crate="${1#*=}"; shift ;;
    --timeout) timeout="$2"; shift 2 ;;
    --timeout=*) timeout="${1#*=}"; shift ;;
    --full-suite) select=all; shift ;;
    --list) mode=list; shift ;;
    --summary) mode=summary; shift ;;
    --recheck) mode=recheck; shift ;;
    --unjudged) mode=recheck; recheck_class=unjudged; shift ;;
    --class) recheck_class="$2"; shift 2 ;;
    --class=*) recheck_class="${1#*=}"; shift ;;
    -h|--help) usage 0 ;;
    *) echo "unknown argument: $1" >&2; usage 2 ;;
  esac
done

# What is mutated.
core_files=(-f 'controller/core/src/**/*.rs')
# The shell modules that take or carry out decisions: the reconcile loop, the zone tracker (claims, dates), the
# scaling shell (delayed downscale calls), the admission webhooks, and the ZoneAwarePodDisruptionBudget driver (its
# I/O, the shared lists whose freshness the intents' argument rests on, the in-process lock, memory and claims, the
# ready-time tracker) with the pod-eviction handler.
shell_files=(-f controller/src/rollout/reconciler.rs -f controller/src/cluster/zone_tracker.rs
  -f controller/src/rollout/scaling.rs -f controller/src/admission/router.rs -f controller/src/admission/no_downscale.rs
  -f controller/src/admission/prepare_downscale.rs
  -f controller/src/zpdb/decide.rs -f controller/src/zpdb/reads.rs -f controller/src/zpdb/serialisation.rs
  -f controller/src/zpdb/ready_time.rs -f controller/src/admission/evictions.rs)
case "$crate" in
  core) scope=(-p rollout-core "${core_files[@]}") ;;
  shell) scope=(-p rollout-operator "${shell_files[@]}") ;;
  all) scope=(-p rollout-core -p rollout-operator "${core_files[@]}" "${shell_files[@]}") ;;
  *) echo "--crate must be core, shell or all" >&2; exit 2 ;;
esac
# What is not mutated, because it cannot change a decision or is not the controller's code:
# - fixture.rs: builders of views for tests, the model and the simulation (the environment's code, not a decision);
# - certificate.rs: the webhook certificate's lifetime and names; neither the model nor the simulation runs TLS, and
#   the core's unit tests and the shell's tls tests own it;
# - `describe` (MinTimeVerdict, Expectation, Readiness, and the ZPDB's denial text) and `Action::reason`: text for
#   people (plan reasons, logs, denial messages); no decision reads them back;
# - likewise the formatters the first sample found surviving as text only (mutants/REPORT.md): `downscale_subject`
#   and `go_time` (denial messages), `format_go_duration` (messages), `summarize` and `with_scaling_errors` (the
#   plan's reason), `GroupState::as_str` (the state's name in logs). `format_timestamp` is NOT one: it writes the
#   record's dates;
# - the same found unexecuted by the coverage map: `gvk` and `compact` (review error messages), the Go-worded parse
#   errors (`DurationError::go_message` with `first_unknown_unit`; `syntax_error`, `go_type`, `go_value` of the ZPDB
#   configuration), the flows' names of phases and observations in their internal-error messages (`phase_name`,
#   `observed_name`, `kind`, `what`), and the errors' `kind` labels (logs and metrics);
# - the parser of the harness's test-only switches (`Defences::parse`, `flag`, `all_on`, `off`, `Layer::parse`,
#   `name`): the simulation's and the model's command line, not the controller (`Defences::is_on`, which the
#   decisions read, IS mutated).
filters=(-e controller/core/src/fixture.rs -e controller/core/src/certificate.rs
  -E '[ :]describe( |$)' -E 'Action::reason( |$)'
  -E '[ :](downscale_subject|go_time|format_go_duration|summarize|with_scaling_errors|GroupState::as_str)( |$)'
  -E '[ :](gvk|compact|DurationError::go_message|first_unknown_unit|syntax_error|go_type|go_value)( |$)'
  -E '[ :](phase_name|observed_name|kind|what|RecordStoreError::kind|ReconcileError::kind)( |$)'
  -E '[ :](Defences::(parse|flag|all_on|off)|Layer::(parse|name))( |$)')

crate_of() { # path prefix -> crate name, for the per-crate counts
  awk '{ c = ($0 ~ /^controller\/core\//) ? "rollout-core" : "rollout-operator (shell)"; print c }'
}

ensure_cargo_mutants() {
  if ! cargo mutants --version >/dev/null 2>&1; then
    echo "installing cargo-mutants from crates.io" >&2
    nice -n 19 cargo install --locked cargo-mutants
  fi
}

ensure_llvm_tools() {
  if ! [[ -x "$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/llvm-cov" ]]; then
    echo "installing llvm-tools (llvm-cov, llvm-profdata) with rustup, for the coverage map" >&2
    rustup component add llvm-tools
  fi
}

# The coverage map: every model and simulation test run alone, instrumented, and the lines of the controller it
# executed. Built once per tree (the synced scratch copy; its stamp names the committed trees of the code and the
# suites plus the diff of the worktree there).
coverage_dir=$repo/target/mutants/coverage
# Speed only (a build is mostly linking the test binaries): mold when the machine has it.
link_with=""
if command -v mold > /dev/null; then link_with=" -C link-arg=-fuse-ld=mold"; fi
tree_stamp() {
  local paths=(controller model sim Cargo.toml Cargo.lock)
  echo "$(git -C "$repo" rev-parse "${paths[@]/#/HEAD:}" | tr '\n' ' ')$( {
    git -C "$repo" diff HEAD -- "${paths[@]}"
    git -C "$repo" ls-files -z --others --exclude-standard -- "${paths[@]}" | (cd "$repo" && xargs -0 -r cat)
  } | sha1sum | cut -c1-16)"
}
coverage_map() {
  local stamp=$stamp_at_sync
  if [[ -f $coverage_dir/map.json && "$(cat "$coverage_dir/stamp" 2>/dev/null)" == "$stamp" ]]; then
    echo "coverage map of this tree: $coverage_dir/map.json"
    return 0
  fi
  ensure_llvm_tools
  mkdir -p "$coverage_dir"
  local began
  began=$(date +%s)
  echo "coverage map: building the instrumented model and simulation tests (once per tree)"
  (cd "$scratch" && CARGO_TARGET_DIR=$coverage_dir/target RUSTFLAGS="--cfg madsim -C instrument-coverage$link_with" \
    nice -n 19 cargo test -p rollout-model -p rollout-sim --tests --no-run --message-format=json 2> "$coverage_dir/build.log") \
    | python3 -c 'import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        print(m["executable"])' > "$coverage_dir/binaries.txt" \
    || { echo "the instrumented build failed: see $coverage_dir/build.log" >&2; exit 1; }
  nice -n 19 python3 "$repo/scripts/mutants_select.py" coverage "$coverage_dir/binaries.txt" "$scratch" "$coverage_dir/map.json"
  echo "$stamp" > "$coverage_dir/stamp"
  echo "coverage map built in $(( $(date +%s) - began )) s"
}

summary() {
  local out="$out_root"
  mkdir -p "$out"
  rm -f "$out/list.txt"
  shopt -s nullglob
  local dirs=("$results_root"/shard-*)
  # A new recheck's list comes from the shards alone (it judges them all again, on this tree).
  [[ -n ${summary_without_recheck:-} ]] || dirs+=("$results_root"/recheck "$results_root"/recheck-*)
  local present=()
  for d in "${dirs[@]}"; do [[ -d $d ]] && present+=("$d"); done
  dirs=("${present[@]}")
  if [[ ${#dirs[@]} -eq 0 ]]; then echo "no shard has run yet ($results_root/shard-*/)"; return 0; fi
  local all
  all=$(mktemp)
  # Every outcome once: "<outcome> <mutant>", from each shard's per-outcome lists. A mutant judged in more than one
  # run (shards of different code) counts once, caught if any run caught it.
  for d in "${dirs[@]}"; do
    for o in caught missed timeout unviable; do
      if [[ -f "$d/$o.txt" ]]; then sed "s/^/$o\t/" "$d/$o.txt"; fi
    done
  done | awk -F'\t' 'BEGIN { rank["caught"] = 0; rank["timeout"] = 1; rank["unviable"] = 2; rank["missed"] = 3 }
    !($2 in best) || rank[$1] < rank[best[$2]] { best[$2] = $1 }
    END { for (m in best) print best[m] "\t" m }' | sort -t$'\t' -k2 > "$all"
  # Counted over the list of this tree when cargo-mutants can list it: a mutant of code since removed, or renamed
  # by a moved line, no longer counts (a renamed one is judged again under its new name).
  if cargo mutants --version > /dev/null 2>&1; then
    cargo mutants --list "${scope[@]}" "${filters[@]}" 2> /dev/null | sort > "$out/list.txt"
    awk -F'\t' 'NR == FNR { listed[$0] = 1; next } ($2 in listed)' "$out/list.txt" "$all" > "$all.listed"
    echo "outcomes kept: $(wc -l < "$all.listed") of $(wc -l < "$all") (the others are of mutants not in this tree's list)"
    mv "$all.listed" "$all"
  fi
  echo "shards run: $(for d in "${dirs[@]}"; do
    printf '%s%s ' "${d##*/}" "$([[ -f $d/complete ]] || echo ' (partial)')"; done)"
  echo "on commits: $(cat "${dirs[@]/%//commit}" 2>/dev/null | sort -u | tr '\n' ' ')"
  printf '%-26s %6s %6s %6s %7s %8s  %s\n' crate tested caught missed timeout unviable "catch rate caught/(caught+missed)"
  for c in "rollout-core" "rollout-operator (shell)" "all"; do
    awk -F'\t' -v c="$c" '
      { crate = ($2 ~ /^controller\/core\//) ? "rollout-core" : "rollout-operator (shell)"
        if (c != "all" && crate != c) next
        n++; k[$1]++ }
      END { caught = k["caught"] + 0; missed = k["missed"] + 0
            rate = (caught + missed) ? sprintf("%.1f %%", 100 * caught / (caught + missed)) : "-"
            printf "%-26s %6d %6d %6d %7d %8d  %s\n", c, n, caught, missed, k["timeout"] + 0, k["unviable"] + 0, rate }' "$all"
  done
  awk -F'\t' '$1 == "missed" { print $2 }' "$all" | sort -V > "$out/missed.txt"
  awk -F'\t' '$1 == "timeout" { print $2 }' "$all" | sort -V > "$out/timeout.txt"
  # Unexecuted: still missed, and no test ran its code when it was last judged.
  for d in "${dirs[@]}"; do if [[ -f $d/unexecuted.txt ]]; then cat "$d/unexecuted.txt"; fi; done | sort -u \
    | comm -12 - <(sort "$out/missed.txt") | sort -V > "$out/unexecuted.txt"
  # Progress over the list of this tree (shards run on earlier code may not tile it exactly: moved lines rename).
  if [[ -f $out/list.txt ]]; then
    cut -f2 "$all" | sort | comm -23 "$out/list.txt" - | sort -V > "$out/unjudged.txt"
    echo "judged: $(( $(wc -l < "$out/list.txt") - $(wc -l < "$out/unjudged.txt") )) of the $(wc -l < "$out/list.txt")" \
      "mutants of this tree; not yet: $out/unjudged.txt"
  fi
  echo "missed mutants ($(wc -l < "$out/missed.txt"), of which $(wc -l < "$out/unexecuted.txt") in code no model or" \
    "simulation test executes): $out/missed.txt, $out/unexecuted.txt; timeouts: $out/timeout.txt"
  # Survivors already judged (equivalent, text, reporting or a named gap) are in mutants/survivors.tsv.
  if [[ -f $repo/mutants/survivors.tsv ]]; then
    cut -f1 "$repo/mutants/survivors.tsv" | sort > "$all.known"
    sort "$out/missed.txt" | comm -23 - "$all.known" | sort -V > "$out/unclassified.txt"
    echo "not yet classified in mutants/survivors.tsv: $(wc -l < "$out/unclassified.txt") ($out/unclassified.txt)"
    rm -f "$all.known"
    survivor_classes "$all" "$repo/mutants/survivors.tsv"
  fi
  rm -f "$all"
}

# The missed mutants by their class in survivors.tsv, per crate, and the catch rates the report states:
# - decision-changing, a lower bound: caught / (caught + gap + closed + unclassified), every survivor that is not
#   shown to change only text, reporting or cost, nor to be equivalent or test-only, counted as a gap (so are the
#   closed ones until `--recheck` judges them again, and those not yet classified);
# - the same with the closed ones counted as caught;
# - strict: caught / (caught + missed - equivalent - testonly).
survivor_classes() {
  awk -F'\t' '
    NR == FNR { class[$1] = $2; next }
    $1 == "caught" || $1 == "missed" {
      crate = ($2 ~ /^controller\/core\//) ? "core" : "shell"
      if ($1 == "caught") { caught[crate]++; caught["all"]++; next }
      c = ($2 in class) ? class[$2] : "unclassified"
      n[crate, c]++; n["all", c]++; missed[crate]++; missed["all"]++; seen[c] = 1
    }
    function rate(num, den) { return den ? sprintf("%.1f %%", 100 * num / den) : "-" }
    END {
      split("unclassified gap closed reporting performance text equivalent testonly", order, " ")
      printf "\nmissed by class (mutants/survivors.tsv)   all   core  shell\n"
      for (i = 1; i in order; i++) {
        c = order[i]
        printf "  %-38s %5d %6d %6d\n", c, n["all", c], n["core", c], n["shell", c]
      }
      for (c in seen) {
        known = 0
        for (i = 1; i in order; i++) if (order[i] == c) known = 1
        if (!known) printf "  %-38s %5d %6d %6d  (not a class this script knows)\n", c, n["all", c], n["core", c], n["shell", c]
      }
      printf "\n%-26s %16s %18s %8s\n", "catch rate", "decision-changing", "with closed caught", "strict"
      split("core shell all", crates, " ")
      names["core"] = "rollout-core"; names["shell"] = "rollout-operator (shell)"; names["all"] = "all"
      for (i = 1; i <= 3; i++) {
        k = crates[i]
        open_ = n[k, "gap"] + n[k, "closed"] + n[k, "unclassified"]
        printf "%-26s %16s %18s %8s\n", names[k], rate(caught[k], caught[k] + open_),
          rate(caught[k] + n[k, "closed"], caught[k] + open_),
          rate(caught[k], caught[k] + missed[k] - n[k, "equivalent"] - n[k, "testonly"])
      }
    }' "$2" "$1"
}

if [[ $mode == summary ]]; then summary; exit 0; fi

ensure_cargo_mutants

if [[ $mode == list ]]; then
  list=$(cargo mutants --list "${scope[@]}" "${filters[@]}")
  echo "$list"
  echo
  echo "mutants per file:"
  echo "$list" | cut -d: -f1 | sort | uniq -c
  echo "mutants per crate:"
  echo "$list" | crate_of | sort | uniq -c
  echo "total: $(echo "$list" | grep -c .) (one shard of $default_shards: about $(( ($(echo "$list" | grep -c .) + default_shards - 1) / default_shards )) mutants)"
  exit 0
fi

only=()
if [[ $mode == recheck ]]; then
  # Every mutant missed so far (on whatever code its shard ran), judged again on this tree, as one shard.
  summary_without_recheck=1 summary > /dev/null
  if [[ ${recheck_class:-} == unjudged ]]; then
    # Not a class of survivors: the mutants of this tree's list that no shard or recheck has judged.
    summary > /dev/null
    cp "$out_root/unjudged.txt" "$out_root/recheck.txt"
    echo "judging the $(wc -l < "$out_root/recheck.txt") mutants of this tree no run has judged"
  elif [[ -n ${recheck_class:-} ]]; then
    # Only the survivors of one class (say, the gaps closed since their shard ran).
    awk -F'\t' -v c="$recheck_class" 'NR == FNR { class[$1] = $2; next }
      (($0 in class) ? class[$0] : "unclassified") == c' "$repo/mutants/survivors.tsv" "$out_root/missed.txt" \
      > "$out_root/recheck.txt"
    echo "recheck of the $(wc -l < "$out_root/recheck.txt") missed mutants of class $recheck_class"
  else
    cp "$out_root/missed.txt" "$out_root/recheck.txt"
  fi
  only=("$out_root/recheck.txt")
  shard="0/1"
elif [[ -n ${recheck_class:-} ]]; then
  echo "--class goes with --recheck" >&2; exit 2
fi
[[ -n $shard ]] || shard="0/$default_shards"
if ! [[ $shard =~ ^([0-9]+)/([0-9]+)$ ]] || (( BASH_REMATCH[1] >= BASH_REMATCH[2] )); then
  echo "--shard K/N with 0 <= K < N" >&2; exit 2
fi
k=${BASH_REMATCH[1]}; n=${BASH_REMATCH[2]}

# The scratch copy: only files whose content differs are copied (with a new mtime), so cargo rebuilds exactly what
# changed, including a file a killed run left mutated there.
scratch=$(realpath -m "${MUTANTS_SCRATCH:-$repo/target/mutants/src}")
mkdir -p "$scratch"
# The code measured: stamped before the copy, so a commit made meanwhile is not credited with this shard.
stamp_at_sync=$(tree_stamp)
measured=$(git -C "$repo" rev-parse --short HEAD)
if ! git -C "$repo" diff --quiet HEAD -- controller model sim; then measured="$measured (with uncommitted changes)"; fi
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  [[ -f $f ]] || continue
  if ! cmp -s "$f" "$scratch/$f"; then mkdir -p "$scratch/$(dirname "$f")"; cp "$f" "$scratch/$f"; fi
done
export CARGO_TARGET_DIR=${MUTANTS_TARGET_DIR:-$repo/target/mutants/target}
# The simulation runs only under madsim; the model builds the same either way.
export RUSTFLAGS="--cfg madsim$link_with"
# Speed only: no debug information (a failing test's message is all the judgement reads).
export CARGO_PROFILE_DEV_DEBUG=0

name="shard-$k-of-$n"
[[ $mode == recheck ]] && name=recheck${recheck_class:+-$recheck_class}
# A whole recheck supersedes the rechecks of one class.
if [[ $mode == recheck && -z ${recheck_class:-} ]]; then rm -rf "$results_root"/recheck-*; fi
out="$out_root/$name"
rm -rf "$out"
mkdir -p "$out"
start=$(date +%s)
# The commit measured: the tree as synced above (later commits made while the shard runs do not count). Outcomes
# go straight to $results_root/shard-K-of-N/ (kept between runs), so an interrupted shard keeps what it judged, and
# a later run of the same shard resumes it, also on other code (the suites only gain: what was caught stays caught,
# and `--recheck` judges every missed mutant again on the final tree). Each code it ran on is appended to the
# shard's stamp and commit files.
kept="$results_root/$name"
run_stamp="$stamp_at_sync select=$select crate=$crate"
# A shard judged another way (--full-suite, another --crate) is not resumed: it starts over; so does a whole recheck
# (it judges every missed mutant on this tree). A recheck of one class resumes (one interrupted, or the class
# rechecked again once more survivors joined it): what it caught stays caught, as in a shard, and what it missed is
# judged again on this tree.
if [[ ${recheck_class:-} == unjudged && -d $kept ]]; then
  : # Resumed as it stands: its list holds only what no run has judged yet.
elif [[ $mode == recheck && -n ${recheck_class:-} && -d $kept ]]; then
  rm -f "$kept/missed.txt" "$kept/unexecuted.txt"
elif [[ $mode == recheck ]] || [[ -f $kept/stamp && "$(tail -n 1 "$kept/stamp" | sed 's/.* select=/select=/')" != "select=$select crate=$crate" ]]; then
  rm -rf "$kept"
fi
mkdir -p "$kept"
if [[ "$(tail -n 1 "$kept/stamp" 2>/dev/null)" != "$run_stamp" ]]; then
  echo "$run_stamp" >> "$kept/stamp"
  echo "$measured" >> "$kept/commit"
fi
rm -f "$kept/complete"
# Our own baseline: cargo-mutants' baseline would build and run the MUTATED packages' tests (rollout-core's and
# rollout-operator's unit tests), not the model and the simulation. With coverage selection the coverage map is the
# baseline (it runs every model and simulation test of this tree unmutated, and fails if one fails), so here the
# build directory is only warmed; without selection the whole suite runs once first.
(cd "$scratch" && cargo mutants --list --json "${scope[@]}" "${filters[@]}") > "$out/mutants.json"
if [[ $select == coverage ]]; then
  coverage_map
  echo "warming the build: cargo test -p rollout-model -p rollout-sim --tests --no-run (RUSTFLAGS=\"$RUSTFLAGS\")"
  baseline=(cargo test -p rollout-model -p rollout-sim --tests --no-run)
else
  echo "baseline: cargo test -p rollout-model -p rollout-sim --tests (RUSTFLAGS=\"$RUSTFLAGS\")"
  baseline=(cargo test -p rollout-model -p rollout-sim --tests)
fi
# A build killed mid-way (a stopped session) can leave an incremental state or a workspace library that links no
# more ("undefined hidden symbol", "linking with `cc` failed"): then the workspace's own crates are built afresh.
if ! (cd "$scratch" && nice -n 19 "${baseline[@]}" > "$out/baseline.log" 2>&1) \
  && ! { grep -q "undefined hidden symbol\|linking with" "$out/baseline.log" && ! grep -q "error\[E" "$out/baseline.log" \
    && echo "the build failed at the link (a killed build's leftovers): building the workspace's crates again" \
    && rm -rf "$CARGO_TARGET_DIR/debug/incremental" \
    && (cd "$scratch" && cargo clean -q -p rollout-core -p rollout-operator -p rollout-known-bugs -p rollout-model \
      -p rollout-sim) \
    && (cd "$scratch" && nice -n 19 "${baseline[@]}" > "$out/baseline.log" 2>&1); }; then
  echo "the model and simulation suites fail (or do not build) without any mutant: see $out/baseline.log" >&2
  exit 1
fi
echo "baseline ok in $(( $(date +%s) - start )) s"

# The mutants of this shard (by a hash of their names), each with the tests that can see it (scripts/mutants_select.py): those whose run of the unmutated code executed a
# line of the mutated function, from the coverage map. Then each is judged in turn in the scratch tree.
if [[ $select == coverage ]]; then
  python3 "$repo/scripts/mutants_select.py" plan "$out/mutants.json" "$coverage_dir/map.json" "$k" "$n" "$out" "${only[@]}"
else
  python3 "$repo/scripts/mutants_select.py" plan "$out/mutants.json" - "$k" "$n" "$out" "${only[@]}"
fi
(cd "$scratch" && nice -n 19 python3 "$repo/scripts/mutants_select.py" run "$out/plan.json" "$scratch" "$kept" "$timeout")
echo "$name took $(( ($(date +%s) - start) / 60 )) min"
summary
exit
}
