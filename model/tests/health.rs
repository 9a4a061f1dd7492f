//! Health-gated zone progression in the rollout model: the real gate (the shell's targeting and the core's
//! evaluation, with the pass's hold) keeps a bad revision to its first zone and lets a good one converge, whatever
//! the answers' faults; and each test-only gate of `rollout-known-bugs` lets a bad revision start a second zone, or
//! holds a good one forever.

use rollout_core::RolloutPlanner;
use rollout_known_bugs::{
    baseline_from_the_candidate_side, every_started_zone_cleared, gate_after_the_zone_started, no_data_passes,
    soak_from_each_evaluation,
};
use rollout_model::checked::{Checked, check};
use rollout_model::{GateShell, Health, ModelConfig, RolloutModel};
use std::sync::Arc;

/// Judged on the controller's committed deletions: with a bad revision they reach one zone only.
const SAFETY: &str = "a bad revision starts no second zone";

fn checked(config: &ModelConfig, gate: GateShell, to_first: bool) -> Checked {
    let model = RolloutModel::new(config.clone(), Arc::new(RolloutPlanner)).with_gate(gate);
    check(&model, to_first, |steps| model.timeline(steps))
}

fn gated(health: Health, zones: u8, pods: u8) -> ModelConfig {
    ModelConfig { zones, pods, health_check: Some(health), query_faults: 1, ..ModelConfig::default() }
}

/// The production gate on `config`: nothing violated, the gate seen holding a zone back, and a good revision's
/// rollout seen completing.
fn assert_real_gate_holds(config: &ModelConfig) -> usize {
    let real = checked(config, GateShell::PRODUCTION, false);
    assert!(real.violated.is_empty(), "{config:?}: {:?}\n{}", real.violated, real.timeline);
    assert!(real.seen.contains(&"the gate holds a zone back"), "{config:?}: the gate never held: {:?}", real.seen);
    let completes = real.seen.contains(&"a rollout completes");
    assert_eq!(completes, config.health_check == Some(Health::Good), "{config:?}: {:?}", real.seen);
    real.states
}

/// `gate` lets a bad revision start a second zone on `config`, and the production gate does not.
fn assert_caught(config: ModelConfig, gate: GateShell) -> Checked {
    let bug = checked(&config, gate, true);
    assert!(bug.violated.contains(&SAFETY), "expected a counterexample to {SAFETY:?}, got {:?}", bug.violated);
    assert!(bug.timeline.trim_end().lines().last().is_some_and(|l| l.contains("VIOLATION")), "{}", bug.timeline);
    assert_real_gate_holds(&config);
    bug
}

/// Three zones with two faulty evaluations, a stale cache and a controller restart (the shell's verdicts and
/// clearances lost); two zones with lagging status counts; two zones with an evicted pod and a restart.
fn configurations(health: Health) -> [ModelConfig; 3] {
    [
        ModelConfig { stale: 1, restarts: 1, query_faults: 2, ..gated(health, 3, 2) },
        ModelConfig { stale: 1, restarts: 1, status_lag: true, ..gated(health, 2, 2) },
        ModelConfig { stale: 1, restarts: 1, evictions: 1, ..gated(health, 2, 2) },
    ]
}

#[test]
fn the_real_gate_holds_a_bad_revision_to_its_first_zone() {
    for config in configurations(Health::Bad) {
        let states = assert_real_gate_holds(&config);
        assert!(states > 100, "suspiciously small state space for {config:?}: {states}");
    }
}

#[test]
fn the_real_gate_lets_a_good_revision_converge() {
    for config in configurations(Health::Good) {
        let states = assert_real_gate_holds(&config);
        assert!(states > 100, "suspiciously small state space for {config:?}: {states}");
    }
    // A crashed pod replaced ahead of its zone, or a zone turned to while another is paused, waits for the gate
    // and then goes on.
    assert_real_gate_holds(&ModelConfig { crashes: 1, ..gated(Health::Good, 2, 2) });
    assert_real_gate_holds(&ModelConfig { pauses: 1, ..gated(Health::Good, 2, 2) });
}

