//! The rollout controller honours ZoneAwarePodDisruptionBudgets (reference 5.5): each pod it deletes is first
//! judged as an eviction, through the same core flow and serialisation as the pod-eviction webhook, over the fake
//! API server.

mod support;

use jiff::{SignedDuration, Timestamp};
use rollout_core::zpdb::Budgets;
use rollout_core::{RolloutPlanner, keys};
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::rollout::reconciler::{Controller, DeletionBudgets, ReconcilerConfig};
use rollout_operator::zpdb::Zpdb;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::{Call, FakeCluster, Harness, three_zones};

const GROUP: &str = "ingester";

fn zone_budget(max: i64) -> Zpdb {
    let budget = json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "ingester-rollout", "namespace": "ns", "uid": "uid-budget", "generation": 1},
        "spec": {"maxUnavailable": max, "selector": {"matchLabels": {"rollout-group": GROUP}}}});
    let (budgets, invalid) = Budgets::from_objects([&budget]);
    assert!(invalid.is_empty(), "{invalid:?}");
    Zpdb::with_budgets(budgets)
}

/// One pass of a controller over `cluster`, honouring `zpdb` when given; the calls it made.
async fn pass(cluster: &FakeCluster, zpdb: Option<Zpdb>) -> Vec<Call> {
    pass_with_metrics(cluster, zpdb, Arc::new(Metrics::new())).await
}

async fn pass_with_metrics(cluster: &FakeCluster, zpdb: Option<Zpdb>, metrics: Arc<Metrics>) -> Vec<Call> {
    let mut ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone());
    if let Some(zpdb) = zpdb {
        ctrl = ctrl.with_budgets(DeletionBudgets::new(zpdb, "ns"));
    }
    let mut h = Harness::with_controller(cluster.clone(), ctrl, metrics);
    cluster.take_calls();
    h.reconcile().await
}

fn deletions(calls: &[Call]) -> Vec<String> {
    calls.iter().filter_map(|c| if let Call::DeletePod { name, .. } = c { Some(name.clone()) } else { None }).collect()
}

/// The pods the controller wrote an eviction intent on.
fn intents(calls: &[Call]) -> Vec<String> {
    calls
        .iter()
        .filter_map(|c| match c {
            Call::PatchPodAnnotations { name, changes, .. } if changes.keys().any(|k| keys::is_eviction_intent(k)) => {
                Some(name.clone())
            }
            _ => None,
        })
        .collect()
}

fn set_intent(cluster: &FakeCluster, pod: &str, until: Option<Timestamp>) {
    let mut p = cluster.pod(pod).expect("pod exists");
    let annotations = p.metadata.annotations.get_or_insert_default();
    match until {
        Some(until) => annotations.insert(keys::EVICTION_INTENT.into(), until.to_string()),
        None => annotations.remove(keys::EVICTION_INTENT),
    };
    cluster.put_pod(p);
}

#[tokio::test]
async fn an_eviction_in_flight_in_another_zone_holds_the_controllers_deletion() {
    let cluster = three_zones("1");
    // A drain was just allowed to evict ingester-zone-c-2: its intent is on the pod, the eviction not committed yet.
    set_intent(&cluster, "ingester-zone-c-2", Some(Timestamp::now() + SignedDuration::from_secs(60)));
    // Without budgets the controller would replace a pod of zone b now, making two zones unavailable at once.
    assert_eq!(deletions(&pass(&cluster, None).await), ["ingester-zone-b-0"]);

    let cluster = three_zones("1");
    set_intent(&cluster, "ingester-zone-c-2", Some(Timestamp::now() + SignedDuration::from_secs(60)));
    let calls = pass(&cluster, Some(zone_budget(1))).await;
    assert_eq!(deletions(&calls), Vec::<String>::new(), "held by the budget: {calls:?}");
    assert_eq!(intents(&calls), Vec::<String>::new(), "denied before writing an intent");
    // The eviction committed long ago / was given up: its intent is gone, and the rollout goes on, leaving its own
    // intent on the pod before deleting it (so a concurrent drain sees it).
    set_intent(&cluster, "ingester-zone-c-2", None);
    let calls = pass(&cluster, Some(zone_budget(1))).await;
    assert_eq!(deletions(&calls), ["ingester-zone-b-0"]);
    assert_eq!(intents(&calls), ["ingester-zone-b-0"]);
    let intent_at = calls.iter().position(|c| matches!(c, Call::PatchPodAnnotations { .. }));
    let delete_at = calls.iter().position(|c| matches!(c, Call::DeletePod { .. }));
    assert!(intent_at < delete_at, "the intent is written before the deletion: {calls:?}");
}

