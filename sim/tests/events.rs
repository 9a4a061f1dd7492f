//! Events in the simulation: the operator's Event recorder runs as in production against the simulated API server.
//! Under every fault the Events stay few per rollout step and no object gets more than its budget allows (no Event
//! storm); under a reference deployment, whose args leave Events off, none is sent; with Events switched on where RBAC
//! grants none, the first 403 turns them off and rollouts converge; groups held by pods that never become ready, or are
//! not created, are reported stuck and then resumed. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_operator::ops::events::EventSettings;
use rollout_sim::oracle::events::STORM_WINDOW;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::faults::FaultMix;

/// The most Events one object can get within [`STORM_WINDOW`]: its burst, plus what it earns back meanwhile.
fn budget_per_window() -> u64 {
    let settings = EventSettings::new("ns", "me");
    u64::from(settings.burst) + (STORM_WINDOW.as_secs() / settings.refill.as_secs())
}

#[test]
fn events_stay_few_per_rollout_step_and_no_object_is_flooded_under_every_fault() {
    events_stay_few(0..15, 0..8);
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_events_stay_few_per_rollout_step_and_no_object_is_flooded_over_more_seeds() {
    events_stay_few(15..40, 8..15);
}

/// The rollout world over `rollouts`, the two scaling worlds over `scaling`.
fn events_stay_few(rollouts: std::ops::Range<u64>, scaling: std::ops::Range<u64>) {
    for (name, sc, seeds) in [
        ("rollouts", Scenario::default(), rollouts),
        ("rollouts with admitted downscales", Scenario::rollout_with_admitted_downscales(), scaling.clone()),
        ("leader/follower scaling", Scenario::scaling(), scaling),
    ] {
        let sc = Scenario { events: true, ..sc };
        let mut steps = 0;
        let mut reasons = std::collections::BTreeMap::new();
        for seed in seeds {
            let o = rollout_sim::harness::run(seed, &sc, false);
            assert!(o.passed(), "{name} seed {seed}: {:#?}", o.violations);
            let e = &o.events;
            steps += e.rollout_steps;
            for (reason, n) in &e.by_reason {
                *reasons.entry(reason.clone()).or_insert(0) += n;
            }
            assert!(e.busiest_window <= budget_per_window(), "{name} seed {seed}: {}", e.describe());
            // A few per step: what the pass did, and what the group then waits for.
            assert!(e.created + e.series_updates <= 3 * e.rollout_steps + 25, "{name} seed {seed}: {}", e.describe());
            let replacing = e.by_reason.get("ReplacingPods").copied().unwrap_or(0);
            assert!(replacing <= e.rollout_steps, "{name} seed {seed}: one per pass's deletions: {}", e.describe());
            if e.rollout_steps > 0 {
                assert!(e.created > 0, "{name} seed {seed}: the recorder ran: {}", e.describe());
            }
        }
        assert!(steps > 0, "{name}: the runs did something");
        if sc.scaling.is_some_and(|s| s.admission == rollout_sim::scenario::scaling::Admission::Webhook) {
            // The prepare-downscale webhook tells its verdicts too, as `main` wires it.
            for reason in ["DownscaleDenied", "DownscalePrepared"] {
                assert!(reasons.get(reason).is_some_and(|n| *n > 0), "{name}: no {reason} Event: {reasons:?}");
            }
        }
    }
}

/// The world without `-events.enabled` (every reference deployment's args): nothing is sent.
#[test]
fn without_the_flag_no_event_is_sent() {
    for deployment in [None, Some(ReferenceDeployment::HelmChart), Some(ReferenceDeployment::Jsonnet)] {
        let sc = Scenario { deployment, ..Scenario::default() };
        for seed in 0..5 {
            let o = rollout_sim::harness::run(seed, &sc, false);
            assert!(o.passed(), "{deployment:?} seed {seed}: {:#?}", o.violations);
            assert_eq!(o.events.created + o.events.series_updates, 0, "{deployment:?} seed {seed}");
        }
    }
}

/// `-events.enabled` where the RBAC grants no events: each controller process's Events are refused, turned off by
/// their feature gate (asked again only after its retry period, which the server judges: a request sent sooner is a
/// violation), and the rest goes on; every invariant holds and the group converges.
#[test]
fn events_refused_by_rbac_are_turned_off_until_their_retry_and_rollouts_converge() {
    let sc = Scenario { events: true, deployment: Some(ReferenceDeployment::HelmChart), ..Scenario::default() };
    let mut refused_total = 0;
    for seed in 0..10 {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
        assert_eq!(o.events.created, 0);
        assert!(o.converged_at.is_some(), "seed {seed} did not converge");
        refused_total += o.activity.forbidden(rollout_sim::oracle::activity::Request::CreateEvent, "");
    }
    assert!(refused_total >= 10, "every run tried once at least: {refused_total}");
}

/// Pods that never become ready, and pods refused by a quota, hold a group beyond the simulation's progress
/// deadline: it is reported stuck, and, once the faults heal and it converges, resumed. Without controller crashes
/// every stuck report has its resumption.
#[test]
fn groups_held_by_unready_or_missing_pods_are_reported_stuck_then_resumed() {
    let mut faults = FaultMix::NONE;
    faults.never_ready = true;
    faults.quota = true;
    let sc = Scenario { faults, events: true, ..Scenario::default() };
    let mut stuck_total = 0;
    for seed in 0..20 {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
        let count = |reason: &str| o.events.by_reason.get(reason).copied().unwrap_or(0);
        assert_eq!(count("RolloutStuck"), count("RolloutResumed"), "seed {seed}: {}", o.events.describe());
        stuck_total += count("RolloutStuck");
        for note in &o.events.stuck_notes {
            assert!(note.contains("(pods-not-ready)") || note.contains("(pods-missing)"), "seed {seed}: {note}");
        }
    }
    assert!(stuck_total > 0, "no group was held long enough to be stuck");
}
