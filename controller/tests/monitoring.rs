//! `deploy/monitoring`: the PrometheusRule passes Prometheus's own checker (`promtool check rules`) and each of its
//! alerts fires on series named and labelled as the operator exports them (`promtool test rules` with
//! `deploy/monitoring/tests/alerts-test.yaml`, one test per alert); the Go operator's mixin alert names are kept;
//! every alert links its section of `docs/runbooks.md`; every metric the rules and the Grafana dashboard query is one
//! the operator registers (the dashboard's resource panels excepted: they read container series); every dashboard
//! panel has a description and a query promtool parses, filtered by the `cluster` variable.
//! `scripts/tools.sh` installs promtool.
#![cfg(not(madsim))]

use regex::Regex;
use rollout_operator::ops::metrics::Metrics;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn monitoring() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/monitoring")
}

fn rule_object() -> Value {
    let text = std::fs::read_to_string(monitoring().join("prometheus-rule.yaml")).expect("the PrometheusRule");
    serde_saphyr::from_str(&text).expect("YAML")
}

fn dashboard() -> Value {
    let text = std::fs::read_to_string(monitoring().join("rollout-operator-dashboard.json")).expect("the dashboard");
    serde_json::from_str(&text).expect("JSON")
}

/// Every series name the operator can expose, as Prometheus sees them: counters with `_total`, histograms with
/// `_bucket`, `_sum` and `_count`. A family shows only once it has a series, so each is given one through the
/// operator's own recording paths (a family left out here makes the checks below fail, never pass wrongly).
async fn exported() -> BTreeSet<String> {
    use rollout_core::{GroupState, WaitReason};
    use rollout_operator::ops::metrics::{GroupReport, StatefulSetReport};
    use std::sync::Arc;
    use std::time::Duration;
    use tower::ServiceExt;
    let metrics = Arc::new(Metrics::new());
    metrics.group_reconcile_started("g");
    metrics.group_reconcile_finished("g", Duration::from_millis(1), false, 1.0);
    metrics.scaling_error("g", "s");
    metrics.gates().refused(rollout_operator::ops::feature_gate::Gate::Events, &"events is forbidden");
    metrics.webhook_failure_policy("ValidatingWebhook", "w", "Fail");
    metrics.group_report(
        "g",
        &GroupReport {
            state: GroupState::Waiting,
            waiting: Some(WaitReason::PodsNotReady),
            stuck: false,
            without_progress: Duration::ZERO,
            statefulsets: vec![StatefulSetReport { name: "s".into(), desired: 1, updated: 0, unavailable: 1 }],
        },
    );
    metrics.event_recorded("RolloutWaiting", "Normal");
    metrics.event_dropped("rate_limited");
    metrics.certificate_expires_at(1.0);
    metrics.zpdb.configuration_observed("invalid");
    metrics.health_checks.gate_state("g", true, true);
    metrics.health_checks.configuration_observed("valid");
    metrics.health_checks.evaluated(
        "g",
        &rollout_operator::health_check::evaluate::GateRun {
            verdict: rollout_core::health_check::GateVerdict::NoBaselineTime,
            records: vec![rollout_core::health_check::CheckRecord {
                check: "c".into(),
                result: rollout_core::health_check::CheckResult::Skipped,
            }],
            durations: vec![("c".into(), rollout_core::health_check::QueryKind::Current, Duration::ZERO)],
        },
    );
    metrics.zpdb.eviction_decided("denied", 429);
    metrics.kube_client.observe_request("core/v1/pods collection", "GET", "200", Duration::from_millis(1));
    metrics.kube_client.rate_limited("core");
    metrics.pod_http_client.observe(
        "/prepare",
        rollout_operator::pods::client::PodMethod::Post,
        Some(200),
        Duration::ZERO,
    );
    let validation = rollout_operator::ops::cluster_validation::ClusterValidation::new(
        "ns",
        false,
        &[],
        &[],
        metrics.cluster_validation.clone(),
    )
    .expect("valid settings");
    let _ = validation.check("/metrics-of-something", &http::HeaderMap::new());
    let app =
        rollout_operator::ops::http_server::router(metrics.clone(), rollout_operator::ops::health::ReadyFlag::new());
    let request = http::Request::get("/ready").body(axum::body::Body::empty()).unwrap();
    let _ = app.oneshot(request).await;
    let text = metrics.encode_prometheus_text();
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else { continue };
        let Some((name, kind)) = rest.split_once(' ') else { continue };
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        } else {
            names.insert(name.to_string());
        }
    }
    names
}

