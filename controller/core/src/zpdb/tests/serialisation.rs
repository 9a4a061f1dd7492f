//! The step machine's serialisation: intents on pods, on StatefulSets, and the fallback to the in-process lock and
//! memory when neither may be patched.

use super::*;
use crate::failure::Failure;

#[test]
fn requests_that_are_not_evictions_are_denied_with_400() {
    let mut cluster = Cluster::new(World::new(3, 1), zone_mode(1));
    let cases = [
        (review_request("DELETE", "eviction", "p", Value::Null), "request operation is not create, got: DELETE"),
        (review_request("CREATE", "status", "p", Value::Null), "request SubResource is not eviction, got: status"),
        (review_request("CREATE", "eviction", "", Value::Null), "request did not include both a namespace and a name"),
    ];
    for (request, message) in cases {
        let (verdict, needs) = decide(&mut cluster, &request, Serialisation::Intents);
        assert_eq!(
            (verdict.message(), verdict.verdict.code, verdict.outcome),
            (message, Some(400), Outcome::INVALID_REQUEST)
        );
        assert!(needs.is_empty(), "nothing read: {needs:?}");
    }
}

#[test]
fn an_allowed_eviction_writes_its_intent_and_judges_again() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!(
        (verdict.allowed(), verdict.outcome, verdict.message()),
        (true, Outcome::ALLOWED, "zpdb met across 3 zones")
    );
    assert_eq!(needs[..4], FIRST_READS);
    assert_eq!(needs[4..], ["claim", "write-intent", "statefulsets-again", "pods-again"]);
    let until = cluster.world.pod("ingester-zone-a-0").intent_until.expect("intent left on the pod");
    assert_eq!(until, "2026-03-01T12:00:30Z".parse::<Timestamp>().unwrap());
    // The next eviction in any zone sees it.
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::Intents);
    assert_eq!(
        (verdict.allowed(), verdict.message(), verdict.verdict.code),
        (false, "1 pod not ready in ingester-zone-a", Some(429))
    );
    assert!(!needs.contains(&"write-intent".to_string()), "denied before writing: {needs:?}");
}

/// The intents on StatefulSets read back: live ones by the pod's uid (a pod recreated under the name is not held),
/// the latest per pod; expired and unreadable ones are stale.
#[test]
fn statefulset_intents_name_the_pod_by_uid_and_expire() {
    let intent = StatefulSetIntent { until: now(), pod: "ingester-zone-a-0".into(), uid: "u0".into() };
    assert_eq!(intent.value(), "2026-03-01T12:00:00Z ingester-zone-a-0 u0");
    assert_eq!(StatefulSetIntent::parse(&intent.value()), Some(intent));
    for garbled in ["", "2026-03-01T12:00:00Z", "2026-03-01T12:00:00Z p", "soon p u", "2026-03-01T12:00:00Z p u x"] {
        assert_eq!(StatefulSetIntent::parse(garbled), None, "{garbled:?}");
    }
    let mut world = World::new(2, 1);
    let later = now() + jiff::SignedDuration::from_secs(30);
    let annotations = &mut world.statefulsets[0].annotations;
    annotations.insert(keys::eviction_intent_key("one"), format!("{} p u0", format_timestamp(now())));
    annotations.insert(keys::eviction_intent_key("two"), format!("{} p u0", format_timestamp(later)));
    annotations.insert(keys::eviction_intent_key("bad"), "garbled".into());
    annotations.insert("other".into(), format!("{} p u1", format_timestamp(later)));
    world.statefulsets[1].annotations.insert(keys::EVICTION_INTENT.into(), format!("{} q u1", format_timestamp(now())));
    let kept = pods::statefulset_intents(&world.statefulsets);
    assert_eq!(kept, BTreeMap::from([("u0".to_string(), later), ("u1".to_string(), now())]));
    let stale = pods::stale_statefulset_intents(&world.statefulsets[0], now());
    assert_eq!(stale, [keys::eviction_intent_key("bad"), keys::eviction_intent_key("one")]);
}

