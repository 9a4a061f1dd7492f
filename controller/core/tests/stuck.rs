//! Wait classes and stuck detection on hand-made groups: every class the planner reports, and four situations that
//! must be reported stuck (a crash-looping new revision, a quota that keeps pods from being created, a paused zone,
//! a leader that never becomes ready), each reported stuck after the deadline with the wait that held it, while a slow
//! but moving rollout and a scheduled downscale never are.

use jiff::{SignedDuration, Timestamp};
use rollout_core::downscale::DownscaleInProgress;
use rollout_core::fixture::{annotate, label, not_ready, pod, statefulset, terminating};
use rollout_core::progress::{ProgressClock, judge};
use rollout_core::view::{PodView, StatefulSetView};
use rollout_core::{
    DownscaleRecord, Expectation, GroupPlan, GroupSnapshot, GroupState, PassInput, PendingExpectation, RecordRead,
    Wait, WaitReason, ZoneTracker, keys, plan_pass,
};
use std::time::Duration;

const OLD: &str = "r0";
const NEW: &str = "r1";
const DEADLINE: Duration = Duration::from_secs(30 * 60);

fn t0() -> Timestamp {
    "2026-11-20T12:00:00Z".parse().unwrap()
}

fn at(minutes: i64) -> Timestamp {
    t0() + SignedDuration::from_mins(minutes)
}

/// A zone at `current` whose status says it is being updated to `update`.
fn zone(name: &str, replicas: u32, current: &str, update: &str) -> StatefulSetView {
    let mut s = statefulset("ingester", name, replicas, current);
    s.status.as_mut().unwrap().update_revision = update.to_string();
    s
}

fn ready_pods(sts: &StatefulSetView, revision: &str) -> Vec<PodView> {
    (0..sts.replicas).map(|i| pod(sts, i, revision)).collect()
}

fn group(stss: Vec<StatefulSetView>, pods: Vec<PodView>) -> GroupSnapshot {
    GroupSnapshot::assemble("ingester", stss, &pods)
}

fn plan_at(g: &GroupSnapshot, now: Timestamp) -> GroupPlan {
    plan_pass(g, &PassInput::new(now, &[])).plan
}

/// Runs a pass every five minutes over `snapshots(minute)` for `minutes`, keeping the progress clock as the shell
/// does; returns the first stuck verdict with the minute it came, if any.
fn first_stuck(minutes: i64, snapshots: impl Fn(i64) -> GroupSnapshot) -> Option<(i64, rollout_core::Stuck)> {
    let mut clock: Option<ProgressClock> = None;
    for minute in (0..=minutes).step_by(5) {
        let g = snapshots(minute);
        let plan = plan_at(&g, at(minute));
        let next = ProgressClock::observe(clock.as_ref(), &g, plan.state, at(minute));
        if let Some(stuck) = judge(&next, &plan, at(minute), DEADLINE) {
            return Some((minute, stuck));
        }
        clock = Some(next);
    }
    None
}

fn wait(plan: &GroupPlan) -> Option<(WaitReason, Option<&str>)> {
    plan.wait.as_ref().map(|w| (w.reason, w.statefulset.as_deref()))
}

// ----- every wait class -----

#[test]
fn pods_not_ready_missing_and_terminating_are_told_apart() {
    let a = zone("a", 3, NEW, NEW);
    let b = zone("b", 3, OLD, OLD);
    let mut pods = vec![pod(&a, 0, NEW), not_ready(pod(&a, 1, NEW)), pod(&a, 2, NEW)];
    pods.extend(ready_pods(&b, OLD));
    let p = plan_at(&group(vec![a.clone(), b.clone()], pods.clone()), t0());
    assert_eq!((p.state, wait(&p)), (GroupState::Waiting, Some((WaitReason::PodsNotReady, Some("a")))), "{p:?}");

    pods.remove(1);
    let p = plan_at(&group(vec![a.clone(), b.clone()], pods.clone()), t0());
    assert_eq!(wait(&p), Some((WaitReason::PodsMissing, Some("a"))), "{p:?}");

    let c = zone("c", 2, OLD, NEW);
    let pods = vec![pod(&c, 0, NEW), terminating(pod(&c, 1, OLD))];
    let p = plan_at(&group(vec![c], pods), t0());
    assert_eq!(wait(&p), Some((WaitReason::PodsTerminating, Some("c"))), "{p:?}");
}

