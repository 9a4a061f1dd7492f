//! `rollout-operator rbac` against the way the reference operator is really deployed
//! (the Helm charts and the jsonnet users run it with): each deployment's container args must be accepted by the
//! real parser, and the rules generated for them must be within what that deployment's RBAC grants, since
//! users switch the image and keep their manifests. Also the command's parsing and the built binary's output.
//!
//! The grants are written down here as data, one function per set of grants. A test failing here names the
//! deployment and exactly what it does not grant: the operator would get 403 on it there. Fix the operator (or
//! its flags' features in `rbac.rs`) rather than the data.

use k8s_openapi::api::rbac::v1::PolicyRule;
use rollout_operator::cli::{self, Command, OperatorFlags};
use rollout_operator::commands::rbac::RULES_ANNOTATION;
use rollout_operator::kube::rbac::{Access, Rules, not_granted, required_rules_for, rules_for};
use serde_json::Value;

use rollout_operator::kube::reference_deployments::{
    Grants, by_name, hc_0_50_1, hc_old_mh, js_v0_38_1, lj_grants, loki_helm_0_24_0, rule,
};

// Section 1, exactly as the container receives them.
const HC_WEBHOOKS_ON: &str = "-kubernetes.namespace=mimir -zpdb.pod-ready-annotation-patch-timeout=5s \
    -server-tls.enabled=true -server-tls.self-signed-cert.secret-name=certificate \
    -server-tls.self-signed-cert.dns-name=mimir-rollout-operator.mimir.svc";
const HC_WEBHOOKS_OFF: &str = "-kubernetes.namespace=mimir -zpdb.pod-ready-annotation-patch-timeout=5s";
const MH: &str = "-kubernetes.namespace=mimir -server-tls.enabled=true \
    -server-tls.self-signed-cert.secret-name=certificate \
    -server-tls.self-signed-cert.dns-name=release-name-rollout-operator.mimir.svc";
const JS: &str = "-kubernetes.namespace=default -server-tls.enabled=true -use-zone-tracker=true \
    -zone-tracker.config-map-name=rollout-operator-zone-tracker -zpdb.pod-ready-annotation-patch-timeout=5s";
const JS_RATE_LIMITS: &str = "-kubernetes.namespace=default -kubernetes.client-burst=40 -kubernetes.client-qps=20 \
    -server-tls.enabled=true -use-zone-tracker=true -zone-tracker.config-map-name=rollout-operator-zone-tracker \
    -zpdb.pod-ready-annotation-patch-timeout=5s";
const JS_NO_RATE_LIMIT: &str = "-kubernetes.namespace=default -kubernetes.client-qps=0 -server-tls.enabled=true \
    -use-zone-tracker=true -zone-tracker.config-map-name=rollout-operator-zone-tracker \
    -zpdb.pod-ready-annotation-patch-timeout=5s";
// Note the double dash of the first flag.
const OLDER_MIMIR_JSONNET: &str = "--server-tls.enabled=true -kubernetes.namespace=mimir -use-zone-tracker=true \
    -zone-tracker.config-map-name=rollout-operator-zone-tracker";
const LJ: &str = "-kubernetes.namespace=loki";

fn argv<'a>(prefix: &[&'a str], args: &'a str) -> Vec<&'a str> {
    prefix.iter().copied().chain(args.split_whitespace()).collect()
}

/// The flags of `args`, which both the controller and `rbac` must accept, and which must mean the same to both.
fn accepted(deployment: &str, args: &str) -> OperatorFlags {
    let controller = match cli::parse(argv(&["rollout-operator"], args)) {
        Ok(Command::Run(config)) => config.flags,
        Ok(other) => panic!("{deployment}: the controller parsed its args as {other:?}"),
        Err(e) => panic!("{deployment}: the controller does not accept its args: {e}"),
    };
    let rbac = match cli::parse(argv(&["rollout-operator", "rbac"], args)) {
        Ok(Command::Rbac(rbac)) => rbac.flags,
        Ok(other) => panic!("{deployment}: `rbac` parsed its args as {other:?}"),
        Err(e) => panic!("{deployment}: `rbac` does not accept its args: {e}"),
    };
    assert_eq!(
        rules_for(&controller.rbac_settings()),
        rules_for(&rbac.rbac_settings()),
        "{deployment}: the same args mean the same rules"
    );
    rbac
}

fn show(missing: &[Access]) -> String {
    if missing.is_empty() {
        return "    nothing".to_string();
    }
    missing.iter().map(|a| format!("    {a}")).collect::<Vec<_>>().join("\n")
}

