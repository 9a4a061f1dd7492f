//! The pass under ZoneAwarePodDisruptionBudgets: a deletion the budgets would refuse is held back in the plan with
//! the `held-by-budget` wait, naming the budget and the pods it counts, exactly as the controller holds it.

use jiff::Timestamp;
use rollout_core::fixture::{annotate, not_ready, pod, statefulset, terminating};
use rollout_core::zpdb::{BudgetPod, BudgetScope, KnownBudgets, ZpdbConfig};
use rollout_core::{Action, GroupState, PassInput, PodView, StatefulSetView, Wait, WaitReason, build_groups, keys};
use serde_json::json;

const GROUP: &str = "mimir-ingester";

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn budget(max_unavailable: i64) -> ZpdbConfig {
    ZpdbConfig::parse(&json!({
        "apiVersion": "rollout-operator.grafana.com/v1",
        "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "ingester-zpdb", "namespace": "ns", "uid": "zpdb-uid", "generation": 1},
        "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"rollout-group": GROUP}}}
    }))
    .unwrap()
}

/// Three zones of five pods. Zone b rolls to r1 with `grafana.com/rollout-max-unavailable: 4`: b-0 is new and
/// Ready, b-1 new and not Ready, b-2 old and terminating, b-3 and b-4 old and Ready, so the planner deletes b-3 and
/// b-4.
fn group() -> (Vec<StatefulSetView>, Vec<PodView>) {
    let a = statefulset(GROUP, "zone-a", 5, "r1");
    let mut b = annotate(statefulset(GROUP, "zone-b", 5, "r0"), keys::ROLLOUT_MAX_UNAVAILABLE, "4");
    b.status.as_mut().unwrap().update_revision = "r1".into();
    let c = statefulset(GROUP, "zone-c", 5, "r0");
    let mut pods: Vec<PodView> = (0..5).map(|i| pod(&a, i, "r1")).collect();
    pods.push(pod(&b, 0, "r1"));
    pods.push(not_ready(pod(&b, 1, "r1")));
    pods.push(terminating(pod(&b, 2, "r0")));
    pods.extend((3..5).map(|i| pod(&b, i, "r0")));
    pods.extend((0..5).map(|i| pod(&c, i, "r0")));
    for p in &mut pods {
        p.labels.insert(keys::ROLLOUT_GROUP.to_string(), GROUP.to_string());
    }
    (vec![a, b, c], pods)
}

fn plan_with(budgets: Option<&KnownBudgets>) -> rollout_core::GroupPlan {
    let (statefulsets, pods) = group();
    let budget_pods: Vec<BudgetPod> = pods.iter().cloned().map(BudgetPod::plain).collect();
    let scope =
        budgets.map(|known| BudgetScope { known, namespace: "ns", statefulsets: &statefulsets, pods: &budget_pods });
    let snapshot = build_groups(statefulsets.clone(), &pods).remove(0);
    let input = PassInput { budgets: scope, ..PassInput::new(now(), &[]) };
    rollout_core::plan_pass(&snapshot, &input).plan
}

fn deleted(plan: &rollout_core::GroupPlan) -> Vec<&str> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn a_rollout_held_by_a_budget_waits_on_it_naming_the_budget_and_the_pods_it_counts() {
    // Without budgets the planner replaces both remaining old pods.
    let free = plan_with(None);
    assert_eq!(deleted(&free), ["zone-b-3", "zone-b-4"]);
    assert_eq!(free.state, GroupState::Progressing);

    let known = KnownBudgets::Known(vec![budget(1)]);
    let held = plan_with(Some(&known));
    assert_eq!(deleted(&held), Vec::<&str>::new(), "{held:?}");
    assert_eq!(held.state, GroupState::Waiting);
    assert_eq!(held.wait, Some(Wait::on(WaitReason::HeldByBudget, "zone-b")));
    assert_eq!(
        held.reason,
        "ZoneAwarePodDisruptionBudget ingester-zpdb holds the replacement of pod zone-b-3 back: 2 pods not ready in \
         zone-b (unavailable: zone-b-1, zone-b-2)"
    );
}

#[test]
fn deletions_a_budget_allows_go_ahead_and_count_for_the_ones_after_them() {
    let known = KnownBudgets::Known(vec![budget(3)]);
    let plan = plan_with(Some(&known));
    assert_eq!(deleted(&plan), ["zone-b-3"], "{plan:?}");
    assert_eq!(plan.state, GroupState::Progressing);
    assert_eq!(plan.wait, Some(Wait::on(WaitReason::HeldByBudget, "zone-b")));
    assert!(
        plan.reason.ends_with(
            "then ZoneAwarePodDisruptionBudget ingester-zpdb holds the replacement of pod zone-b-4 back: 3 pods not \
             ready in zone-b (unavailable: zone-b-1, zone-b-2, zone-b-3)"
        ),
        "{}",
        plan.reason
    );
    // A budget that allows all of them changes nothing.
    let roomy = KnownBudgets::Known(vec![budget(4)]);
    assert_eq!(plan_with(Some(&roomy)), plan_with(None));
}

#[test]
fn budgets_not_loaded_hold_every_deletion_and_unreadable_ones_hold_none() {
    let loading = KnownBudgets::NotLoaded("the watch is starting".into());
    let plan = plan_with(Some(&loading));
    assert!(deleted(&plan).is_empty());
    assert_eq!(plan.wait, Some(Wait::on(WaitReason::HeldByBudget, "zone-b")));
    assert!(plan.reason.contains("not loaded yet"), "{}", plan.reason);
    let refused = KnownBudgets::Unreadable("forbidden".into());
    assert_eq!(deleted(&plan_with(Some(&refused))), ["zone-b-3", "zone-b-4"]);
}
