//! What the runs report beside their verdict: the faults' heal-to-write times, the HA world's failovers after any
//! loss of the leader, the controller's own pass reports, and the demo built from them. Asserted on the outcome's
//! typed fields (and, for the demo, on its sections). Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::run_passing;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::ha::{ElectionVariant, Ha};

/// Runs with faults report each fault's window, and heals that find the group with work give heal-to-write samples,
/// each within the liveness deadline (the controller must act within it once the faults are over).
#[test]
fn heals_are_followed_by_the_controllers_next_needed_write_within_the_settle_deadline() {
    let sc = Scenario::default();
    let outcomes = run_passing(&sc, 0..6);
    let faults: usize = outcomes.iter().map(|o| o.faults.len()).sum();
    let samples: Vec<_> = outcomes.iter().flat_map(|o| o.heal_to_write.iter().copied()).collect();
    assert!(faults >= 24, "every run injects 4-12 faults: {faults}");
    assert!(samples.len() >= 6, "too few heal-to-write samples: {samples:?}");
    for o in &outcomes {
        assert!(o.heal_to_write.len() <= o.faults.len(), "seed {}: a sample per heal at most", o.seed);
        for f in &o.faults {
            assert!(f.from <= f.to && f.to <= sc.fault_phase, "seed {}: {f:?} heals within the fault phase", o.seed);
        }
    }
    assert!(
        samples.iter().all(|d| *d <= sc.settle_deadline),
        "a heal-to-write beyond the settle deadline: {samples:?}"
    );
}

/// A world without faults has none to report.
#[test]
fn a_world_without_faults_reports_no_heals() {
    let sc = Scenario { faults: rollout_sim::scenario::faults::FaultMix::NONE, ..Scenario::default() };
    let o = &run_passing(&sc, 0..1)[0];
    assert!(o.faults.is_empty() && o.heal_to_write.is_empty(), "{:?} {:?}", o.faults, o.heal_to_write);
}

/// The HA world measures failovers from any loss of the leader (killed, frozen or cut off) to the new leader's first
/// committed write, each no longer than the run.
#[test]
fn the_ha_world_reports_failovers_after_the_leaders_loss() {
    let sc = Scenario {
        ha: Some(Ha { replicas: 3, election: ElectionVariant::Real, ..Ha::default() }),
        ..Scenario::default()
    };
    let outcomes = run_passing(&sc, 0..4);
    let failovers: Vec<_> = outcomes.iter().flat_map(|o| o.ha.failovers_after_loss.iter().copied()).collect();
    assert!(failovers.len() >= 3, "too few failovers measured: {failovers:?}");
    let lease = rollout_core::election::ElectionConfig::new("").lease_duration;
    for f in &failovers {
        assert!(f.took <= sc.fault_phase, "{f:?}");
    }
    assert!(
        failovers.iter().any(|f| f.took >= lease / 2),
        "a failover waits out about the lost leader's lease: {failovers:?}"
    );
}

/// The controller's own pass reports reach the outcome: the default world's controller waits for pods to become
/// ready, says why, and ends with the group done.
#[test]
fn the_controllers_own_pass_reports_are_kept() {
    let o = &run_passing(&Scenario::default(), 7..8)[0];
    assert!(o.pass_reports.iter().any(|r| r.waits() && !r.reason.is_empty()), "{:#?}", o.pass_reports);
    assert!(o.pass_reports.last().is_some_and(|r| r.state == "done"), "{:#?}", o.pass_reports.last());
}

/// The demo says what world ran and its faults, shows the controller's waits with their reason, and ends with every
/// guarantee judged and its verdict.
#[test]
fn the_demo_has_its_header_waits_and_guarantees() {
    let sc = Scenario::default();
    let o = rollout_sim::harness::run(7, &sc, false);
    let demo = rollout_sim::demo::render(&sc, &o);
    for part in
        ["World: rollout group \"ingester\", 3 zones x 3 pods", "Faults: 4-12 faults", "Summary", "Guarantees judged:"]
    {
        assert!(demo.contains(part), "no {part:?} in:\n{demo}");
    }
    let waits: Vec<&str> = demo.lines().filter(|l| l.contains(" controller   [ingester] waits (")).collect();
    assert!(waits.iter().any(|l| l.contains("(pods-not-ready): ")), "no wait with its reason in:\n{demo}");
    assert!(demo.contains("    one zone at a time: held") && demo.contains("    liveness: held"), "{demo}");
    assert!(!demo.contains("paused is left alone: held") || sc.faults.pauses);
    assert!(!demo.contains("one leader writes"), "no HA guarantee in a world without HA:\n{demo}");
}
