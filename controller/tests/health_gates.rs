//! The controller's health gates over the in-memory API server, with a stand-in Prometheus behind the transport
//! port: the first pass records when the rollout started (`grafana.com/rollout-health-check-started-at`) and starts
//! nothing while the gate is evaluated off the pass; a bad zone a keeps zone b from starting, pass after pass, with
//! the group waiting on `held-by-health-check`; once the checks pass, zone b starts.

mod support;

use rollout_core::RolloutPlanner;
use rollout_core::keys;
use rollout_operator::health_check::gates::HealthGates;
use rollout_operator::health_check::offline::health_checks;
use rollout_operator::health_check::prometheus::{HttpRequest, HttpResponse, Transport, TransportError};
use rollout_operator::ops::events::EventRecorder;
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::rollout::reconciler::{Controller, ReconcilerConfig};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Call, FakeCluster, WatchFeed, pod, sts};

/// Answers the instant-query API: the updated pods' error rate is `current`, the others' 0.02, and the success
/// query is judged as PromQL would (`<current> <= bool 2 * <baseline> + 0.01`).
#[derive(Clone, Default)]
struct StandIn {
    current: Arc<Mutex<f64>>,
}

fn form_value(form: &str, key: &str) -> String {
    let raw = form.split('&').find_map(|p| p.strip_prefix(&format!("{key}="))).unwrap_or_default();
    let bytes = raw.replace('+', " ").into_bytes();
    let (mut out, mut i) = (Vec::new(), 0);
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            out.push(u8::from_str_radix(std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap(), 16).unwrap());
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

impl Transport for StandIn {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let query = form_value(request.form.as_deref().unwrap_or_default(), "query");
        let value = if !query.contains("errors") {
            let current: f64 = query.split_whitespace().next().unwrap().parse().unwrap();
            if current <= 0.05 { 1.0 } else { 0.0 }
        } else if query.contains("ingester-zone-a-0") {
            *self.current.lock().unwrap()
        } else {
            0.02
        };
        let body = json!({"status": "success", "data": {"resultType": "scalar", "result": [0, value.to_string()]}});
        Ok(HttpResponse { status: 200, body: body.to_string().into_bytes() })
    }
}

/// Three zones of 3 pods (`rollout-max-unavailable: 2`), zone a on the new revision, b and c not started, all gated
/// by `ingester-health`.
fn gated_cluster() -> FakeCluster {
    let (old, new) = ("rev-old", "rev-new");
    let mut pods = Vec::new();
    let mut statefulsets = Vec::new();
    for (zone, rev) in [("a", new), ("b", old), ("c", old)] {
        let name = format!("ingester-zone-{zone}");
        for i in 0..3 {
            let mut p = pod(&name, i, rev, true, 0);
            p.metadata.labels.get_or_insert_default().insert("rollout-group".into(), "ingester".into());
            pods.push(p);
        }
        let mut s = sts("ingester", &name, 3, rev, new);
        let annotations = s.metadata.annotations.get_or_insert_default();
        annotations.insert("rollout-max-unavailable".into(), "2".into());
        annotations.insert(keys::ROLLOUT_HEALTH_CHECK.into(), "ingester-health".into());
        statefulsets.push(s);
    }
    FakeCluster::new(statefulsets, pods)
}

fn health_check() -> serde_json::Value {
    json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "RolloutHealthCheck",
           "metadata": {"name": "ingester-health", "namespace": "ns", "generation": 1},
           "spec": {"selector": {"matchLabels": {"rollout-group": "ingester"}},
                    "prometheusURL": "http://prometheus:9090",
                    "checks": [{"name": "request-error-rate", "currentRange": "1m",
                                "query": "sum(rate(errors{${targetMatchers}}[${range}]))",
                                "successQuery": "${current} <= bool 2 * ${baseline} + 0.01"}]}})
}

/// The group waits on `held-by-health-check`, as its state metric says.
fn assert_held(exposition: &str) {
    let held = r#"rollout_operator_group_waiting{rollout_group="ingester",reason="held-by-health-check"} 1"#;
    assert!(exposition.contains(held), "{exposition}");
}

