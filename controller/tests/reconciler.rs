//! The reconcile loop against an in-memory API server: preconditions, expectations, failures and a whole rollout.

mod support;

use futures::FutureExt;
use rollout_core::RolloutPlanner;
use rollout_operator::cluster::{ApiError, WatchEvent};
use rollout_operator::ops::health::ReadyFlag;
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::rollout::reconciler::{Controller, ReconcilerConfig};
use std::sync::Arc;
use std::time::Duration;
use support::{Call, FakeCluster, Harness, WatchFeed, pod, sts, three_zones};

const OLD: &str = "rev-old";
const NEW: &str = "rev-new";
const GROUP: &str = "ingester";

fn delete(name: &str, uid: &str) -> Call {
    Call::DeletePod { name: name.into(), uid: Some(uid.into()) }
}

#[tokio::test]
async fn deletes_outdated_pods_with_a_uid_precondition_and_expects_to_see_them_go() {
    let mut h = Harness::new(three_zones("2"));
    let calls = h.reconcile().await;
    assert_eq!(
        calls,
        vec![
            delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0"),
            delete("ingester-zone-b-1", "uid-ingester-zone-b-1-0")
        ]
    );
    assert_eq!(h.ctrl.pending_expectations(GROUP).len(), 2);
    // Once the cache has seen the deletions, the expectations are dropped on the next pass.
    h.reconcile().await;
    assert!(h.ctrl.pending_expectations(GROUP).is_empty());
}

#[tokio::test]
async fn a_lagging_cache_gets_no_writes_until_our_own_writes_are_observed() {
    let mut h = Harness::new(three_zones("1"));
    h.cluster.hold_events(true);
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);
    // The pod comes back at the new revision and becomes ready, but the cache sees none of it yet.
    h.cluster.recreate_missing_pods();
    h.cluster.set_pod_ready("ingester-zone-b-0", true);
    // The stale cache still shows b-0 old and ready: planning on it would delete b-0 again. It must wait.
    assert_eq!(h.reconcile().await, vec![]);
    h.cluster.hold_events(false);
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-1", "uid-ingester-zone-b-1-0")]);
}

/// Found by the simulation's review: a deletion that committed but whose reply was lost left no expectation, so a
/// lagging cache could be planned on as if the deletion had not happened.
#[tokio::test]
async fn a_write_with_an_unknown_outcome_still_holds_the_group_until_observed() {
    let mut h = Harness::new(three_zones("1"));
    h.cluster.hold_events(true);
    h.cluster.lose_next_reply();
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);
    assert_eq!(h.ctrl.pending_expectations(GROUP).len(), 1, "an unknown outcome is expected until seen");
    // The cache still shows b-0 ready on the old revision: no write until it shows the deletion.
    assert_eq!(h.reconcile().await, vec![]);
    h.cluster.hold_events(false);
    h.cluster.recreate_missing_pods();
    h.cluster.set_pod_ready("ingester-zone-b-0", true);
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-1", "uid-ingester-zone-b-1-0")]);
}

/// Sim seed 3500 in miniature: an expectation that expires while the cache still has not shown the write is kept
/// when the live pod shows the deletion happened (planning on that cache would delete in another zone), and given
/// up only when the live pod shows it did not.
#[tokio::test]
async fn an_expired_expectation_is_kept_while_the_live_object_shows_the_write_happened() {
    let cluster = three_zones("1");
    let metrics = Arc::new(Metrics::new());
    let config = ReconcilerConfig {
        unknown_outcome_ttl: Duration::from_millis(1),
        expectation_ttl: Duration::from_millis(1),
        ..ReconcilerConfig::default()
    };
    let mut h = Harness::new(cluster.clone());
    h.ctrl = Controller::new(cluster.clone(), RolloutPlanner, config, metrics);
    h.feed = WatchFeed::new(&cluster);
    h.pump();
    h.cluster.hold_events(true);
    h.cluster.lose_next_reply();
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);
    tokio::time::sleep(Duration::from_millis(5)).await;
    // Expired, unobserved, but b-0 is terminating in the API: no write (the stale cache shows b-0 Ready).
    assert_eq!(h.reconcile().await, vec![]);
    assert_eq!(h.ctrl.pending_expectations(GROUP).len(), 1, "kept");
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(h.reconcile().await, vec![], "still kept while the cache lags");
    h.cluster.hold_events(false);
    assert_eq!(h.reconcile().await, vec![], "observed: b-0 is terminating, the zone waits");
    assert!(h.ctrl.pending_expectations(GROUP).is_empty());

    // A deletion that did not happen (refused, the reply lost on the way back) is given up on once expired.
    let cluster = three_zones("1");
    let config = ReconcilerConfig { unknown_outcome_ttl: Duration::from_millis(1), ..ReconcilerConfig::default() };
    let mut h = Harness::new(cluster.clone());
    h.ctrl = Controller::new(cluster.clone(), RolloutPlanner, config, Arc::new(Metrics::new()));
    h.feed = WatchFeed::new(&cluster);
    h.pump();
    h.cluster.fail_next(ApiError::Unavailable("request timed out".into()));
    let attempted = h.reconcile().await;
    assert_eq!(attempted, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")], "tried, timed out");
    assert_eq!(h.ctrl.pending_expectations(GROUP).len(), 1, "an unknown outcome is expected");
    tokio::time::sleep(Duration::from_millis(5)).await;
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);
}

