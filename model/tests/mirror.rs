//! Mirror scaling with delayed downscale, model-checked through the real pass and the real mirror step machine:
//! replicas are removed only once prepared for the delay, never below the reference, never during another zone's
//! rollout; and each test-only fault is caught by the property it breaks.

use rollout_model::mirror::{
    DELAY_KEPT, MirrorBug, MirrorModel, MirrorModelConfig, NO_DOWNSCALE_DURING_ROLLOUT, NOT_BELOW_REFERENCE,
};
use stateright::{Checker, Model};

/// Checks `config`; returns the violated properties, whether both examples were seen, and the state count.
fn check(config: MirrorModelConfig) -> (Vec<&'static str>, bool, usize) {
    let model = MirrorModel::new(config);
    let checker = model.checker().threads(2).spawn_bfs().join();
    let violated = [DELAY_KEPT, NOT_BELOW_REFERENCE, NO_DOWNSCALE_DURING_ROLLOUT]
        .into_iter()
        .filter(|p| checker.discovery(p).is_some())
        .collect();
    let examples = checker.discovery("a replica is removed after its delay").is_some()
        && checker.discovery("the mirror scales up").is_some();
    (violated, examples, checker.unique_state_count())
}

/// Small configurations, each adding one kind of trouble to the default (one huge one would not fit the CI budget).
fn configurations() -> [MirrorModelConfig; 4] {
    let base = MirrorModelConfig::default();
    [
        base.clone(),
        MirrorModelConfig { reference_may_vanish: true, pushes: 1, ..base.clone() },
        MirrorModelConfig { prepare_failures: 1, restarts: 1, ..base.clone() },
        MirrorModelConfig { stale: true, ..base },
    ]
}

#[test]
fn the_mirror_step_keeps_its_guarantees() {
    for config in configurations() {
        let (violated, examples, states) = check(config.clone());
        eprintln!("{config:?}: {states} states");
        assert_eq!(violated, Vec::<&str>::new(), "{config:?}");
        assert!(examples, "vacuous: no delayed removal or no upscale seen ({states} states, {config:?})");
    }
}

#[test]
fn an_immediate_mirror_downscale_stays_at_or_above_the_reference() {
    let config = MirrorModelConfig { delay: None, reference_may_vanish: true, pushes: 1, ..Default::default() };
    let model = MirrorModel::new(config);
    let checker = model.checker().threads(2).spawn_bfs().join();
    for p in [NOT_BELOW_REFERENCE, NO_DOWNSCALE_DURING_ROLLOUT] {
        assert!(checker.discovery(p).is_none(), "{p}");
    }
    assert!(checker.discovery("the mirror scales up").is_some());
}

#[test]
fn each_test_only_fault_is_caught_by_the_property_it_breaks() {
    let [base, rollouts, ..] = configurations();
    for (bug, property, config) in [
        (MirrorBug::NoDelayCheck, DELAY_KEPT, base),
        (MirrorBug::MissingReplicasAsOne, NOT_BELOW_REFERENCE, rollouts.clone()),
        (MirrorBug::IgnoresOtherZones, NO_DOWNSCALE_DURING_ROLLOUT, rollouts),
    ] {
        let config = MirrorModelConfig { bug: Some(bug), ..config };
        let (violated, _, states) = check(config);
        assert!(violated.contains(&property), "{bug:?} not caught by {property:?} ({states} states): {violated:?}");
    }
}
