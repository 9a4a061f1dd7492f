//! Properties of scaling over generated inputs: leader/follower groups with random replicas, readiness, min times,
//! last downscales and force values; delayed-downscale arithmetic over random pod timestamps.

use jiff::{SignedDuration, Timestamp};
use proptest::prelude::*;
use rollout_core::fixture::{annotate, label, not_ready, pod, statefulset};
use rollout_core::keys;
use rollout_core::scaling::{delayed_downscale_target, downscale_held};
use rollout_core::view::PodView;
use rollout_core::{Action, GroupSnapshot, MinTimeVerdict, PlanContext, check_min_time, plan_group};
use std::collections::BTreeMap;
use std::time::Duration;

fn now() -> Timestamp {
    "2026-11-20T12:00:00Z".parse().unwrap()
}

#[derive(Debug, Clone)]
struct Zone {
    replicas: u32,
    ready: u32,
    leader: Option<usize>,
    gate: bool,
    min_time_min: Option<u32>,
    last_downscale_min_ago: Option<u32>,
    force: Option<i64>,
    outdated: bool,
}

fn zone() -> impl Strategy<Value = Zone> {
    (
        0..6u32,
        0..6u32,
        prop::option::weighted(0.7, 0..4usize),
        any::<bool>(),
        prop::option::of(0..120u32),
        prop::option::weighted(0.4, 0..180u32),
        prop::option::weighted(0.2, -2..8i64),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(replicas, ready, leader, gate, min_time_min, last_downscale_min_ago, force, outdated)| Zone {
            replicas,
            ready,
            leader,
            gate,
            min_time_min,
            last_downscale_min_ago,
            force,
            outdated,
        })
}

fn build(zones: &[Zone]) -> GroupSnapshot {
    let names: Vec<String> = (0..zones.len()).map(|i| format!("zone-{}", (b'a' + i as u8) as char)).collect();
    let mut stss = Vec::new();
    let mut pods: Vec<PodView> = Vec::new();
    for (i, z) in zones.iter().enumerate() {
        let mut s = statefulset("g", &names[i], z.replicas, "r1");
        if let Some(l) = z.leader {
            // Out-of-range indexes name a StatefulSet that does not exist.
            let leader = names.get(l).cloned().unwrap_or_else(|| "zone-missing".to_string());
            s = annotate(s, keys::ROLLOUT_DOWNSCALE_LEADER, &leader);
        }
        if z.gate {
            s = annotate(s, keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY, "true");
        }
        if let Some(m) = z.min_time_min {
            s = label(s, keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, &format!("{m}m"));
        }
        if let Some(ago) = z.last_downscale_min_ago {
            let at = now() - SignedDuration::from_mins(i64::from(ago));
            s = annotate(s, keys::LAST_DOWNSCALE, &at.to_string());
        }
        if let Some(f) = z.force {
            s = annotate(s, keys::ROLLOUT_FORCE_REPLICAS, &f.to_string());
        }
        let ready = z.ready.min(z.replicas);
        s.status.as_mut().unwrap().ready_replicas = ready;
        if z.outdated {
            s.status.as_mut().unwrap().update_revision = "r2".to_string();
        }
        for ordinal in 0..z.replicas {
            let p = pod(&s, ordinal, "r1");
            pods.push(if ordinal < ready { p } else { not_ready(p) });
        }
        stss.push(s);
    }
    GroupSnapshot::assemble("g", stss, &pods)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// At most one StatefulSet is scaled per pass, never together with pod deletions; every controller-initiated
    /// follower downscale satisfies the min-time rule, and no downscale happens during a rollout.
    #[test]
    fn scaling_rules_hold(zones in prop::collection::vec(zone(), 1..5)) {
        let g = build(&zones);
        let plan = plan_group(&g, &PlanContext::new(now(), &[]));
        let scales: Vec<&Action> = plan.actions.iter().filter(|a| matches!(a, Action::Scale { .. })).collect();
        prop_assert!(scales.len() <= 1, "{plan:?}");
        if let Some(Action::Scale { statefulset, from, to, coordinated_downscale, .. }) = scales.first() {
            prop_assert_eq!(plan.actions.len(), 1, "a scaling pass does nothing else: {:?}", plan);
            let member = g.member(statefulset).unwrap();
            prop_assert_eq!(*from, member.sts.replicas);
            prop_assert_ne!(from, to);
            let settings = &member.sts.scaling;
            // Only followers are scaled here (mirrors are the shell's); force replicas elsewhere is ignored.
            prop_assert!(settings.leader.is_some(), "a StatefulSet without a leader scaled: {:?}", plan);
            if to < from {
                prop_assert!(
                    downscale_held(&g, statefulset, now()).is_none(),
                    "downscale while another zone is rolling or unready: {:?}",
                    plan
                );
            }
            match settings.force_replicas {
                Some(force) => {
                    prop_assert_eq!(*to, force);
                    prop_assert!(!coordinated_downscale);
                }
                None => {
                    let leader = g.member(settings.leader.as_deref().unwrap()).unwrap();
                    prop_assert_eq!(*to, leader.sts.replicas);
                    if to < from {
                        prop_assert!(*coordinated_downscale);
                        prop_assert_eq!(check_min_time(&g, None, statefulset, now()), MinTimeVerdict::Elapsed);
                    } else if settings.upscale_only_when_leader_ready {
                        prop_assert_eq!(leader.sts.status.as_ref().unwrap().ready_replicas, leader.sts.replicas);
                    }
                }
            }
        }
        // Every follower naming a missing leader is reported, by name.
        for (i, z) in zones.iter().enumerate() {
            if z.leader.is_some_and(|l| l >= zones.len()) {
                let name = format!("zone-{}", (b'a' + i as u8) as char);
                prop_assert!(plan.scaling_errors.iter().any(|e| e.statefulset == name), "{plan:?}");
            }
        }
        // Every valid force replicas without a leader is reported as ignored, by name.
        for (i, z) in zones.iter().enumerate() {
            if z.leader.is_none() && z.force.is_some_and(|f| f >= 0) {
                let name = format!("zone-{}", (b'a' + i as u8) as char);
                let ignored = format!("on StatefulSet {name} is ignored");
                prop_assert!(plan.warnings.iter().any(|w| w.contains(&ignored)), "{plan:?}");
            }
        }
    }

    /// Delayed downscale removes exactly the longest tail of replicas that have all been preparing for the delay.
    #[test]
    fn delayed_downscale_removes_the_ready_tail(
        from in 1..12u32,
        desired_frac in 0..100u32,
        ages in prop::collection::vec(prop::option::weighted(0.85, 0..180i64), 12),
        delay_min in 1..120u64,
    ) {
        let desired = from * desired_frac / 100;
        let prepared: BTreeMap<u32, Timestamp> = (desired..from)
            .filter_map(|i| ages[i as usize].map(|m| (i, now() - SignedDuration::from_mins(m))))
            .collect();
        let delay = Duration::from_secs(delay_min * 60);
        let ready = |i: u32| prepared.get(&i).is_some_and(|t| now().as_second() - t.as_second() >= delay.as_secs() as i64);
        let expected = (desired..from).rev().take_while(|i| ready(*i)).last();
        match delayed_downscale_target(from, desired, delay, &prepared, now()) {
            Ok(allowed) => {
                prop_assert_eq!(Some(allowed), expected);
                prop_assert!(allowed >= desired && allowed < from);
            }
            Err(_) => prop_assert_eq!(expected, None),
        }
    }
}
