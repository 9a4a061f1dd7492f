//! Leader election (issue 16), model-checked with two replicas driving the real election step machine against an
//! API server holding the Lease: under delayed and lost messages, a paused leader, clocks running apart and a
//! graceful shutdown, a controller write commits only under its issuer's live Lease and never do two replicas both
//! see that they may write; a network that becomes stable has a leader within the bound; each test-only fault is
//! caught; and the one finding of the model (a release racing its own renewal) is pinned.
//!
//! Small configurations, each adding one kind of trouble to a horizon of 2.5 s of true time (a lease and a bit);
//! the `rollout-model election` command checks longer horizons and more faults.

use rollout_model::election::{
    DEPOSED_LEADER_RUNS, ElectionBug, ElectionModel, ElectionModelConfig, ElectionState, ElectionStep,
    LEADER_WITHIN_BOUND, ONE_MAY_WRITE, RELEASE_HANDS_OVER, STABLE_LONG_ENOUGH, TAKEOVER, WRITE_AFTER_TAKEOVER,
    WRITE_UNDER_LEASE,
};
use stateright::{Checker, HasDiscoveries, Model};

struct Checked {
    violated: Vec<&'static str>,
    seen: Vec<&'static str>,
    /// The counterexample of the first violated property, as a timeline.
    timeline: String,
    states: usize,
}

/// Checks `config` (stopping at the first violation when `to_first`).
fn check(config: ElectionModelConfig, to_first: bool) -> Checked {
    let model = ElectionModel::new(config).expect("a valid configuration");
    let started = std::time::Instant::now();
    let mut checker = model.clone().checker().threads(2);
    if to_first {
        checker = checker.finish_when(HasDiscoveries::AnyFailures);
    }
    let checker = checker.spawn_bfs().join();
    let mut checked = Checked {
        violated: Vec::new(),
        seen: Vec::new(),
        timeline: String::new(),
        states: checker.unique_state_count(),
    };
    for p in model.properties() {
        match (p.expectation, checker.discovery(p.name)) {
            (stateright::Expectation::Sometimes, Some(_)) => checked.seen.push(p.name),
            (stateright::Expectation::Sometimes, None) | (_, None) => {}
            (_, Some(path)) => {
                checked.violated.push(p.name);
                if checked.timeline.is_empty() {
                    let steps: Vec<(ElectionState, Option<ElectionStep>)> = path.into_vec();
                    checked.timeline = model.timeline(&steps);
                }
            }
        }
    }
    eprintln!("{:?}: {} states in {:.2?}", model.config, checked.states, started.elapsed());
    checked
}

/// The production election keeps every property but the `findings` (pinned below), and shows the examples
/// `expected` (not vacuous).
fn holds(config: ElectionModelConfig, expected: &[&str], findings: &[&str]) {
    let c = check(config.clone(), false);
    let violated: Vec<_> = c.violated.iter().filter(|p| !findings.contains(p)).collect();
    assert!(violated.is_empty(), "{config:?}: {violated:?}\n{}", c.timeline);
    for example in expected {
        assert!(c.seen.contains(example), "{config:?}: no example of {example:?} in {} states", c.states);
    }
}

/// 2.5 s of true time in 500 ms ticks, a 2 s lease renewed every 500 ms, writes within 1 s of a renewal's send.
fn base() -> ElectionModelConfig {
    ElectionModelConfig { horizon: 5, losses: 0, pauses: 0, ..ElectionModelConfig::default() }
}

#[test]
fn delayed_and_lost_messages_keep_one_writer() {
    holds(ElectionModelConfig { losses: 1, ..base() }, &[TAKEOVER, WRITE_AFTER_TAKEOVER], &[]);
}

#[test]
fn a_paused_leader_resuming_on_its_stale_state_does_not_write_under_the_next_leader() {
    holds(ElectionModelConfig { pauses: 1, ..base() }, &[TAKEOVER, WRITE_AFTER_TAKEOVER, DEPOSED_LEADER_RUNS], &[]);
}

