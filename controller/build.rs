//! Build information for `rollout-operator --version` and `rollout_operator_build_info`: the git revision and the
//! Rust compiler's version, passed to the crate as `ROLLOUT_OPERATOR_REVISION` and `ROLLOUT_OPERATOR_RUSTC_VERSION`.
//!
//! The revision is `$ROLLOUT_OPERATOR_REVISION` when set (a build without `.git`, such as the image build, can pass
//! it in), else `git rev-parse --short HEAD`, else `unknown`. Nothing here can fail the build: a missing `git`, a
//! source tree without `.git` or an unreadable compiler version all give `unknown`.

use std::path::PathBuf;
use std::process::Command;

const UNKNOWN: &str = "unknown";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=ROLLOUT_OPERATOR_REVISION");
    let revision = match std::env::var("ROLLOUT_OPERATOR_REVISION") {
        Ok(revision) if is_label_value(&revision) => revision,
        _ => git_revision().unwrap_or_else(|| UNKNOWN.to_string()),
    };
    println!("cargo:rustc-env=ROLLOUT_OPERATOR_REVISION={revision}");
    println!("cargo:rustc-env=ROLLOUT_OPERATOR_RUSTC_VERSION={}", rustc_version().unwrap_or_else(|| UNKNOWN.into()));
}

/// A short, printable value: what a revision or a version may be (no spaces, quotes or control characters).
fn is_label_value(value: &str) -> bool {
    !value.is_empty() && value.len() <= 64 && value.chars().all(|c| c.is_ascii_alphanumeric() || "._-+".contains(c))
}

fn run(program: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    Some(text.trim().to_string())
}

/// `git rev-parse --short HEAD`, rebuilt when HEAD moves (a commit, a checkout) but not on every file change.
fn git_revision() -> Option<String> {
    let revision = run("git", &["rev-parse", "--short", "HEAD"]).filter(|r| is_label_value(r))?;
    // HEAD names the branch; the branch's ref (loose or packed) names the commit. `--git-path` resolves them in a
    // worktree too.
    for path in ["HEAD", "packed-refs"] {
        if let Some(file) = run("git", &["rev-parse", "--git-path", path]) {
            rerun_if_changed(file);
        }
    }
    // A branch whose ref is only packed gets a loose ref at its next commit: watch the folder it will appear in.
    if let Some(branch) = run("git", &["symbolic-ref", "-q", "HEAD"]) {
        let loose = run("git", &["rev-parse", "--git-path", &branch]).map(PathBuf::from);
        match loose {
            Some(file) if file.exists() => rerun_if_changed(file),
            _ => {
                if let Some(heads) = run("git", &["rev-parse", "--git-path", "refs/heads"]) {
                    rerun_if_changed(PathBuf::from(heads));
                }
            }
        }
    }
    Some(revision)
}

/// Cargo reruns the script at every build for a path that does not exist, so only existing ones are given. Paths
/// are relative to the package, where git runs.
fn rerun_if_changed(path: impl Into<PathBuf>) {
    let path = path.into();
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// `rustc --version` is `rustc 1.95.0 (59807616e 2025-04-01)`: the second word.
fn rustc_version() -> Option<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let text = run(&rustc, &["--version"])?;
    text.split_whitespace().nth(1).filter(|v| is_label_value(v)).map(str::to_string)
}
