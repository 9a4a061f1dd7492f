//! The planner's rules on hand-made groups: the reference's expectations and each deliberate divergence.

use jiff::{SignedDuration, Timestamp};
use rollout_core::fixture::{not_ready, pod, statefulset, terminating};
use rollout_core::view::{PodView, ReadyCondition, StatefulSetView};
use rollout_core::{
    Action, Expectation, GroupPlan, GroupSnapshot, GroupState, MaxUnavailable, PendingExpectation, PlanContext,
    RolloutSettings, plan_group,
};
use std::collections::BTreeMap;

const OLD: &str = "rev-old";
const NEW: &str = "rev-new";

fn now() -> Timestamp {
    "2026-11-20T12:00:00Z".parse().unwrap()
}

/// A zone whose status says it is being updated to `update`, with `current` as its current revision.
fn zone(name: &str, replicas: u32, current: &str, update: &str) -> StatefulSetView {
    let mut s = statefulset("ingester", name, replicas, current);
    s.status.as_mut().unwrap().update_revision = update.to_string();
    s
}

fn with_max_unavailable(mut s: StatefulSetView, raw: &str) -> StatefulSetView {
    s.settings = RolloutSettings::from_annotations(
        &s.name,
        &BTreeMap::from([("rollout-max-unavailable".to_string(), raw.to_string())]),
    );
    s
}

fn paused(mut s: StatefulSetView) -> StatefulSetView {
    s.settings.paused = true;
    s
}

fn pods(sts: &StatefulSetView, revisions: &[&str]) -> Vec<PodView> {
    revisions.iter().enumerate().map(|(i, r)| pod(sts, i as u32, r)).collect()
}

fn plan(stss: Vec<StatefulSetView>, pods: Vec<PodView>) -> GroupPlan {
    plan_with(stss, pods, &[])
}

fn plan_with(stss: Vec<StatefulSetView>, pods: Vec<PodView>, expectations: &[PendingExpectation]) -> GroupPlan {
    let group = GroupSnapshot::assemble("ingester", stss, &pods);
    plan_group(&group, &PlanContext::new(now(), expectations))
}

fn deleted(plan: &GroupPlan) -> Vec<&str> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect()
}

/// Zone a done on NEW, zone b all OLD (ready), zone c all OLD (ready).
fn three_zones(max_unavailable: &str) -> (Vec<StatefulSetView>, Vec<PodView>) {
    let a = zone("ingester-zone-a", 3, NEW, NEW);
    let b = with_max_unavailable(zone("ingester-zone-b", 3, OLD, NEW), max_unavailable);
    let c = zone("ingester-zone-c", 3, OLD, NEW);
    let mut ps = pods(&a, &[NEW, NEW, NEW]);
    ps.extend(pods(&b, &[OLD, OLD, OLD]));
    ps.extend(pods(&c, &[OLD, OLD, OLD]));
    (vec![a, b, c], ps)
}

#[test]
fn rolls_the_first_outdated_zone_up_to_max_unavailable_in_natural_order() {
    let (stss, ps) = three_zones("2");
    let p = plan(stss, ps);
    assert_eq!(p.state, GroupState::Progressing);
    assert_eq!(deleted(&p), vec!["ingester-zone-b-0", "ingester-zone-b-1"]);
    // Preconditions travel with the action.
    let Action::DeletePod { uid, .. } = &p.actions[0] else { panic!() };
    assert_eq!(uid, "uid-ingester-zone-b-0-rev-old");
}