/// The rules `args` require (optional features left out: they degrade with a clear message when refused) are
/// within `grants`; otherwise fails naming exactly what is not granted.
fn assert_covered(deployment: &str, args: &str, column: &str, grants: Grants) {
    let flags = accepted(deployment, args);
    let Rules { role, cluster_role } = required_rules_for(&flags.rbac_settings())
        .unwrap_or_else(|e| panic!("{deployment}: no rules for its args: {e}"));
    assert!(!role.is_empty(), "{deployment}: the operator always needs a Role");
    let missing_role = not_granted(&role, &grants.role);
    let missing_cluster = not_granted(&cluster_role, &grants.cluster_role);
    assert!(
        missing_role.is_empty() && missing_cluster.is_empty(),
        "{deployment} ({column} RBAC) does not grant what the operator needs for its args [{args}]; it would get \
         403 on:\n  Role:\n{}\n  ClusterRole:\n{}",
        show(&missing_role),
        show(&missing_cluster)
    );
}

#[test]
fn hc_with_webhooks() {
    assert_covered("HC (webhooks on, default)", HC_WEBHOOKS_ON, "HC 0.50.1", hc_0_50_1());
}

#[test]
fn hc_without_webhooks() {
    assert_covered("HC (webhooks off)", HC_WEBHOOKS_OFF, "HC 0.50.1", hc_0_50_1());
}

#[test]
fn mh() {
    assert_covered("MH", MH, "HC-old 0.37.1 / 0.40.0 (MH)", hc_old_mh());
}

#[test]
fn js() {
    assert_covered("JS (webhooks on, default)", JS, "JS v0.38.1", js_v0_38_1());
}

#[test]
fn js_with_the_runbook_rate_limits() {
    assert_covered("JS + runbook rate limits", JS_RATE_LIMITS, "JS v0.38.1", js_v0_38_1());
}

#[test]
fn js_with_the_rate_limit_disabled() {
    assert_covered("JS, rate limit disabled", JS_NO_RATE_LIMIT, "JS v0.38.1", js_v0_38_1());
}

/// Section 2 has no column of its own for it; it is the reference's jsonnet of an older release, judged against
/// the JS grants (the only column that grants the zone tracker's ConfigMap, which its args switch on).
#[test]
fn older_mimir_jsonnet() {
    assert_covered("older Mimir jsonnet", OLDER_MIMIR_JSONNET, "JS v0.38.1", js_v0_38_1());
}

#[test]
fn lj() {
    assert_covered("LJ", LJ, "LJ", lj_grants());
}

#[test]
fn loki_helm() {
    assert_covered("Loki Helm (0.24.0)", LJ, "Loki Helm 0.24.0", loki_helm_0_24_0());
}

