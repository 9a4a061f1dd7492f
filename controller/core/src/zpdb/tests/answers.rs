//! The step machine's early answers (message, code and outcome), how the owner is read, and failed reads answered
//! by policy.

use super::*;
use crate::failure::Failure;

#[test]
fn each_early_answer_has_the_reference_message_code_and_outcome() {
    let config = zone_mode(1);
    let run = |cluster: &mut Cluster, pod: &str| decide(cluster, &eviction(pod), Serialisation::Intents).0;
    let check = |v: EvictionVerdict, outcome: Outcome, message: &str| {
        assert_eq!((v.outcome, v.message()), (outcome, message), "{v:?}");
        assert_eq!(v.verdict.code, (!outcome.allowed()).then_some(outcome.status));
        assert_eq!(v.allowed(), outcome.allowed());
    };
    let mut cluster = Cluster::new(World::new(3, 1), config.clone());
    check(run(&mut cluster, "nope"), Outcome::POD_NOT_FOUND, "pods \"nope\" not found");

    cluster.world.change("ingester-zone-a-0", |p| p.pod.phase = "Pending".into());
    let v = run(&mut cluster, "ingester-zone-a-0");
    assert_eq!((v.outcome, v.verdict.warnings.clone()), (Outcome::POD_NOT_READY, vec!["pod is not ready".to_string()]));
    cluster.world.change("ingester-zone-a-0", |p| p.pod.phase = "Running".into());

    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod.labels.remove(keys::ROLLOUT_GROUP);
    });
    check(run(&mut cluster, "ingester-zone-b-0"), Outcome::POD_NOT_IN_SCOPE, "");

    let mut twice = config.clone();
    twice.name = "second".into();
    cluster.budgets = KnownBudgets::Known(vec![config.clone(), twice]);
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::CFG_NOT_FOUND,
        "multiple zoned pod disruption budgets found for pod",
    );
    cluster.budgets = KnownBudgets::NotLoaded("starting".into());
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::CFG_NOT_LOADED,
        "ZoneAwarePodDisruptionBudgets are not loaded yet (starting); retry",
    );
    cluster.budgets = KnownBudgets::Known(vec![config.clone()]);

    cluster.world.change("ingester-zone-c-0", |p| p.pod.owner = None);
    check(run(&mut cluster, "ingester-zone-c-0"), Outcome::STS_NOT_FOUND, "unable to find a StatefulSet pod owner");
    cluster.world.change("ingester-zone-c-0", |p| {
        p.pod.owner = Some(OwnerRef { kind: "ReplicaSet".into(), name: "rs".into(), uid: "u".into() })
    });
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::STS_NOT_FOUND,
        "pod owner is not a StatefulSet - ingester-zone-c-0 has owner rs (ReplicaSet)",
    );
    cluster.world.change("ingester-zone-c-0", |p| {
        p.pod.owner = Some(OwnerRef { kind: "StatefulSet".into(), name: "gone".into(), uid: "u".into() })
    });
    check(
        run(&mut cluster, "ingester-zone-c-0"),
        Outcome::STS_NOT_FOUND,
        "unable to find StatefulSet gone by name: statefulsets.apps \"gone\" not found",
    );

    cluster.budgets = KnownBudgets::Known(vec![zone_mode(0)]);
    check(run(&mut cluster, "ingester-zone-a-0"), Outcome::MAX_UNAVAILABLE_0, "max unavailable = 0");

    cluster.budgets = KnownBudgets::Known(vec![config.clone()]);
    let single = World::new(1, 2);
    let mut alone = Cluster::new(single, config);
    check(run(&mut alone, "ingester-zone-a-0"), Outcome::MIN_STS_NOT_FOUND, "minimum number of StatefulSets not found");

    let mut named = Cluster::new(
        World::new(2, 1),
        parse(with_selector(json!({"podNamePartitionRegex": "ingester-zone-[a-z]-(x)"}))).unwrap(),
    );
    check(
        run(&mut named, "ingester-zone-a-0"),
        Outcome::PARTITION_NOT_IDENTIFIED,
        "failed to extract partition from pod Name regular expression",
    );
}

#[test]
fn the_owner_is_taken_from_the_budgets_list_and_read_by_name_only_when_it_is_not_in_it() {
    let world = World::new(3, 1);
    let pod = world.pod("ingester-zone-a-0").clone();
    let config = zone_mode(1);
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    flow.step(Observed::Start, now());
    flow.step(Observed::Pod(Lookup::Found(Box::new(pod))), now());
    assert!(matches!(
        flow.step(Observed::Budgets(KnownBudgets::Known(vec![config])), now()),
        Need::StatefulSets { .. }
    ));
    // The budget does not select the pod's own StatefulSet: read by name, then judged (and denied, zone mode).
    let others: Vec<StatefulSetView> =
        world.statefulsets.iter().filter(|s| s.name != "ingester-zone-a").cloned().collect();
    assert_eq!(
        flow.step(Observed::StatefulSets(Ok(others)), now()),
        Need::StatefulSet { name: "ingester-zone-a".into() }
    );
    let owner = world.statefulsets.iter().find(|s| s.name == "ingester-zone-a").cloned().unwrap();
    assert!(matches!(flow.step(Observed::StatefulSet(Lookup::Found(Box::new(owner))), now()), Need::Pods { .. }));
    assert!(matches!(flow.step(Observed::Pods(Ok(world.pods.as_slice().into())), now()), Need::Claim { .. }));
    let Need::Answer(v) = flow.step(Observed::Claimed { others: Vec::new() }, now()) else { panic!("no answer") };
    assert_eq!((v.outcome, v.allowed()), (Outcome::STS_NOT_FOUND, false));
    assert!(v.message().starts_with("the pod's StatefulSet ingester-zone-a is not selected"), "{}", v.message());
}

