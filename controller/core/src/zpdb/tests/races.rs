//! Decisions racing for one budget: intent order between rivals, interleaved deciders, and decisions about the
//! same pod each keeping an intent of their own.

use super::*;

/// Runs a flow whose pods, at its second read, carry `rival`'s intent expiring at `rival_until`; `rival_gives_way`
/// removes that intent after the first wait. Returns the answer and the writes.
fn race_with(
    evicted: &str,
    rival: &str,
    rival_until: Timestamp,
    rival_gives_way: bool,
) -> (EvictionVerdict, Vec<String>, u32) {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction(evicted), settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let mut waits = 0;
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need => {
                if let Need::StatefulSetsAgain { after, .. } = &need {
                    if after.is_zero() {
                        cluster.world.change(rival, |p| p.intent_until = Some(rival_until));
                    } else {
                        assert_eq!(*after, flow::rival_wait(waits), "waits double from the first");
                        waits += 1;
                        if rival_gives_way {
                            cluster.world.change(rival, |p| p.intent_until = None);
                        }
                    }
                }
                observed = cluster.observe(&need);
            }
        }
    };
    (verdict, cluster.writes, waits)
}

#[test]
fn of_two_racing_decisions_the_earlier_intent_goes_first() {
    let ours = now() + jiff::SignedDuration::from_secs(30);
    // A later intent (written after ours) gives way: we wait for it to go, then allow.
    let later = ours + jiff::SignedDuration::from_secs(1);
    let a0 = "ingester-zone-a-0";
    let (verdict, writes, waits) = race_with(a0, "ingester-zone-b-1", later, true);
    assert!(verdict.allowed(), "{verdict:?}");
    assert_eq!((writes.len(), waits), (1, 1), "{writes:?}");
    // Same expiry: the pod name decides (ingester-zone-a-0 before ingester-zone-b-1).
    let (verdict, _, waits) = race_with(a0, "ingester-zone-b-1", ours, true);
    assert!(verdict.allowed() && waits == 1, "{verdict:?}");
    let (verdict, writes, waits) = race_with("ingester-zone-b-1", a0, ours, true);
    assert_eq!((verdict.allowed(), waits), (false, 0), "{verdict:?}");
    assert_eq!(writes, ["intent ingester-zone-b-1", "remove ingester-zone-b-1"]);
    // An earlier intent: we give way at once.
    let (verdict, _, waits) = race_with(a0, "ingester-zone-b-1", now() + jiff::SignedDuration::from_secs(29), true);
    assert_eq!((verdict.allowed(), waits), (false, 0), "{verdict:?}");
    // A later rival that never goes: we give up after the last wait and take our intent back.
    let (verdict, writes, waits) = race_with(a0, "ingester-zone-b-1", later, false);
    assert_eq!((verdict.allowed(), waits), (false, flow::RIVAL_WAITS));
    assert_eq!((verdict.outcome, verdict.message()), (Outcome::DENIED, "1 pod not ready in ingester-zone-b"));
    assert_eq!(writes, ["intent ingester-zone-a-0", "remove ingester-zone-a-0"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]
    /// Two evictions over one budget (maxUnavailable 1, both in one zone or in two zones), their needs interleaved
    /// in any order against a linearizable store: never both allowed; and run one after the other, the first is.
    #[test]
    fn two_racing_evictions_never_spend_one_budget_twice(
        schedule in proptest::collection::vec(any::<bool>(), 0..40),
        same_zone in any::<bool>(),
        in_process in any::<bool>(),
    ) {
        let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
        let names = ["ingester-zone-a-0", if same_zone { "ingester-zone-a-1" } else { "ingester-zone-b-0" }];
        let serialisation = if in_process { Serialisation::InProcess } else { Serialisation::Intents };
        let mut racers: Vec<Racer> = names
            .iter()
            .map(|n| {
                let mut flow = EvictPod::from_admission(&eviction(n), settings(serialisation));
                let next = flow.step(Observed::Start, now());
                Racer { flow, next }
            })
            .collect();
        // The in-process lock: held by at most one racer until it answers.
        let mut holder: Option<usize> = None;
        let mut answers: [Option<bool>; 2] = [None, None];
        let mut turn = schedule.into_iter().chain(std::iter::repeat(false));
        while answers.iter().any(Option::is_none) {
            let mut i = usize::from(turn.next().unwrap_or(false));
            if answers[i].is_some() { i = 1 - i; }
            // Blocked on the lock the other holds: the other goes on.
            if matches!(racers[i].next, Need::Lock { .. }) && holder == Some(1 - i) { i = 1 - i; }
            let racer = &mut racers[i];
            if let Need::Answer(v) = &racer.next {
                answers[i] = Some(v.allowed());
                if holder == Some(i) { holder = None; }
                continue;
            }
            if matches!(racer.next, Need::Lock { .. }) {
                holder = Some(i);
            }
            let observed = cluster.observe(&racer.next);
            racer.next = racer.flow.step(observed, now());
        }
        prop_assert!(!(answers[0] == Some(true) && answers[1] == Some(true)), "both allowed: {:?}", cluster.writes);
    }
}

/// Two racers stepped strictly in turn, from either side first and for every offset: exactly one is allowed.
#[test]
fn two_evictions_taking_turns_allow_exactly_one() {
    for same_zone in [true, false] {
        for offset in 0..12 {
            for first in [0usize, 1] {
                let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
                let names = ["ingester-zone-a-0", if same_zone { "ingester-zone-a-1" } else { "ingester-zone-b-0" }];
                let mut racers: Vec<Racer> = names
                    .iter()
                    .map(|n| {
                        let mut flow = EvictPod::from_admission(&eviction(n), settings(Serialisation::Intents));
                        let next = flow.step(Observed::Start, now());
                        Racer { flow, next }
                    })
                    .collect();
                let mut answers: [Option<bool>; 2] = [None, None];
                let mut turn = first;
                let mut steps = 0;
                while answers.iter().any(Option::is_none) {
                    // `first` alone for `offset` steps, then strictly in turn.
                    let i = if steps < offset { first } else { turn };
                    steps += 1;
                    turn = 1 - turn;
                    let i = if answers[i].is_some() { 1 - i } else { i };
                    let racer = &mut racers[i];
                    if let Need::Answer(v) = &racer.next {
                        answers[i] = Some(v.allowed());
                        continue;
                    }
                    let observed = cluster.observe(&racer.next);
                    racer.next = racer.flow.step(observed, now());
                }
                let allowed = answers.iter().filter(|a| **a == Some(true)).count();
                assert_eq!(allowed, 1, "same zone {same_zone}, offset {offset}, first {first}: {:?}", cluster.writes);
            }
        }
    }
}

/// Found by the model (`rollout-model zpdb`): the pod is deleted (another eviction commits), recreated and Ready
/// again between the intent write and the second read. The intent went with the old pod and the new one carries
/// none, so allowing would let the API server evict the new pod while a later decision sees nothing being evicted.
#[test]
fn a_pod_replaced_after_its_intent_was_written_is_not_evicted_on_that_intent() {
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    let mut flow = EvictPod::from_admission(&eviction("ingester-zone-b-0"), settings(Serialisation::Intents));
    let mut need = flow.step(Observed::Start, now());
    while !matches!(need, Need::PodsAgain { .. }) {
        assert!(!matches!(need, Need::Answer(_)), "answered before its second read: {need:?}");
        let observed = cluster.observe(&need);
        need = flow.step(observed, now());
    }
    cluster.world.change("ingester-zone-b-0", |p| {
        p.pod.uid.push_str("-recreated");
        p.intent_until = None;
    });
    let observed = cluster.observe(&need);
    let Need::Answer(v) = flow.step(observed, now()) else { panic!("no answer") };
    assert_eq!((v.allowed(), v.outcome), (false, Outcome::DENIED), "{v:?}");
    assert_eq!(v.message(), "pod ingester-zone-b-0 was replaced while its eviction was being decided; retry");
    // Not replaced, the same decision is allowed.
    let mut cluster = Cluster::new(World::new(2, 2), zone_mode(1));
    let (v, _) = decide(&mut cluster, &eviction("ingester-zone-b-0"), Serialisation::Intents);
    assert!(v.allowed(), "{v:?}");
}

#[test]
fn one_after_the_other_the_first_is_allowed_and_the_second_denied() {
    for serialisation in [Serialisation::Intents, Serialisation::InProcess] {
        let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
        let (first, _) = decide(&mut cluster, &eviction("ingester-zone-a-0"), serialisation);
        let (second, _) = decide(&mut cluster, &eviction("ingester-zone-a-1"), serialisation);
        assert!(first.allowed() && !second.allowed(), "{serialisation:?}: {first:?} {second:?}");
        assert_eq!(second.message(), "1 pod not ready in ingester-zone-a");
    }
}

/// Found by the ZPDB model: two decisions about the same pod wrote the same intent annotation, and the one denied
/// took back the intent the allowed one relied on until its eviction committed. Each decision now has its own key.
#[test]
fn a_denied_decision_leaves_the_intent_of_an_allowed_one_about_the_same_pod() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let mut first = eviction("ingester-zone-a-0");
    first.uid = "first".into();
    let (verdict, _) = decide(&mut cluster, &first, Serialisation::Intents);
    assert!(verdict.allowed(), "{verdict:?}");
    // A second decision about the same pod (a retried drain on another replica) is denied after writing its intent:
    // an earlier intent of another zone shows at its second read.
    let mut second = eviction("ingester-zone-a-0");
    second.uid = "second".into();
    let mut flow = EvictPod::from_admission(&second, settings(Serialisation::Intents));
    let mut observed = Observed::Start;
    let verdict = loop {
        match flow.step(observed, now()) {
            Need::Answer(v) => break v,
            need => {
                if let Need::WriteIntent { key, .. } = &need {
                    assert_eq!(key, "grafana.com/eviction-intent.second");
                    cluster.world.change("ingester-zone-b-0", |p| {
                        p.intent_until = Some(now() + jiff::SignedDuration::from_secs(1))
                    });
                }
                observed = cluster.observe(&need);
            }
        }
    };
    assert!(!verdict.allowed(), "{verdict:?}");
    assert_eq!(cluster.writes.iter().filter(|w| w.starts_with("remove")).count(), 1, "{:?}", cluster.writes);
    // The first decision's intent is still on the pod: a third decision about another zone counts it.
    let keys: Vec<&String> = cluster.intents.keys().map(|(_, key)| key).collect();
    assert_eq!(keys, ["grafana.com/eviction-intent.first"]);
    assert!(cluster.world.pod("ingester-zone-a-0").has_live_intent(now()));
}