/// Without `patch` on pods (older Helm charts) the intent goes on the pod's StatefulSet, and the StatefulSets are
/// read again before the pods; a later decision (any replica) counts it, while the pod it names is the same pod.
#[test]
fn without_pod_patches_the_intent_goes_on_the_statefulset_and_holds_the_budget() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.refuse_pod_patches = true;
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(needs[..4], FIRST_READS);
    assert_eq!(needs[4..], ["claim", "write-intent", "write-statefulset-intent", "statefulsets-again", "pods-again"]);
    let uid = cluster.world.pod("ingester-zone-a-0").uid().to_string();
    let kept = pods::statefulset_intents(&cluster.world.statefulsets);
    assert_eq!(kept, BTreeMap::from([(uid, "2026-03-01T12:00:30Z".parse::<Timestamp>().unwrap())]));
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::StatefulSetIntents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-a"));
    assert!(!needs.iter().any(|n| n.starts_with("write")), "denied before writing: {needs:?}");
    // The pod recreated under its name (another uid) is not held by the intent about the old one.
    cluster.world.change("ingester-zone-a-0", |p| p.pod.uid = "recreated".into());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::StatefulSetIntents);
    assert!(verdict.allowed(), "{verdict:?}");
}

/// Refused on StatefulSets too, the flow falls back to the lock and this process's memory.
#[test]
fn without_pod_and_statefulset_patches_the_flow_serialises_in_process() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.refuse_pod_patches = true;
    cluster.refuse_statefulset_patches = true;
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(
        needs[4..],
        ["claim", "write-intent", "write-statefulset-intent", "lock", "statefulsets-again", "pods-again", "remember"]
    );
}

/// A rival's intent on another StatefulSet that shows only in the read after ours: denied, ours taken back; and a
/// read after ours that fails is a denial too (other intents cannot be seen), ours taken back.
#[test]
fn a_statefulset_intent_that_loses_or_cannot_tell_is_taken_back() {
    let flow = || EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::StatefulSetIntents));
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, _) = cluster.run_with(flow(), |cluster, need| {
        if matches!(need, Need::StatefulSetsAgain { .. }) {
            let uid = cluster.world.pod("ingester-zone-b-1").uid().to_string();
            let earlier = now() + jiff::SignedDuration::from_secs(10);
            let intent = StatefulSetIntent { until: earlier, pod: "ingester-zone-b-1".into(), uid };
            cluster
                .annotate_statefulset("ingester-zone-b", &[(keys::eviction_intent_key("rival"), Some(intent.value()))]);
        }
    });
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"));
    assert_eq!(cluster.writes, ["intent on ingester-zone-a", "remove from ingester-zone-a"]);
    assert!(cluster.world.statefulsets[0].annotations.keys().all(|k| !keys::is_eviction_intent(k)));
    // Our intent gone from where we wrote it (the StatefulSet replaced, or someone removed it): nothing holds the
    // budget for this eviction, so it is denied (429) and retried.
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, _) = cluster.run_with(flow(), |cluster, need| {
        if matches!(need, Need::StatefulSetsAgain { .. }) {
            let keys = cluster.world.statefulsets[0].annotations.keys();
            let removals: Vec<(String, Option<String>)> = keys.map(|k| (k.clone(), None)).collect();
            cluster.annotate_statefulset("ingester-zone-a", &removals);
        }
    });
    assert_eq!((verdict.allowed(), verdict.verdict.code), (false, Some(429)), "{verdict:?}");
    assert_eq!(verdict.message(), "the eviction intent of pod ingester-zone-a-0 was lost; retry");
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.fail_statefulsets_again = true;
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::StatefulSetIntents);
    assert_eq!((verdict.allowed(), verdict.verdict.code), (false, Some(500)), "{verdict:?}");
    assert_eq!(cluster.writes, ["intent on ingester-zone-a", "remove from ingester-zone-a"]);
}

/// Another decision under way in this process (its claim came first) counts in the first judgement: a burst in one
/// process does not write intents that would only deny each other after their second reads.
#[test]
fn a_decision_under_way_in_the_process_denies_at_the_first_judgement() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    cluster.under_way = vec![cluster.world.pod("ingester-zone-b-0").uid().to_string()];
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"));
    assert_eq!(needs, ["pod", "budgets", "statefulsets", "pods", "claim"]);
    assert!(cluster.writes.is_empty(), "{:?}", cluster.writes);
    // Twins: another decision about the same pod under way decides; this one is denied for a retry.
    cluster.under_way = vec![cluster.world.pod("ingester-zone-a-0").uid().to_string()];
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert_eq!(
        (verdict.allowed(), verdict.outcome, verdict.message()),
        (false, Outcome::DENIED, "another eviction of pod ingester-zone-a-0 is being decided; retry")
    );
    assert_eq!(needs.last().map(String::as_str), Some("claim"));
    cluster.under_way.clear();
    // Partition mode: one under way in another partition does not matter, one in the same does.
    let mut cluster = Cluster::new(World::new(3, 2), partition_mode(1, "0s"));
    cluster.under_way = vec![cluster.world.pod("ingester-zone-b-1").uid().to_string()];
    assert!(decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents).0.allowed());
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-c-1"), Serialisation::Intents);
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in partition 1"));
}

