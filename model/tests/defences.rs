//! Each defence in depth the rollout model carries, shown on its own: the configuration where a
//! layer matters holds with the layer that might back it up switched off (`rollout_core::defences`, test-only), and
//! with the layer off too the model finds a counterexample. Exhaustive, so "holds" covers every interleaving of the
//! small configuration, not a sample of seeds.

use rollout_core::{Defences, Layer, RolloutPlanner};
use rollout_model::{ModelConfig, RolloutModel, State, Step};
use stateright::{Checker, HasDiscoveries, Model};
use std::sync::Arc;

/// Checks `config` with the production planner and `defences`; the violated safety properties, one timeline, and
/// the number of states explored.
fn check(config: ModelConfig, defences: Defences) -> (Vec<&'static str>, String, usize) {
    let model = RolloutModel::new(ModelConfig { defences, ..config }, Arc::new(RolloutPlanner));
    let checker = model.clone().checker().threads(2).finish_when(HasDiscoveries::AnyFailures).spawn_bfs().join();
    let mut violated = Vec::new();
    let mut timeline = String::new();
    for p in model.properties() {
        if p.expectation == stateright::Expectation::Always
            && let Some(path) = checker.discovery(p.name)
        {
            violated.push(p.name);
            let steps: Vec<(State, Option<Step>)> = path.into_vec();
            timeline = model.timeline(&steps);
        }
    }
    (violated, timeline, checker.unique_state_count())
}

fn without(layers: &[Layer]) -> Defences {
    Defences::ALL.without(layers)
}

/// A pod evicted by someone else and recreated under the same name while the cache still shows the old one: the
/// expectations do not cover it (it is not the controller's write), the uid precondition alone does.
#[test]
fn the_uid_precondition_alone_keeps_a_pod_replaced_unseen_from_being_deleted() {
    let evicted = ModelConfig { zones: 1, pods: 2, stale: 2, evictions: 1, ..ModelConfig::default() };
    let (bad, timeline, states) = check(evicted.clone(), Defences::ALL);
    assert!(bad.is_empty(), "{bad:?}\n{timeline}");
    assert!(states > 100, "{states} states");
    let (bad, timeline, _) = check(evicted, without(&[Layer::UidPreconditions]));
    assert_eq!(bad, vec!["only pods the controller has seen are deleted"], "{timeline}");
    assert!(timeline.contains("PodIsEvicted") && timeline.contains("StatefulSetRecreatesPod"), "{timeline}");
}

/// The controller's own deletions on a stale cache: the expectations alone (no uid precondition) keep every
/// invariant; the uid precondition alone does not (it refuses a deletion of a replaced pod, not a deletion of the
/// next pod planned before the last one shows).
#[test]
fn expectations_alone_keep_a_stale_cache_from_acting_twice_and_the_uid_precondition_alone_does_not() {
    let stale = ModelConfig { zones: 2, pods: 2, stale: 1, crashes: 1, ..ModelConfig::default() };
    let (bad, timeline, states) = check(stale.clone(), without(&[Layer::UidPreconditions]));
    assert!(bad.is_empty(), "{bad:?}\n{timeline}");
    assert!(states > 100, "{states} states");
    let (bad, timeline, _) = check(stale.clone(), without(&[Layer::Expectations]));
    assert!(bad.contains(&"max unavailable") || bad.contains(&"one zone at a time"), "{bad:?}\n{timeline}");
    let (bad, timeline, _) = check(stale, without(&[Layer::Expectations, Layer::UidPreconditions]));
    assert!(!bad.is_empty(), "{timeline}");
}

/// A downscale being prepared while the record has outages. The rollout-step claim alone (the pass failing open on
/// an unreadable record) holds: the claim after a failed read is a create, refused because the record exists. The
/// record failing closed cannot be shown alone: without the claim, a marker written between the pass's read and
/// its deletions is missed whatever the pass does on an unreadable record.
#[test]
fn the_rollout_step_claim_alone_holds_an_unreadable_record_and_failing_closed_alone_does_not() {
    let outages = ModelConfig { zones: 2, pods: 2, downscales: 2, record_outages: 1, ..ModelConfig::default() };
    let (bad, timeline, states) = check(outages.clone(), without(&[Layer::RecordFailsClosed]));
    assert!(bad.is_empty(), "{bad:?}\n{timeline}");
    assert!(states > 1000, "{states} states");
    for defences in
        [without(&[Layer::RolloutStepClaims]), without(&[Layer::RolloutStepClaims, Layer::RecordFailsClosed])]
    {
        let (bad, timeline, _) = check(outages.clone(), defences);
        assert_eq!(bad, vec!["no rollout step while a downscale is being prepared"], "{timeline}");
    }
}