#[tokio::test]
async fn a_failed_precondition_fails_the_reconcile_and_is_counted() {
    let mut h = Harness::new(three_zones("1"));
    h.cluster.fail_next(ApiError::Conflict("precondition failed: uid".into()));
    let calls = h.reconcile().await;
    assert_eq!(calls.len(), 1);
    assert!(h.ctrl.pending_expectations(GROUP).is_empty(), "a failed write is not expected to be observed");
    assert!(h.ctrl.is_queued(GROUP), "a failed reconcile is retried");
    let text = h.metrics.encode();
    assert!(text.contains("rollout_operator_group_reconciles_failed_total{rollout_group=\"ingester\"} 1"), "{text}");
}

#[tokio::test]
async fn a_pod_that_is_already_gone_is_not_an_error() {
    let mut h = Harness::new(three_zones("1"));
    h.cluster.fail_next(ApiError::NotFound("pods ingester-zone-b-0".into()));
    h.reconcile().await;
    let text = h.metrics.encode();
    assert!(text.contains("rollout_operator_group_reconciles_failed_total{rollout_group=\"ingester\"} 0"), "{text}");
}

#[tokio::test]
async fn current_revision_is_written_conditionally_on_the_planned_resource_version() {
    let cluster = FakeCluster::new(
        vec![sts(GROUP, "ingester-zone-a", 1, OLD, NEW)],
        vec![pod("ingester-zone-a", 0, NEW, true, 0)],
    );
    let rv = cluster.statefulset("ingester-zone-a").unwrap().metadata.resource_version.unwrap();
    let mut h = Harness::new(cluster);
    let calls = h.reconcile().await;
    assert_eq!(
        calls,
        vec![Call::UpdateStatus {
            name: "ingester-zone-a".into(),
            resource_version: Some(rv),
            current_revision: Some(NEW.into()),
        }]
    );
    let status = h.cluster.statefulset("ingester-zone-a").unwrap().status.unwrap();
    assert_eq!(status.current_revision.as_deref(), Some(NEW));
    // Observed and done: nothing more to write.
    assert_eq!(h.reconcile().await, vec![]);
}

/// The status write sends back the object the watch delivered (the plan's own resourceVersion), so a step that ends
/// a zone costs one round trip, not a read and a write.
#[tokio::test]
async fn current_revision_is_written_from_the_watched_object_without_a_read() {
    let cluster = FakeCluster::new(
        vec![sts(GROUP, "ingester-zone-a", 1, OLD, NEW)],
        vec![pod("ingester-zone-a", 0, NEW, true, 0)],
    );
    let mut h = Harness::new(cluster);
    h.cluster.fail_reads(Some(ApiError::Unavailable("reads are down".into())));
    h.reconcile().await;
    let status = h.cluster.statefulset("ingester-zone-a").unwrap().status.unwrap();
    assert_eq!(status.current_revision.as_deref(), Some(NEW), "written with every read failing");
}