#[test]
fn several_unready_zones_paused_zones_and_foreign_strategies_have_their_classes() {
    let a = zone("a", 2, OLD, NEW);
    let b = zone("b", 2, OLD, NEW);
    let pods = vec![not_ready(pod(&a, 0, OLD)), pod(&a, 1, OLD), not_ready(pod(&b, 0, OLD)), pod(&b, 1, OLD)];
    let p = plan_at(&group(vec![a.clone(), b.clone()], pods), t0());
    assert_eq!(wait(&p), Some((WaitReason::SeveralNotReady, Some("a"))), "{p:?}");
    assert!(p.wait.as_ref().is_some_and(|w| w.reason.needs_attention()));

    let mut paused = zone("b", 2, OLD, NEW);
    paused.settings.paused = true;
    let mut done = zone("a", 2, NEW, NEW);
    done.status.as_mut().unwrap().current_revision = NEW.into();
    let mut pods = ready_pods(&done, NEW);
    pods.extend(ready_pods(&paused, OLD));
    let p = plan_at(&group(vec![done.clone(), paused.clone()], pods), t0());
    assert_eq!((p.state, wait(&p)), (GroupState::Blocked, Some((WaitReason::Paused, Some("b")))), "{p:?}");

    let pods = vec![pod(&done, 0, NEW), pod(&done, 1, NEW), pod(&paused, 0, OLD), not_ready(pod(&paused, 1, OLD))];
    let p = plan_at(&group(vec![done.clone(), paused], pods), t0());
    assert_eq!((p.state, wait(&p)), (GroupState::Waiting, Some((WaitReason::Paused, Some("b")))), "{p:?}");

    let mut rolling = zone("c", 1, OLD, OLD);
    rolling.update_strategy = "RollingUpdate".into();
    let p = plan_at(&group(vec![rolling.clone()], ready_pods(&rolling, OLD)), t0());
    assert_eq!((p.state, wait(&p)), (GroupState::Blocked, Some((WaitReason::UpdateStrategy, Some("c")))), "{p:?}");
}

#[test]
fn own_writes_stale_status_markers_and_an_unreadable_record_have_their_classes() {
    let a = zone("a", 1, OLD, NEW);
    let g = group(vec![a.clone()], vec![pod(&a, 0, OLD)]);
    let pending = [PendingExpectation {
        expectation: Expectation::PodDeleted { statefulset: "a".into(), pod: "a-0".into(), uid: "uid-a-0-r0".into() },
        expires_at: at(5),
    }];
    let p = plan_pass(&g, &PassInput::new(t0(), &pending)).plan;
    assert_eq!(wait(&p), Some((WaitReason::OwnWrites, Some("a"))), "{p:?}");
    assert!(WaitReason::OwnWrites.is_routine());

    let mut stale = a.clone();
    stale.generation = Some(2);
    let p = plan_at(&group(vec![stale], vec![pod(&a, 0, OLD)]), t0());
    assert_eq!(wait(&p), Some((WaitReason::StatusNotCurrent, Some("a"))), "{p:?}");

    let served = label(a.clone(), keys::PREPARE_DOWNSCALE, "true");
    let g = group(vec![served], vec![pod(&a, 0, OLD)]);
    let record = DownscaleRecord::default();
    let markers = [DownscaleInProgress { statefulset: "a".into(), group: "ingester".into(), until: at(1) }];
    let input = PassInput {
        zone_tracker: ZoneTracker::On,
        record: RecordRead::Read { record: &record, markers: &markers },
        ..PassInput::new(t0(), &[])
    };
    let p = plan_pass(&g, &input).plan;
    assert_eq!(wait(&p), Some((WaitReason::DownscaleInProgress, Some("a"))), "{p:?}");
    let p = plan_pass(&g, &PassInput { record: RecordRead::Unreadable { error: "timeout" }, ..input }).plan;
    assert_eq!(wait(&p), Some((WaitReason::DownscaleRecordUnreadable, None)), "{p:?}");
}

