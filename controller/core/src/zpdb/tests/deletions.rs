//! The rollout controller's deletions (reference 5.5), run through the same step machine as evictions.

use super::*;

fn rollout_deletion(cluster: &mut Cluster, pod: &str, rollout_max_unavailable: u32) -> (EvictionVerdict, Vec<String>) {
    let request = EvictionRequest::for_rollout(pod, "ns", rollout_max_unavailable);
    cluster.run(EvictPod::new(request, settings(Serialisation::Intents)))
}

#[test]
fn the_controller_deletes_under_a_zero_budget_with_its_own_max_unavailable() {
    // maxUnavailable 0 switches voluntary evictions off; the rollout goes on with rollout-max-unavailable 2.
    let mut cluster = Cluster::new(World::new(3, 3), zone_mode(0));
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.outcome), (false, Outcome::MAX_UNAVAILABLE_0));
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 2);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::ALLOWED), "{verdict:?}");
    assert!(needs.contains(&"write-intent".to_string()), "serialised like an eviction: {needs:?}");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-1", 2);
    assert!(verdict.allowed(), "a second pod of the zone within 2: {verdict:?}");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-2", 2);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "2 pods not ready in ingester-zone-a"));
    // Zones are still kept: another zone waits while zone a has pods going.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-0", 2);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "2 pods not ready in ingester-zone-a"));
}

#[test]
fn the_controller_stands_in_one_for_a_zero_partition_aware_budget() {
    let mut cluster = Cluster::new(World::new(3, 3), partition_mode(0, "0s"));
    // Its rollout-max-unavailable (3) is not used: under a partition-aware budget the stand-in is 1.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 3);
    assert!(verdict.allowed(), "{verdict:?}");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-0", 3);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in partition 0"));
    // Another partition is free.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-1", 3);
    assert!(verdict.allowed(), "{verdict:?}");
}

/// Sim seeds 39, 61 and 96 of `--drains partition --webhook`: zones scaled to different sizes by their HPAs, and a
/// rollout holding the downscales that would make them alike.
#[test]
fn the_controller_deletes_a_partition_a_smaller_zone_has_no_slot_for_and_evictions_wait() {
    let mut cluster = Cluster::new(World::new(3, 3), partition_mode(1, "0s"));
    cluster.world.statefulsets[0].replicas = 2;
    cluster.world.statefulsets[0].status.as_mut().unwrap().replicas = 2;
    cluster.world.remove("ingester-zone-a-2");
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-b-2"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod unknown in partition 2"), "the reference's rule");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-2", 1);
    assert!(verdict.allowed(), "{verdict:?}");
    // The partition's other peer is now going: the same deletion in zone c waits (it would be the last).
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-c-2", 1);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready, 1 pod unknown in partition 2"));
}

#[test]
fn a_budget_other_than_zero_binds_the_controller_too() {
    // maxUnavailable 1 wins over rollout-max-unavailable 3: the budget is the stricter.
    let mut cluster = Cluster::new(World::new(3, 3), zone_mode(1));
    assert!(rollout_deletion(&mut cluster, "ingester-zone-a-0", 3).0.allowed());
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-1", 3);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"));
}

#[test]
fn the_controller_replaces_an_unavailable_pod_without_spending_the_budget() {
    let mut cluster = Cluster::new(World::new(3, 3), zone_mode(1));
    cluster.world.not_ready("ingester-zone-a-0");
    cluster.world.not_ready("ingester-zone-a-1");
    // A drain may not take the second unready pod's zone further, and the webhook judges it as the reference does.
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-1"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"));
    // The controller replacing a crash-looping pod takes nothing away that serves: allowed without spending the
    // budget (its intent written and the pods read again all the same:
    // `a_rollout_deletion_of_an_unavailable_pod_records_its_intent_first`).
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-1", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::POD_NOT_READY), "{verdict:?}");
    assert!(needs.ends_with(&["write-intent", "statefulsets-again", "pods-again"].map(String::from)), "{needs:?}");
    // A Ready pod of that zone still waits.
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-2", 1);
    assert!(!verdict.allowed(), "{verdict:?}");
}

#[test]
fn budgets_the_operator_may_not_read_do_not_stop_the_controller_but_do_stop_evictions() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.budgets = KnownBudgets::Unreadable("forbidden".into());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.outcome.status), (false, 500));
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::POD_NOT_IN_SCOPE), "{verdict:?}");
    assert_eq!(needs, ["budgets"], "nothing read live: no permission beyond the rollout's is needed");
    // No budget at all in the namespace: the same, without a live read.
    cluster.budgets = KnownBudgets::Known(Vec::new());
    let (verdict, needs) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome, needs), (true, Outcome::POD_NOT_IN_SCOPE, vec!["budgets".into()]));
    // Not listed yet: the controller waits, as an eviction would.
    cluster.budgets = KnownBudgets::NotLoaded("starting".into());
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-a-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (false, Outcome::CFG_NOT_LOADED));
}

/// Found by the model (`rollout-model zpdb`, a crash during a rollout): the controller's deletion of a crashed pod
/// was allowed at once, without an intent; the pod turned Ready again before the deletion committed, and a drain
/// eviction in another zone, decided meanwhile, saw nothing going in that zone. The deletion now goes through the
/// flow: intent, then the pods read again (a pod Ready again by then is judged as any other).
#[test]
fn a_rollout_deletion_of_an_unavailable_pod_records_its_intent_first() {
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    cluster.world.not_ready("ingester-zone-b-0");
    let (verdict, _) = rollout_deletion(&mut cluster, "ingester-zone-b-0", 1);
    assert_eq!((verdict.allowed(), verdict.outcome), (true, Outcome::POD_NOT_READY), "{verdict:?}");
    // Ready again before the controller's deletion commits.
    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod = fixture::pod(&fixture::statefulset(GROUP, &zone('b'), 2, "r1"), 0, "r1")
    });
    assert!(cluster.world.pod("ingester-zone-b-0").intent_until.is_some());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"), "{verdict:?}");
    // Ready again before the second read: judged as any other pod (zone a is going).
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    cluster.world.not_ready("ingester-zone-a-0");
    cluster.world.not_ready("ingester-zone-b-0");
    let mut flow =
        EvictPod::new(EvictionRequest::for_rollout("ingester-zone-b-0", "ns", 1), settings(Serialisation::Intents));
    let mut need = flow.step(Observed::Start, now());
    while !matches!(need, Need::PodsAgain { .. }) {
        assert!(!matches!(need, Need::Answer(_)), "answered before its second read: {need:?}");
        let observed = cluster.observe(&need);
        need = flow.step(observed, now());
    }
    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod = fixture::pod(&fixture::statefulset(GROUP, &zone('b'), 2, "r1"), 0, "r1")
    });
    let observed = cluster.observe(&need);
    let mut need = flow.step(observed, now());
    while let Need::PodsAgain { .. } | Need::RemoveIntent { .. } = need {
        let observed = cluster.observe(&need);
        need = flow.step(observed, now());
    }
    let Need::Answer(verdict) = need else { panic!("no answer: {need:?}") };
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"), "{verdict:?}");
}
