//! Properties of the planner over generated rollout groups: any number of StatefulSets and pods, two revisions,
//! readiness, terminations, missing pods, pauses and max-unavailable settings.

use jiff::Timestamp;
use proptest::prelude::*;
use rollout_core::fixture::{not_ready, pod, statefulset, terminating};
use rollout_core::view::{PodView, StatefulSetView};
use rollout_core::{Action, GroupPlan, GroupSnapshot, MaxUnavailable, PlanContext, Readiness, plan_group};

const REVISIONS: [&str; 2] = ["r1", "r2"];

#[derive(Debug, Clone)]
struct PodSpec {
    present: bool,
    revision: usize,
    ready: bool,
    terminating: bool,
}

#[derive(Debug, Clone)]
struct StsSpec {
    pods: Vec<PodSpec>,
    status_replicas_extra: u32,
    current: usize,
    update: usize,
    paused: bool,
    max_unavailable: MaxUnavailable,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (prop::bool::weighted(0.9), 0..2usize, prop::bool::weighted(0.8), prop::bool::weighted(0.1))
        .prop_map(|(present, revision, ready, terminating)| PodSpec { present, revision, ready, terminating })
}

fn sts_spec() -> impl Strategy<Value = StsSpec> {
    let max = prop_oneof![(1..4u32).prop_map(MaxUnavailable::Count), (1..=100u32).prop_map(MaxUnavailable::Percent)];
    (prop::collection::vec(pod_spec(), 0..7), 0..2u32, 0..2usize, 0..2usize, prop::bool::weighted(0.15), max).prop_map(
        |(pods, status_replicas_extra, current, update, paused, max_unavailable)| StsSpec {
            pods,
            status_replicas_extra,
            current,
            update,
            paused,
            max_unavailable,
        },
    )
}

fn build(specs: &[StsSpec]) -> GroupSnapshot {
    let mut stss = Vec::new();
    let mut pods: Vec<PodView> = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let name = format!("zone-{}", (b'a' + i as u8) as char);
        let mut s: StatefulSetView = statefulset("g", &name, spec.pods.len() as u32, REVISIONS[spec.current]);
        let status = s.status.as_mut().unwrap();
        status.update_revision = REVISIONS[spec.update].to_string();
        status.replicas = spec.pods.len() as u32 + spec.status_replicas_extra;
        s.settings.paused = spec.paused;
        s.settings.max_unavailable = spec.max_unavailable;
        for (ordinal, p) in spec.pods.iter().enumerate() {
            if !p.present {
                continue;
            }
            let mut v = pod(&s, ordinal as u32, REVISIONS[p.revision]);
            if !p.ready {
                v = not_ready(v);
            }
            if p.terminating {
                v = terminating(v);
            }
            pods.push(v);
        }
        stss.push(s);
    }
    GroupSnapshot::assemble("g", stss, &pods)
}

fn now() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

fn plan(group: &GroupSnapshot) -> GroupPlan {
    plan_group(group, &PlanContext::new(now(), &[]))
}

fn deleted_pods<'a>(group: &'a GroupSnapshot, plan: &GroupPlan) -> Vec<(&'a str, &'a PodView)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { statefulset, pod, .. } => {
                let m = group.member(statefulset).expect("deleted pod of a member");
                Some((m.sts.name.as_str(), m.pods.iter().find(|p| &p.name == pod).expect("deleted pod exists")))
            }
            _ => None,
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn never_deletes_pods_of_two_statefulsets(specs in prop::collection::vec(sts_spec(), 1..5)) {
        let group = build(&specs);
        let p = plan(&group);
        let mut stss: Vec<&str> = deleted_pods(&group, &p).into_iter().map(|(s, _)| s).collect();
        stss.dedup();
        prop_assert!(stss.len() <= 1, "{:?}", p.actions);
    }

    #[test]
    fn never_exceeds_max_unavailable_except_by_replacing_unavailable_outdated_pods(
        specs in prop::collection::vec(sts_spec(), 1..5)
    ) {
        let group = build(&specs);
        let p = plan(&group);
        let deleted = deleted_pods(&group, &p);
        if let Some((sts_name, _)) = deleted.first() {
            let m = group.member(sts_name).unwrap();
            let readiness = Readiness::of(m, now());
            let max = m.sts.settings.max_unavailable.resolve(m.sts.replicas);
            let update = &m.sts.status.as_ref().unwrap().update_revision;
            let mut spent = 0;
            for (_, pod) in &deleted {
                prop_assert!(pod.revision() != Some(update.as_str()), "deleted an updated pod {}", pod.name);
                prop_assert!(!pod.is_terminating(), "deleted a terminating pod {}", pod.name);
                if pod.is_available(m.sts.min_ready_seconds, now()) {
                    spent += 1;
                }
            }
            if spent > 0 {
                prop_assert!(readiness.unavailable() + spent <= max,
                    "unavailable {} + deletions {} > max {}", readiness.unavailable(), spent, max);
            }
        }
    }

    #[test]
    fn never_deletes_in_a_group_with_more_than_one_unavailable_statefulset(
        specs in prop::collection::vec(sts_spec(), 1..5)
    ) {
        let group = build(&specs);
        let not_ready = group.members.iter().filter(|m| !Readiness::of(m, now()).is_ready()).count();
        let p = plan(&group);
        if not_ready > 1 {
            prop_assert!(p.actions.is_empty(), "{:?}", p.actions);
        }
    }

    #[test]
    fn never_advances_past_a_statefulset_with_a_missing_unready_or_terminating_pod(
        specs in prop::collection::vec(sts_spec(), 1..5)
    ) {
        let group = build(&specs);
        let p = plan(&group);
        for action in &p.actions {
            let target = action.statefulset();
            for m in &group.members {
                let ready = Readiness::of(m, now()).is_ready();
                match action {
                    // Deleting pods of X requires every other StatefulSet to be ready.
                    Action::DeletePod { .. } if m.sts.name != target => {
                        prop_assert!(ready, "deleted in {} while {} is not ready", target, m.sts.name);
                    }
                    // Advancing X's revision requires X itself to be ready and fully updated.
                    Action::SetCurrentRevision { revision, .. } if m.sts.name == target => {
                        prop_assert!(ready);
                        prop_assert!(m.pods.iter().all(|p| p.revision() == Some(revision.as_str())));
                    }
                    _ => {}
                }
            }
        }
    }

    #[test]
    fn paused_statefulsets_lose_no_pods(specs in prop::collection::vec(sts_spec(), 1..5)) {
        let group = build(&specs);
        let p = plan(&group);
        for (sts, _) in deleted_pods(&group, &p) {
            prop_assert!(!group.member(sts).unwrap().sts.settings.paused);
        }
    }

    #[test]
    fn plans_are_deterministic_and_independent_of_input_order(specs in prop::collection::vec(sts_spec(), 1..5)) {
        let group = build(&specs);
        let p1 = plan(&group);
        prop_assert_eq!(&p1, &plan(&group));
        // Same objects, delivered in reverse order (as a cache might list them).
        let mut stss: Vec<StatefulSetView> = group.members.iter().map(|m| m.sts.clone()).collect();
        let mut pods: Vec<PodView> = group.members.iter().flat_map(|m| m.pods.clone()).collect();
        stss.reverse();
        pods.reverse();
        let shuffled = GroupSnapshot::assemble("g", stss, &pods);
        prop_assert_eq!(p1, plan(&shuffled));
    }
}
