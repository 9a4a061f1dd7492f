//! The built binary, end to end: subcommand dispatch, exit codes and messages users and scripts rely on.

use std::process::Command;

fn operator() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rollout-operator"))
}

fn example(name: &str) -> String {
    format!("{}/../examples/{name}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn plan_on_the_example_dump_prints_the_next_actions() {
    let out = operator().args(["plan", "-f", &example("three-zone-mid-rollout.yaml"), "-o", "json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let group = &v["groups"][0];
    assert_eq!(group["group"], "ingester");
    assert_eq!(group["state"], "progressing");
    let pods: Vec<&str> = group["actions"].as_array().unwrap().iter().map(|a| a["pod"].as_str().unwrap()).collect();
    assert_eq!(pods, ["ingester-zone-b-1", "ingester-zone-b-2"]);
}

#[test]
fn plan_with_a_single_dash_long_flag_style_and_text_output() {
    let out = operator().args(["plan", "-f", &example("three-zone-mid-rollout.yaml")]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ingester-zone-b-1"), "{text}");
}

#[test]
fn plan_on_bad_input_exits_2_naming_the_file() {
    let out = operator().args(["plan", "-f", "/nonexistent/dump.yaml"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/dump.yaml"));
}

#[test]
fn missing_namespace_exits_1_with_the_reference_message() {
    let out = operator().output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("-kubernetes.namespace has not been specified"));
}

#[test]
fn unknown_flag_exits_2() {
    let out = operator().args(["-kubernetes.namespace=x", "-no-such-flag=1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn unreachable_cluster_config_fails_fast_with_a_clear_message() {
    let out = operator()
        .args([
            "-kubernetes.namespace=x",
            "-kubernetes.config-file=/nonexistent/kubeconfig",
            "-kubernetes.api-url=https://127.0.0.1:1",
            "-server.port=0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/kubeconfig"), "{err}");
}

#[test]
fn version_flag_and_subcommand_print_the_version_revision_and_rust_version() {
    let expected = rollout_operator::ops::build_info::version_text();
    assert!(expected.starts_with(&format!("rollout-operator {} (revision: ", env!("CARGO_PKG_VERSION"))), "{expected}");
    for args in [&["--version"][..], &["-version"], &["version"]] {
        let out = operator().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{args:?}");
        assert!(out.stderr.is_empty(), "{args:?}");
    }
    let out = operator().args(["version", "extra"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The exit codes docs/reference/endpoints.md lists for the subcommands: 0 done (a review allowed), 1 a refused or
/// failed check, 2 bad input; one message on stderr for each error.
#[test]
fn subcommand_exit_codes_are_the_documented_ones() {
    let code = |args: &[&str]| {
        let out = operator().args(args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let dump = example("downscale-and-eviction.yaml");
    let now = "--now=2026-01-01T12:00:00Z";
    let review = |path: &str, file: &str| code(&["review", "--path", path, "-f", &example(file), "-f", &dump, now]).0;
    assert_eq!(review("/admission/prepare-downscale", "review-prepare-downscale-scale.json"), Some(0), "allowed");
    assert_eq!(review("/admission/no-downscale", "review-no-downscale.json"), Some(1), "refused");
    assert_eq!(review("/admission/pod-eviction", "review-eviction.json"), Some(1), "refused");
    let (status, err) = code(&["review", "--path", "/admission/no-downscale", "-f", &dump]);
    assert_eq!(status, Some(2), "a dump is not an AdmissionReview: {err}");
    assert!(err.contains("downscale-and-eviction.yaml: not an AdmissionReview"), "{err}");
    assert_eq!(code(&["review", "--path", "/nope", "-f", &dump]).0, Some(2));

    assert_eq!(code(&["status", "-f", &dump, now]).0, Some(0));
    assert_eq!(code(&["status", "-f", &dump, "--watch"]).0, Some(2));
    assert_eq!(code(&["status", "-o", "yaml"]).0, Some(2));
    let (status, err) = code(&["status", "-kubernetes.config-file=/nonexistent/kubeconfig", "-n", "x"]);
    assert_eq!(status, Some(2), "an unusable kubeconfig is bad input: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    assert_eq!(code(&["-log.level=loud", "plan", "-f", &dump]).0, Some(2));
    assert_eq!(code(&["plan", "-f", &dump, now]).0, Some(0));

    assert_eq!(code(&["rbac", "-n", "x"]).0, Some(0));
    assert_eq!(code(&["rbac", "-n", "x", "-kubernetes.cluster-domain="]).0, Some(1), "refused by the controller");
    assert_eq!(code(&["rbac", "-n", "x", "-no-such-flag"]).0, Some(2));
}