#[test]
fn intent_keys_are_valid_annotation_names_and_all_of_them_are_read() {
    assert_eq!(keys::eviction_intent_key("7c2a-uid"), "grafana.com/eviction-intent.7c2a-uid");
    assert_eq!(keys::eviction_intent_key("a/b c"), "grafana.com/eviction-intent.a-b-c");
    assert_eq!(keys::eviction_intent_key(""), "grafana.com/eviction-intent");
    let long = keys::eviction_intent_key(&"x".repeat(100));
    assert_eq!(long.len() - "grafana.com/".len(), 63);
    assert!(keys::is_eviction_intent("grafana.com/eviction-intent") && keys::is_eviction_intent(&long));
    assert!(!keys::is_eviction_intent("grafana.com/eviction-intentional"));
    // A pod read from the API shows the latest of its intents.
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(json!({
        "metadata": {"name": "ingester-zone-a-0", "uid": "u0", "annotations": {
            "grafana.com/eviction-intent.a": "2026-03-01T12:00:10Z",
            "grafana.com/eviction-intent.b": "2026-03-01T12:00:40Z",
            "grafana.com/eviction-intent.c": "not a time"}},
        "status": {"phase": "Running"}}))
    .unwrap();
    let read = BudgetPod::from_k8s(&pod).unwrap();
    assert_eq!(read.intent_until, Some("2026-03-01T12:00:40Z".parse().unwrap()));
}