#[test]
fn a_done_group_waits_for_nothing_and_a_scheduled_downscale_is_its_own_class() {
    let a = zone("a", 2, NEW, NEW);
    let p = plan_at(&group(vec![a.clone()], ready_pods(&a, NEW)), t0());
    assert_eq!((p.state, p.wait), (GroupState::Done, None));

    let leader = annotate(a.clone(), keys::LAST_DOWNSCALE, &at(-10).to_string());
    let follower = label(
        annotate(zone("b", 3, NEW, NEW), keys::ROLLOUT_DOWNSCALE_LEADER, "a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "12h",
    );
    let mut pods = ready_pods(&leader, NEW);
    pods.extend(ready_pods(&follower, NEW));
    let p = plan_at(&group(vec![leader, follower], pods), t0());
    assert_eq!((p.state, wait(&p)), (GroupState::Waiting, Some((WaitReason::ScalingScheduled, None))), "{p:?}");
}

// ----- stuck -----

/// Zone a is rolled to r1 and its new pods crash: the rollout cannot go on and reports why.
#[test]
fn a_crash_looping_new_revision_is_reported_stuck() {
    let a = zone("a", 3, OLD, NEW);
    let b = zone("b", 3, OLD, NEW);
    let snapshot = |minute: i64| {
        // The pod flaps: Ready every other pass, which is not progress.
        let flapping = if minute % 10 == 0 { pod(&a, 0, NEW) } else { not_ready(pod(&a, 0, NEW)) };
        let mut pods = vec![flapping, pod(&a, 1, OLD), pod(&a, 2, OLD)];
        pods.extend(ready_pods(&b, OLD));
        group(vec![a.clone(), b.clone()], pods)
    };
    let (minute, stuck) = first_stuck(120, snapshot).expect("stuck");
    assert_eq!(minute, 35, "the first pass after 30 minutes without progress");
    assert_eq!(stuck.wait, Some(Wait::on(WaitReason::PodsNotReady, "a")));
    assert!(stuck.reason.contains("max unavailable (1) has been reached"), "{}", stuck.reason);
}

/// A quota refuses zone a's replacement pod: the pod stays missing.
#[test]
fn a_quota_that_keeps_pods_from_being_created_is_reported_stuck() {
    let a = zone("a", 3, OLD, NEW);
    let b = zone("b", 3, OLD, NEW);
    let snapshot = |_| {
        let mut pods = vec![pod(&a, 0, NEW), pod(&a, 2, OLD)];
        pods.extend(ready_pods(&b, OLD));
        group(vec![a.clone(), b.clone()], pods)
    };
    let (_, stuck) = first_stuck(120, snapshot).expect("stuck");
    assert_eq!(stuck.wait, Some(Wait::on(WaitReason::PodsMissing, "a")));
    assert!(stuck.describe().contains("(pods-missing)"), "{}", stuck.describe());
}

/// Zone b is paused half-way: with every pod Ready the group is blocked on it; with one unready it waits on it.
#[test]
fn a_paused_zone_blocking_the_group_is_reported_stuck() {
    let a = zone("a", 2, NEW, NEW);
    let mut b = zone("b", 2, OLD, NEW);
    b.settings.paused = true;
    for unready in [false, true] {
        let snapshot = |_| {
            let last = if unready { not_ready(pod(&b, 1, OLD)) } else { pod(&b, 1, OLD) };
            let mut pods = ready_pods(&a, NEW);
            pods.extend([pod(&b, 0, NEW), last]);
            group(vec![a.clone(), b.clone()], pods)
        };
        let (_, stuck) = first_stuck(120, snapshot).unwrap_or_else(|| panic!("stuck (unready pod: {unready})"));
        assert_eq!(stuck.wait, Some(Wait::on(WaitReason::Paused, "b")), "unready pod: {unready}");
    }
}

/// The leader was scaled up and its new pods never become ready; its follower waits for it
/// (`grafana.com/rollout-upscale-only-when-leader-ready`).
#[test]
fn a_leader_that_never_becomes_ready_is_reported_stuck() {
    let mut leader = zone("a", 5, NEW, NEW);
    leader.status.as_mut().unwrap().ready_replicas = 3;
    let follower = annotate(
        annotate(zone("b", 3, NEW, NEW), keys::ROLLOUT_DOWNSCALE_LEADER, "a"),
        keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY,
        "true",
    );
    let snapshot = |_| {
        let mut pods = ready_pods(&zone("a", 3, NEW, NEW), NEW);
        pods.extend([not_ready(pod(&leader, 3, NEW)), not_ready(pod(&leader, 4, NEW))]);
        pods.extend(ready_pods(&follower, NEW));
        group(vec![leader.clone(), follower.clone()], pods)
    };
    let (_, stuck) = first_stuck(120, snapshot).expect("stuck");
    assert_eq!(stuck.wait, Some(Wait::on(WaitReason::PodsNotReady, "a")));
    assert!(stuck.reason.contains("not all leader replicas are ready"), "{}", stuck.reason);
}

/// One pod every 20 minutes is slow but moving: never stuck with a 30-minute deadline.
#[test]
fn a_slow_rollout_that_keeps_moving_is_not_stuck() {
    let a = zone("a", 6, OLD, NEW);
    let snapshot = |minute: i64| {
        let updated = (minute / 20).min(6) as u32;
        let pods: Vec<PodView> = (0..6)
            .map(|i| match i.cmp(&updated) {
                std::cmp::Ordering::Less => pod(&a, i, NEW),
                std::cmp::Ordering::Equal => not_ready(pod(&a, i, NEW)),
                std::cmp::Ordering::Greater => pod(&a, i, OLD),
            })
            .collect();
        group(vec![a.clone()], pods)
    };
    assert_eq!(first_stuck(110, snapshot).map(|(m, s)| (m, s.describe())), None);
}

/// A follower whose downscale waits 12 hours for the min time between zone downscales is scheduled, not stuck.
#[test]
fn a_downscale_waiting_for_the_min_time_is_never_stuck() {
    let leader = annotate(zone("a", 2, NEW, NEW), keys::LAST_DOWNSCALE, &at(-1).to_string());
    let follower = label(
        annotate(zone("b", 3, NEW, NEW), keys::ROLLOUT_DOWNSCALE_LEADER, "a"),
        keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
        "12h",
    );
    let snapshot = |_| {
        let mut pods = ready_pods(&leader, NEW);
        pods.extend(ready_pods(&follower, NEW));
        group(vec![leader.clone(), follower.clone()], pods)
    };
    assert_eq!(first_stuck(300, snapshot).map(|(m, s)| (m, s.describe())), None);
}