/// Where the StatefulSet moved on after the watch delivered it, the write from the watched object is refused on its
/// resourceVersion: nothing the controller has not seen is overwritten.
#[tokio::test]
async fn a_status_write_from_a_watched_object_the_server_moved_past_overwrites_nothing() {
    let cluster = FakeCluster::new(
        vec![sts(GROUP, "ingester-zone-a", 1, OLD, NEW)],
        vec![pod("ingester-zone-a", 0, NEW, true, 0)],
    );
    let mut h = Harness::new(cluster);
    let mut moved = h.cluster.statefulset("ingester-zone-a").unwrap();
    moved.status.as_mut().unwrap().ready_replicas = Some(0);
    h.cluster.put_statefulset(moved);
    // Not pumped: the cache still holds the object before the move.
    h.ctrl.reconcile_group(GROUP).await;
    let calls = h.cluster.take_calls();
    assert!(matches!(calls.as_slice(), [Call::UpdateStatus { .. }]), "{calls:?}");
    let status = h.cluster.statefulset("ingester-zone-a").unwrap().status.unwrap();
    assert_eq!(status.current_revision.as_deref(), Some(OLD), "refused on its resourceVersion");
    assert_eq!(status.ready_replicas, Some(0), "the move is kept");
}

#[tokio::test]
async fn metrics_of_a_vanished_group_are_removed() {
    let mut h = Harness::new(three_zones("1"));
    h.reconcile().await;
    assert!(h.metrics.encode().contains("rollout_group=\"ingester\""));
    for zone in ["a", "b", "c"] {
        let s = h.cluster.statefulset(&format!("ingester-zone-{zone}")).unwrap();
        h.ctrl.cache_mut().apply_statefulset_event(WatchEvent::Delete(s));
    }
    h.ctrl.reconcile_group(GROUP).await;
    assert!(!h.metrics.encode().contains("rollout_group=\"ingester\""));
}

/// The whole loop, on a paused clock: watches, queue, debounce, requeue. A "kubelet" recreates deleted pods at the
/// update revision and makes them ready a little later. The rollout must finish zone by zone.
#[tokio::test(start_paused = true)]
async fn a_three_zone_rollout_completes_one_zone_at_a_time() {
    let cluster = three_zones("2");
    let ready = ReadyFlag::new();
    let metrics = Arc::new(Metrics::new());
    let config = ReconcilerConfig { interval: Duration::from_secs(1), ..ReconcilerConfig::default() };
    let (stop_tx, stop_rx) = futures::channel::oneshot::channel::<()>();
    let controller = tokio::spawn(rollout_operator::rollout::reconciler::run(
        cluster.clone(),
        config,
        metrics.clone(),
        ready.clone(),
        stop_rx.map(|_| ()),
    ));
    let mut done = false;
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        // Kubelet: pods not ready become ready; missing pods come back (not ready) at the update revision.
        for p in cluster.pods() {
            let name = p.metadata.name.clone().unwrap();
            if p.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].status != "True" {
                cluster.set_pod_ready(&name, true);
            }
        }
        cluster.recreate_missing_pods();
        done =
            ["a", "b", "c"].iter().all(|z| {
                let s = cluster.statefulset(&format!("ingester-zone-{z}")).unwrap();
                s.status.unwrap().current_revision.as_deref() == Some(NEW)
            }) && cluster.pods().iter().all(|p| p.metadata.labels.as_ref().unwrap()["controller-revision-hash"] == NEW);
        if done {
            break;
        }
    }
    assert!(ready.is_ready());
    assert!(
        done,
        "rollout did not complete; pods: {:?}",
        cluster.pods().iter().map(|p| &p.metadata.name).collect::<Vec<_>>()
    );
    assert_eq!(cluster.cross_zone_violations(), Vec::<String>::new());
    let max = cluster.max_unavailable_after_delete();
    assert_eq!(max.get("ingester-zone-b"), Some(&2), "{max:?}");
    assert_eq!(max.get("ingester-zone-c"), Some(&2), "{max:?}");
    let _ = stop_tx.send(());
    controller.await.unwrap();
}

/// Marks every StatefulSet of the harness's group as served by the prepare-downscale webhook.
fn prepare_downscale_labelled(cluster: &FakeCluster) {
    for zone in ["a", "b", "c"] {
        let mut s = cluster.statefulset(&format!("ingester-zone-{zone}")).unwrap();
        s.metadata.labels.get_or_insert_default().insert("grafana.com/prepare-downscale".into(), "true".into());
        cluster.put_statefulset(s);
    }
}