/// A rollout the budget holds is reported as waiting on the budget, not as progressing: the state metrics say
/// `held-by-budget`, as `plan` and `status` do, whether the pass's judgement or the live one holds it.
#[tokio::test]
async fn a_rollout_held_by_a_budget_is_reported_as_waiting_on_it() {
    let state = |metrics: &Metrics, state: &str| {
        let line = format!("rollout_operator_group_state{{rollout_group=\"{GROUP}\",state=\"{state}\"}} 1");
        metrics.encode().lines().any(|l| l == line)
    };
    let waiting_on = |metrics: &Metrics| {
        let prefix = format!("rollout_operator_group_waiting{{rollout_group=\"{GROUP}\",reason=\"");
        metrics
            .encode()
            .lines()
            .find_map(|l| l.strip_prefix(&prefix).map(|rest| rest.split('"').next().unwrap_or("").to_string()))
    };
    let cluster = three_zones("1");
    set_intent(&cluster, "ingester-zone-c-2", Some(Timestamp::now() + SignedDuration::from_secs(60)));
    let metrics = Arc::new(Metrics::new());
    let calls = pass_with_metrics(&cluster, Some(zone_budget(1)), metrics.clone()).await;
    assert_eq!(deletions(&calls), Vec::<String>::new());
    assert!(state(&metrics, "waiting"), "{}", metrics.encode());
    assert!(!state(&metrics, "progressing"), "{}", metrics.encode());
    assert_eq!(waiting_on(&metrics).as_deref(), Some("held-by-budget"), "{}", metrics.encode());
    // Once nothing holds it, the same controller reports the rollout progressing again.
    set_intent(&cluster, "ingester-zone-c-2", None);
    let calls = pass_with_metrics(&cluster, Some(zone_budget(1)), metrics.clone()).await;
    assert_eq!(deletions(&calls), ["ingester-zone-b-0"]);
    assert!(state(&metrics, "progressing"), "{}", metrics.encode());
}

#[tokio::test]
async fn a_budget_stricter_than_rollout_max_unavailable_binds_the_controller() {
    // rollout-max-unavailable 2 would replace two pods of zone b at once; the budget allows one.
    let cluster = three_zones("2");
    assert_eq!(deletions(&pass(&cluster, None).await), ["ingester-zone-b-0", "ingester-zone-b-1"]);
    let cluster = three_zones("2");
    assert_eq!(deletions(&pass(&cluster, Some(zone_budget(1))).await), ["ingester-zone-b-0"]);
}

#[tokio::test]
async fn under_a_zero_budget_the_rollout_goes_on_with_its_own_max_unavailable() {
    // maxUnavailable 0 switches drains off; rollouts proceed, within rollout-max-unavailable and one zone at a time.
    let cluster = three_zones("2");
    let calls = pass(&cluster, Some(zone_budget(0))).await;
    assert_eq!(deletions(&calls), ["ingester-zone-b-0", "ingester-zone-b-1"]);
    assert_eq!(intents(&calls), ["ingester-zone-b-0", "ingester-zone-b-1"]);
}

#[tokio::test]
async fn crash_looping_pods_are_replaced_without_spending_the_budget() {
    let cluster = three_zones("1");
    cluster.set_pod_ready("ingester-zone-b-1", false);
    cluster.set_pod_ready("ingester-zone-b-2", false);
    let calls = pass(&cluster, Some(zone_budget(1))).await;
    // Both unavailable pods are replaced (the planner's free replacement), without a judgement: nothing that serves
    // is taken away. The budget would have refused either as an eviction (the other is not ready). Each gets its
    // intent first all the same: a pod that turns Ready before its deletion commits must still count as going for
    // a drain deciding meanwhile (found by the model).
    assert_eq!(deletions(&calls), ["ingester-zone-b-1", "ingester-zone-b-2"]);
    assert_eq!(intents(&calls), ["ingester-zone-b-1", "ingester-zone-b-2"]);
}

#[tokio::test]
async fn pods_no_budget_selects_are_deleted_as_before() {
    let cluster = three_zones("1");
    let mut p = cluster.pod("ingester-zone-b-0").unwrap();
    p.metadata.labels = Some(BTreeMap::from([("name".to_string(), "ingester-zone-b".to_string())]));
    cluster.put_pod(p);
    let calls = pass(&cluster, Some(zone_budget(1))).await;
    assert_eq!(deletions(&calls), ["ingester-zone-b-0"]);
    assert_eq!(intents(&calls), Vec::<String>::new());
}

#[tokio::test]
async fn a_deployment_that_may_not_get_pods_rolls_on_without_budgets() {
    let cluster = three_zones("1");
    cluster.fail_reads(Some(rollout_operator::cluster::ApiError::Forbidden(
        "pods \"ingester-zone-b-0\" is forbidden".into(),
    )));
    let calls = pass(&cluster, Some(zone_budget(1))).await;
    assert_eq!(deletions(&calls), ["ingester-zone-b-0"], "{calls:?}");
    assert_eq!(intents(&calls), Vec::<String>::new());
}
