//! RolloutHealthCheck: the resource's validation, the pod sets and substitutions, the evaluation's decision (soak,
//! policies, order) and the gate's hold in the pass, exactly where it sits: before the first deletion of a zone after
//! the first, never before the first zone, never once a zone has started.

use jiff::Timestamp;
use proptest::prelude::*;
use rollout_core::fixture;
use rollout_core::health_check::config::{self, ConfigError, HealthCheckConfig, Policy};
use rollout_core::health_check::targets::{self, gate_of, promql_number, substitute_query, substitute_success};
use rollout_core::health_check::{
    Answer, CheckResult, GateState, GateTimes, GateVerdict, GroupGates, HealthGate, HealthGating, Misconfiguration,
    QueryKind, QueryRequest, QueryResult, Side, Targets, evaluate, gate_target, resolve,
};
use rollout_core::keys;
use rollout_core::view::ReadyCondition;
use rollout_core::wait::{Wait, WaitReason};
use rollout_core::{Action, GroupSnapshot, GroupState, PassInput, build_groups, plan_pass};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Duration;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap()
}

/// The example resource of the docs.
fn example() -> Value {
    json!({
        "apiVersion": "rollout-operator.grafana.com/v1",
        "kind": "RolloutHealthCheck",
        "metadata": {"name": "ingester-health", "namespace": "mimir", "generation": 2},
        "spec": {
            "selector": {"matchLabels": {"rollout-group": "ingester"}},
            "prometheusURL": "http://prometheus.monitoring.svc:9090",
            "checks": [{
                "name": "request-error-rate",
                "query": "sum(rate(cortex_request_duration_seconds_count{${targetMatchers},status_code=~\"5..\"}[${range}])) / sum(rate(cortex_request_duration_seconds_count{${targetMatchers}}[${range}]))",
                "successQuery": "${current} <= bool 2 * ${baseline} + 0.01"
            }]
        }
    })
}

fn config() -> HealthCheckConfig {
    config::parse(&example()).expect("the example is valid")
}

fn with_check(patch: Value) -> Value {
    let mut object = example();
    let check = &mut object["spec"]["checks"][0];
    for (k, v) in patch.as_object().unwrap() {
        check[k] = v.clone();
    }
    object
}

#[test]
fn the_example_parses_with_the_defaults() {
    let c = config();
    assert_eq!(c.name, "ingester-health");
    assert_eq!(c.generation, 2);
    let check = &c.checks[0];
    assert_eq!((check.current_range.as_str(), check.baseline_range.as_str()), ("5m", "10m"));
    assert_eq!(check.current_range_length, Duration::from_secs(300));
    assert_eq!(check.baseline_range_length, Duration::from_secs(600));
    assert_eq!(check.query_timeout, Duration::from_secs(10));
    assert_eq!(check.query_retries, 3);
    assert_eq!((check.on_failure, check.on_no_data), (Policy::Pause, Policy::Pause));
    assert!(!check.disabled);
    assert_eq!(c.soak(), Duration::from_secs(300));
}

#[test]
fn malformed_resources_are_refused_with_the_field_named() {
    let refused = |object: Value| config::parse(&object).expect_err("refused");
    let mut wrong_kind = example();
    wrong_kind["kind"] = json!("ZoneAwarePodDisruptionBudget");
    assert!(matches!(refused(wrong_kind), ConfigError::WrongKind(_)));
    let mut no_spec = example();
    no_spec.as_object_mut().unwrap().remove("spec");
    assert_eq!(refused(no_spec), ConfigError::NoSpec);
    let mut no_selector = example();
    no_selector["spec"]["selector"] = json!({"matchLabels": {}});
    assert_eq!(refused(no_selector), ConfigError::NoSelector);
    for url in ["", "prometheus:9090", "ftp://p", "http://", "http://p:90x", "http://a b"] {
        let mut bad = example();
        bad["spec"]["prometheusURL"] = json!(url);
        let err = refused(bad);
        assert!(matches!(err, ConfigError::NoPrometheusUrl | ConfigError::BadPrometheusUrl(_)), "{url}: {err}");
    }
    for url in ["http://p", "https://p:9090/prometheus", "http://[::1]:9090", "http://u@p"] {
        let mut good = example();
        good["spec"]["prometheusURL"] = json!(url);
        assert!(config::parse(&good).is_ok(), "{url}");
    }
    let mut no_checks = example();
    no_checks["spec"]["checks"] = json!([]);
    assert_eq!(refused(no_checks), ConfigError::NoChecks);
    let mut twice = example();
    let check = twice["spec"]["checks"][0].clone();
    twice["spec"]["checks"] = json!([check.clone(), check]);
    assert!(matches!(refused(twice), ConfigError::DuplicateName { index: 1, .. }));

    let err = refused(with_check(json!({"onFailure": "pause"})));
    assert!(err.to_string().contains("checks[0].onFailure") && err.to_string().contains("Pause"), "{err}");
    let err = refused(with_check(json!({"queryRetries": "three"})));
    assert!(err.to_string().starts_with("spec.checks[0].queryRetries"), "{err}");
    assert!(matches!(refused(with_check(json!({"queryRetries": -1}))), ConfigError::NegativeRetries { .. }));
    let err = refused(with_check(json!({"query": "sum(up{${targetMatchers}})"})));
    assert!(matches!(err, ConfigError::MissingPlaceholder { placeholder: "${range}", .. }), "{err}");
    let err = refused(with_check(json!({"successQuery": "${curent} < 1"})));
    assert!(err.to_string().contains("unknown placeholder ${curent}"), "{err}");
    let err = refused(with_check(json!({"query": "up{${targetMatchers}}[${range}] + ${baseline}"})));
    assert!(matches!(err, ConfigError::UnknownPlaceholder { field: "query", .. }), "{err}");
    for (field, value) in [("currentRange", "5 minutes"), ("baselineRange", "0"), ("queryTimeout", "0s")] {
        let err = refused(with_check(json!({ field: value })));
        assert!(matches!(err, ConfigError::BadDuration { field: f, .. } if f == field), "{field}: {err}");
    }
    assert!(matches!(refused(with_check(json!({"name": " "}))), ConfigError::NoName { index: 0 }));
}