/// The metric names a PromQL expression selects: identifiers that are not functions, keywords, label names (in
/// matchers and grouping clauses) or durations.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut outside = String::new();
    let (mut braces, mut brackets, mut quoted) = (0, 0, false);
    for c in expr.chars() {
        match c {
            _ if quoted => quoted = c != '"',
            '"' => quoted = true,
            '{' => braces += 1,
            '}' => braces -= 1,
            '[' => brackets += 1,
            ']' => brackets -= 1,
            _ if braces > 0 || brackets > 0 => {}
            _ => outside.push(c),
        }
        if matches!(c, '{' | '}' | '[' | ']') {
            outside.push(' ');
        }
    }
    let grouping = Regex::new(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)").unwrap();
    let outside = grouping.replace_all(&outside, " ");
    let identifier = Regex::new(r"[A-Za-z_:][A-Za-z0-9_:]*").unwrap();
    const KEYWORDS: [&str; 13] = [
        "and",
        "or",
        "unless",
        "bool",
        "offset",
        "inf",
        "nan",
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ];
    identifier
        .find_iter(&outside)
        .filter(|m| !outside[m.end()..].trim_start().starts_with('('))
        .filter(|m| !outside[..m.start()].ends_with('$'))
        .map(|m| m.as_str().to_string())
        .filter(|name| !KEYWORDS.contains(&name.as_str()))
        .collect()
}

