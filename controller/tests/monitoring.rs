//! `deploy/monitoring`: the PrometheusRule passes Prometheus's own checker (`promtool check rules`) and its alerts
//! fire on series named and labelled as the operator exports them (`promtool test rules`); every metric the rules
//! and the Grafana dashboard query is one the operator registers, and the dashboard shows the group state metrics.
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
    metrics.feature_disabled("events", "events.k8s.io events create/patch");
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

#[tokio::test]
async fn the_rules_cover_what_issue_17_asks_and_query_only_exported_metrics() {
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
        for key in ["summary", "description"] {
            assert!(rule["annotations"][key].is_string(), "{name} has a {key}");
        }
        alerts.insert(name);
    }
    for expected in [
        "RolloutOperatorGroupStuck",
        "RolloutOperatorReconcilesFailing",
        "RolloutOperatorWebhookErrors",
        "RolloutOperatorWebhookLatencyHigh",
        "RolloutOperatorCertificateExpiresSoon",
        "RolloutOperatorIncorrectWebhookFailurePolicy",
    ] {
        assert!(alerts.contains(expected), "no {expected} in {alerts:?}");
    }
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

/// Each alert fires on series named and labelled as the operator exports them, after its `for`, and not before.
#[test]
fn the_alerts_fire_on_the_operators_series() {
    let dir = scratch("test");
    rule_file(&dir, true);
    let ns = r#"namespace="mimir""#;
    let tests = format!(
        r#"
rule_files: [bare-rules.json]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'rollout_operator_group_stuck{{{ns},rollout_group="ingester"}}'
        values: '0 0 1x30'
      - series: 'rollout_operator_group_reconciles_total{{{ns},rollout_group="ingester"}}'
        values: '0+10x40'
      - series: 'rollout_operator_group_reconciles_failed_total{{{ns},rollout_group="ingester"}}'
        values: '0+8x40'
      - series: 'rollout_operator_last_successful_group_reconcile_timestamp_seconds{{{ns},rollout_group="ingester"}}'
        values: '0x100'
      - series: 'rollout_operator_request_duration_seconds_count{{{ns},method="POST",route="admission_prepare_downscale",status_code="500",ws="false"}}'
        values: '0+5x40'
      - series: 'rollout_operator_request_duration_seconds_bucket{{{ns},method="POST",route="admission_no_downscale",status_code="200",ws="false",le="5"}}'
        values: '0+1x40'
      - series: 'rollout_operator_request_duration_seconds_bucket{{{ns},method="POST",route="admission_no_downscale",status_code="200",ws="false",le="10"}}'
        values: '0+10x40'
      - series: 'rollout_operator_request_duration_seconds_bucket{{{ns},method="POST",route="admission_no_downscale",status_code="200",ws="false",le="+Inf"}}'
        values: '0+10x40'
      - series: 'rollout_operator_tls_certificate_expiry_timestamp_seconds{{{ns}}}'
        values: '86400x100'
      - series: 'kube_validating_webhook_failure_policy{{{ns},type="ValidatingWebhook",webhook="no-downscale-mimir.grafana.com",policy="Ignore"}}'
        values: '1x40'
      - series: 'rollout_operator_feature_disabled{{{ns},feature="events",missing_permission="events.k8s.io events create/patch"}}'
        values: '1x40'
    alert_rule_test:
      - eval_time: 5m
        alertname: RolloutOperatorGroupStuck
        exp_alerts: []
      - eval_time: 10m
        alertname: RolloutOperatorGroupStuck
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: mimir, rollout_group: ingester}}
      - eval_time: 30m
        alertname: RolloutOperatorReconcilesFailing
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: mimir, rollout_group: ingester}}
      - eval_time: 30m
        alertname: RolloutOperatorWebhookErrors
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: mimir, route: admission_prepare_downscale}}
      - eval_time: 30m
        alertname: RolloutOperatorWebhookLatencyHigh
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: mimir, route: admission_no_downscale}}
      - eval_time: 30m
        alertname: RolloutOperatorIncorrectWebhookFailurePolicy
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: mimir, type: ValidatingWebhook, webhook: no-downscale-mimir.grafana.com}}
      - eval_time: 30m
        alertname: RolloutOperatorFeatureDisabled
        exp_alerts:
          - exp_labels: {{severity: info, namespace: mimir, feature: events, missing_permission: events.k8s.io events create/patch}}
      - eval_time: 50m
        alertname: RolloutOperatorCertificateExpiresSoon
        exp_alerts: []
      - eval_time: 70m
        alertname: RolloutOperatorCertificateExpiresSoon
        exp_alerts:
          - exp_labels: {{severity: critical, namespace: mimir}}
      - eval_time: 80m
        alertname: RolloutOperatorNoSuccessfulReconcile
        exp_alerts:
          - exp_labels: {{severity: warning, namespace: mimir, rollout_group: ingester}}
"#
    );
    let path = dir.join("tests.yaml");
    std::fs::write(&path, tests).unwrap();
    let (ok, report) = promtool(&["test", "rules", path.to_str().unwrap()]);
    assert!(ok, "promtool test rules:\n{report}");
}

/// Every expression of the dashboard (panels and template variables).
fn dashboard_queries(d: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in d["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or_default().to_string();
            out.push((title, target["expr"].as_str().expect("every target has an expr").to_string()));
        }
    }
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
            assert!(exported.contains(&name), "panel {panel:?} queries {name}, which the operator does not export");
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
    ] {
        assert!(used.contains(state), "the dashboard does not show {state}");
    }
    // Grafana needs unique panel ids, and every panel uses the data source variable.
    let ids: Vec<i64> = d["panels"].as_array().unwrap().iter().map(|p| p["id"].as_i64().expect("id")).collect();
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len(), "duplicate panel ids");
    for panel in d["panels"].as_array().unwrap().iter().filter(|p| p["type"] != "row") {
        assert_eq!(panel["datasource"]["uid"], "${datasource}", "{}", panel["title"]);
    }
}