#[test]
fn a_graceful_release_keeps_one_writer() {
    holds(ElectionModelConfig { releases: 1, ..base() }, &[TAKEOVER, WRITE_AFTER_TAKEOVER], &[RELEASE_HANDS_OVER]);
}

/// Bounded liveness: the network settles by 500 ms (after a loss, a pause and a release at most), and a replica may
/// write within the bound after that.
#[test]
fn a_stable_network_has_a_leader_within_the_bound() {
    let config = ElectionModelConfig {
        settle_by: Some(1),
        losses: 1,
        pauses: 1,
        releases: 1,
        writes: false,
        ..ElectionModelConfig::default()
    };
    let bound = config.lead_within();
    let c = check(ElectionModelConfig { horizon: 1 + bound, ..config }, false);
    assert!(!c.violated.contains(&LEADER_WITHIN_BOUND), "no leader within {bound} ticks\n{}", c.timeline);
    assert!(!c.violated.contains(&WRITE_UNDER_LEASE) && !c.violated.contains(&ONE_MAY_WRITE), "{:?}", c.violated);
    assert!(c.seen.contains(&STABLE_LONG_ENOUGH) && c.seen.contains(&TAKEOVER), "vacuous: {:?}", c.seen);
}

/// Known-bug variant (a): the controller writes while its replica believes in the term it won, without asking the
/// clock before each write; a paused leader resumes and writes after the other replica took over.
#[test]
fn writing_without_the_pre_write_check_is_caught() {
    let config = ElectionModelConfig { bug: Some(ElectionBug::NoPreWriteCheck), pauses: 1, ..base() };
    let c = check(config, true);
    assert!(c.violated.contains(&WRITE_UNDER_LEASE), "not caught in {} states: {:?}", c.states, c.violated);
    eprintln!("{}", c.timeline);
}

/// Known-bug variant (b): a renew deadline equal to the lease duration (no skew margin): a write sent at the end of
/// the window commits after the Lease expired by true time (and, with the holder's clock slow, both may write).
#[test]
fn a_renew_deadline_equal_to_the_lease_is_caught() {
    let config = ElectionModelConfig { bug: Some(ElectionBug::NoMargin), ..base() };
    let c = check(config, true);
    assert!(c.violated.contains(&WRITE_UNDER_LEASE), "not caught in {} states: {:?}", c.states, c.violated);
    eprintln!("{}", c.timeline);
    // Without controller writes, the holder's slow clock alone gives two replicas that may write at once.
    let c = check(ElectionModelConfig { bug: Some(ElectionBug::NoMargin), writes: false, horizon: 7, ..base() }, true);
    assert!(c.violated.contains(&ONE_MAY_WRITE), "not caught in {} states: {:?}", c.states, c.violated);
}

/// Finding of this model in the core (not fixed here; safety is not affected): a replica released while its own
/// Lease write is in flight leaves the Lease to expire. With a renewal in flight, the release compares-and-swaps on
/// the version before that renewal; the renewal commits first and the release fails with a conflict. With a
/// takeover in flight (the counterexample found here), the replica is not leader yet, so its release sends
/// nothing, and the takeover commits after. Either way the Lease names the stopped replica until it expires, and the
/// next leader takes over a lease duration later instead of at once (README, High availability: "Graceful shutdown
/// hands over at once"). When `Elector::release` is fixed (for example: wait for the write in flight, or on a
/// conflict read again and clear the holder while it is still this replica), turn this test into a check that the
/// property holds.
#[test]
fn a_release_racing_its_own_lease_write_leaves_the_lease_held_until_it_expires() {
    let config = ElectionModelConfig { releases: 1, writes: false, horizon: 3, ..base() };
    let c = check(config, true);
    assert_eq!(c.violated, [RELEASE_HANDS_OVER], "{}", c.timeline);
    assert!(c.timeline.contains("Releases"), "{}", c.timeline);
    eprintln!("{}", c.timeline);
}