/// The first list of the StatefulSets may be shared with decisions that issued it before this
/// request arrived. A zone scaled up since has a missing pod the second judgement must count, so that judgement
/// uses the StatefulSets listed after the intent.
#[test]
fn a_statefulset_scaled_up_before_the_second_read_counts_its_missing_pod() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let (verdict, needs) = cluster.run_with(
        EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents)),
        |cluster, need| {
            if matches!(need, Need::StatefulSetsAgain { .. }) {
                let zone_b = &mut cluster.world.statefulsets[1];
                zone_b.replicas = 3;
                zone_b.status.as_mut().unwrap().replicas = 3;
            }
        },
    );
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod unknown in ingester-zone-b"));
    assert_eq!(needs.last().map(String::as_str), Some("remove-intent"), "{needs:?}");
    assert!(cluster.world.pod("ingester-zone-a-0").intent_until.is_none(), "the intent was taken back");
}

#[test]
fn a_dry_run_writes_nothing() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut request = eviction("ingester-zone-a-0");
    request.dry_run = true;
    let (verdict, needs) = decide(&mut cluster, &request, Serialisation::Intents);
    assert!(verdict.allowed());
    assert_eq!(needs, ["pod", "budgets", "statefulsets", "pods"]);
    let mut request = eviction("ingester-zone-a-0");
    request.object["deleteOptions"] = json!({"dryRun": ["All"]});
    let (verdict, _) = decide(&mut cluster, &request, Serialisation::InProcess);
    assert!(verdict.allowed());
    assert!(cluster.writes.is_empty(), "{:?}", cluster.writes);
    assert!(cluster.world.pods.iter().all(|p| p.intent_until.is_none()));
    // An empty dryRun list is not a dry run.
    request.object["deleteOptions"] = json!({"dryRun": []});
    decide(&mut cluster, &request, Serialisation::Intents);
    assert_eq!(cluster.writes, ["intent ingester-zone-a-0"]);
}

#[test]
fn a_denial_after_the_intent_removes_it() {
    // Another decider's intent lands between this one's first read and its second.
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need => {
                if matches!(need, Need::PodsAgain { .. }) && cluster.writes.len() == 1 {
                    cluster.world.change("ingester-zone-b-1", |p| {
                        p.intent_until = Some(now() + jiff::SignedDuration::from_secs(10))
                    });
                }
                observed = cluster.observe(&need);
            }
        }
    };
    assert_eq!((verdict.allowed(), verdict.message()), (false, "1 pod not ready in ingester-zone-b"));
    assert_eq!(cluster.writes, ["intent ingester-zone-a-0", "remove ingester-zone-a-0"]);
    assert_eq!(cluster.world.pod("ingester-zone-a-0").intent_until, None);
    // An expired intent does not count.
    cluster.world.change("ingester-zone-b-1", |p| p.intent_until = Some(now()));
    let (verdict, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
}

#[test]
fn without_permission_to_patch_pods_or_statefulsets_it_falls_back_to_the_lock_and_memory() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let mut needs = Vec::new();
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need @ (Need::WriteIntent { .. } | Need::WriteStatefulSetIntent { .. }) => {
                needs.push(need.kind());
                observed = Observed::IntentWritten(Err(Failure::Forbidden("forbidden".into())));
            }
            need => {
                needs.push(need.kind());
                observed = cluster.observe(&need);
            }
        }
    };
    assert!(verdict.allowed() && flow.locked(), "{verdict:?}");
    assert_eq!(needs[..4], FIRST_READS);
    assert_eq!(
        needs[4..],
        ["claim", "write-intent", "write-statefulset-intent", "lock", "statefulsets-again", "pods-again", "remember"]
    );
    // The memory now counts the pod for this process's next decisions.
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::InProcess);
    assert_eq!(verdict.message(), "1 pod not ready in ingester-zone-a");
    assert_eq!(needs, ["pod", "budgets", "statefulsets", "lock", "pods"]);
    // Once expired, it does not.
    let uid = cluster.world.pod("ingester-zone-a-0").uid().to_string();
    cluster.remembered.insert(uid, now());
    let (verdict, needs) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::InProcess);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!(needs.last().map(String::as_str), Some("remember"));
}