/// A deployment: its name, its args, the name of the grants it is judged against, and those grants.
type Deployment = (&'static str, &'static str, &'static str, fn() -> Grants);

/// Every deployment above.
const DEPLOYMENTS: [Deployment; 9] = [
    ("HC (webhooks on, default)", HC_WEBHOOKS_ON, "HC 0.50.1", hc_0_50_1),
    ("HC (webhooks off)", HC_WEBHOOKS_OFF, "HC 0.50.1", hc_0_50_1),
    ("MH", MH, "HC-old 0.37.1 / 0.40.0 (MH)", hc_old_mh),
    ("JS (webhooks on, default)", JS, "JS v0.38.1", js_v0_38_1),
    ("JS + runbook rate limits", JS_RATE_LIMITS, "JS v0.38.1", js_v0_38_1),
    ("JS, rate limit disabled", JS_NO_RATE_LIMIT, "JS v0.38.1", js_v0_38_1),
    ("older Mimir jsonnet", OLDER_MIMIR_JSONNET, "JS v0.38.1", js_v0_38_1),
    ("LJ", LJ, "LJ", lj_grants),
    ("Loki Helm (0.24.0)", LJ, "Loki Helm 0.24.0", loki_helm_0_24_0),
];

/// One object `rbac` printed: its kind, its rules, and its rules annotation's lines.
struct Printed {
    kind: String,
    rules: Vec<PolicyRule>,
    marks: Vec<String>,
}

/// What `rollout-operator rbac <args> <extra> -o json` prints, object by object.
fn printed(deployment: &str, args: &str, extra: &[&str]) -> Vec<Printed> {
    let argv = argv(&["rollout-operator", "rbac"], args).into_iter().chain(extra.iter().copied()).chain(["-o", "json"]);
    let rbac = match cli::parse(argv) {
        Ok(Command::Rbac(rbac)) => rbac,
        other => panic!("{deployment}: expected rbac, got {other:?}"),
    };
    let text =
        rollout_operator::commands::rbac::execute(&rbac.options()).unwrap_or_else(|e| panic!("{deployment}: {e}"));
    let list: Value = serde_json::from_str(&text).expect("JSON");
    let items = list["items"].as_array().expect("items");
    items
        .iter()
        .map(|item| Printed {
            kind: item["kind"].as_str().expect("kind").to_string(),
            rules: serde_json::from_value(item["rules"].clone()).expect("rules"),
            marks: item["metadata"]["annotations"][RULES_ANNOTATION]
                .as_str()
                .unwrap_or_else(|| panic!("{deployment}: no {RULES_ANNOTATION} annotation in {item:#}"))
                .lines()
                .map(str::to_string)
                .collect(),
        })
        .collect()
}

/// The Role's and the ClusterRole's rules of a printed List.
fn role_and_cluster_role(objects: &[Printed]) -> (Vec<PolicyRule>, Vec<PolicyRule>) {
    let of = |kind: &str| objects.iter().filter(|o| o.kind == kind).flat_map(|o| o.rules.clone()).collect();
    (of("Role"), of("ClusterRole"))
}

#[test]
fn required_only_output_needs_nothing_a_deployment_does_not_grant() {
    for (deployment, args, column, grants) in DEPLOYMENTS {
        let grants = grants();
        let objects = printed(deployment, args, &["--required-only"]);
        for object in &objects {
            assert_eq!(object.marks.len(), object.rules.len(), "{deployment}: one mark per rule");
            assert!(object.marks.iter().all(|m| m.contains("] required: ")), "{deployment}: {:#?}", object.marks);
        }
        let (role, cluster_role) = role_and_cluster_role(&objects);
        let (missing_role, missing_cluster) =
            (not_granted(&role, &grants.role), not_granted(&cluster_role, &grants.cluster_role));
        assert!(
            missing_role.is_empty() && missing_cluster.is_empty(),
            "{deployment} ({column} RBAC) does not grant what `rbac --required-only` prints for its args [{args}]:\n  \
             Role:\n{}\n  ClusterRole:\n{}",
            show(&missing_role),
            show(&missing_cluster)
        );
    }
}

#[test]
fn what_a_deployment_does_not_grant_of_the_full_output_is_all_marked_optional() {
    let mut some_missing = false;
    for (deployment, args, column, grants) in DEPLOYMENTS {
        let grants = grants();
        let objects = printed(deployment, args, &[]);
        for object in &objects {
            let granted = if object.kind == "Role" { &grants.role } else { &grants.cluster_role };
            for (rule, mark) in object.rules.iter().zip(&object.marks) {
                let missing = not_granted(std::slice::from_ref(rule), granted);
                some_missing |= !missing.is_empty();
                assert!(
                    missing.is_empty() || mark.contains("] optional: "),
                    "{deployment} ({column}): {rule:?} is not granted but marked `{mark}`"
                );
            }
        }
    }
    assert!(some_missing, "no deployment lacks an optional rule: this test would show nothing");
}

#[test]
fn the_coverage_check_reports_what_is_missing() {
    // Not a deployment: shows that the check above fails, and how, when a grant is missing or too narrow.
    let grants = Grants {
        role: vec![
            rule("", &["pods"], &["list", "watch"]),
            rule("apps", &["statefulsets"], &["get", "list", "watch", "patch"]),
            rule("", &["secrets"], &["create"]),
            by_name("", &["secrets"], &["another-secret"], &["get", "update"]),
        ],
        cluster_role: vec![],
    };
    let flags = accepted("test", "-kubernetes.namespace=ns -server-tls.enabled=true");
    let rules = rules_for(&flags.rbac_settings()).expect("rules");
    let missing: Vec<String> = not_granted(&rules.role, &grants.role).iter().map(ToString::to_string).collect();
    for expected in [
        "delete pods (apiGroup \"\")",
        "get secrets (apiGroup \"\") resourceNames [rollout-operator-self-signed-certificate]",
        "get deployments (apiGroup \"apps\")",
    ] {
        assert!(missing.contains(&expected.to_string()), "{expected} not reported in {missing:#?}");
    }
    assert!(!not_granted(&rules.cluster_role, &grants.cluster_role).is_empty());
}

// ---- the subcommand's command line ----------------------------------------------------------------------------

fn parse(args: &[&str]) -> Result<Command, cli::CliError> {
    cli::parse(std::iter::once("rollout-operator").chain(args.iter().copied()))
}

#[test]
fn rbac_accepts_the_controllers_flags_in_every_go_form() {
    let args = [
        "rbac",
        "-kubernetes.namespace",
        "mimir",
        "--server-tls.enabled",
        "-use-zone-tracker=true",
        "-zone-tracker.config-map-name",
        "record",
        "-kubernetes.client-qps",
        "-1",
        "-server.cluster-validation.http.enabled",
        "-log.level=info",
        "-o",
        "json",
    ];
    match parse(&args) {
        Ok(Command::Rbac(rbac)) => {
            assert_eq!(rbac.flags.kubernetes_namespace, "mimir");
            assert!(rbac.flags.server_tls_enabled && rbac.flags.use_zone_tracker);
            assert_eq!(rbac.flags.zone_tracker_config_map(), Some("record"));
            assert_eq!(rbac.flags.kubernetes_client_qps, -1.0);
            assert_eq!(rbac.output, rollout_operator::commands::rbac::OutputFormat::Json);
        }
        other => panic!("expected rbac, got {other:?}"),
    }
    // Later occurrences win, as in Go's flag package and the controller.
    match parse(&["rbac", "-kubernetes.namespace=a", "-server-tls.enabled", "-server-tls.enabled=false"]) {
        Ok(Command::Rbac(rbac)) => assert!(!rbac.flags.server_tls_enabled),
        other => panic!("expected rbac, got {other:?}"),
    }
    // YAML by default.
    match parse(&["rbac", "-kubernetes.namespace=a"]) {
        Ok(Command::Rbac(rbac)) => assert_eq!(rbac.output, rollout_operator::commands::rbac::OutputFormat::Yaml),
        other => panic!("expected rbac, got {other:?}"),
    }
}

#[test]
fn rbac_rejects_what_the_controller_rejects_with_the_same_message() {
    for (args, message) in [
        (&["rbac"][..], "-kubernetes.namespace has not been specified"),
        (
            &["rbac", "-kubernetes.namespace=a", "-use-zone-tracker", "-zone-tracker.config-map-name="],
            "-use-zone-tracker is true, but -zone-tracker.config-map-name has not been specified",
        ),
        (&["rbac", "-kubernetes.namespace=a", "-log.format=text"], "unknown log format: text"),
    ] {
        match parse(args) {
            Err(e) => {
                assert_eq!(e.to_string(), message, "{args:?}");
                assert_eq!(e.exit_code(), 1, "{args:?}");
            }
            Ok(other) => panic!("{args:?}: expected an error, got {other:?}"),
        }
    }
}

#[test]
fn rbac_usage_errors_exit_2() {
    for args in [
        &["rbac", "-kubernetes.namespace=a", "-o", "xml"][..],
        &["rbac", "-kubernetes.namespace=a", "-no-such-flag=1"],
        &["rbac", "-kubernetes.namespace=a", "-server-tls.enabled=yes"],
    ] {
        match parse(args) {
            Err(e) => assert_eq!(e.exit_code(), 2, "{args:?}: {e}"),
            Ok(other) => panic!("{args:?}: expected an error, got {other:?}"),
        }
    }
}

#[test]
fn controller_flags_before_rbac_are_refused_not_ignored() {
    match parse(&["-server-tls.enabled", "rbac", "-kubernetes.namespace=a"]) {
        Err(e) => {
            assert_eq!(e.exit_code(), 2);
            assert!(e.to_string().contains("-server-tls.enabled must come after `rbac`"), "{e}");
        }
        Ok(other) => panic!("expected an error, got {other:?}"),
    }
}

// ---- the built binary -----------------------------------------------------------------------------------------

/// A `--cfg madsim` binary runs nothing (see main.rs).
#[cfg(not(madsim))]
mod binary {
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
    use serde_json::Value;
    use std::process::{Command, Output};

    fn operator(args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_rollout-operator")).args(args).output().expect("the binary runs")
    }

    #[test]
    fn rbac_prints_a_parseable_list_as_json() {
        let out = operator(&["rbac", "-kubernetes.namespace=ns", "-o", "json"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let list: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!((&list["apiVersion"], &list["kind"]), (&Value::from("v1"), &Value::from("List")));
        let items = list["items"].as_array().expect("items");
        // No TLS: nothing cluster-scoped, so no ClusterRole.
        assert_eq!(items.len(), 1, "{list:#}");
        let role: Role = serde_json::from_value(items[0].clone()).expect("a Role");
        assert_eq!(role.metadata.name.as_deref(), Some("rollout-operator"));
        assert_eq!(role.metadata.namespace.as_deref(), Some("ns"));
        assert!(role.rules.is_some_and(|rules| !rules.is_empty()));
    }

    #[test]
    fn rbac_yaml_and_json_print_the_same_objects() {
        let args = ["rbac", "-kubernetes.namespace=mimir", "-server-tls.enabled=true", "-use-zone-tracker=true"];
        let yaml = operator(&args);
        let json = operator(&[&args[..], &["-o", "json"]].concat());
        assert!(yaml.status.success() && json.status.success(), "{}", String::from_utf8_lossy(&yaml.stderr));
        let from_yaml: Value = serde_saphyr::from_slice(&yaml.stdout).expect("YAML");
        let from_json: Value = serde_json::from_slice(&json.stdout).expect("JSON");
        assert_eq!(from_yaml, from_json);
        let items = from_json["items"].as_array().expect("items");
        assert_eq!(items.len(), 2);
        let cluster_role: ClusterRole = serde_json::from_value(items[1].clone()).expect("a ClusterRole");
        assert_eq!(cluster_role.metadata.name.as_deref(), Some("rollout-operator"));
    }

    /// Each printed rule is marked required or optional, with the features that use it, in a comment in YAML and
    /// in the objects' annotation in both formats; `--required-only` prints the required rules alone.
    #[test]
    fn rbac_marks_each_rule_required_or_optional_and_prints_the_required_alone() {
        let args = ["rbac", "-kubernetes.namespace=mimir", "-server-tls.enabled=true", "-events.enabled"];
        let yaml = operator(&args);
        assert!(yaml.status.success(), "{}", String::from_utf8_lossy(&yaml.stderr));
        let text = String::from_utf8_lossy(&yaml.stdout);
        let lines: Vec<&str> = text.lines().collect();
        let rule_starts: Vec<usize> =
            (0..lines.len()).filter(|&i| lines[i].trim_start().starts_with("- apiGroups:")).collect();
        assert!(!rule_starts.is_empty(), "{text}");
        for i in rule_starts {
            let comment = lines[i - 1].trim_start();
            assert!(
                comment.starts_with("# rules[")
                    && (comment.contains("] required: ") || comment.contains("] optional: ")),
                "no mark above line {i}:\n{text}"
            );
        }
        assert!(text.contains("required: rollouts (always on)"), "{text}");
        assert!(text.contains("optional: events (-events.enabled)"), "{text}");
        assert!(text.contains("optional: no-downscale-parent-lookups (-server-tls.enabled)"), "{text}");

        let json = operator(&[&args[..], &["-o", "json"]].concat());
        let list: Value = serde_json::from_slice(&json.stdout).expect("JSON");
        let from_yaml: Value = serde_saphyr::from_slice(&yaml.stdout).expect("YAML");
        assert_eq!(from_yaml, list, "the comments change nothing of the objects");
        let mut all = 0;
        for item in list["items"].as_array().expect("items") {
            let marks = item["metadata"]["annotations"][super::RULES_ANNOTATION].as_str().expect("annotation");
            let rules = item["rules"].as_array().expect("rules");
            assert_eq!(marks.lines().count(), rules.len(), "{item:#}");
            all += rules.len();
        }

        let required = operator(&[&args[..], &["--required-only", "-o", "json"]].concat());
        assert!(required.status.success(), "{}", String::from_utf8_lossy(&required.stderr));
        let required: Value = serde_json::from_slice(&required.stdout).expect("JSON");
        let mut fewer = 0;
        for (item, full) in required["items"].as_array().expect("items").iter().zip(list["items"].as_array().unwrap()) {
            let marks = item["metadata"]["annotations"][super::RULES_ANNOTATION].as_str().expect("annotation");
            assert!(!marks.contains("optional:"), "{marks}");
            let rules = item["rules"].as_array().expect("rules");
            assert_eq!(rules[..], full["rules"].as_array().unwrap()[..rules.len()], "the required rules come first");
            fewer += rules.len();
        }
        assert!(fewer < all, "optional rules left out");
        // Go's syntax, like every flag.
        assert!(operator(&["rbac", "-kubernetes.namespace=ns", "-required-only=true"]).status.success());
        assert_eq!(operator(&["rbac", "-kubernetes.namespace=ns", "-required-only=maybe"]).status.code(), Some(2));
    }

    #[test]
    fn rbac_errors_are_one_clear_line_and_a_non_zero_exit() {
        let out = operator(&[
            "rbac",
            "-kubernetes.namespace=ns",
            "-server-tls.enabled",
            "-server-tls.self-signed-cert.secret-name=",
        ]);
        assert_eq!(out.status.code(), Some(1));
        assert!(out.stdout.is_empty());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("-server-tls.self-signed-cert.secret-name is empty"), "{err}");
        let out = operator(&["rbac", "-kubernetes.namespace=ns", "-o", "xml"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("invalid value 'xml'"));
    }
}
