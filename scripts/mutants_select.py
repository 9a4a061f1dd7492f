#!/usr/bin/env python3
"""Coverage-guided test selection for scripts/mutants.sh (not meant to be run by hand).

A mutant can only change the outcome of a test that executes the function it mutates: until the first call, the
mutated program runs exactly as the original, and the model checker and the simulation are deterministic. So each
mutant needs only the model and simulation tests whose run of the UNMUTATED code executed a line of that function.
This saves the whole suite (about 150 s here) for every mutant of code the suites never reach, and most of it for
code only a few tests reach. Were coverage ever to miss a call, the error could only make a mutant look missed that
the whole suite would catch, never the reverse; `mutants.sh --full-suite` judges a shard without selection.

  coverage BINS_FILE SCRATCH OUT_JSON   run every test of the instrumented binaries alone and record, per source
                                        file of the controller, which tests executed which lines
  plan MUTANTS_JSON MAP_JSON K N OUT    shard K of N (round-robin over the whole list) grouped by selected tests;
                                        writes OUT/groups.tsv (count, targets, test names, regex of the mutants)
                                        and OUT/unexecuted.txt (mutants no test executes); MAP_JSON `-` selects
                                        the whole suite for every mutant (targets `*`)
"""
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile

SCOPE = ("controller/core/src/", "controller/src/")


def llvm_tool(name):
    sysroot = subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True).stdout
    path = os.path.join(sysroot.strip(), "lib", "rustlib", "x86_64-unknown-linux-gnu", "bin", name)
    if not os.path.exists(path):
        sys.exit(f"{path} is missing: run `rustup component add llvm-tools`")
    return path


def target_of(binary):
    """`.../deps/zpdb-c475b1809383f3ee` -> `zpdb` (the test target's name)."""
    return re.sub(r"-[0-9a-f]{16}$", "", os.path.basename(binary))


def list_tests(binary):
    out = subprocess.run([binary, "--list", "--format", "terse"], capture_output=True, text=True, check=True).stdout
    return [line[: -len(": test")] for line in out.splitlines() if line.endswith(": test")]


def run_one(job):
    binary, test, profdir, scratch, profdata, cov = job
    raw = os.path.join(profdir, f"{os.path.basename(binary)}.{abs(hash(test))}.%p.profraw")
    env = dict(os.environ, LLVM_PROFILE_FILE=raw)
    run = subprocess.run([binary, "--exact", test, "--test-threads", "1"], env=env, capture_output=True, text=True)
    if run.returncode != 0:
        return binary, test, None, f"failed without any mutant:\n{run.stdout[-2000:]}{run.stderr[-2000:]}"
    stem = raw.split(".%p")[0]
    raws = [os.path.join(profdir, f) for f in os.listdir(profdir) if os.path.join(profdir, f).startswith(stem + ".")]
    merged = stem + ".profdata"
    subprocess.run([profdata, "merge", "-sparse", "-o", merged, *raws], check=True)
    lcov = subprocess.run(
        [cov, "export", "-format=lcov", "-skip-functions", f"-instr-profile={merged}", binary,
         "-ignore-filename-regex=/(\\.cargo|rustc|library)/"],
        capture_output=True, text=True, check=True).stdout
    for f in raws + [merged]:
        os.remove(f)
    hit = {}
    current = None
    prefix = scratch.rstrip("/") + "/"
    for line in lcov.splitlines():
        if line.startswith("SF:"):
            path = line[3:]
            rel = path[len(prefix):] if path.startswith(prefix) else None
            current = hit.setdefault(rel, set()) if rel and rel.startswith(SCOPE) else None
        elif line.startswith("DA:") and current is not None:
            number, count = line[3:].split(",")[:2]
            if int(count) > 0:
                current.add(int(number))
    return binary, test, {f: sorted(lines) for f, lines in hit.items()}, None


