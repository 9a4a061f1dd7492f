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
  plan MUTANTS_JSON MAP_JSON K N OUT [ONLY]  shard K of N (by a hash of each mutant's name), each mutant with its
                                        selected test binaries and tests, and the mutants no test executes:
                                        OUT/plan.json; MAP_JSON `-` selects the whole suite for every mutant;
                                        with ONLY (a file of names), only those mutants (before sharding)
  run PLAN_JSON SCRATCH OUT TIMEOUT     judge the planned mutants one by one in the scratch tree (cargo-mutants'
                                        own runner cannot: its --re filter does not hold back its struct-field
                                        deletions, and it runs one test command for all mutants)
"""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zlib

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


def list_tests(binary, profdir):
    env = dict(os.environ, LLVM_PROFILE_FILE=os.path.join(profdir, "list.%p.profraw"))
    out = subprocess.run([binary, "--list", "--format", "terse"], env=env, capture_output=True, text=True,
                         check=True).stdout
    return [line[: -len(": test")] for line in out.splitlines() if line.endswith(": test")]


def run_one(job):
    binary, test, profdir, scratch, profdata, cov = job
    raw = os.path.join(profdir, f"{os.path.basename(binary)}.{abs(hash(test))}.%p.profraw")
    env = dict(os.environ, LLVM_PROFILE_FILE=raw)
    # Tests marked #[ignore] (larger configurations kept out of the CI suite) belong to the mutation suite too.
    run = subprocess.run([binary, "--exact", test, "--include-ignored", "--test-threads", "1"], env=env,
                         capture_output=True, text=True)
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
    jobs = [(b, t, profdir, scratch, profdata, cov) for b in binaries for t in list_tests(b, profdir)]
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


def plan(mutants_json, map_json, k, n, out, only=None):
    mutants = json.load(open(mutants_json))
    if only is not None:
        names = set(line.rstrip("\n") for line in open(only))
        mutants = [m for m in mutants if m["name"] in names]
    # By a hash of the mutant's name, not its index: a shard keeps its mutants when code elsewhere changes the list.
    chosen = [m for m in mutants if zlib.crc32(m["name"].encode()) % n == k]
    planned, unexecuted = [], []
    if map_json == "-":
        # No selection: every mutant gets the whole suite.
        for m in chosen:
            planned.append({"name": m["name"], "file": m["file"], "diff": m["diff"], "targets": None, "tests": None})
    else:
        cov = json.load(open(map_json))
        tests, files = cov["tests"], cov["files"]
        for m in chosen:
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
            planned.append({"name": m["name"], "file": m["file"], "diff": m["diff"],
                            "targets": sorted({tests[t][0] for t in selected}),
                            "tests": sorted({tests[t][1] for t in selected})})
    os.makedirs(out, exist_ok=True)
    json.dump({"mutants": planned, "unexecuted": unexecuted}, open(os.path.join(out, "plan.json"), "w"))
    print(f"shard {k}/{n}: {len(chosen)} mutants, {len(unexecuted)} in code no model or simulation test executes",
          file=sys.stderr)


def apply_diff(text, diff):
    """The mutated text: `diff` is cargo-mutants' unified diff of this file (hunks in order, with context)."""
    lines = text.split("\n")
    result, at = [], 0
    hunks = re.split(r"^@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@.*$", diff, flags=re.M)
    for i in range(1, len(hunks), 2):
        start = int(hunks[i]) - 1
        result.extend(lines[at:start])
        at = start
        for line in hunks[i + 1].split("\n"):
            if line.startswith(" "):
                if lines[at] != line[1:]:
                    raise ValueError(f"context does not match at line {at + 1}: {lines[at]!r} != {line[1:]!r}")
                result.append(lines[at])
                at += 1
            elif line.startswith("-"):
                if lines[at] != line[1:]:
                    raise ValueError(f"removed line does not match at line {at + 1}")
                at += 1
            elif line.startswith("+"):
                result.append(line[1:])
    result.extend(lines[at:])
    return "\n".join(result)


# The unit tests of the model's and the simulation's libraries build as binaries named after the library.
LIBRARIES = {"rollout_model", "rollout_sim"}


def target_arg(target):
    return "--lib" if target in LIBRARIES else f"--test={target}"


def cargo(args, timeout, stop_at_first_failure=False):
    """Runs cargo in its own process group; (exit code or None on timeout, seconds, what it wrote).

    With `stop_at_first_failure` (a test run), cargo is stopped as soon as libtest reports a failed test: the
    outcome (caught) is known, and the selected tests still running would only cost time. Its exit code is then 101,
    as cargo's own for a failed test."""
    began = time.monotonic()
    process = subprocess.Popen(["cargo", *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", start_new_session=True)
    written, failed = [], threading.Event()

    def read():
        for line in process.stdout:
            written.append(line)
            # libtest's line for a finished test: "test <name> ... FAILED".
            if stop_at_first_failure and not failed.is_set() and line.startswith("test ") \
                    and line.rstrip().endswith(" ... FAILED"):
                failed.set()
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        code = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        code = None
    except BaseException:
        # Stopped (SIGTERM, Ctrl-C): cargo and its tests go too, before the mutated file is put back.
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    if code is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    reader.join()
    if failed.is_set():
        code = 101
    return code, time.monotonic() - began, "".join(written)


def linker_failure(written):
    """A build that failed only at the link: not the mutant (a mutant that does not type-check fails with a rustc
    error code), but a build directory left inconsistent by a killed build."""
    return "error[E" not in written and ("linking with" in written or "undefined hidden symbol" in written)


def forget_incremental_state():
    """Removes the incremental compilation state of this workspace's crates in CARGO_TARGET_DIR (the next build
    compiles them afresh), after a killed build left it inconsistent."""
    incremental = os.path.join(os.environ.get("CARGO_TARGET_DIR", "target"), "debug", "incremental")
    for entry in os.listdir(incremental) if os.path.isdir(incremental) else []:
        shutil.rmtree(os.path.join(incremental, entry), ignore_errors=True)


def run(plan_json, scratch, out, timeout):
    """Each planned mutant in turn: mutate its file in the scratch tree, build its selected test binaries (a failed
    build: unviable), run its selected tests (they pass: missed; they fail: caught; over `timeout` s: timeout), put
    the file back. Outcomes are appended to OUT/<outcome>.txt as they come (each mutant's times to
    OUT/outcomes.log), and OUT/complete is written at the end."""
    # A SIGTERM unwinds like Ctrl-C, so the mutated file is put back (`finally`) and cargo is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    plan = json.load(open(plan_json))
    # Resumable: mutants already judged in OUT (an interrupted run, on this tree or an earlier one) are not judged
    # again.
    judged = set()
    for outcome in ("caught", "missed", "timeout", "unviable", "unexecuted"):
        path = os.path.join(out, f"{outcome}.txt")
        if os.path.exists(path):
            judged.update(line.rstrip("\n") for line in open(path))
        else:
            open(path, "w").close()
    # A mutant of code no test executes is missed without running anything; it is listed apart too.
    with open(os.path.join(out, "missed.txt"), "a") as missed, open(os.path.join(out, "unexecuted.txt"), "a") as u:
        for name in plan["unexecuted"]:
            if name not in judged:
                missed.write(name + "\n")
                u.write(name + "\n")
    mutants = [m for m in plan["mutants"] if m["name"] not in judged]
    if len(mutants) < len(plan["mutants"]):
        print(f"resuming: {len(plan['mutants']) - len(mutants)} mutant(s) of this shard already judged", flush=True)
    log = open(os.path.join(out, "outcomes.log"), "a")
    for index, m in enumerate(mutants, 1):
        path = os.path.join(scratch, m["file"])
        original = open(path).read()
        packages = ["-p", "rollout-model", "-p", "rollout-sim"]
        selection = ["--tests"] if m["targets"] is None else sorted({target_arg(t) for t in m["targets"]})
        filters = ["--", "--include-ignored"] + ([] if m["tests"] is None else ["--exact", *m["tests"]])
        try:
            mutated = apply_diff(original, m["diff"])
            open(path, "w").write(mutated)
            built, build_s, written = cargo(["test", *packages, *selection, "--no-run"], 1800)
            if built not in (0, None) and linker_failure(written):
                print(f"the build of {m['name']} failed at the link: building again without incremental state",
                      flush=True)
                forget_incremental_state()
                built, again_s, written = cargo(["test", *packages, *selection, "--no-run"], 1800)
                build_s += again_s
            test_s = 0.0
            if built is None:
                outcome = "timeout"
            elif built != 0:
                outcome = "unviable"
            else:
                passed, test_s, _ = cargo(["test", *packages, *selection, *filters], timeout,
                                          stop_at_first_failure=True)
                outcome = "missed" if passed == 0 else "timeout" if passed is None else "caught"
        finally:
            open(path, "w").write(original)
        with open(os.path.join(out, f"{outcome}.txt"), "a") as f:
            f.write(m["name"] + "\n")
        tests = "all tests" if m["tests"] is None else f"{len(m['tests'])} test(s)"
        line = f"{outcome.upper():8} {m['name']} in {build_s:.0f}s build + {test_s:.0f}s test ({tests})"
        log.write(line + "\n")
        log.flush()
        print(f"[{index}/{len(mutants)}] {line}", flush=True)
    open(os.path.join(out, "complete"), "w").close()


def main():
    if len(sys.argv) >= 2 and sys.argv[1] == "coverage" and len(sys.argv) == 5:
        coverage(*sys.argv[2:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "plan" and len(sys.argv) in (7, 8):
        plan(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), sys.argv[6], *sys.argv[7:])
    elif len(sys.argv) >= 2 and sys.argv[1] == "run" and len(sys.argv) == 6:
        run(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
