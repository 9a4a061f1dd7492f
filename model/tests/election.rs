//! Leader election (issue 16), model-checked with two replicas driving the real election step machine against an
//! API server holding the Lease: under delayed and lost messages, a paused leader, clocks running apart and a
//! graceful shutdown, a controller write commits only under its issuer's live Lease and never do two replicas both
//! see that they may write; a network that becomes stable has a leader within the bound; each test-only fault is
//! caught; a release racing its own Lease write hands over at once (the model's first finding, fixed); and the two
//! cases where a completed release still leaves the Lease held by its stopped replica (findings in the core) are
//! pinned. The case the release property excludes (a write abandoned at its timeout that commits after the
//! release's last request) is not reached with today's core (see `ElectionModel::handed_over`), so no test shows
//! it.
//!
//! Small configurations, each adding one kind of trouble to a horizon of 2.5 s of true time (a lease and a bit);
//! the `rollout-model election` command checks longer horizons and more faults.

use rollout_model::election::{
    DEPOSED_LEADER_RUNS, ElectionBug, ElectionModel, ElectionModelConfig, ElectionState, ElectionStep,
    LEADER_WITHIN_BOUND, ONE_MAY_WRITE, RELEASE_HANDS_OVER, RELEASE_WAITS_FOR_WRITE, STABLE_LONG_ENOUGH, TAKEOVER,
    WRITE_AFTER_TAKEOVER, WRITE_UNDER_LEASE,
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

/// (A release here may still leave the Lease held: the findings pinned below.)
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

/// The race the model found, fixed (the shell lets a Lease write in flight finish before releasing, and the core's
/// release reads the Lease and clears it while it names this replica): a replica released while its own takeover or
/// renewal is in flight hands the Lease over at once. Answers come within the tick of their request here (message
/// delay 0: every order of the two replicas' steps and the release within a tick is still explored), so that no
/// write window lapses between renewals, the case pinned by
/// [`a_release_after_its_write_window_lapsed_leaves_the_lease_held_until_it_expires`]. Before the fix (the core's
/// release and the shell's loop before commit a824a8b), this configuration broke the property: the release's
/// compare-and-swap lost to its own renewal, committed first.
#[test]
fn a_release_racing_its_own_lease_write_hands_over_at_once() {
    let config = ElectionModelConfig { releases: 1, writes: false, horizon: 3, message_delay: 0, ..base() };
    let c = check(config.clone(), false);
    assert!(c.violated.is_empty(), "{:?}\n{}", c.violated, c.timeline);
    assert!(c.seen.contains(&RELEASE_WAITS_FOR_WRITE) && c.seen.contains(&TAKEOVER), "vacuous: {:?}", c.seen);
    // With controller writes (the release waits for the controller to stop) and a longer horizon.
    let c = check(ElectionModelConfig { writes: true, horizon: 5, ..config }, false);
    assert!(c.violated.is_empty(), "{:?}\n{}", c.violated, c.timeline);
    assert!(c.seen.contains(&RELEASE_WAITS_FOR_WRITE) && c.seen.contains(&WRITE_AFTER_TAKEOVER), "{:?}", c.seen);
}

/// Finding of this model in the core, left after the fix of the race above (not a safety matter): a replica whose
/// write window lapsed (its renewal's answer came late, or failed, and its deadline made it a candidate again) while
/// the Lease still names it releases without reading or clearing the Lease (`Elector::release` reads only when the
/// replica leads or has a write pending), so the Lease names the stopped replica until it expires.
#[test]
fn a_release_after_its_write_window_lapsed_leaves_the_lease_held_until_it_expires() {
    let config = ElectionModelConfig { releases: 1, writes: false, horizon: 3, ..base() };
    let c = check(config, true);
    assert_eq!(c.violated, [RELEASE_HANDS_OVER], "{}", c.timeline);
    let release = c.timeline.lines().find(|l| l.contains("Releases(")).expect("a release");
    assert!(release.contains("not leader, done") && c.timeline.contains("window over"), "{}", c.timeline);
    eprintln!("{}", c.timeline);
}

/// Finding of this model in the core, left after the fix (not a safety matter): a replica released while its own
/// create (or takeover) is in flight lets it finish, as the shell now does, but the write commits and its answer is
/// lost: the shell feeds the timeout to the core as a failed write, which the core takes as not written (it forgets
/// the write's outcome is unknown), so `Elector::release` of a replica that does not lead sends nothing, and the
/// Lease names the stopped replica until it expires. The write committed before the release (a read would have seen
/// it): not the case [`RELEASE_HANDS_OVER`] excludes.
#[test]
fn a_release_after_its_own_write_timed_out_leaves_the_lease_held_until_it_expires() {
    let config = ElectionModelConfig { releases: 1, writes: false, losses: 1, horizon: 2, message_delay: 0, ..base() };
    let c = check(config, true);
    assert_eq!(c.violated, [RELEASE_HANDS_OVER], "{}", c.timeline);
    assert!(c.timeline.contains("AnswerLost") && c.timeline.contains("TimesOut"), "{}", c.timeline);
    eprintln!("{}", c.timeline);
}