#[test]
fn metric_names_are_found_in_promql() {
    let expr = r#"sum by (a, b) (rate(x_total{b="c}", d=~"$e"}[$__rate_interval])) / on (a) group_left y
        and histogram_quantile(0.99, z_bucket) > 7 * 24 * 3600"#;
    assert_eq!(metric_names(expr), BTreeSet::from(["x_total".into(), "y".into(), "z_bucket".into()]));
    assert_eq!(metric_names(r#"time() - max(w) > bool 3"#), BTreeSet::from(["w".into()]));
}

fn rules() -> Vec<Value> {
    let object = rule_object();
    assert_eq!(object["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(object["kind"], "PrometheusRule");
    object["spec"]["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The Go operator's mixin alerts (v0.38.1, and the rate-limit alert of later versions), whose names routes and
/// silences written for it match.
const MIXIN_ALERTS: [&str; 4] = [
    "rollout-operatorIncorrectWebhookConfigurationFailurePolicy",
    "rollout-operatorBadZoneAwarePodDisruptionBudgetConfiguration",
    "rollout-operatorHighNumberInflightZpdbRequests",
    "rollout-operatorKubernetesAPIClientRateLimited",
];

/// Series the dashboard's resource panels read from the kubelet (cAdvisor) and kube-state-metrics: the operator
/// exports no process metrics.
const CONTAINER_SERIES: [&str; 6] = [
    "container_cpu_usage_seconds_total",
    "container_memory_working_set_bytes",
    "container_spec_cpu_quota",
    "container_spec_cpu_period",
    "container_spec_memory_limit_bytes",
    "kube_pod_container_resource_requests",
];

#[tokio::test]
async fn the_rules_query_only_exported_metrics_and_keep_the_mixins_names() {
    let exported = exported().await;
    let mut alerts = BTreeSet::new();
    for rule in rules() {
        let name = rule["alert"].as_str().expect("every rule is an alert").to_string();
        let expr = rule["expr"].as_str().expect("expr");
        let used = metric_names(expr);
        assert!(!used.is_empty(), "{name}: {expr}");
        for metric in &used {
            assert!(exported.contains(metric), "{name} queries {metric}, which the operator does not export");
        }
        assert!(rule["labels"]["severity"].is_string(), "{name} has a severity");
        for key in ["summary", "description", "runbook_url"] {
            assert!(rule["annotations"][key].is_string(), "{name} has a {key}");
        }
        assert!(alerts.insert(name.clone()), "{name} is defined twice");
    }
    for expected in [
        "RolloutOperatorGroupStuck",
        "RolloutOperatorReconcilesFailing",
        "RolloutOperatorWebhookErrors",
        "RolloutOperatorWebhookLatencyHigh",
        "RolloutOperatorCertificateExpiresSoon",
        "RolloutOperatorIncorrectWebhookFailurePolicy",
    ]
    .into_iter()
    .chain(MIXIN_ALERTS)
    {
        assert!(alerts.contains(expected), "no {expected} in {alerts:?}");
    }
}

/// A heading's anchor as GitHub renders it: lowercase; letters, digits, `-` and `_` kept, spaces made `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_alert_links_its_own_runbook_section_and_every_section_has_its_alert() {
    let runbooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/runbooks.md");
    let text = std::fs::read_to_string(&runbooks).expect("docs/runbooks.md");
    let sections: BTreeSet<String> =
        text.lines().filter_map(|l| l.strip_prefix("## ")).map(|h| h.trim().to_string()).collect();
    let anchors: BTreeSet<String> = sections.iter().map(|h| anchor(h)).collect();
    let mut alerts = BTreeSet::new();
    for rule in rules() {
        let name = rule["alert"].as_str().expect("alert").to_string();
        let url = rule["annotations"]["runbook_url"].as_str().unwrap_or_else(|| panic!("{name} has no runbook_url"));
        let expected = format!("docs/runbooks.md#{}", anchor(&name));
        assert_eq!(url, expected, "{name}'s runbook_url");
        assert!(anchors.contains(&anchor(&name)), "docs/runbooks.md has no section {name:?} for {url}");
        alerts.insert(name);
    }
    assert_eq!(sections, alerts, "docs/runbooks.md has one section per alert, named after it");
}

#[test]
fn anchors_are_githubs() {
    assert_eq!(anchor("RolloutOperatorGroupStuck"), "rolloutoperatorgroupstuck");
    assert_eq!(
        anchor("rollout-operatorBadZoneAwarePodDisruptionBudgetConfiguration"),
        "rollout-operatorbadzoneawarepoddisruptionbudgetconfiguration"
    );
    assert_eq!(anchor("Why was it denied: `review`"), "why-was-it-denied-review");
}

fn promtool(args: &[&str]) -> (bool, String) {
    let out = Command::new("promtool")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("promtool is needed by this test ({e}); run scripts/tools.sh to install it"));
    (out.status.success(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

/// The rule groups as a Prometheus rule file; without annotations when `bare` (for `promtool test rules`, which
/// compares annotations exactly).
fn rule_file(dir: &Path, bare: bool) -> PathBuf {
    let mut groups = rule_object()["spec"].clone();
    if bare {
        for group in groups["groups"].as_array_mut().into_iter().flatten() {
            for rule in group["rules"].as_array_mut().into_iter().flatten() {
                rule.as_object_mut().map(|r| r.remove("annotations"));
            }
        }
    }
    let path = dir.join(if bare { "bare-rules.json" } else { "rules.json" });
    std::fs::write(&path, serde_json::to_string_pretty(&groups).unwrap()).unwrap();
    path
}

fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("monitoring-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn promtool_accepts_the_rules() {
    let dir = scratch("check");
    let (ok, report) = promtool(&["check", "rules", rule_file(&dir, false).to_str().unwrap()]);
    assert!(ok, "promtool check rules:\n{report}");
    assert!(report.contains("SUCCESS"), "{report}");
}

fn rule_tests() -> Value {
    let text = std::fs::read_to_string(monitoring().join("tests/alerts-test.yaml")).expect("the rule tests");
    serde_saphyr::from_str(&text).expect("YAML")
}

/// `deploy/monitoring/tests/alerts-test.yaml` has one test per alert, named after it, in which that alert fires.
#[test]
fn every_alert_has_a_rule_test_in_which_it_fires() {
    let tests = rule_tests();
    let mut tested = BTreeSet::new();
    for test in tests["tests"].as_array().expect("tests") {
        let name = test["name"].as_str().expect("every test is named after its alert").to_string();
        let fires = test["alert_rule_test"].as_array().into_iter().flatten().any(|case| {
            case["alertname"] == name.as_str() && case["exp_alerts"].as_array().is_some_and(|a| !a.is_empty())
        });
        assert!(fires, "the test {name:?} never expects {name} to fire");
        assert!(tested.insert(name.clone()), "two tests named {name}");
    }
    let alerts: BTreeSet<String> = rules().iter().map(|r| r["alert"].as_str().unwrap().to_string()).collect();
    assert_eq!(tested, alerts, "one test per alert");
}

/// Each alert fires on series named and labelled as the operator exports them, after its `for`, and not before.
#[test]
fn the_alerts_fire_on_the_operators_series() {
    let dir = scratch("test");
    rule_file(&dir, true);
    let path = dir.join("alerts-test.yaml");
    std::fs::copy(monitoring().join("tests/alerts-test.yaml"), &path).unwrap();
    let (ok, report) = promtool(&["test", "rules", path.to_str().unwrap()]);
    assert!(ok, "promtool test rules:\n{report}");
    assert!(report.contains("SUCCESS"), "{report}");
}

/// The panels of the dashboard, rows' panels included, rows left out.
fn panels(d: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in d["panels"].as_array().expect("panels") {
        if panel["type"] != "row" {
            out.push(panel);
        }
        out.extend(panel["panels"].as_array().into_iter().flatten().filter(|p| p["type"] != "row"));
    }
    out
}

/// Every expression of the dashboard's panels, with the panel's title.
fn panel_queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in panels(d) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            out.push((title, target["expr"].as_str().expect("every target has an expr").to_string()));
        }
    }
    out
}

/// Every expression of the dashboard (panels and template variables).
fn dashboard_queries(d: &Value) -> Vec<(String, String)> {
    let mut out = panel_queries(d);
    for var in d["templating"]["list"].as_array().into_iter().flatten() {
        if let Some(q) = var["query"]["query"].as_str() {
            // label_values(metric, label): the metric is the first argument.
            let metric = q.trim_start_matches("label_values(").split(',').next().unwrap_or_default().to_string();
            out.push((format!("variable {}", var["name"]), metric));
        }
    }
    out
}

#[tokio::test]
async fn the_dashboard_queries_exported_metrics_and_shows_the_group_state() {
    let d = dashboard();
    let exported = exported().await;
    let queries = dashboard_queries(&d);
    assert!(queries.len() >= 20, "{} queries", queries.len());
    let mut used = BTreeSet::new();
    for (panel, expr) in &queries {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{panel}: {expr}");
        for name in names {
            assert!(
                exported.contains(&name) || CONTAINER_SERIES.contains(&name.as_str()),
                "panel {panel:?} queries {name}, which the operator does not export"
            );
            used.insert(name);
        }
    }
    for state in [
        "rollout_operator_group_stuck",
        "rollout_operator_group_state",
        "rollout_operator_group_waiting",
        "rollout_operator_group_seconds_without_progress",
        "rollout_operator_statefulset_replicas",
        "rollout_operator_statefulset_replicas_updated",
        "rollout_operator_statefulset_replicas_unavailable",
        "rollout_operator_group_reconciles_total",
        "rollout_operator_request_duration_seconds_bucket",
        "rollout_operator_events_total",
        // The budgets, as the Go operator's dashboard shows them.
        "rollout_operator_zpdb_configurations_observed_total",
        "rollout_operator_zpdb_eviction_requests_total",
        "rollout_operator_zpdb_inflight_eviction_requests",
        // Resources.
        "container_cpu_usage_seconds_total",
        "container_memory_working_set_bytes",
    ] {
        assert!(used.contains(state), "the dashboard does not show {state}");
    }
    // Grafana needs unique panel ids, and every panel uses the data source variable.
    let ids: Vec<i64> = d["panels"].as_array().unwrap().iter().map(|p| p["id"].as_i64().expect("id")).collect();
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len(), "duplicate panel ids");
    for panel in panels(&d) {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
    }
}

#[test]
fn every_panel_has_a_description_and_every_query_is_filtered_by_cluster() {
    let d = dashboard();
    let variables: Vec<&str> =
        d["templating"]["list"].as_array().expect("variables").iter().filter_map(|v| v["name"].as_str()).collect();
    for name in ["datasource", "cluster", "namespace"] {
        assert!(variables.contains(&name), "no {name} variable in {variables:?}");
    }
    let cluster = d["templating"]["list"].as_array().unwrap().iter().find(|v| v["name"] == "cluster").unwrap();
    // "All" must also match series without a cluster label (a single-cluster Prometheus).
    assert_eq!(cluster["allValue"], ".*");
    for panel in panels(&d) {
        let title = panel["title"].as_str().unwrap_or_default();
        let description = panel["description"].as_str().unwrap_or_default();
        assert!(description.len() >= 20, "panel {title:?} has no description");
    }
    for (title, expr) in panel_queries(&d) {
        assert!(expr.contains(r#"cluster=~"$cluster""#), "panel {title:?} ignores the cluster variable: {expr}");
        assert!(expr.contains(r#"namespace=~"$namespace""#), "panel {title:?} ignores the namespace variable: {expr}");
    }
}

/// A dashboard expression as Prometheus would receive it: Grafana's variables replaced by what Grafana substitutes.
fn as_sent(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__interval", "1m")
        .replace("$cluster", ".*")
        .replace("$namespace", ".*")
}

#[test]
fn every_dashboard_query_parses() {
    let d = dashboard();
    let queries = panel_queries(&d);
    assert!(queries.iter().all(|(_, e)| !as_sent(e).contains('$')), "a variable is left unreplaced");
    // Each query as a recording rule: `promtool check rules` parses it with Prometheus's own parser.
    let rules: Vec<Value> = queries
        .iter()
        .enumerate()
        .map(|(i, (_, expr))| serde_json::json!({"record": format!("dashboard:query_{i}"), "expr": as_sent(expr)}))
        .collect();
    let file = serde_json::json!({"groups": [{"name": "dashboard", "rules": rules}]});
    let dir = scratch("dashboard");
    let path = dir.join("dashboard-queries.json");
    std::fs::write(&path, serde_json::to_string_pretty(&file).unwrap()).unwrap();
    let (ok, report) = promtool(&["check", "rules", path.to_str().unwrap()]);
    let titled: Vec<String> = queries.iter().enumerate().map(|(i, (t, e))| format!("query_{i} ({t}): {e}")).collect();
    assert!(ok, "promtool cannot parse a dashboard query:\n{report}\n{}", titled.join("\n"));
}

#[test]
fn a_query_that_does_not_parse_is_caught() {
    let dir = scratch("bad-query");
    let path = dir.join("bad.json");
    let file =
        serde_json::json!({"groups": [{"name": "g", "rules": [{"record": "r", "expr": "sum by (a) (rate(x[5m])"}]}]});
    std::fs::write(&path, file.to_string()).unwrap();
    let (ok, _) = promtool(&["check", "rules", path.to_str().unwrap()]);
    assert!(!ok, "promtool accepted an unbalanced expression");
}
