//! Leader election around the reconcile loop: a replica whose term has ended sends no write, the same pass in a
//! term does; and one controller per term over the in-memory Lease store.

mod support;

use rollout_core::RolloutPlanner;
use rollout_core::election::ElectionConfig;
use rollout_operator::election::{Election, LeaderGate, MonotonicClock};
use rollout_operator::ops::metrics::{LeaderMetrics, Metrics};
use rollout_operator::rollout::reconciler::{Controller, ReconcilerConfig};
use std::sync::Arc;
use support::{Call, FakeCluster, WatchFeed, pod, sts};

const OLD: &str = "rev-old";
const NEW: &str = "rev-new";
const GROUP: &str = "ingester";

/// Zone a on NEW; zone b on OLD with two pods at once allowed: a pass deletes two pods of zone b.
fn cluster() -> FakeCluster {
    let mut pods = Vec::new();
    for (zone, rev) in [("a", NEW), ("b", OLD)] {
        for i in 0..3 {
            pods.push(pod(&format!("ingester-zone-{zone}"), i, rev, true, 0));
        }
    }
    let mut b = sts(GROUP, "ingester-zone-b", 3, OLD, NEW);
    b.metadata.annotations.get_or_insert_default().insert("rollout-max-unavailable".into(), "2".into());
    FakeCluster::new(vec![sts(GROUP, "ingester-zone-a", 3, NEW, NEW), b], pods)
}

/// An election of `identity` over the cluster's Lease, running on its own task.
fn elect(cluster: &FakeCluster, identity: &str) -> LeaderGate {
    let clock = MonotonicClock::start("2026-03-01T12:00:00Z".parse().unwrap());
    let (election, gate) = Election::new(
        cluster.clone(),
        "rollout-operator-leader",
        ElectionConfig::new(identity),
        clock,
        LeaderMetrics::default(),
    );
    tokio::spawn(election.run(std::future::pending::<()>()));
    gate
}

fn controller(cluster: &FakeCluster, gate: LeaderGate) -> (Controller<FakeCluster>, WatchFeed) {
    let metrics = Arc::new(Metrics::new());
    let mut ctrl =
        Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics).with_leadership(gate);
    let mut feed = WatchFeed::new(cluster);
    feed.pump(ctrl.cache_mut());
    (ctrl, feed)
}

fn deletions(calls: &[Call]) -> usize {
    calls.iter().filter(|c| matches!(c, Call::DeletePod { .. })).count()
}

/// A controller of replica `pod-a` in its first term; with `ended`, the replica then lost the API and its term ended
/// by the clock before the controller's next pass (the controller itself not told yet).
async fn in_term(cluster: &FakeCluster, ended: bool) -> (Controller<FakeCluster>, WatchFeed) {
    let mut gate = elect(cluster, "pod-a");
    assert_eq!(gate.next_term().await, Some(1));
    let running = controller(cluster, gate.clone());
    if ended {
        cluster.leases.set_unreachable(true);
        gate.term_ended(1).await;
    }
    running
}

#[tokio::test(start_paused = true)]
async fn the_leader_replaces_pods_and_a_replica_whose_term_ended_sends_no_write() {
    // In its term, the pass deletes (the check below can fail).
    let leading = cluster();
    let (mut ctrl, _feed) = in_term(&leading, false).await;
    ctrl.reconcile_group(GROUP).await;
    assert_eq!(deletions(&leading.take_calls()), 2);

    // The same cluster state, but the replica lost the API before the pass: its term ends by the clock, and the
    // pass (run by a controller that did not notice yet) writes nothing.
    let cut_off = cluster();
    let (mut ctrl, _feed) = in_term(&cut_off, true).await;
    ctrl.reconcile_group(GROUP).await;
    let calls = cut_off.take_calls();
    assert_eq!(deletions(&calls), 0, "{calls:?}");
    assert!(ctrl.pending_expectations(GROUP).is_empty(), "nothing written, nothing expected");
    assert!(ctrl.is_queued(GROUP), "retried (by the next term's controller, since this one is stopped)");
}

#[tokio::test(start_paused = true)]
async fn a_follower_never_writes() {
    let cluster = cluster();
    let leader = elect(&cluster, "pod-a");
    let mut first = leader.clone();
    assert_eq!(first.next_term().await, Some(1));
    let follower = elect(&cluster, "pod-b");
    // Let the follower read the Lease a few times.
    tokio::time::sleep(std::time::Duration::from_secs(7)).await;
    assert!(!follower.may_write());
    let (mut ctrl, _feed) = controller(&cluster, follower);
    ctrl.reconcile_group(GROUP).await;
    assert_eq!(deletions(&cluster.take_calls()), 0);
}

#[tokio::test(start_paused = true)]
async fn the_status_write_is_asked_for_after_the_live_read_and_not_sent_once_the_term_ended() {
    let updated = || {
        FakeCluster::new(
            vec![sts(GROUP, "ingester-zone-a", 1, OLD, NEW)],
            vec![pod("ingester-zone-a", 0, NEW, true, 0)],
        )
    };
    let status_writes = |calls: &[Call]| calls.iter().filter(|c| matches!(c, Call::UpdateStatus { .. })).count();
    // In its term: the revision is advanced.
    let leading = updated();
    let (mut ctrl, _feed) = in_term(&leading, false).await;
    ctrl.reconcile_group(GROUP).await;
    assert_eq!(status_writes(&leading.take_calls()), 1);
    // Term over: not sent.
    let cut_off = updated();
    let (mut ctrl, _feed) = in_term(&cut_off, true).await;
    ctrl.reconcile_group(GROUP).await;
    let calls = cut_off.take_calls();
    assert_eq!(status_writes(&calls), 0, "{calls:?}");
    let status = cut_off.statefulset("ingester-zone-a").and_then(|s| s.status).and_then(|s| s.current_revision);
    assert_eq!(status.as_deref(), Some(OLD));
}
