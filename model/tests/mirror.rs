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

/// Small configurations, each adding one kind of trouble to the default (one huge one would not fit the CI budget),
/// the clock stopped at `max_time` minutes where the trouble is costly (4: about half the states of 5).
fn configurations(max_time: u8) -> [MirrorModelConfig; 4] {
    let base = MirrorModelConfig::default();
    [
        base.clone(),
        MirrorModelConfig { reference_may_vanish: true, pushes: 1, max_time, ..base.clone() },
        MirrorModelConfig { prepare_failures: 1, restarts: 1, max_time, ..base.clone() },
        MirrorModelConfig { stale: true, ..base },
    ]
}

fn keeps_its_guarantees(config: MirrorModelConfig) {
    let (violated, examples, states) = check(config.clone());
    eprintln!("{config:?}: {states} states");
    assert_eq!(violated, Vec::<&str>::new(), "{config:?}");
    assert!(examples, "vacuous: no delayed removal or no upscale seen ({states} states, {config:?})");
}

#[test]
fn the_mirror_step_keeps_its_guarantees() {
    configurations(4).into_iter().for_each(keeps_its_guarantees);
}

/// The costly configurations with the default clock (5 minutes: 133,367 and 120,030 states).
#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_the_mirror_step_keeps_its_guarantees_over_five_minutes() {
    let [_, rollouts, failures, _] = configurations(MirrorModelConfig::default().max_time);
    [rollouts, failures].into_iter().for_each(keeps_its_guarantees);
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

/// Each fault in the smallest configuration with the trouble it needs: one change of the reference, which may
/// make it vanish, or one rollout (5,417 and 23,709 states).
#[test]
fn each_test_only_fault_is_caught_by_the_property_it_breaks() {
    let base = MirrorModelConfig::default();
    let vanishing = MirrorModelConfig { reference_may_vanish: true, reference_changes: 1, ..base.clone() };
    let rollout = MirrorModelConfig { pushes: 1, reference_changes: 1, ..base.clone() };
    for (bug, property, config) in [
        (MirrorBug::NoDelayCheck, DELAY_KEPT, base),
        (MirrorBug::MissingReplicasAsOne, NOT_BELOW_REFERENCE, vanishing),
        (MirrorBug::IgnoresOtherZones, NO_DOWNSCALE_DURING_ROLLOUT, rollout),
    ] {
        let config = MirrorModelConfig { bug: Some(bug), ..config };
        let (violated, _, states) = check(config);
        assert!(violated.contains(&property), "{bug:?} not caught by {property:?} ({states} states): {violated:?}");
    }
}