fn deletions(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::DeletePod { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_bad_zone_a_keeps_zone_b_from_starting_until_the_checks_pass() {
    let cluster = gated_cluster();
    let metrics = Arc::new(Metrics::new());
    let prometheus = StandIn::default();
    *prometheus.current.lock().unwrap() = 0.4;
    let (events, mut queue) = EventRecorder::new(64, metrics.clone());
    let gates = HealthGates::new(prometheus.clone(), "ns")
        .with_cadence(Duration::ZERO)
        .with_metrics(metrics.health_checks.clone())
        .with_events(events);
    let rhc = health_check();
    gates.set_checks(Some(health_checks([&rhc])));
    let mut ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone())
        .with_health_gates(gates);
    let mut feed = WatchFeed::new(&cluster);
    let mut pass = async || {
        feed.pump(ctrl.cache_mut());
        ctrl.reconcile_group("ingester").await;
        // The evaluation runs in a task of its own: give it its turn.
        tokio::time::sleep(Duration::from_millis(5)).await;
        cluster.take_calls()
    };

    let first = pass().await;
    let started: Vec<_> = first
        .iter()
        .filter_map(|c| match c {
            Call::MergeStatefulSetAnnotations { name, changes } => {
                let value = changes[keys::ROLLOUT_HEALTH_CHECK_STARTED_AT].clone().unwrap();
                Some((name.clone(), value.split_once('=').unwrap().0.to_string()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        started,
        [
            ("ingester-zone-b".to_string(), "rev-new".to_string()),
            ("ingester-zone-c".to_string(), "rev-new".to_string())
        ],
        "{first:?}"
    );
    assert!(deletions(&first).is_empty(), "{first:?}");

    // A bad zone a: never a deletion in zone b, however many passes.
    for _ in 0..20 {
        let calls = pass().await;
        assert!(deletions(&calls).is_empty(), "{calls:?}");
    }
    let exposition = metrics.encode();
    assert_held(&exposition);
    assert!(
        exposition.contains(r#"rollout_operator_health_check_blocked{rollout_group="ingester"} 1"#),
        "{exposition}"
    );
    let failed = r#"rollout_operator_health_check_evaluations_total{rollout_group="ingester",check="request-error-rate",result="fail"}"#;
    assert!(exposition.contains(failed), "{exposition}");
    let current = r#"rollout_operator_health_check_query_duration_seconds_count{rollout_group="ingester",check="request-error-rate",query_type="current"}"#;
    assert!(exposition.contains(current), "{exposition}");

    // Told once, on the StatefulSet that does not start, naming the check and its values.
    let told: Vec<_> = std::iter::from_fn(|| queue.try_recv()).filter(|e| e.reason.contains("HealthCheck")).collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!((told[0].reason, told[0].regarding.name.as_str()), ("RolloutBlockedByHealthCheck", "ingester-zone-b"));
    assert!(told[0].note.contains(r#"check "request-error-rate" failed (current=0.4 baseline=0.02)"#), "{:?}", told[0]);

    // Zone a recovers: zone b starts.
    *prometheus.current.lock().unwrap() = 0.01;
    let mut deleted = Vec::new();
    for _ in 0..50 {
        deleted = deletions(&pass().await);
        if !deleted.is_empty() {
            break;
        }
    }
    assert_eq!(deleted, ["ingester-zone-b-0", "ingester-zone-b-1"]);
    let exposition = metrics.encode();
    assert!(
        exposition.contains(r#"rollout_operator_health_check_blocked{rollout_group="ingester"} 0"#),
        "{exposition}"
    );
}

#[tokio::test]
async fn a_health_check_that_does_not_select_the_zone_lets_it_roll_and_says_so() {
    let cluster = gated_cluster();
    let metrics = Arc::new(Metrics::new());
    let (events, mut queue) = EventRecorder::new(64, metrics.clone());
    let gates =
        HealthGates::new(StandIn::default(), "ns").with_metrics(metrics.health_checks.clone()).with_events(events);
    let mut rhc = health_check();
    rhc["spec"]["selector"]["matchLabels"] = json!({"rollout-group": "distributor"});
    gates.set_checks(Some(health_checks([&rhc])));
    let mut ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone())
        .with_health_gates(gates);
    let mut feed = WatchFeed::new(&cluster);
    feed.pump(ctrl.cache_mut());
    ctrl.reconcile_group("ingester").await;
    assert_eq!(deletions(&cluster.take_calls()), ["ingester-zone-b-0", "ingester-zone-b-1"]);
    let exposition = metrics.encode();
    assert!(
        exposition.contains(r#"rollout_operator_health_check_misconfigured{rollout_group="ingester"} 1"#),
        "{exposition}"
    );
    assert!(
        exposition.contains(r#"rollout_operator_health_check_misconfigurations_total{rollout_group="ingester"} 1"#)
    );
    let told: Vec<_> = std::iter::from_fn(|| queue.try_recv()).filter(|e| e.reason.contains("HealthCheck")).collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert_eq!(told[0].reason, "RolloutHealthCheckMisconfigured");
    assert!(told[0].note.contains("does not select StatefulSet ingester-zone-b"), "{:?}", told[0]);

    // The group goes away (its StatefulSets moved to another group): its gauges go with it.
    for zone in ["a", "b", "c"] {
        let mut s = cluster.statefulset(&format!("ingester-zone-{zone}")).unwrap();
        s.metadata.labels.get_or_insert_default().insert("rollout-group".into(), "distributor".into());
        cluster.put_statefulset(s);
    }
    feed.pump(ctrl.cache_mut());
    ctrl.reconcile_group("ingester").await;
    let exposition = metrics.encode();
    assert!(!exposition.contains(r#"health_check_misconfigured{rollout_group="ingester"}"#), "{exposition}");
    assert!(!exposition.contains(r#"health_check_blocked{rollout_group="ingester"}"#), "{exposition}");
}

/// A process that has just started has not listed its RolloutHealthChecks yet: it cannot tell a gate it has not read
/// from none, so zone b waits as not evaluated (seed 24 of the simulation's bad-release world started it). Once the
/// feed says the resources cannot be listed, the gates are off and zone b rolls as without one.
#[tokio::test]
async fn a_gated_zone_waits_until_the_health_checks_are_listed_and_rolls_once_they_are_refused() {
    let cluster = gated_cluster();
    let metrics = Arc::new(Metrics::new());
    let gates = HealthGates::new(StandIn::default(), "ns").with_metrics(metrics.health_checks.clone());
    let mut ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone())
        .with_health_gates(gates.clone());
    let mut feed = WatchFeed::new(&cluster);
    for _ in 0..3 {
        feed.pump(ctrl.cache_mut());
        ctrl.reconcile_group("ingester").await;
        let calls = cluster.take_calls();
        assert!(deletions(&calls).is_empty(), "{calls:?}");
    }
    let exposition = metrics.encode();
    assert_held(&exposition);

    // Refused (RBAC): the feature is off, zone b starts.
    gates.set_checks(None);
    feed.pump(ctrl.cache_mut());
    ctrl.reconcile_group("ingester").await;
    assert_eq!(deletions(&cluster.take_calls()), ["ingester-zone-b-0", "ingester-zone-b-1"]);
}

/// A controller over a gated cluster with gates on a stand-in Prometheus (evaluated at every pass).
struct Gated {
    cluster: FakeCluster,
    prometheus: StandIn,
    metrics: Arc<Metrics>,
    ctrl: Controller<FakeCluster>,
    feed: WatchFeed,
}

impl Gated {
    /// Over `cluster`, with the updated pods' error rate `current`.
    fn new(cluster: FakeCluster, current: f64) -> Self {
        let metrics = Arc::new(Metrics::new());
        let prometheus = StandIn::default();
        *prometheus.current.lock().unwrap() = current;
        let gates = HealthGates::new(prometheus.clone(), "ns")
            .with_cadence(Duration::ZERO)
            .with_metrics(metrics.health_checks.clone());
        gates.set_checks(Some(health_checks([&health_check()])));
        let ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone())
            .with_health_gates(gates);
        let feed = WatchFeed::new(&cluster);
        Gated { cluster, prometheus, metrics, ctrl, feed }
    }

    /// One pass (and the evaluation's turn): the calls made.
    async fn pass(&mut self) -> Vec<Call> {
        self.feed.pump(self.ctrl.cache_mut());
        self.ctrl.reconcile_group("ingester").await;
        tokio::time::sleep(Duration::from_millis(5)).await;
        self.cluster.take_calls()
    }

    /// Passes until one deletes pods (at most 50): the calls of each pass, the last one's deletions last.
    async fn until_deletions(&mut self) -> Vec<Vec<Call>> {
        let mut passes = Vec::new();
        for _ in 0..50 {
            let calls = self.pass().await;
            let deleted = !deletions(&calls).is_empty();
            passes.push(calls);
            if deleted {
                break;
            }
        }
        passes
    }

    fn set_current(&self, current: f64) {
        *self.prometheus.current.lock().unwrap() = current;
    }
}

/// The deletions of the last pass.
fn last_deletions(passes: &[Vec<Call>]) -> Vec<String> {
    passes.last().map(|calls| deletions(calls)).unwrap_or_default()
}

/// Zone b's first pod evicted and recreated on the new revision while the release is bad: the controller does not
/// finish zone b (nor start c) until the checks pass.
#[tokio::test]
async fn a_zone_started_by_someone_else_is_not_finished_until_the_checks_pass() {
    let cluster = gated_cluster();
    let mut evicted = pod("ingester-zone-b", 0, "rev-new", true, 1);
    evicted.metadata.labels.get_or_insert_default().insert("rollout-group".into(), "ingester".into());
    cluster.put_pod(evicted);
    let mut gated = Gated::new(cluster, 0.4);
    for _ in 0..20 {
        let calls = gated.pass().await;
        assert!(deletions(&calls).is_empty(), "{calls:?}");
    }
    assert_held(&gated.metrics.encode());

    gated.set_current(0.01);
    assert_eq!(last_deletions(&gated.until_deletions().await), ["ingester-zone-b-1", "ingester-zone-b-2"]);
}

/// Zone b started after a passing evaluation rolls on as its candidates change, whatever the checks say meanwhile
/// (its clearance lasts for the revisions): readiness alone governs it.
#[tokio::test]
async fn a_zone_the_gate_let_start_rolls_on_without_another_evaluation() {
    let cluster = gated_cluster();
    for name in ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"] {
        let mut s = cluster.statefulset(name).unwrap();
        s.metadata.annotations.get_or_insert_default().insert("rollout-max-unavailable".into(), "1".into());
        cluster.put_statefulset(s);
    }
    let mut gated = Gated::new(cluster.clone(), 0.01);
    assert_eq!(last_deletions(&gated.until_deletions().await), ["ingester-zone-b-0"]);

    // The checks would now fail, and the candidates changed (no evaluation for them yet): zone b goes on.
    gated.set_current(0.4);
    assert_eq!(cluster.recreate_missing_pods(), ["ingester-zone-b-0"]);
    let mut b0 = cluster.pod("ingester-zone-b-0").unwrap();
    b0.metadata.labels.get_or_insert_default().insert("rollout-group".into(), "ingester".into());
    cluster.put_pod(b0);
    cluster.set_pod_ready("ingester-zone-b-0", true);
    assert_eq!(deletions(&gated.pass().await), ["ingester-zone-b-1"]);
}

/// The operator may not patch StatefulSets: the rollout's start cannot be recorded. The refusal is said once (the
/// feature's series), the writes stop for a while, and the gates take the time the process first saw the rollout as
/// the baseline time: a good zone a lets zone b start.
#[tokio::test]
async fn without_patch_on_statefulsets_the_baseline_is_when_the_rollout_was_first_seen() {
    let cluster = gated_cluster();
    cluster.fail_statefulset_annotation_patches(Some(rollout_operator::cluster::ApiError::Forbidden(
        "statefulsets is forbidden: cannot patch".into(),
    )));
    let mut gated = Gated::new(cluster, 0.01);
    let passes = gated.until_deletions().await;
    assert_eq!(last_deletions(&passes), ["ingester-zone-b-0", "ingester-zone-b-1"]);
    let patches = passes.iter().flatten().filter(|c| matches!(c, Call::MergeStatefulSetAnnotations { .. })).count();
    assert_eq!(patches, 1, "refused once, then not tried again for a while");
    let disabled = r#"rollout_operator_feature_disabled{feature="health-check-started-at",missing_permission="patch statefulsets"} 1"#;
    assert!(gated.metrics.encode().contains(disabled), "{}", gated.metrics.encode());
}