/// A zone the planner starts while another is part-way is gated too: a crashed pod of the second zone, replaced
/// while the first is part-way, or a zone turned to while the first is paused, waits for the gate like the zone
/// started between zones (the pass holds a start it has no evaluation for).
#[test]
fn a_zone_started_while_another_is_part_way_is_gated_too() {
    for config in
        [ModelConfig { crashes: 1, ..gated(Health::Bad, 2, 2) }, ModelConfig { pauses: 1, ..gated(Health::Bad, 2, 2) }]
    {
        let real = checked(&config, GateShell::PRODUCTION, false);
        assert!(real.violated.is_empty(), "{config:?}: {:?}\n{}", real.violated, real.timeline);
    }
}

/// The gate looked for once the zone has started: between zones nothing is evaluated, and the pass holds the next
/// zone's first deletion as not evaluated yet. A bad revision still stops after its first zone (the pass's hold is
/// the defence); a good one is held for ever.
#[test]
fn a_gate_consulted_after_the_zone_started_is_caught() {
    let gate = GateShell { target: gate_after_the_zone_started, ..GateShell::PRODUCTION };
    let bad = checked(&gated(Health::Bad, 2, 2), gate, false);
    assert!(bad.violated.is_empty(), "{:?}\n{}", bad.violated, bad.timeline);
    let config = gated(Health::Good, 2, 2);
    let bug = checked(&config, gate, true);
    assert_eq!(bug.violated, vec!["quiescent states are converged"], "{}", bug.timeline);
    assert_real_gate_holds(&config);
}

#[test]
fn a_baseline_taken_from_the_candidate_side_is_caught() {
    let gate = GateShell { evaluate: baseline_from_the_candidate_side, ..GateShell::PRODUCTION };
    let bug = assert_caught(gated(Health::Bad, 2, 2), gate);
    assert!(bug.timeline.contains("(Faithful answers): passes"), "{}", bug.timeline);
}

#[test]
fn no_data_treated_as_a_pass_is_caught() {
    let gate = GateShell { evaluate: no_data_passes, ..GateShell::PRODUCTION };
    let bug = assert_caught(gated(Health::Bad, 2, 2), gate);
    assert!(bug.timeline.contains("(Lagging answers): passes"), "{}", bug.timeline);
    // Without a faulty answer the bug has nothing to misread.
    let faithful = checked(&ModelConfig { query_faults: 0, ..gated(Health::Bad, 2, 2) }, gate, false);
    assert!(faithful.violated.is_empty(), "{:?}\n{}", faithful.violated, faithful.timeline);
}

/// Liveness: a gate that never judges holds a good revision after its first zone, where nothing can happen any more.
#[test]
fn a_soak_counted_from_each_evaluation_is_caught() {
    let gate = GateShell { evaluate: soak_from_each_evaluation, ..GateShell::PRODUCTION };
    let config = gated(Health::Good, 2, 2);
    let bug = checked(&config, gate, true);
    assert_eq!(bug.violated, vec!["quiescent states are converged"], "{}", bug.timeline);
    assert!(bug.timeline.contains("answers): the updated pods have served since"), "{}", bug.timeline);
    assert_real_gate_holds(&config);
}

/// An evicted pod of a later zone comes back on the bad revision: that zone has started, but not by the controller,
/// and the gate never passed. Taking every started zone as cleared (the reference's "once a zone has started,
/// readiness alone governs it") lets the controller finish it; the real gate holds it until an evaluation passes.
#[test]
fn a_zone_someone_else_started_is_not_finished_on_a_bad_revision() {
    let gate = GateShell { cleared: every_started_zone_cleared, ..GateShell::PRODUCTION };
    let bug = assert_caught(ModelConfig { evictions: 1, ..gated(Health::Bad, 2, 2) }, gate);
    assert!(bug.timeline.contains("PodIsEvicted"), "{}", bug.timeline);
    // With a good revision, the zone someone else started is finished once the gate passes.
    assert_real_gate_holds(&ModelConfig { evictions: 1, ..gated(Health::Good, 2, 2) });
}
