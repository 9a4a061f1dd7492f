//! The judgement (reference 5.4): zone mode and partition mode with the reference's examples, percentages, the
//! cross-zone eviction delay and the ready-time stamp.

use super::*;

#[test]
fn messages_count_and_pluralise_as_the_reference() {
    assert_eq!(describe(1, 0, "ingester-zone-a"), "1 pod not ready in ingester-zone-a");
    assert_eq!(describe(0, 1, "ingester-zone-b"), "1 pod unknown in ingester-zone-b");
    assert_eq!(describe(2, 0, "partition 0"), "2 pods not ready in partition 0");
    assert_eq!(describe(1, 1, "partition 2"), "1 pod not ready, 1 pod unknown in partition 2");
    assert_eq!(describe(3, 2, "x"), "3 pods not ready, 2 pods unknown in x");
}

#[test]
fn zone_mode_allows_one_zone_at_a_time() {
    let mut world = World::new(3, 3);
    let config = zone_mode(1);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met across 3 zones".into()));
    // Any disruption in another zone blocks, whatever maxUnavailable says.
    world.not_ready("ingester-zone-b-1");
    assert_eq!(world.judge(&zone_mode(5), "ingester-zone-a-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    // In the zone of the disruption, within maxUnavailable.
    assert_eq!(world.judge(&zone_mode(2), "ingester-zone-b-0", &[]), Ok("zpdb met across 3 zones".into()));
    assert_eq!(world.judge(&config, "ingester-zone-b-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    // Evicting the not-ready pod itself costs nothing more.
    assert_eq!(world.judge(&config, "ingester-zone-b-1", &[]), Ok("zpdb met across 3 zones".into()));
    // A missing pod is unknown.
    let mut world = World::new(3, 3);
    world.remove("ingester-zone-c-2");
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod unknown in ingester-zone-c".into()));
    assert_eq!(world.judge(&config, "ingester-zone-c-0", &[]), Err("1 pod unknown in ingester-zone-c".into()));
}

#[test]
fn zone_mode_counts_terminating_pods_pods_without_statuses_and_pending_evictions_as_not_ready() {
    let config = zone_mode(1);
    let mut world = World::new(2, 2);
    world.change("ingester-zone-b-0", |p| p.pod = fixture::terminating(p.pod.clone()));
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    let mut world = World::new(2, 2);
    world.change("ingester-zone-b-0", |p| p.pod.container_count = 0);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod not ready in ingester-zone-b".into()));
    let world = World::new(2, 2);
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &["ingester-zone-a-1"]),
        Err("1 pod not ready in ingester-zone-a".into())
    );
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &["ingester-zone-b-1"]),
        Err("1 pod not ready in ingester-zone-b".into())
    );
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &["ingester-zone-a-0"]),
        Ok("zpdb met across 2 zones".into()),
        "its own intent"
    );
}

#[test]
fn zone_mode_judges_pods_by_owner_and_ordinals() {
    let config = zone_mode(1);
    // A ready pod of another StatefulSet carrying zone-b's labels does not stand in for zone-b's missing pod.
    let mut world = World::new(2, 2);
    world.remove("ingester-zone-b-1");
    let mut stray = world.pod("ingester-zone-b-0").clone();
    stray.pod.name = "ingester-zone-b-1".into();
    stray.pod.uid = "stray".into();
    stray.pod.owner =
        Some(OwnerRef { kind: "StatefulSet".into(), name: "elsewhere".into(), uid: "uid-elsewhere".into() });
    world.pods.push(stray);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod unknown in ingester-zone-b".into()));
    // A ready pod above the replicas does not stand in for a missing one below.
    let mut world = World::new(2, 2);
    world.remove("ingester-zone-b-1");
    let mut extra = world.pod("ingester-zone-b-0").clone();
    extra.pod.name = "ingester-zone-b-5".into();
    extra.pod.uid = "extra".into();
    world.pods.push(extra);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Err("1 pod unknown in ingester-zone-b".into()));
}

#[test]
fn zone_mode_denies_clearly_when_the_budget_does_not_select_the_pods_statefulset() {
    let mut world = World::new(3, 2);
    let owner = world.owner("ingester-zone-a-0").clone();
    world.statefulsets.retain(|s| s.name != owner.name);
    let err = world.judge(&zone_mode(1), "ingester-zone-a-0", &[]).unwrap_err();
    assert!(
        err.starts_with(
            "the pod's StatefulSet ingester-zone-a is not selected by ZoneAwarePodDisruptionBudget ingester-rollout"
        ),
        "{err}"
    );
}

