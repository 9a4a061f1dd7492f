//! Health-gated zones in the simulation: the StatefulSets name a RolloutHealthCheck of the pods' error ratio, a
//! simulated Prometheus scrapes the pods, and the user pushes one release under the default faults. A bad release
//! (its pods fail 30% of their requests, all of them Ready) must start no second zone and end held by the check; a
//! good one must converge. Asserted on the outcome's typed fields. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::outcome::Outcome;
use rollout_sim::harness::run_passing;
use rollout_sim::oracle::checker::HEALTH_GATE;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::drains::Drains;
use rollout_sim::scenario::health::HealthGated;

fn world(bad_release: bool, query_faults: bool) -> Scenario {
    let sc = Scenario::health_gated(bad_release);
    Scenario { health: Some(HealthGated { bad_release, query_faults, ..HealthGated::default() }), ..sc }
}

fn assert_stopped(outcomes: &[Outcome]) {
    for o in outcomes {
        let health = o.health.expect("a health-gated world reports");
        assert!(o.converged_at.is_none(), "seed {}: the bad release converged", o.seed);
        assert!(health.zones_on_bad_release <= 1, "seed {}: {health:?}", o.seed);
        assert!(health.queries.answered > 0, "seed {}: the gate never asked Prometheus: {health:?}", o.seed);
    }
}

/// Seed `seed` of the bad-release world `sc` passes and stops after its first zone.
fn assert_seed_stops(seed: u64, sc: &Scenario) {
    let o = rollout_sim::harness::run(seed, sc, false);
    assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
    assert_stopped(&[o]);
}

fn assert_converged(outcomes: &[Outcome]) {
    for o in outcomes {
        let health = o.health.expect("a health-gated world reports");
        assert!(o.converged_at.is_some(), "seed {}: the good release did not converge", o.seed);
        assert_eq!(health.zones_on_bad_release, 0, "seed {}", o.seed);
        assert!(health.queries.answered > 0, "seed {}: the gate never asked Prometheus: {health:?}", o.seed);
    }
}

/// Seed 24 of the bad-release world: the controller process crashes after zone-a finished and the restarted one
/// deleted zone-b-2 (crash-looping on the old revision) 26 ms after it started, before its RolloutHealthChecks were
/// listed: it took the gates for off. A process that has not heard from its feed yet holds a gated start as not
/// evaluated.
#[test]
fn a_controller_restarted_before_its_health_checks_are_listed_starts_no_gated_zone() {
    let o = rollout_sim::harness::run(24, &world(true, false), false);
    assert!(o.violations.iter().all(|v| v.invariant != HEALTH_GATE), "{:#?}", o.violations);
    assert!(o.passed(), "{:#?}", o.violations);
}

#[test]
fn a_bad_release_stops_after_its_first_zone_on_every_seed() {
    assert_stopped(&run_passing(&world(true, false), 0..40));
}

#[test]
fn a_good_release_converges_on_every_seed() {
    assert_converged(&run_passing(&world(false, false), 0..40));
}

/// Prometheus slow past the check's timeout, refused at the connection, or answering empty, until the faults stop:
/// a bad release still stops (no data and errors pause), a good one still converges once the answers are whole.
#[test]
fn query_faults_never_let_a_bad_release_through_nor_keep_a_good_one_back() {
    let bad = run_passing(&world(true, true), 0..25);
    assert_stopped(&bad);
    let good = run_passing(&world(false, true), 0..25);
    assert_converged(&good);
    let faulted: u64 = bad
        .iter()
        .chain(&good)
        .map(|o| {
            let q = o.health.unwrap().queries;
            q.no_data + q.slow + q.outages
        })
        .sum();
    assert!(faulted > 0, "no query fault was ever drawn");
}