#[test]
fn natural_order_puts_pod_2_before_pod_10() {
    let b = with_max_unavailable(zone("ingester-zone-b", 11, OLD, NEW), "3");
    let mut ps: Vec<PodView> =
        (0..11).map(|i| pod(&b, i, if i == 2 || i == 10 || i == 9 { OLD } else { NEW })).collect();
    ps.reverse();
    let p = plan(vec![b], ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-b-2", "ingester-zone-b-9", "ingester-zone-b-10"]);
}

#[test]
fn an_unavailable_updated_pod_spends_budget() {
    let (stss, mut ps) = three_zones("2");
    // b-2 already replaced but not ready yet.
    ps[5] = not_ready(pod(&stss[1], 2, NEW));
    let p = plan(stss, ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-b-0"]);
}

#[test]
fn budget_exhausted_means_wait() {
    let (stss, mut ps) = three_zones("1");
    ps[5] = not_ready(pod(&stss[1], 2, NEW));
    let p = plan(stss, ps);
    assert_eq!(p.state, GroupState::Waiting);
    assert!(p.actions.is_empty());
    assert!(p.reason.contains("max unavailable (1) has been reached"), "{}", p.reason);
}

#[test]
fn invalid_max_unavailable_falls_back_to_one_with_a_warning() {
    let (stss, ps) = three_zones("xxx");
    let p = plan(stss, ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-b-0"]);
    assert_eq!(p.warnings.len(), 1);
    assert!(p.warnings[0].contains("ingester-zone-b") && p.warnings[0].contains("\"xxx\""), "{:?}", p.warnings);
}

#[test]
fn percentage_max_unavailable_is_floored_against_spec_replicas() {
    let b = with_max_unavailable(zone("ingester-zone-b", 8, OLD, NEW), "25%");
    let ps = pods(&b, &[OLD; 8]);
    assert_eq!(b.settings.max_unavailable, MaxUnavailable::Percent(25));
    assert_eq!(deleted(&plan(vec![b.clone()], ps.clone())).len(), 2);
    let small = with_max_unavailable(zone("ingester-zone-b", 3, OLD, NEW), "25%");
    assert_eq!(deleted(&plan(vec![small.clone()], pods(&small, &[OLD; 3]))).len(), 1);
}

#[test]
fn two_not_ready_statefulsets_stop_the_group() {
    let (stss, mut ps) = three_zones("2");
    ps[0] = not_ready(ps[0].clone());
    ps[8] = terminating(ps[8].clone());
    let p = plan(stss, ps);
    assert_eq!(p.state, GroupState::Waiting);
    assert!(p.actions.is_empty());
    assert!(p.reason.contains("2 StatefulSets have not-ready pods"), "{}", p.reason);
}

#[test]
fn the_one_not_ready_statefulset_goes_first() {
    // Zone c has a not-ready pod on the old revision; zone b is outdated but ready. Zone c is handled first: its
    // unavailable outdated pod is replaced, and zone b is not touched.
    let (stss, mut ps) = three_zones("1");
    ps[6] = not_ready(ps[6].clone());
    let p = plan(stss, ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-c-0"]);
}

#[test]
fn terminating_pod_that_still_reports_ready_makes_its_zone_not_ready() {
    // Zone a finished, but one of its pods is terminating: zone b must not start.
    let (stss, mut ps) = three_zones("2");
    ps[1] = terminating(ps[1].clone());
    let p = plan(stss, ps);
    assert!(deleted(&p).is_empty());
    assert_eq!(p.state, GroupState::Waiting);
    assert!(p.reason.contains("ingester-zone-a"), "{}", p.reason);
}

#[test]
fn terminating_outdated_pods_are_waited_for_not_deleted_again() {
    let (stss, mut ps) = three_zones("2");
    ps[3] = terminating(ps[3].clone());
    let p = plan(stss, ps);
    // b-0 is terminating: one unit of budget spent; b-1 is deleted; b-0 is not deleted twice.
    assert_eq!(deleted(&p), vec!["ingester-zone-b-1"]);
}

#[test]
fn missing_pods_are_not_ready_pods() {
    // Zone a claims 3 replicas but has no pods at all: it is not ready, so zone b waits.
    let (stss, ps) = three_zones("2");
    let ps: Vec<PodView> = ps.into_iter().filter(|p| !p.name.starts_with("ingester-zone-a")).collect();
    let p = plan(stss, ps);
    assert!(deleted(&p).is_empty());
    assert!(p.reason.contains("3 of 3 pods missing"), "{}", p.reason);
}

#[test]
fn readiness_counts_against_the_larger_of_spec_and_status_replicas() {
    let (mut stss, ps) = three_zones("2");
    stss[0].replicas = 2;
    stss[0].status.as_mut().unwrap().replicas = 4;
    let p = plan(stss, ps);
    assert!(deleted(&p).is_empty());
    assert!(p.reason.contains("1 of 4 pods missing"), "{}", p.reason);
}

#[test]
fn stale_status_generation_blocks_decisions_for_that_zone() {
    let (mut stss, ps) = three_zones("2");
    stss[1].generation = Some(2);
    let p = plan(stss, ps);
    assert!(deleted(&p).is_empty());
    assert!(p.reason.contains("observe generation 2 of ingester-zone-b"), "{}", p.reason);
}

#[test]
fn ready_condition_and_container_statuses_both_matter() {
    let (stss, mut ps) = three_zones("2");
    // Containers ready but the Ready condition false (e.g. a readiness gate): not ready.
    ps[0].ready_condition = Some(ReadyCondition { ready: false, since: None });
    let p = plan(stss.clone(), ps.clone());
    assert!(deleted(&p).is_empty());
    // Running with no container statuses at all: not ready either (the reference counted it ready).
    let (stss, mut ps) = three_zones("2");
    ps[0].container_count = 0;
    assert!(deleted(&plan(stss, ps)).is_empty());
}

#[test]
fn min_ready_seconds_is_honoured() {
    let (mut stss, mut ps) = three_zones("2");
    stss[0].min_ready_seconds = 30;
    for p in ps.iter_mut().take(3) {
        p.ready_condition = Some(ReadyCondition { ready: true, since: Some(now() - SignedDuration::from_secs(10)) });
    }
    assert!(deleted(&plan(stss.clone(), ps.clone())).is_empty(), "ready for 10s < 30s");
    for p in ps.iter_mut().take(3) {
        p.ready_condition = Some(ReadyCondition { ready: true, since: Some(now() - SignedDuration::from_secs(31)) });
    }
    assert_eq!(deleted(&plan(stss, ps)).len(), 2, "ready for 31s >= 30s");
}

#[test]
fn pods_belong_by_controller_owner_reference_not_by_name_label() {
    let (stss, mut ps) = three_zones("2");
    // A pod that looks like zone a's by labels but has no owner does not count: zone a is short of one pod.
    ps[0].owner = None;
    let p = plan(stss, ps);
    assert!(deleted(&p).is_empty());
    assert!(p.reason.contains("1 of 3 pods missing"), "{}", p.reason);
}

#[test]
fn owned_pod_outside_the_selector_is_not_counted_and_is_reported() {
    let (stss, mut ps) = three_zones("2");
    ps[0].labels.insert("name".into(), "something-else".into());
    let p = plan(stss, ps);
    assert!(deleted(&p).is_empty());
    assert!(p.warnings.iter().any(|w| w.contains("ingester-zone-a-0") && w.contains("selector")), "{:?}", p.warnings);
}

#[test]
fn paused_ready_zone_is_skipped_and_the_next_rolls() {
    let (mut stss, ps) = three_zones("2");
    stss[1] = paused(stss[1].clone());
    let p = plan(stss, ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-c-0"]);
}

#[test]
fn paused_zone_with_unavailable_pods_still_blocks_the_group() {
    // Reference bug 9.2-F: the next zone started while the paused one was degraded.
    let (mut stss, mut ps) = three_zones("2");
    stss[1] = paused(stss[1].clone());
    ps[4] = not_ready(ps[4].clone());
    let p = plan(stss, ps);
    assert!(p.actions.is_empty(), "{:?}", p.actions);
    assert_eq!(p.state, GroupState::Waiting);
    assert!(p.reason.contains("paused and not ready"), "{}", p.reason);
}

#[test]
fn paused_but_fully_updated_zone_still_gets_its_current_revision() {
    let a = paused(zone("ingester-zone-a", 2, OLD, NEW));
    let ps = pods(&a, &[NEW, NEW]);
    let p = plan(vec![a], ps);
    assert!(matches!(&p.actions[..], [Action::SetCurrentRevision { revision, .. }] if revision == NEW), "{p:?}");
}

#[test]
fn only_paused_work_left_is_blocked() {
    let (mut stss, ps) = three_zones("2");
    stss[1] = paused(stss[1].clone());
    stss[2] = paused(stss[2].clone());
    let p = plan(stss, ps);
    assert_eq!(p.state, GroupState::Blocked);
    assert!(p.reason.contains("rollout paused"), "{}", p.reason);
}

#[test]
fn crash_looping_outdated_pods_are_replaced_first_without_spending_budget() {
    // Zone b: max 1; b-1 and b-2 crash-loop on the old revision. The reference stalls forever here.
    let (stss, mut ps) = three_zones("1");
    ps[4] = not_ready(ps[4].clone());
    ps[5] = not_ready(ps[5].clone());
    let p = plan(stss, ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-b-1", "ingester-zone-b-2"]);
    assert!(p.actions[0].reason().contains("already unavailable"));
}

#[test]
fn crash_looping_pod_first_then_budget_for_available_ones() {
    let (stss, mut ps) = three_zones("2");
    ps[5] = not_ready(ps[5].clone());
    let p = plan(stss, ps);
    // b-2 is free; one unit of budget remains (2 - 1 unavailable) for b-0.
    assert_eq!(deleted(&p), vec!["ingester-zone-b-2", "ingester-zone-b-0"]);
}

#[test]
fn updated_and_ready_zone_gets_its_current_revision_advanced_after_the_next_zones_deletions() {
    let (mut stss, ps) = three_zones("2");
    stss[0].status.as_mut().unwrap().current_revision = OLD.into();
    stss[0].resource_version = "42".into();
    let p = plan(stss, ps);
    assert_eq!(deleted(&p), vec!["ingester-zone-b-0", "ingester-zone-b-1"]);
    // The status write is bookkeeping: the deletions the rollout waits on are sent first.
    assert!(matches!(p.actions[0], Action::DeletePod { .. }), "{:?}", p.actions);
    assert_eq!(
        p.actions.last(),
        Some(&Action::SetCurrentRevision {
            statefulset: "ingester-zone-a".into(),
            revision: NEW.into(),
            resource_version: "42".into(),
            reason: p.actions.last().unwrap().reason().to_string(),
        })
    );
    assert_eq!(p.actions.len(), 3);
}

#[test]
fn rollback_with_equal_revisions_still_replaces_pods() {
    // currentRevision == updateRevision, but pods run another revision (a rollback): no shortcut.
    let a = zone("ingester-zone-a", 2, OLD, OLD);
    let ps = pods(&a, &[NEW, NEW]);
    assert_eq!(deleted(&plan(vec![a], ps)), vec!["ingester-zone-a-0"]);
}

#[test]
fn pod_without_revision_label_is_outdated() {
    let a = zone("ingester-zone-a", 1, NEW, NEW);
    let mut p0 = pod(&a, 0, NEW);
    p0.labels.remove("controller-revision-hash");
    assert_eq!(deleted(&plan(vec![a], vec![p0])), vec!["ingester-zone-a-0"]);
}

#[test]
fn rolling_update_strategy_blocks_the_group() {
    let (mut stss, ps) = three_zones("2");
    stss[2].update_strategy = "RollingUpdate".into();
    let p = plan(stss, ps);
    assert_eq!(p.state, GroupState::Blocked);
    assert!(p.actions.is_empty());
    assert_eq!(
        p.reason,
        "StatefulSet ingester-zone-c has RollingUpdate update strategy while OnDelete is expected, skipping reconcile"
    );
}

#[test]
fn statefulset_without_status_waits() {
    let (mut stss, ps) = three_zones("2");
    stss[2].status = None;
    let p = plan(stss, ps);
    assert_eq!(p.state, GroupState::Waiting);
    assert!(p.actions.is_empty());
}

#[test]
fn everything_updated_is_done() {
    let a = zone("ingester-zone-a", 2, NEW, NEW);
    let b = zone("ingester-zone-b", 2, NEW, NEW);
    let mut ps = pods(&a, &[NEW, NEW]);
    ps.extend(pods(&b, &[NEW, NEW]));
    let p = plan(vec![a, b], ps);
    assert_eq!(p.state, GroupState::Done);
    assert!(p.actions.is_empty());
}

#[test]
fn unobserved_own_writes_hold_the_group_until_seen_or_expired() {
    let (stss, ps) = three_zones("2");
    let expect = |expires_at| PendingExpectation {
        expectation: Expectation::PodDeleted {
            statefulset: "ingester-zone-b".into(),
            pod: "ingester-zone-b-0".into(),
            uid: "uid-ingester-zone-b-0-rev-old".into(),
        },
        expires_at,
    };
    let later = now() + SignedDuration::from_secs(60);
    let p = plan_with(stss.clone(), ps.clone(), &[expect(later)]);
    assert_eq!(p.state, GroupState::Waiting);
    assert!(p.actions.is_empty());
    assert!(p.reason.contains("deletion of pod ingester-zone-b-0"), "{}", p.reason);

    // Once the cache shows the pod terminating, the group moves on (b-0 is waited for, b-1 is next).
    let mut seen = ps.clone();
    seen[3] = terminating(seen[3].clone());
    assert_eq!(deleted(&plan_with(stss.clone(), seen, &[expect(later)])), vec!["ingester-zone-b-1"]);

    // An expectation that was never observed expires instead of stalling the group forever.
    let earlier = now() - SignedDuration::from_secs(1);
    assert_eq!(deleted(&plan_with(stss, ps, &[expect(earlier)])).len(), 2);
}

#[test]
fn statefulset_write_expectation_is_observed_when_the_resource_version_moves() {
    let (mut stss, ps) = three_zones("2");
    stss[0].resource_version = "7".into();
    let e = PendingExpectation {
        expectation: Expectation::StatefulSetWritten {
            statefulset: "ingester-zone-a".into(),
            previous_resource_version: "7".into(),
        },
        expires_at: now() + SignedDuration::from_secs(60),
    };
    assert_eq!(plan_with(stss.clone(), ps.clone(), std::slice::from_ref(&e)).state, GroupState::Waiting);
    stss[0].resource_version = "8".into();
    assert_eq!(plan_with(stss, ps, &[e]).state, GroupState::Progressing);
}

#[test]
fn action_expectations_match_the_preconditions() {
    let (stss, ps) = three_zones("2");
    let p = plan(stss, ps);
    assert_eq!(
        p.actions[0].expectation(),
        Expectation::PodDeleted {
            statefulset: "ingester-zone-b".into(),
            pod: "ingester-zone-b-0".into(),
            uid: "uid-ingester-zone-b-0-rev-old".into(),
        }
    );
}

#[test]
fn plan_json_has_the_documented_shape() {
    let (mut stss, ps) = three_zones("2");
    stss[0].status.as_mut().unwrap().current_revision = OLD.into();
    let v = serde_json::to_value(plan(stss, ps)).unwrap();
    assert_eq!(v["group"], "ingester");
    assert_eq!(v["state"], "progressing");
    assert_eq!(
        v["actions"][0],
        serde_json::json!({"action": "delete-pod", "statefulSet": "ingester-zone-b", "pod": "ingester-zone-b-0",
            "reason": v["actions"][0]["reason"]})
    );
    assert_eq!(
        v["actions"][2],
        serde_json::json!({"action": "set-current-revision", "statefulSet": "ingester-zone-a", "revision": NEW,
            "reason": v["actions"][2]["reason"]})
    );
    assert_eq!(v.as_object().unwrap().len(), 4, "{v}");
}

/// Regression (simulation seeds 62 and 112): during a scale-down a condemned pod above `spec.replicas` that is
/// still Ready must not stand in for a missing kept pod. Zone a: spec 2, status says 2, pods a-1 and a-2 (a-0
/// missing): a is not ready, nothing may be deleted in zone b, and zone a's budget is already spent.
#[test]
fn a_ready_pod_above_the_replica_count_does_not_hide_a_missing_pod() {
    let a = zone("ingester-zone-a", 2, NEW, NEW);
    let b = zone("ingester-zone-b", 2, OLD, NEW);
    let mut all = vec![pod(&a, 1, NEW), pod(&a, 2, NEW)];
    all.extend(pods(&b, &[OLD, OLD]));
    let group = GroupSnapshot::assemble("ingester", vec![a.clone(), b.clone()], &all);
    let readiness = rollout_core::Readiness::of(&group.members[0], now());
    assert!(!readiness.is_ready(), "{}", readiness.describe());
    assert_eq!((readiness.missing, readiness.available, readiness.unavailable()), (1, 1, 1));
    let p = plan(vec![a, b], all);
    assert!(deleted(&p).is_empty(), "deleted {:?} while ingester-zone-a-0 is missing", deleted(&p));
    assert!(!p.actions.iter().any(|a| matches!(a, Action::SetCurrentRevision { .. })), "{:?}", p.actions);

    // Within one zone: a-0 missing and a-1 outdated; a-2 (condemned, Ready) must not make room to delete a-1.
    let a = zone("ingester-zone-a", 2, OLD, NEW);
    let p = plan(vec![a.clone()], vec![pod(&a, 1, OLD), pod(&a, 2, OLD)]);
    assert!(deleted(&p).is_empty(), "deleted {:?} with max unavailable 1 already spent", deleted(&p));
}

/// Sim seed 1468: an outdated pod Ready but still within minReadySeconds is about to serve; it is not replaced for
/// free as an unavailable one (it may be available by the time the deletion lands), while a pod that is not Ready
/// at all still is.
#[test]
fn a_pod_within_min_ready_seconds_is_not_replaced_as_already_unavailable() {
    let (mut stss, mut ps) = three_zones("1");
    stss[1].min_ready_seconds = 30;
    // zone-b: pod 0 Ready for 29 s (not yet available), pods 1 and 2 long available.
    for p in ps.iter_mut().filter(|p| p.name.starts_with("ingester-zone-b-")) {
        let since = if p.name.ends_with("-0") { 29 } else { 300 };
        p.ready_condition = Some(ReadyCondition { ready: true, since: Some(now() - SignedDuration::from_secs(since)) });
    }
    assert!(deleted(&plan(stss.clone(), ps.clone())).is_empty(), "b-0 waits out its 30 s; the budget is spent");
    // Not Ready at all (a crash loop on the old revision): replaced for free.
    let b0 = ps.iter_mut().find(|p| p.name == "ingester-zone-b-0").unwrap();
    b0.ready_condition = Some(ReadyCondition { ready: false, since: None });
    assert_eq!(deleted(&plan(stss, ps)), vec!["ingester-zone-b-0"]);
}

/// Deliberate difference: a StatefulSet whose `status.currentRevision` is empty (a fresh StatefulSet whose
/// controller has not written it, or a status restored without it) is rolled like any other; the reference fails the
/// whole group on it. Its pods on the old revision are replaced, and once every pod is updated and ready the
/// revision is written.
#[test]
fn an_empty_current_revision_is_rolled_not_failed() {
    let a = zone("a", 2, "", NEW);
    let b = zone("b", 2, OLD, OLD);
    let mut all = pods(&a, &[OLD, NEW]);
    all.extend(pods(&b, &[OLD, OLD]));
    let p = plan(vec![a.clone(), b.clone()], all);
    assert_eq!(p.state, GroupState::Progressing, "{p:?}");
    assert_eq!(deleted(&p), ["a-0"]);
    let mut done = pods(&a, &[NEW, NEW]);
    done.extend(pods(&b, &[OLD, OLD]));
    let p = plan(vec![a, b], done);
    assert!(
        matches!(&p.actions[..], [Action::SetCurrentRevision { statefulset, revision, .. }] if statefulset == "a" && revision == NEW),
        "{p:?}"
    );
}