#[test]
fn the_webhook_refuses_what_parse_refuses() {
    use rollout_core::admission::parse_review;
    use rollout_core::health_check::validation::validate;
    let review = |object: Value| {
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "object": object,
                        "kind": {"group": config::GROUP, "version": "v1", "kind": config::KIND}}
        });
        parse_review(body.to_string().as_bytes()).expect("review")
    };
    assert!(validate(&review(example())).allowed);
    let denied = validate(&review(with_check(json!({"onNoData": "Ignore"}))));
    assert!(!denied.allowed);
    assert!(denied.message.as_deref().unwrap_or_default().contains("onNoData"), "{denied:?}");
}

#[test]
fn matchers_cover_each_side_and_an_empty_side_matches_nothing() {
    let targets = Targets {
        namespace: "mimir".into(),
        candidate: vec!["ingester-zone-a-0".into(), "ingester-zone-a-1".into()],
        stable: vec![],
    };
    assert_eq!(targets.matchers(Side::Candidate), r#"namespace="mimir",pod=~"ingester-zone-a-0|ingester-zone-a-1""#);
    assert_eq!(targets.matchers(Side::Stable), r#"namespace="mimir",pod=~"^$""#);
    let dotted = Targets { namespace: "n".into(), candidate: vec!["a.b-0".into()], stable: vec![] };
    assert_eq!(dotted.matchers(Side::Candidate), r#"namespace="n",pod=~"a\\.b-0""#);
    assert_eq!(
        substitute_query("rate(x{${targetMatchers}}[${range}]) / rate(y{${targetMatchers}}[${range}])", "M", "5m"),
        "rate(x{M}[5m]) / rate(y{M}[5m])"
    );
    assert_eq!(substitute_success("${current} <= bool 2 * ${baseline}", 0.4, -0.5), "0.4 <= bool 2 * (-0.5)");
    assert_eq!(promql_number(f64::INFINITY), "+Inf");
    assert_eq!(promql_number(1e-7), "0.0000001");
}

/// What replaces a placeholder is never read as one: the matchers and the range are inserted as they are, in one
/// pass over the user's template (a namespace or pod name, or a value, holding `${range}` stays as written).
#[test]
fn substituted_text_is_not_substituted_again() {
    let query = "rate(x{${targetMatchers}}[${range}])";
    assert_eq!(substitute_query(query, "pod=~\"${range}\"", "5m"), "rate(x{pod=~\"${range}\"}[5m])");
    assert_eq!(substitute_query(query, "M", "${targetMatchers}"), "rate(x{M}[${targetMatchers}])");
    assert_eq!(substitute_query("${range}${targetMatchers}", "${range}", "1m"), "1m${range}");
}

/// Three zones: `a` rolled to r1 (pods Ready since `ready_since`), `b` and `c` untouched on r0 with update revision
/// r1, `b` and `c` gated by `ingester-health`; `b` carries the `started-at` annotation.
fn between_zones(ready_since: Timestamp) -> GroupSnapshot {
    let a = fixture::statefulset("ingester", "zone-a", 2, "r1");
    let mut pods: Vec<_> = (0..2)
        .map(|i| {
            let mut p = fixture::pod(&a, i, "r1");
            p.ready_condition = Some(ReadyCondition { ready: true, since: Some(ready_since) });
            p
        })
        .collect();
    let mut members = vec![a];
    for name in ["zone-b", "zone-c"] {
        let mut s = fixture::statefulset("ingester", name, 2, "r0");
        s.status.as_mut().unwrap().update_revision = "r1".into();
        s = fixture::annotate(s, keys::ROLLOUT_HEALTH_CHECK, "ingester-health");
        pods.extend((0..2).map(|i| fixture::pod(&s, i, "r0")));
        members.push(s);
    }
    members[1] =
        fixture::annotate(members[1].clone(), keys::ROLLOUT_HEALTH_CHECK_STARTED_AT, "r1=2023-11-14T22:00:00Z");
    build_groups(members, &pods).remove(0)
}

fn deletions(plan: &rollout_core::GroupPlan) -> Vec<&str> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_sides_baseline_time_and_serving_time_come_from_the_snapshot() {
    let group = between_zones(t(-60));
    let targets = Targets::of(&group, "mimir");
    assert_eq!(targets.candidate, ["zone-a-0", "zone-a-1"]);
    assert_eq!(targets.stable, ["zone-b-0", "zone-b-1", "zone-c-0", "zone-c-1"]);
    assert_eq!(targets::baseline_time(&group), Some("2023-11-14T22:00:00Z".parse().unwrap()));
    assert_eq!(targets::candidates_serving_since(&group, t(0)), Some(t(-60)));
    // A candidate not Ready (recreated, not serving yet): the candidate side is not complete, nothing has soaked.
    let mut recreated = group.clone();
    recreated.members[0].pods[1] = fixture::not_ready(recreated.members[0].pods[1].clone());
    assert_eq!(targets::candidates_serving_since(&recreated, t(0)), Some(t(0)));
    // b's annotation names r1 already; c's is missing and is due.
    assert_eq!(targets::started_at_writes(&group, t(0)), [("zone-c".to_string(), format!("r1={}", t(0)))]);
    let target = gate_target(&group, t(0), &BTreeSet::new()).expect("gated");
    assert_eq!((target.statefulset.as_str(), target.health_check.as_str()), ("zone-b", "ingester-health"));
}

#[test]
fn an_annotation_for_another_revision_is_ignored() {
    let mut group = between_zones(t(-60));
    group.members[1]
        .sts
        .annotations
        .insert(keys::ROLLOUT_HEALTH_CHECK_STARTED_AT.into(), "r0=2023-01-01T00:00:00Z".into());
    assert_eq!(targets::baseline_time(&group), None);
    assert_eq!(targets::started_at_writes(&group, t(0)).len(), 2);
}

fn times(now: Timestamp) -> GateTimes {
    GateTimes { now, baseline: Some(t(-3600)), candidates_serving_since: Some(t(-600)) }
}

fn answering(current: Answer, baseline: Answer, success: Answer) -> impl FnMut(&QueryRequest) -> Answer {
    move |q: &QueryRequest| match q.kind {
        QueryKind::Current => current.clone(),
        QueryKind::Baseline => baseline.clone(),
        QueryKind::Success => success.clone(),
    }
}

#[test]
fn a_passing_check_passes_and_the_queries_are_over_each_side_at_its_time() {
    let group = between_zones(t(-600));
    let mut asked = Vec::new();
    let (verdict, records) = evaluate(&config(), Targets::of(&group, "mimir"), times(t(0)), |q| {
        asked.push(q.clone());
        match q.kind {
            QueryKind::Current => Answer::Value(0.01),
            QueryKind::Baseline => Answer::Value(0.02),
            QueryKind::Success => Answer::Value(1.0),
        }
    });
    assert_eq!(verdict, GateVerdict::Pass { warnings: vec![] });
    assert_eq!(records[0].result, CheckResult::Pass { current: 0.01, baseline: 0.02 });
    let kinds: Vec<_> = asked.iter().map(|q| q.kind).collect();
    assert_eq!(kinds, [QueryKind::Current, QueryKind::Baseline, QueryKind::Success]);
    assert!(asked[0].promql.contains(r#"pod=~"zone-a-0|zone-a-1""#) && asked[0].promql.contains("[5m]"));
    assert_eq!(asked[0].at, t(0));
    assert!(asked[1].promql.contains("zone-b-0|zone-b-1|zone-c-0|zone-c-1") && asked[1].promql.contains("[10m]"));
    assert_eq!(asked[1].at, t(-3600));
    assert_eq!(asked[2].promql, "0.01 <= bool 2 * 0.02 + 0.01");
    assert_eq!((asked[2].timeout, asked[2].retries), (Duration::from_secs(10), 3));
}

#[test]
fn a_failing_check_pauses_naming_the_check_and_its_values() {
    let group = between_zones(t(-600));
    let ask = answering(Answer::Value(0.4), Answer::Value(0.02), Answer::Value(0.0));
    let (verdict, _) = evaluate(&config(), Targets::of(&group, "mimir"), times(t(0)), ask);
    let GateVerdict::Pause { check, detail, .. } = verdict else { panic!("{verdict:?}") };
    assert_eq!(check, "request-error-rate");
    assert_eq!(detail, r#"check "request-error-rate" failed (current=0.4 baseline=0.02)"#);
    // Anything but 0 or 1 fails too.
    let ask = answering(Answer::Value(0.4), Answer::Value(0.02), Answer::Value(2.0));
    let (verdict, records) = evaluate(&config(), Targets::of(&group, "mimir"), times(t(0)), ask);
    assert!(!verdict.passes());
    assert_eq!(records[0].result.label(), "fail");
}

#[test]
fn no_data_and_errors_follow_their_policies() {
    let group = between_zones(t(-600));
    let targets = || Targets::of(&group, "mimir");
    let mut c = config();
    let no_data = || answering(Answer::NoData, Answer::Value(0.0), Answer::Value(1.0));
    let (verdict, records) = evaluate(&c, targets(), times(t(0)), no_data());
    assert!(matches!(verdict, GateVerdict::Pause { ref detail, .. } if detail.contains("no data (its current query)")));
    assert_eq!(records[0].result, CheckResult::NoData { kind: QueryKind::Current });
    c.checks[0].on_no_data = Policy::Warn;
    let (verdict, _) = evaluate(&c, targets(), times(t(0)), no_data());
    assert!(matches!(verdict, GateVerdict::Pass { ref warnings } if warnings.len() == 1), "{verdict:?}");
    c.checks[0].on_no_data = Policy::Disabled;
    let (verdict, _) = evaluate(&c, targets(), times(t(0)), no_data());
    assert_eq!(verdict, GateVerdict::Pass { warnings: vec![] });
    // An error is the failure policy's.
    let unreachable = || answering(Answer::Value(0.1), Answer::Error("connection refused".into()), Answer::Value(1.0));
    let (verdict, records) = evaluate(&c, targets(), times(t(0)), unreachable());
    assert!(
        matches!(verdict, GateVerdict::Pause { ref detail, .. } if detail.contains("baseline query: connection refused"))
    );
    assert_eq!(records[0].result.label(), "error");
    c.checks[0].on_failure = Policy::Warn;
    assert!(evaluate(&c, targets(), times(t(0)), unreachable()).0.passes());
}

#[test]
fn the_first_pausing_check_stops_the_evaluation_and_disabled_checks_are_skipped() {
    let mut object = example();
    let first = object["spec"]["checks"][0].clone();
    let mut off = first.clone();
    off["name"] = json!("off");
    off["disabled"] = json!(true);
    let mut warn = first.clone();
    warn["name"] = json!("warn");
    warn["onFailure"] = json!("Warn");
    let mut last = first.clone();
    last["name"] = json!("last");
    object["spec"]["checks"] = json!([off, warn, first, last]);
    let c = config::parse(&object).unwrap();
    let group = between_zones(t(-600));
    let mut checks_asked = Vec::new();
    let (verdict, records) = evaluate(&c, Targets::of(&group, "mimir"), times(t(0)), |q| {
        checks_asked.push(q.check.clone());
        if q.kind == QueryKind::Success { Answer::Value(0.0) } else { Answer::Value(0.5) }
    });
    let GateVerdict::Pause { check, warnings, .. } = verdict else { panic!() };
    assert_eq!(check, "request-error-rate");
    assert_eq!(warnings.len(), 1, "the Warn check's failure is a warning: {warnings:?}");
    assert!(!checks_asked.iter().any(|c| c == "off" || c == "last"), "{checks_asked:?}");
    let labels: Vec<_> = records.iter().map(|r| (r.check.as_str(), r.result.label())).collect();
    assert_eq!(labels, [("off", "skipped"), ("warn", "fail"), ("request-error-rate", "fail")]);
}

#[test]
fn nothing_is_judged_before_the_updated_pods_have_served_for_the_current_range() {
    let group = between_zones(t(-600));
    let never = |q: &QueryRequest| -> Answer { panic!("queried while soaking: {q:?}") };
    let soaking = GateTimes { now: t(0), baseline: Some(t(-3600)), candidates_serving_since: Some(t(-299)) };
    let (verdict, records) = evaluate(&config(), Targets::of(&group, "mimir"), soaking, never);
    assert_eq!(verdict, GateVerdict::Soaking { since: t(-299), until: t(1) });
    assert!(records.is_empty());
    let soaked = GateTimes { candidates_serving_since: Some(t(-300)), ..soaking };
    let ask = answering(Answer::Value(0.0), Answer::Value(0.0), Answer::Value(1.0));
    assert!(evaluate(&config(), Targets::of(&group, "mimir"), soaked, ask).0.passes());
    // Without a known Ready time the soak counts from the baseline time.
    let unknown = GateTimes { now: t(0), baseline: Some(t(-10)), candidates_serving_since: None };
    assert!(matches!(evaluate(&config(), Targets::of(&group, "mimir"), unknown, never).0, GateVerdict::Soaking { .. }));
    let none = GateTimes { baseline: None, ..soaked };
    assert_eq!(evaluate(&config(), Targets::of(&group, "mimir"), none, never).0, GateVerdict::NoBaselineTime);
}

#[test]
fn a_gate_that_can_only_warn_holds_nothing_back() {
    let mut c = config();
    c.checks[0].on_failure = Policy::Warn;
    c.checks[0].on_no_data = Policy::Warn;
    assert_eq!(c.soak(), Duration::ZERO);
    let group = between_zones(t(0));
    let at_once = GateTimes { now: t(0), baseline: None, candidates_serving_since: Some(t(0)) };
    let ask = answering(Answer::Value(0.4), Answer::Value(0.02), Answer::Value(0.0));
    let (verdict, _) = evaluate(&c, Targets::of(&group, "mimir"), at_once, ask);
    assert!(matches!(verdict, GateVerdict::Pass { ref warnings } if warnings.len() == 1), "{verdict:?}");
}

#[test]
fn values_are_shown_to_six_significant_digits() {
    use rollout_core::health_check::decision::shown;
    assert_eq!(shown(0.39999999999999997), "0.4");
    assert_eq!(shown(0.019999999999999997), "0.02");
    assert_eq!(shown(1234567.25), "1234567");
    assert_eq!(shown(-0.000123456789), "-0.000123457");
    assert_eq!(shown(0.0), "0");
    assert_eq!(shown(f64::INFINITY), "+Inf");
}

#[test]
fn query_results_are_read_by_shape() {
    assert_eq!(QueryResult::Scalar(0.5).answer(), Answer::Value(0.5));
    assert_eq!(QueryResult::Vector(vec![0.5]).answer(), Answer::Value(0.5));
    assert_eq!(QueryResult::Vector(vec![]).answer(), Answer::NoData);
    assert_eq!(QueryResult::Scalar(f64::NAN).answer(), Answer::NoData);
    assert!(matches!(QueryResult::Vector(vec![1.0, 2.0]).answer(), Answer::Error(m) if m.contains("2")));
    assert!(matches!(QueryResult::Other("matrix".into()).answer(), Answer::Error(m) if m.contains("matrix")));
}

fn gate(state: GateState) -> HealthGate {
    HealthGate { health_check: "ingester-health".into(), state }
}

fn evaluated(verdict: GateVerdict) -> HealthGate {
    gate(GateState::Evaluated { at: t(0), verdict })
}

fn pause() -> GateVerdict {
    GateVerdict::Pause {
        check: "request-error-rate".into(),
        detail: r#"check "request-error-rate" failed (current=0.4 baseline=0.02)"#.into(),
        warnings: vec![],
    }
}

#[test]
fn the_pass_holds_the_next_zone_unless_the_gate_passes() {
    let group = between_zones(t(-600));
    let plan_gated =
        |g: HealthGating| plan_pass(&group, &PassInput { health_gate: g, ..PassInput::new(t(0), &[]) }).plan;
    let plan_with = |g: Option<&HealthGate>| plan_gated(HealthGating::On(&GroupGates::of(g.cloned())));
    assert_eq!(deletions(&plan_gated(HealthGating::Off)), ["zone-b-0"], "gates off: as without one");
    let plan = plan_with(None);
    assert!(deletions(&plan).is_empty(), "gates on, no evaluation yet: held, {plan:?}");
    assert_eq!(plan.wait, Some(Wait::on(WaitReason::HeldByHealthCheck, "zone-b")));
    assert!(plan.reason.contains("RolloutHealthCheck ingester-health has not been evaluated yet"), "{}", plan.reason);
    let passing = evaluated(GateVerdict::Pass { warnings: vec!["check \"w\" has no data".into()] });
    let plan = plan_with(Some(&passing));
    assert_eq!(deletions(&plan), ["zone-b-0"]);
    assert!(plan.warnings.iter().any(|w| w.contains("check \"w\" has no data")), "{:?}", plan.warnings);

    let paused = evaluated(pause());
    let plan = plan_with(Some(&paused));
    assert!(deletions(&plan).is_empty(), "{plan:?}");
    assert_eq!(plan.state, GroupState::Waiting);
    assert_eq!(plan.wait, Some(Wait::on(WaitReason::HeldByHealthCheck, "zone-b")));
    assert!(
        plan.reason.contains("StatefulSet zone-b does not start rolling: RolloutHealthCheck ingester-health"),
        "{}",
        plan.reason
    );
    assert!(
        plan.reason.contains(r#"check "request-error-rate" failed (current=0.4 baseline=0.02)"#),
        "{}",
        plan.reason
    );

    let soaking = evaluated(GateVerdict::Soaking { since: t(-10), until: t(290) });
    assert!(deletions(&plan_with(Some(&soaking))).is_empty());
    let pending = gate(GateState::NotEvaluated("being evaluated".into()));
    let plan = plan_with(Some(&pending));
    assert!(deletions(&plan).is_empty());
    assert!(plan.reason.ends_with("RolloutHealthCheck ingester-health: being evaluated"), "{}", plan.reason);
    let other = HealthGate { health_check: "another".into(), ..evaluated(GateVerdict::Pass { warnings: vec![] }) };
    assert!(deletions(&plan_with(Some(&other))).is_empty(), "an evaluation of another resource is not this one's");

    let misconfigured = gate(GateState::Misconfigured(Misconfiguration::Missing { name: "ingester-health".into() }));
    let plan = plan_with(Some(&misconfigured));
    assert_eq!(deletions(&plan), ["zone-b-0"]);
    assert!(
        plan.warnings.iter().any(|w| w.contains("RolloutHealthCheck ingester-health not found")),
        "{:?}",
        plan.warnings
    );
}

#[test]
fn the_first_zone_is_never_gated() {
    // Nothing rolled yet: every StatefulSet untouched, all gated.
    let mut members = Vec::new();
    let mut pods = Vec::new();
    for name in ["zone-a", "zone-b"] {
        let mut s = fixture::statefulset("ingester", name, 2, "r0");
        s.status.as_mut().unwrap().update_revision = "r1".into();
        s = fixture::annotate(s, keys::ROLLOUT_HEALTH_CHECK, "ingester-health");
        pods.extend((0..2).map(|i| fixture::pod(&s, i, "r0")));
        members.push(s);
    }
    let group = build_groups(members, &pods).remove(0);
    assert_eq!(gate_target(&group, t(0), &BTreeSet::new()), None);
    let paused = evaluated(pause());
    for gate in [HealthGating::On(&GroupGates::of(Some(paused.clone()))), HealthGating::On(&GroupGates::default())] {
        let plan = plan_pass(&group, &PassInput { health_gate: gate, ..PassInput::new(t(0), &[]) }).plan;
        assert_eq!(deletions(&plan), ["zone-a-0"]);
    }
}

#[test]
fn a_zone_the_gate_cleared_rolls_on_by_readiness_alone() {
    let group = between_zones(t(-600));
    let passing = evaluated(GateVerdict::Pass { warnings: vec![] });
    let pass = plan_pass(
        &group,
        &PassInput { health_gate: HealthGating::On(&GroupGates::of(Some(passing))), ..PassInput::new(t(0), &[]) },
    );
    assert_eq!(deletions(&pass.plan), ["zone-b-0"]);
    assert_eq!(pass.cleared_by_health_check, ["zone-b"], "the start the gate let through is reported cleared");

    // zone-b-0 replaced and Ready on r1: the candidates changed, the evaluation is for another key; zone-b cleared.
    let mut group = between_zones(t(-600));
    let b = group.members[1].sts.clone();
    group.members[1].pods[0] = fixture::pod(&b, 0, "r1");
    let cleared = BTreeSet::from(["zone-b".to_string()]);
    let target = gate_target(&group, t(0), &cleared).map(|g| g.statefulset);
    assert_eq!(target, Some("zone-c".to_string()), "c's gate is evaluated ahead, while b is part-way");
    let paused = evaluated(pause());
    for gate in [Some(paused), None] {
        let gates = GroupGates { gate, cleared: cleared.clone() };
        let pass = plan_pass(&group, &PassInput { health_gate: HealthGating::On(&gates), ..PassInput::new(t(0), &[]) });
        assert_eq!(deletions(&pass.plan), ["zone-b-1"]);
        assert!(pass.cleared_by_health_check.is_empty());
    }
}

#[test]
fn a_zone_someone_else_started_is_not_finished_without_a_pass() {
    // A pod of zone-b missing (deleted, being recreated): gated too (the planner waits for it first).
    let mut missing = between_zones(t(-600));
    missing.members[1].pods.remove(0);
    let target = gate_target(&missing, t(0), &BTreeSet::new()).expect("gated");
    assert_eq!((target.statefulset.as_str(), target.started), ("zone-b", true));

    // zone-b-0 evicted and recreated on r1 (or cleared by a process since restarted): b has started, not cleared.
    let mut group = between_zones(t(-600));
    let b = group.members[1].sts.clone();
    group.members[1].pods[0] = fixture::pod(&b, 0, "r1");
    let target = gate_target(&group, t(0), &BTreeSet::new()).expect("gated");
    assert_eq!((target.statefulset.as_str(), target.started), ("zone-b", true));
    let paused = evaluated(pause());
    for gate in [Some(paused), None] {
        let gates = GroupGates::of(gate);
        let plan =
            plan_pass(&group, &PassInput { health_gate: HealthGating::On(&gates), ..PassInput::new(t(0), &[]) }).plan;
        assert!(deletions(&plan).is_empty(), "{plan:?}");
        assert_eq!(plan.wait, Some(Wait::on(WaitReason::HeldByHealthCheck, "zone-b")));
        assert!(
            plan.reason.contains("StatefulSet zone-b is not rolled further: RolloutHealthCheck"),
            "{}",
            plan.reason
        );
    }
    let passing = GroupGates::of(Some(evaluated(GateVerdict::Pass { warnings: vec![] })));
    let pass = plan_pass(&group, &PassInput { health_gate: HealthGating::On(&passing), ..PassInput::new(t(0), &[]) });
    assert_eq!(pass.cleared_by_health_check, ["zone-b"]);
    assert!(deletions(&pass.plan).iter().all(|p| p.starts_with("zone-b")), "{:?}", pass.plan);
}

/// Zone-a part-way and zone-b started by someone else: the first zone is no longer the only one on the revision,
/// so zone-a's further deletions wait for the gate too (whichever zone the planner turns to, the controller rolls
/// no second zone on a revision the gate has not passed).
#[test]
fn a_zone_part_way_waits_too_once_another_has_been_started_by_someone_else() {
    let mut group = part_way();
    let b = group.members[1].sts.clone();
    group.members[1].pods[1] = fixture::pod(&b, 1, "r1");
    let gated: Vec<String> =
        group.members.iter().filter_map(|m| gate_of(&group, m, &BTreeSet::new())).map(|g| g.statefulset).collect();
    assert_eq!(gated, ["zone-a", "zone-b"]);
    let plan = plan_pass(
        &group,
        &PassInput { health_gate: HealthGating::On(&GroupGates::default()), ..PassInput::new(t(0), &[]) },
    )
    .plan;
    assert!(deletions(&plan).is_empty(), "{plan:?}");
    assert_eq!(plan.wait.map(|w| w.reason), Some(WaitReason::HeldByHealthCheck));
}

/// Two gated zones of 2 pods, zone-a part-way (zone-a-0 on r1), zone-b untouched.
fn part_way() -> GroupSnapshot {
    let mut members = Vec::new();
    let mut pods = Vec::new();
    for (name, revisions) in [("zone-a", ["r1", "r0"]), ("zone-b", ["r0", "r0"])] {
        let mut s = fixture::statefulset("ingester", name, 2, "r0");
        s.status.as_mut().unwrap().update_revision = "r1".into();
        s = fixture::annotate(s, keys::ROLLOUT_HEALTH_CHECK, "ingester-health");
        s = fixture::annotate(s, keys::ROLLOUT_HEALTH_CHECK_STARTED_AT, "r1=2023-11-14T22:00:00Z");
        pods.extend(revisions.iter().enumerate().map(|(i, r)| fixture::pod(&s, i as u32, r)));
        members.push(s);
    }
    build_groups(members, &pods).remove(0)
}

/// Whether the pass on `group` with `gate` deletes a pod of zone-b.
fn starts_zone_b(group: &GroupSnapshot, gate: HealthGating) -> bool {
    let plan = plan_pass(group, &PassInput { health_gate: gate, ..PassInput::new(t(0), &[]) }).plan;
    let started = deletions(&plan).iter().any(|p| p.starts_with("zone-b"));
    if !started {
        assert_eq!(plan.wait, Some(Wait::on(WaitReason::HeldByHealthCheck, "zone-b")), "{plan:?}");
    }
    started
}

#[test]
fn a_zone_started_while_another_is_part_way_is_gated_too() {
    let passing = evaluated(GateVerdict::Pass { warnings: vec![] });
    let paused = evaluated(pause());
    // A crashed pod of zone-b, outdated and unready: replacing it would start zone-b.
    let mut crashed = part_way();
    crashed.members[1].pods[1] = fixture::not_ready(crashed.members[1].pods[1].clone());
    // zone-a paused part-way: the planner turns to zone-b.
    let mut group = part_way();
    group.members[0].sts = fixture::annotate(group.members[0].sts.clone(), keys::ROLLOUT_PAUSED, "true");
    for group in [crashed, group] {
        assert_eq!(gate_target(&group, t(0), &BTreeSet::new()).map(|g| g.statefulset), Some("zone-b".to_string()));
        assert!(starts_zone_b(&group, HealthGating::Off), "gates off: as without one");
        assert!(!starts_zone_b(&group, HealthGating::On(&GroupGates::default())), "not evaluated yet");
        assert!(!starts_zone_b(&group, HealthGating::On(&GroupGates::of(Some(paused.clone())))));
        assert!(starts_zone_b(&group, HealthGating::On(&GroupGates::of(Some(passing.clone())))));
    }
}

#[test]
fn a_crashed_pod_of_the_first_zone_is_not_a_start() {
    // Nothing rolled yet: zone-b-1 crashes and is replaced first; zone-b is then the first zone.
    let mut group = part_way();
    let a = group.members[0].sts.clone();
    group.members[0].pods[0] = fixture::pod(&a, 0, "r0");
    group.members[1].pods[1] = fixture::not_ready(group.members[1].pods[1].clone());
    assert_eq!(gate_target(&group, t(0), &BTreeSet::new()), None);
    assert!(starts_zone_b(&group, HealthGating::On(&GroupGates::default())));
    // zone-a part-way, its own pod crashed: replaced ungated.
    let mut group = part_way();
    group.members[0].pods[1] = fixture::not_ready(group.members[0].pods[1].clone());
    let plan = plan_pass(
        &group,
        &PassInput { health_gate: HealthGating::On(&GroupGates::default()), ..PassInput::new(t(0), &[]) },
    )
    .plan;
    assert_eq!(deletions(&plan), ["zone-a-1"]);
}

#[test]
fn an_evaluation_is_keyed_by_revisions_and_candidates() {
    let group = between_zones(t(-600));
    let key = rollout_core::health_check::revision_key(&group, "ingester-health", 2);
    assert_eq!(key, "ingester-health/2:zone-a=r1,zone-b=r1,zone-c=r1;zone-a-0,zone-a-1;2023-11-14T22:00:00Z");
    let mut later = group.clone();
    let b = later.members[1].sts.clone();
    later.members[1].pods = (0..2).map(|i| fixture::pod(&b, i, "r1")).collect();
    assert_ne!(rollout_core::health_check::revision_key(&later, "ingester-health", 2), key);
}

#[test]
fn a_paused_zone_is_not_evaluated() {
    let mut group = between_zones(t(-600));
    let b = fixture::annotate(group.members[1].sts.clone(), keys::ROLLOUT_PAUSED, "true");
    group.members[1].sts = b;
    assert_eq!(gate_target(&group, t(0), &BTreeSet::new()).map(|g| g.statefulset), Some("zone-c".to_string()));
}

#[test]
fn a_misconfigured_gate_is_resolved_as_such() {
    let group = between_zones(t(-600));
    assert!(matches!(resolve(&group, "zone-b", "x", None), Err(Misconfiguration::Missing { .. })));
    let invalid = Err(ConfigError::NoChecks);
    let err = resolve(&group, "zone-b", "x", Some(&invalid)).unwrap_err();
    assert_eq!(err.to_string(), "RolloutHealthCheck x is invalid: spec.checks must have at least one check");
    let mut other = config();
    other.match_labels.insert("name".into(), "distributor".into());
    let found = Ok(other);
    assert!(matches!(resolve(&group, "zone-b", "x", Some(&found)), Err(Misconfiguration::NotSelecting { .. })));
    let found = Ok(config());
    assert!(resolve(&group, "zone-b", "x", Some(&found)).is_ok());
}

/// The gate's verdict, judged independently: the first active check whose result maps to `Pause` pauses.
fn oracle(policies: &[(Policy, Policy, bool)], answers: &[(Answer, Answer, Answer)]) -> Option<usize> {
    for (i, ((on_failure, on_no_data, disabled), (cur, base, ok))) in policies.iter().zip(answers).enumerate() {
        if *disabled {
            continue;
        }
        let mut policy = None;
        for (kind, answer) in [(0, cur), (1, base), (2, ok)] {
            match answer {
                Answer::NoData => {
                    policy = Some(*on_no_data);
                    break;
                }
                Answer::Error(_) => {
                    policy = Some(*on_failure);
                    break;
                }
                Answer::Value(v) if kind == 2 && *v != 1.0 => policy = Some(*on_failure),
                Answer::Value(_) => {}
            }
        }
        if policy == Some(Policy::Pause) {
            return Some(i);
        }
    }
    None
}

fn any_policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Pause), Just(Policy::Warn), Just(Policy::Disabled)]
}

fn any_answer() -> impl Strategy<Value = Answer> {
    prop_oneof![
        (0u8..3).prop_map(|v| Answer::Value(f64::from(v) * 0.5)),
        Just(Answer::NoData),
        Just(Answer::Error("timeout".into())),
    ]
}

proptest! {
    #[test]
    fn the_gate_pauses_exactly_on_the_first_pausing_check(
        checks in prop::collection::vec(((any_policy(), any_policy(), any::<bool>()), (any_answer(), any_answer(), any_answer())), 1..5)
    ) {
        let mut object = example();
        let template = object["spec"]["checks"][0].clone();
        let specs: Vec<Value> = checks.iter().enumerate().map(|(i, ((f, n, d), _))| {
            let mut c = template.clone();
            c["name"] = json!(format!("c{i}"));
            c["onFailure"] = json!(f.as_str());
            c["onNoData"] = json!(n.as_str());
            c["disabled"] = json!(d);
            c
        }).collect();
        object["spec"]["checks"] = json!(specs);
        let c = config::parse(&object).unwrap();
        let group = between_zones(t(-3600));
        let (verdict, records) = evaluate(&c, Targets::of(&group, "mimir"), times(t(0)), |q| {
            let i: usize = q.check[1..].parse().unwrap();
            let (cur, base, ok) = &checks[i].1;
            match q.kind { QueryKind::Current => cur.clone(), QueryKind::Baseline => base.clone(), QueryKind::Success => ok.clone() }
        });
        let policies: Vec<_> = checks.iter().map(|(p, _)| *p).collect();
        let answers: Vec<_> = checks.iter().map(|(_, a)| a.clone()).collect();
        let expected = oracle(&policies, &answers);
        match (&verdict, expected) {
            (GateVerdict::Pause { check, .. }, Some(i)) => prop_assert_eq!(check, &format!("c{i}")),
            (GateVerdict::Pass { .. }, None) => {}
            _ => prop_assert!(false, "verdict {:?}, expected pause at {:?}", verdict, expected),
        }
        // Every check up to the deciding one is recorded, none after it.
        prop_assert_eq!(records.len(), expected.map_or(checks.len(), |i| i + 1));
    }

    #[test]
    fn a_sides_matchers_select_exactly_its_pods(
        pods in prop::collection::btree_set("[a-z0-9]([a-z0-9.-]{0,8}[a-z0-9])?", 0..6),
        other in "[a-z0-9]([a-z0-9.-]{0,8}[a-z0-9])?",
    ) {
        let pods: Vec<String> = pods.into_iter().collect();
        let targets = Targets { namespace: "ns".into(), candidate: pods.clone(), stable: vec![] };
        let matchers = targets.matchers(Side::Candidate);
        let quoted = matchers.strip_prefix(r#"namespace="ns",pod=~""#).and_then(|m| m.strip_suffix('"')).unwrap();
        // PromQL string unescaping (only `\\` and `\"` can appear), then Prometheus' anchoring.
        let regex = quoted.replace(r"\\", r"\").replace(r#"\""#, "\"");
        let regex = regex::Regex::new(&format!("^(?:{regex})$")).unwrap();
        for p in &pods {
            prop_assert!(regex.is_match(p), "{} not matched by {}", p, regex);
        }
        prop_assert_eq!(regex.is_match(&other), pods.contains(&other));
    }

    #[test]
    fn no_query_is_asked_while_the_updated_pods_soak(served in 0i64..300, now in 0i64..1000) {
        let group = between_zones(t(-600));
        let times = GateTimes { now: t(now), baseline: Some(t(-3600)), candidates_serving_since: Some(t(now - served)) };
        let mut asked = false;
        let (verdict, _) = evaluate(&config(), Targets::of(&group, "mimir"), times, |_| { asked = true; Answer::Value(1.0) });
        prop_assert!(!asked);
        prop_assert!(matches!(verdict, GateVerdict::Soaking { .. }), "{:?}", verdict);
    }
}