/// Found by the `zpdb_evictions` bench (two evictions of one pod at once, as from overlapping drains or
/// a client retrying while its first request is still being decided): the decider of the same pod that loses a
/// race takes back the intent its twin, already allowed, relies on until the API server commits the eviction; a
/// decider in another zone then reads no intent and no terminating pod, and is allowed too. Scripted: twins `d1`,
/// `d2` evict `ingester-zone-b-0`, `q` evicts `ingester-zone-a-0` (ordered before it by name).
/// Fixed by keying each decision's intent on its AdmissionReview's uid.
#[test]
fn twin_decisions_of_one_pod_never_let_a_rival_spend_the_budget_again() {
    let mut cluster = Cluster::new(World::new(3, 2), zone_mode(1));
    let start = |pod: &str, uid: &str| {
        let mut request = eviction(pod);
        request.uid = uid.into();
        let mut flow = EvictPod::from_admission(&request, settings(Serialisation::Intents));
        let next = flow.step(Observed::Start, now());
        Racer { flow, next }
    };
    let (mut d1, mut d2, mut q) =
        (start("ingester-zone-b-0", "d1"), start("ingester-zone-b-0", "d2"), start("ingester-zone-a-0", "q"));
    // Steps `racer` until it needs `until` (not carried out) or answers.
    let run_until = |cluster: &mut Cluster, racer: &mut Racer, until: &str| loop {
        if matches!(racer.next, Need::Answer(_)) || racer.next.kind() == until {
            return;
        }
        let observed = cluster.observe(&racer.next);
        racer.next = racer.flow.step(observed, now());
    };
    let step = |cluster: &mut Cluster, racer: &mut Racer| {
        let observed = cluster.observe(&racer.next);
        racer.next = racer.flow.step(observed, now());
    };
    run_until(&mut cluster, &mut q, "write-intent"); // q judged on a view without intents
    run_until(&mut cluster, &mut d1, "answer"); // d1 allowed; the eviction is not committed yet
    assert!(matches!(&d1.next, Need::Answer(v) if v.allowed()), "{:?}", d1.next);
    run_until(&mut cluster, &mut d2, "pods-again"); // d2 rewrote the same intent
    step(&mut cluster, &mut q); // q's intent
    step(&mut cluster, &mut q); // q reads again: only a later intent (b-0) stands in its way: it waits
    run_until(&mut cluster, &mut d2, "answer"); // d2 loses to q and takes the intent of b-0 back
    run_until(&mut cluster, &mut q, "answer");
    let q_allowed = matches!(&q.next, Need::Answer(v) if v.allowed());
    assert!(!q_allowed, "b-0 allowed and then a-0 allowed, in another zone: {:?}", cluster.writes);
}