/// No rollout step while a downscale is prepared, controller side: while the prepare-downscale webhook's marker for the
/// group is live in the downscale record, no pod of the group is replaced; once it has expired, the rollout goes on.
#[tokio::test]
async fn no_pod_is_replaced_while_a_downscale_of_the_group_is_being_prepared() {
    use k8s_openapi::api::core::v1::ConfigMap;
    use rollout_core::downscale::{DownscaleInProgress, render_in_progress};
    let cluster = three_zones("1");
    prepare_downscale_labelled(&cluster);
    let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(600);
    let marker = DownscaleInProgress { statefulset: "ingester-zone-c".into(), group: GROUP.into(), until };
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("rollout-operator-zone-tracker".into());
    cm.metadata.annotations = Some(
        [(
            rollout_core::keys::DOWNSCALES_IN_PROGRESS.to_string(),
            render_in_progress(std::slice::from_ref(&marker)).unwrap(),
        )]
        .into(),
    );
    cluster.put_config_map(cm.clone());
    let mut h = Harness::new(cluster);
    assert_eq!(h.reconcile().await, vec![], "deleted pods while a downscale was being prepared");

    // A marker of another group does not hold this one; an expired marker holds nothing.
    let other = DownscaleInProgress { group: "other".into(), ..marker.clone() };
    let expired = DownscaleInProgress { until: jiff::Timestamp::now() - jiff::SignedDuration::from_secs(1), ..marker };
    let mut cm = h.cluster.config_map("rollout-operator-zone-tracker").unwrap();
    cm.metadata
        .annotations
        .get_or_insert_default()
        .insert(rollout_core::keys::DOWNSCALES_IN_PROGRESS.to_string(), render_in_progress(&[other, expired]).unwrap());
    h.cluster.put_config_map(cm);
    let rv = h.cluster.config_map(RECORD).unwrap().metadata.resource_version;
    assert_eq!(h.reconcile().await, stepped(rv, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]));
}

/// A group served by the prepare-downscale webhook is not rolled on a downscale record it cannot read (it cannot
/// tell whether a downscale is being prepared); a group that is not is rolled as before.
#[tokio::test]
async fn an_unreadable_downscale_record_holds_only_groups_served_by_the_prepare_downscale_webhook() {
    let cluster = three_zones("1");
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let mut h = Harness::new(cluster.clone());
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);

    let cluster = three_zones("1");
    prepare_downscale_labelled(&cluster);
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let mut h = Harness::new(cluster.clone());
    assert_eq!(h.reconcile().await, vec![]);
    assert!(h.ctrl.is_queued(GROUP), "a failed pass is retried");
    cluster.fail_reads(None);
    let calls = h.reconcile().await;
    assert_eq!(calls[0], Call::CreateConfigMap { name: RECORD.into() }, "the step is claimed first: {calls:?}");
    assert_eq!(calls[1], delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0"));
    assert!(matches!(&calls[2], Call::ReplaceConfigMap { .. }) && calls.len() == 3, "then ended: {calls:?}");
}

const RECORD: &str = "rollout-operator-zone-tracker";

/// `-use-zone-tracker=true` on a deployment that grants no configmaps (the Helm charts): the feature is disabled
/// with a metric (and one log line) and the rollout goes on; the webhook, refused too, denies every downscale.
#[tokio::test]
async fn a_forbidden_zone_tracker_is_disabled_and_rollouts_go_on() {
    let cluster = three_zones("1");
    prepare_downscale_labelled(&cluster);
    cluster.fail_config_map_reads(Some(ApiError::Forbidden("configmaps is forbidden".into())));
    let mut h = Harness::new(cluster.clone());
    assert_eq!(h.reconcile().await, vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);
    assert!(
        h.metrics.encode().contains(
            "rollout_operator_feature_disabled{feature=\"zone-tracker\",missing_permission=\"configmaps get/update/create\"} 1"
        ),
        "{}",
        h.metrics.encode()
    );
}