#[test]
fn percentages_take_the_smaller_of_spec_and_status_replicas_and_at_least_one() {
    let config = |pct: i64| parse(with_selector(json!({"maxUnavailablePercentage": pct}))).unwrap();
    let mut sts = fixture::statefulset(GROUP, "ingester-zone-a", 10, "r1");
    assert_eq!(max_unavailable(&config(25), &sts, None), 2);
    assert_eq!(max_unavailable(&config(1), &sts, None), 1, "at least one");
    sts.status.as_mut().unwrap().replicas = 4;
    assert_eq!(max_unavailable(&config(50), &sts, None), 2, "min(spec 10, status 4)");
    sts.status.as_mut().unwrap().replicas = 0;
    assert_eq!(max_unavailable(&config(50), &sts, None), 0, "no replicas: nothing may go");
    assert_eq!(max_unavailable(&config(50), &sts, Some(3)), 3, "the controller's override");
    assert_eq!(max_unavailable(&zone_mode(0), &sts, None), 0);
    assert_eq!(max_unavailable(&zone_mode(2), &sts, Some(7)), 2, "the override only replaces 0");
}

#[test]
fn partition_mode_counts_the_partition_across_the_other_zones() {
    let config = partition_mode(1, "");
    let mut world = World::new(3, 3);
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 3 zones".into()));
    // Another partition's disruption does not matter.
    world.not_ready("ingester-zone-b-1");
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 3 zones".into()));
    assert_eq!(world.judge(&config, "ingester-zone-a-1", &[]), Err("1 pod not ready in partition 1".into()));
    // Nor does one in the pod's own zone.
    world.not_ready("ingester-zone-a-2");
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 3 zones".into()));
    // Two zones down in partition 0: both are counted.
    world.not_ready("ingester-zone-b-0");
    world.not_ready("ingester-zone-c-0");
    assert_eq!(
        world.judge(&partition_mode(2, ""), "ingester-zone-a-0", &[]),
        Err("2 pods not ready in partition 0".into())
    );
}

#[test]
fn partition_mode_reference_examples() {
    // Zone a already downscaled to 2 pods: evicting zone-b-2 finds no peer in zone a (v0.35.0).
    let mut world = World::new(3, 3);
    world.statefulsets[0].replicas = 2;
    world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    world.remove("ingester-zone-a-2");
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Err("1 pod unknown in partition 2".into())
    );
    // The controller's deletions: zone a has no slot for partition 2 any more, so nothing of it is missing there
    // while zone c's peer stays available (a rollout holds the other zones' downscales, so waiting for them would
    // wait for good).
    world.absent_peer = AbsentPeer::UnknownForTheLastPod;
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Ok("zpdb met for partition 2 across 3 zones".into())
    );
    // Still scaling down (status.replicas 3): the slot is expected, its pod missing.
    world.statefulsets[0].status.as_mut().unwrap().replicas = 3;
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Err("1 pod unknown in partition 2".into())
    );
    // Zone a scaled below the partition, the peer in zone c not ready: the pod is the partition's last available
    // one, so zone a counts as the reference counts it.
    world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    world.not_ready("ingester-zone-c-2");
    assert_eq!(
        world.judge(&partition_mode(2, ""), "ingester-zone-b-2", &[]),
        Err("1 pod not ready, 1 pod unknown in partition 2".into())
    );
    // Two zones, the other scaled below the partition: never the partition's last pod.
    let mut world = World::new(2, 3);
    world.statefulsets[0].replicas = 2;
    world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    world.remove("ingester-zone-a-2");
    world.absent_peer = AbsentPeer::UnknownForTheLastPod;
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-2", &[]),
        Err("1 pod unknown in partition 2".into())
    );
    assert_eq!(
        world.judge(&partition_mode(1, ""), "ingester-zone-b-1", &[]),
        Ok("zpdb met for partition 1 across 2 zones".into())
    );
    // A not-ready peer and a missing pod elsewhere in a zone: `1 pod not ready, 1 pod unknown in partition 2`.
    let mut world = World::new(3, 4);
    world.not_ready("ingester-zone-b-2");
    world.remove("ingester-zone-c-3");
    assert_eq!(
        world.judge(&partition_mode(3, ""), "ingester-zone-a-2", &[]),
        Ok("zpdb met for partition 2 across 3 zones".into())
    );
    assert_eq!(
        world.judge(&partition_mode(2, ""), "ingester-zone-a-2", &[]),
        Err("1 pod not ready, 1 pod unknown in partition 2".into())
    );
}