/// Under the real deployments' RBAC, with the Role rule a user who opts in adds (list and watch on
/// RolloutHealthChecks).
#[test]
fn under_the_real_deployments_rbac_the_gate_holds_and_lets_through() {
    for deployment in [ReferenceDeployment::HelmChart, ReferenceDeployment::Jsonnet, ReferenceDeployment::HelmOld] {
        let bad = Scenario { deployment: Some(deployment), ..world(true, true) };
        assert_stopped(&run_passing(&bad, 0..12));
        let good = Scenario { deployment: Some(deployment), ..world(false, true) };
        assert_converged(&run_passing(&good, 0..12));
    }
}

/// A deployment that grants no `patch` on StatefulSets: the rollout's start cannot be recorded. The refused write is
/// the feature's probe (said once, tried again after a while) and the gate takes its baseline time from when the
/// process first saw the rollout: a good release converges, a bad one stops.
#[test]
fn without_patch_on_statefulsets_the_gate_still_judges() {
    let bad = Scenario { deployment: Some(ReferenceDeployment::NoPatch), ..world(true, false) };
    assert_stopped(&run_passing(&bad, 0..10));
    let good = Scenario { deployment: Some(ReferenceDeployment::NoPatch), ..world(false, false) };
    assert_converged(&run_passing(&good, 0..10));
}

/// Without the Role's rule for RolloutHealthChecks the operator's list is refused: its gates are off (said once), a
/// good release converges as without gates, and a bad one rolls on to a second zone, which the oracle sees. The
/// degraded path of an opt-in feature, and the rule shown to catch a gate that does not hold.
#[test]
fn without_the_grant_the_gates_are_off_and_a_bad_release_is_seen_rolling_on() {
    let ungranted = |bad: bool| {
        let sc = world(bad, false);
        let health = sc.health.clone().map(|h| HealthGated { rbac_grant: false, ..h });
        Scenario { deployment: Some(ReferenceDeployment::HelmChart), health, ..sc }
    };
    for o in run_passing(&ungranted(false), 0..10) {
        assert!(o.converged_at.is_some(), "seed {}: a good release without gates did not converge", o.seed);
    }
    let caught = (0..10)
        .map(|s| rollout_sim::harness::run(s, &ungranted(true), false))
        .filter(|o| o.violations.iter().any(|v| v.invariant == HEALTH_GATE))
        .count();
    assert!(caught >= 8, "a bad release rolled ungated was seen on {caught} of 10 seeds");
}

/// Seed 0 of the bad release with `--evictions`: a user deletes zone-b's pods during the fault phase, the
/// StatefulSet controller recreates two of three on the bad revision, and the controller (for which a started zone
/// was past its gate) deleted zone-b's last old pod at 328 s. A zone after the first that the gate has not cleared is
/// gated however it started.
#[test]
fn a_zone_started_by_someone_elses_deletions_is_not_finished_on_a_bad_release() {
    assert_seed_stops(0, &Scenario { evictions: true, ..world(true, false) });
}

/// Seed 16 of the bad release with `--sidecars`: zone-b's pods, replaced while a quota fault kept them from being
/// recreated, were candidates not Ready yet, and the gate judged them on the series their old incarnations had left
/// under the same names (the soak counted only Ready candidates): it passed, and the controller went on to zone-a. A
/// candidate not Ready means the candidate side has not served yet: the gate soaks.
#[test]
fn candidates_not_ready_yet_are_not_judged_on_their_names_old_series() {
    assert_seed_stops(16, &Scenario { sidecars: true, ..world(true, false) });
}

/// Pods of later zones deleted by others (evictions, node drains) during a rollout: a bad release still stops after
/// one zone, a good one still converges (a zone so started waits for a passing evaluation, then rolls on).
#[test]
fn deletions_by_others_neither_spread_a_bad_release_nor_keep_a_good_one_back() {
    for (evictions, drains) in [(true, None), (false, Some(Drains::default()))] {
        let bad = Scenario { evictions, drains: drains.clone(), ..world(true, false) };
        assert_stopped(&run_passing(&bad, 0..12));
        let good = Scenario { evictions, drains, ..world(false, false) };
        assert_converged(&run_passing(&good, 0..12));
    }
}