#[test]
fn failed_reads_are_answered_by_policy() {
    let world = World::new(3, 1);
    let pod = world.pod("ingester-zone-a-0").clone();
    let sts = world.statefulsets.clone();
    let config = zone_mode(1);
    let start = |observations: Vec<Observed>| {
        let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
        let mut need = flow.step(Observed::Start, now());
        for o in observations {
            need = flow.step(o, now());
        }
        match need {
            Need::Answer(v) => v,
            other => panic!("expected an answer, got {other:?}"),
        }
    };
    let found = || Observed::Pod(Lookup::Found(Box::new(pod.clone())));
    let budgets = || Observed::Budgets(KnownBudgets::Known(vec![config.clone()]));
    let owner = || Observed::StatefulSet(Lookup::Found(Box::new(sts[0].clone())));
    let v = start(vec![Observed::Pod(Lookup::Failed(Failure::Unavailable("API unavailable: deadline".into())))]);
    assert_eq!((v.outcome, v.message()), (Outcome::POD_NOT_FOUND, "API unavailable: deadline"));
    // The owner is not in a failed list: read by name, and that read's failure comes first (as the reference).
    let v = start(vec![
        found(),
        budgets(),
        Observed::StatefulSets(Err(Failure::Unavailable("boom".into()))),
        Observed::StatefulSet(Lookup::Failed(Failure::Unavailable("boom".into()))),
    ]);
    assert_eq!(
        (v.outcome, v.message()),
        (Outcome::STS_NOT_FOUND, "unable to find StatefulSet ingester-zone-a by name: boom")
    );
    let v = start(vec![found(), budgets(), Observed::StatefulSets(Err(Failure::Unavailable("boom".into()))), owner()]);
    assert_eq!((v.outcome, v.message()), (Outcome::MIN_STS_NOT_FOUND, "minimum number of StatefulSets not found"));
    let v = start(vec![
        found(),
        budgets(),
        Observed::StatefulSets(Ok(sts.clone())),
        Observed::Pods(Err(Failure::Unavailable("boom".into()))),
    ]);
    assert_eq!(
        (v.outcome, v.message(), v.verdict.code),
        (Outcome::POD_STATUS_NOT_DETERMINED, "unable to determine pod status in related StatefulSet", Some(500))
    );
    let pods = || Observed::Pods(Ok(world.pods.as_slice().into()));
    let sts_listed = || Observed::StatefulSets(Ok(sts.clone()));
    let claimed = || Observed::Claimed { others: Vec::new() };
    let v = start(vec![
        found(),
        budgets(),
        sts_listed(),
        pods(),
        claimed(),
        Observed::IntentWritten(Err(Failure::Failed("timeout".into()))),
    ]);
    assert_eq!((v.outcome, v.verdict.code), (Outcome::INTENT_NOT_RECORDED, Some(500)));
    let v = start(vec![
        found(),
        budgets(),
        sts_listed(),
        pods(),
        claimed(),
        Observed::IntentWritten(Err(Failure::Conflict("conflict".into()))),
    ]);
    assert_eq!((v.outcome, v.verdict.code), (Outcome::DENIED, Some(429)));
    // A failed second read takes the intent back and denies.
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::Intents));
    for o in [
        Observed::Start,
        found(),
        budgets(),
        sts_listed(),
        pods(),
        claimed(),
        Observed::IntentWritten(Ok(())),
        sts_listed(),
    ] {
        flow.step(o, now());
    }
    assert!(matches!(
        flow.step(Observed::Pods(Err(Failure::Unavailable("boom".into()))), now()),
        Need::RemoveIntent { .. }
    ));
    let Need::Answer(v) = flow.step(Observed::IntentRemoved, now()) else { panic!("no answer") };
    assert_eq!(v.outcome, Outcome::POD_STATUS_NOT_DETERMINED);
    // The lock not taken in time: 429.
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-a-0"), settings(Serialisation::InProcess));
    for o in [Observed::Start, found(), budgets()] {
        flow.step(o, now());
    }
    assert!(matches!(flow.step(sts_listed(), now()), Need::Lock { .. }));
    let Need::Answer(v) = flow.step(Observed::NotLocked, now()) else { panic!("no answer") };
    assert_eq!((v.outcome, v.verdict.code), (Outcome::DENIED, Some(429)));
    assert_eq!(
        v.message(),
        "another eviction under ZoneAwarePodDisruptionBudget ingester-rollout is being decided; retry"
    );
    // An observation out of order is a denial, and the flow keeps giving the same answer.
    let v = start(vec![budgets()]);
    assert!(!v.allowed() && v.message().starts_with("internal error: the eviction flow expected the pod"), "{v:?}");
}

#[test]
fn a_foreign_namespace_is_allowed_with_a_warning_and_nothing_read() {
    let mut cluster = Cluster::new(World::new(3, 1), zone_mode(1));
    let mut request = eviction("ingester-zone-a-0");
    request.namespace = "elsewhere".into();
    let (verdict, needs) = decide(&mut cluster, &request, Serialisation::Intents);
    assert!(verdict.allowed() && needs.is_empty());
    assert_eq!(verdict.outcome, Outcome::POD_NOT_IN_SCOPE);
    assert_eq!(verdict.verdict.warnings.len(), 1);
}