#[test]
fn cross_zone_eviction_delay_needs_an_old_enough_ready_time() {
    let config = partition_mode(1, "20m");
    let stamp =
        |minutes_ago: i64| crate::downscale::format_timestamp(now() - jiff::SignedDuration::from_mins(minutes_ago));
    let mut world = World::new(2, 2);
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "no ready-time"
    );
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(5)));
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "too recent"
    );
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(20)));
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "not strictly after"
    );
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(21)));
    assert_eq!(world.judge(&config, "ingester-zone-a-0", &[]), Ok("zpdb met for partition 0 across 2 zones".into()));
    world.change("ingester-zone-b-0", |p| p.ready_time = Some("yesterday".into()));
    assert_eq!(
        world.judge(&config, "ingester-zone-a-0", &[]),
        Err("1 pod not ready in partition 0".into()),
        "unreadable"
    );
    // Without a delay the stamp is not needed.
    world.change("ingester-zone-b-0", |p| p.ready_time = None);
    assert!(world.judge(&partition_mode(1, ""), "ingester-zone-a-0", &[]).is_ok());
    // Without a stamp (one the tracker cannot write), the Ready condition's last transition dates the pod; a stamp,
    // when there is one, wins.
    let ready_since = |minutes_ago: i64| {
        Some(crate::view::ReadyCondition {
            ready: true,
            since: Some(now() - jiff::SignedDuration::from_mins(minutes_ago)),
        })
    };
    world.change("ingester-zone-b-0", |p| p.pod.ready_condition = ready_since(5));
    assert!(world.judge(&config, "ingester-zone-a-0", &[]).is_err(), "ready too recently");
    world.change("ingester-zone-b-0", |p| p.pod.ready_condition = ready_since(21));
    assert!(world.judge(&config, "ingester-zone-a-0", &[]).is_ok(), "ready long enough by its condition");
    world.change("ingester-zone-b-0", |p| p.ready_time = Some(stamp(5)));
    assert!(world.judge(&config, "ingester-zone-a-0", &[]).is_err(), "the stamp wins");
}

proptest! {
    /// Zone mode keeps its promise on any state: an allowed eviction leaves every other zone fully available and
    /// at most maxUnavailable pods of its own zone (the evicted one included) unavailable.
    #[test]
    fn zone_mode_never_allows_more_than_the_budget(
        max in 1i64..4,
        broken in proptest::collection::vec((0usize..3, 0u32..4, any::<bool>()), 0..6),
        evicted in (0usize..3, 0u32..4),
    ) {
        let mut world = World::new(3, 4);
        for (z, o, remove) in broken {
            let name = format!("{}-{o}", zone((b'a' + z as u8) as char));
            if world.pods.iter().any(|p| p.name() == name) {
                if remove { world.remove(&name) } else { world.not_ready(&name) }
            }
        }
        let name = format!("{}-{}", zone((b'a' + evicted.0 as u8) as char), evicted.1);
        prop_assume!(world.pods.iter().any(|p| p.name() == name));
        if world.judge(&zone_mode(max), &name, &[]).is_ok() {
            for sts in &world.statefulsets {
                let available = world
                    .pods
                    .iter()
                    .filter(|p| sts.owns(&p.pod) && p.name() != name && p.pod.is_available(0, now()))
                    .count() as i64;
                let unavailable = i64::from(sts.replicas) - available;
                if sts.name == world.owner(&name).name {
                    prop_assert!(unavailable <= max, "{} would have {unavailable} unavailable", sts.name);
                } else {
                    prop_assert_eq!(unavailable, 0, "{} is disrupted", &sts.name);
                }
            }
        }
    }
}

#[test]
fn ready_time_is_stamped_once_and_removed_when_not_ready() {
    let world = World::new(1, 1);
    let pod = world.pod("ingester-zone-a-0").clone();
    assert_eq!(ready_time_change(&pod, now()), Some(ReadyTimeChange::Set("2026-03-01T12:00:00Z".into())));
    let stamped = BudgetPod { ready_time: Some("2026-01-01T00:00:00Z".into()), ..pod.clone() };
    assert_eq!(ready_time_change(&stamped, now()), None, "kept across restarts");
    let down = BudgetPod { pod: fixture::not_ready(pod.pod.clone()), ..stamped };
    assert_eq!(ready_time_change(&down, now()), Some(ReadyTimeChange::Remove));
    let down_unstamped = BudgetPod { pod: fixture::not_ready(pod.pod), ready_time: None, intent_until: None };
    assert_eq!(ready_time_change(&down_unstamped, now()), None);
}