/// Without the zone tracker (the default; the Helm charts grant no configmaps), a group served by the
/// prepare-downscale webhook is rolled without reading or writing any ConfigMap.
#[tokio::test]
async fn without_the_zone_tracker_no_configmap_is_touched() {
    let cluster = three_zones("1");
    prepare_downscale_labelled(&cluster);
    let metrics = Arc::new(Metrics::new());
    let scaling = rollout_operator::rollout::scaling::ScalingConfig {
        zone_tracker_config_map: None,
        ..rollout_operator::rollout::scaling::ScalingConfig::default()
    };
    let ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone())
        .with_scaling(rollout_operator::pods::client::NoPodClient, scaling);
    let mut feed = WatchFeed::new(&cluster);
    let mut ctrl = ctrl;
    feed.pump(ctrl.cache_mut());
    // A ConfigMap read would fail the pass (as a 403 would).
    cluster.fail_reads(Some(ApiError::Forbidden("configmaps is forbidden".into())));
    ctrl.reconcile_group(GROUP).await;
    assert_eq!(cluster.take_calls(), vec![delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")]);
}

/// The calls of a pass that claims its rollout step on the record at `rv`, makes `writes`, and ends the step.
fn stepped(rv: Option<String>, writes: Vec<Call>) -> Vec<Call> {
    let claimed = rv.as_ref().map(|v| (v.parse::<u64>().unwrap() + 1).to_string());
    let mut calls = vec![Call::ReplaceConfigMap { name: RECORD.into(), resource_version: rv }];
    calls.extend(writes);
    calls.push(Call::ReplaceConfigMap { name: RECORD.into(), resource_version: claimed });
    calls
}

/// Sim seeds 389, 772, 1573, 1607 in miniature (no rollout step while a downscale is prepared): the pass reads the
/// record, the webhook then commits a downscale's in-progress marker, and the pass, planned on the older record, would
/// delete a pod of the group. Its step's claim is conditional on the version it read: it fails, nothing is deleted, and
/// the next pass sees the marker and waits.
#[tokio::test]
async fn a_pass_planned_on_a_record_older_than_a_downscale_marker_deletes_nothing() {
    use rollout_core::downscale::{DownscaleInProgress, render_in_progress};
    let cluster = three_zones("1");
    prepare_downscale_labelled(&cluster);
    let mut h = Harness::new(cluster.clone());
    cluster.after_next_config_map_read(|c| {
        let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(600);
        let marker = DownscaleInProgress { statefulset: "ingester-zone-b".into(), group: GROUP.into(), until };
        let mut cm = k8s_openapi::api::core::v1::ConfigMap::default();
        cm.metadata.name = Some(RECORD.into());
        let value = render_in_progress(std::slice::from_ref(&marker)).unwrap();
        cm.metadata.annotations = Some([(rollout_core::keys::DOWNSCALES_IN_PROGRESS.to_string(), value)].into());
        c.put_config_map(cm);
    });
    let calls = h.reconcile().await;
    assert_eq!(calls, vec![Call::CreateConfigMap { name: RECORD.into() }], "only the refused step claim");
    assert!(h.ctrl.is_queued(GROUP), "planned again");
    assert_eq!(h.reconcile().await, vec![], "the next pass sees the marker");
}

/// A deletion is never sent when the rollout step's claim could expire while it is in flight (the
/// API server may take up to 60 s to answer): here the claim lives only 30 s, so nothing is deleted and the step is
/// ended; with the default 90 s the deletion goes out.
#[tokio::test]
async fn no_deletion_is_sent_when_the_step_claim_could_expire_in_flight() {
    let cluster = three_zones("1");
    prepare_downscale_labelled(&cluster);
    let mut h = Harness::new(cluster.clone());
    let short = ReconcilerConfig { claim_ttl: Duration::from_secs(30), ..ReconcilerConfig::default() };
    h.ctrl = Controller::new(cluster.clone(), RolloutPlanner, short, h.metrics.clone());
    h.feed = WatchFeed::new(&cluster);
    let calls = h.reconcile().await;
    assert!(calls.iter().all(|c| !matches!(c, Call::DeletePod { .. })), "{calls:?}");
    assert!(matches!(calls.first(), Some(Call::CreateConfigMap { .. })), "the step was claimed: {calls:?}");
    assert!(matches!(calls.last(), Some(Call::ReplaceConfigMap { .. })), "and ended: {calls:?}");

    let mut h = Harness::new(three_zones("1"));
    prepare_downscale_labelled(&h.cluster);
    let calls = h.reconcile().await;
    assert!(calls.contains(&delete("ingester-zone-b-0", "uid-ingester-zone-b-0-0")), "{calls:?}");
}