def coverage(bins_file, scratch, out_json):
    profdata, cov = llvm_tool("llvm-profdata"), llvm_tool("llvm-cov")
    binaries = [b for b in open(bins_file).read().split() if b]
    profdir = tempfile.mkdtemp(prefix="mutants-coverage-")
    jobs = [(b, t, profdir, scratch, profdata, cov) for b in binaries for t in list_tests(b)]
    print(f"coverage: {len(jobs)} tests in {len(binaries)} binaries, each run alone", file=sys.stderr)
    tests, files, failures = [], {}, []
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        for binary, test, hit, error in pool.map(run_one, jobs):
            if error:
                failures.append(f"{target_of(binary)}::{test}: {error}")
                continue
            index = len(tests)
            tests.append([target_of(binary), test])
            for f, lines in hit.items():
                per_line = files.setdefault(f, {})
                for number in lines:
                    per_line.setdefault(str(number), []).append(index)
    if failures:
        sys.exit("tests fail without any mutant, fix them first:\n" + "\n".join(failures))
    json.dump({"tests": tests, "files": files}, open(out_json, "w"))
    print(f"coverage: {len(tests)} tests, {len(files)} files of the controller executed", file=sys.stderr)


# Characters that are special in a Rust regex; escaping only these keeps the others literal (`\<` is a word
# boundary there, so Python's re.escape is not used).
SPECIAL = set("\\.+*?()|[]{}^$#&-~")


def rust_regex_literal(text):
    return "".join("\\" + c if c in SPECIAL else c for c in text)


def plan(mutants_json, map_json, k, n, out):
    mutants = json.load(open(mutants_json))
    if map_json == "-":
        # No selection: every mutant of the shard gets the whole suite, in one group.
        names = [m["name"] for i, m in enumerate(mutants) if i % n == k]
        os.makedirs(out, exist_ok=True)
        regex = "^(" + "|".join(rust_regex_literal(name) for name in names) + ")$"
        with open(os.path.join(out, "groups.tsv"), "w") as g:
            g.write(f"{len(names)}\t*\t*\t{regex}\n")
        open(os.path.join(out, "unexecuted.txt"), "w").close()
        print(f"shard {k}/{n}: {len(names)} mutants, each judged by the whole suite", file=sys.stderr)
        return
    cov = json.load(open(map_json))
    tests, files = cov["tests"], cov["files"]
    groups = {}
    unexecuted = []
    for i, m in enumerate(mutants):
        if i % n != k:
            continue
        function = m.get("function")
        per_line = files.get(m["file"], {})
        if function is None:
            selected = set(range(len(tests)))
        else:
            start, end = function["span"]["start"]["line"], function["span"]["end"]["line"]
            selected = set()
            for number in range(start, end + 1):
                selected.update(per_line.get(str(number), ()))
        if not selected:
            unexecuted.append(m["name"])
            continue
        groups.setdefault(tuple(sorted(selected)), []).append(m["name"])
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "groups.tsv"), "w") as g:
        for selected, names in sorted(groups.items(), key=lambda kv: len(kv[0])):
            targets = sorted({tests[t][0] for t in selected})
            test_names = sorted({tests[t][1] for t in selected})
            regex = "^(" + "|".join(rust_regex_literal(name) for name in names) + ")$"
            g.write(f"{len(names)}\t{' '.join(targets)}\t{' '.join(test_names)}\t{regex}\n")
    with open(os.path.join(out, "unexecuted.txt"), "w") as u:
        u.writelines(name + "\n" for name in unexecuted)
    total = sum(len(v) for v in groups.values())
    print(f"shard {k}/{n}: {total + len(unexecuted)} mutants, {len(unexecuted)} in code no model or simulation "
          f"test executes, {total} in {len(groups)} groups by selected tests", file=sys.stderr)


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "coverage" and len(sys.argv) == 5:
        coverage(*sys.argv[2:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "plan" and len(sys.argv) == 7:
        plan(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
