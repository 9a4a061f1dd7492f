//! Tests of the election: each decision on hand-made observations, and a harness of two or three replicas over
//! one compare-and-swap Lease store, with requests that commit late or lose their answers and clocks that run at
//! different rates, checked at every step against the store's true holder.

use super::*;
use crate::failure::Failure;
use proptest::prelude::*;

fn t0() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn at(ms: i64) -> Timestamp {
    t0() + jiff::SignedDuration::from_millis(ms)
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn held_by(holder: &str, rv: &str) -> LeaseRecord {
    LeaseRecord {
        holder: Some(holder.to_string()),
        acquire_time: Some(at(0)),
        renew_time: Some(at(0)),
        lease_duration_seconds: Some(15),
        transitions: 3,
        resource_version: rv.to_string(),
    }
}

/// Answers a write as the API server would: the record with a new resourceVersion.
fn committed(need: &Need, rv: &str) -> Observed {
    match need {
        Need::Create(r) | Need::Replace(r) => {
            Observed::Written(Ok(LeaseRecord { resource_version: rv.to_string(), ..r.clone() }))
        }
        other => panic!("not a write: {other:?}"),
    }
}

#[test]
fn config_validation_names_the_flags() {
    let ok = ElectionConfig::new("a");
    assert_eq!(ok.validate(), Ok(()));
    assert_eq!(ok.write_window(), secs(10));
    let renew = ElectionConfig { renew_deadline: secs(15), ..ok.clone() };
    let err = renew.validate().unwrap_err();
    assert!(err.to_string().contains("-leader-election.renew-deadline"), "{err}");
    let retry = ElectionConfig { retry_period: secs(10), ..ok.clone() };
    assert!(retry.validate().unwrap_err().to_string().contains("-leader-election.retry-period"));
    let zero = ElectionConfig { retry_period: Duration::ZERO, ..ok.clone() };
    assert!(zero.validate().is_err());
    let fraction = ElectionConfig { lease_duration: Duration::from_millis(15_500), ..ok.clone() };
    assert_eq!(fraction.validate(), Err(ConfigError::LeaseNotWholeSeconds(Duration::from_millis(15_500))));
    assert_eq!(ElectionConfig::new("").validate(), Err(ConfigError::NoIdentity));
    // A lease within the skew margin would leave no write window; the smallest accepted is 2 s.
    let within = ElectionConfig {
        lease_duration: secs(1),
        renew_deadline: Duration::from_millis(750),
        retry_period: Duration::from_millis(250),
        ..ok.clone()
    };
    assert_eq!(within.validate(), Err(ConfigError::LeaseWithinClockSkew { lease: secs(1), skew: secs(1) }));
    assert!(within.validate().unwrap_err().to_string().contains("-leader-election.lease-duration"));
    let smallest = ElectionConfig {
        lease_duration: secs(2),
        renew_deadline: Duration::from_millis(1500),
        retry_period: Duration::from_millis(500),
        ..ok.clone()
    };
    assert_eq!(smallest.validate(), Ok(()));
    assert_eq!(smallest.write_window(), secs(1));
    // A window (here the lease less the margin) no longer than the retry period: the gate would close between renewals.
    let gaps = ElectionConfig {
        lease_duration: secs(2),
        renew_deadline: Duration::from_millis(1900),
        retry_period: Duration::from_millis(1500),
        ..ok.clone()
    };
    assert_eq!(
        gaps.validate(),
        Err(ConfigError::WindowNotLongerThanRetry {
            window: secs(1),
            retry: Duration::from_millis(1500),
            skew: secs(1)
        })
    );
    // The window never comes closer than the skew to the lease duration.
    let tight = ElectionConfig { renew_deadline: secs(14), clock_skew: secs(3), ..ok };
    assert_eq!(tight.write_window(), secs(12));
}

#[test]
fn lease_object_round_trip() {
    let record = held_by("pod-a", "42");
    let lease = record.to_lease("rollout-operator-leader");
    assert_eq!(lease.metadata.name.as_deref(), Some("rollout-operator-leader"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("42"));
    assert_eq!(LeaseRecord::from_lease(&lease), record);
    // A create carries no resourceVersion; an empty holder is nobody.
    let mut fresh = LeaseRecord { resource_version: String::new(), holder: Some(String::new()), ..record };
    assert_eq!(fresh.to_lease("x").metadata.resource_version, None);
    fresh.resource_version = "1".into();
    assert_eq!(LeaseRecord::from_lease(&fresh.to_lease("x")).holder, None);
}

#[test]
fn first_candidate_creates_the_lease_and_writes_until_the_renew_deadline() {
    let mut e = Elector::new(ElectionConfig::new("pod-a"));
    assert_eq!(e.step(Observed::Start, at(0)).need, Need::Get);
    let create = e.step(Observed::Read(Ok(None)), at(100)).need;
    let Need::Create(record) = &create else { panic!("{create:?}") };
    assert_eq!(record.holder.as_deref(), Some("pod-a"));
    assert_eq!(record.lease_duration_seconds, Some(15));
    assert_eq!(record.resource_version, "");
    assert!(!e.may_write(at(100)), "not before the create is answered");
    let step = e.step(committed(&create, "1"), at(300));
    assert_eq!(step.events, vec![Event::Acquired { transitions: 0 }]);
    assert_eq!(step.need, Need::Wait(secs(2)));
    // The term counts from the send (100 ms), not from the answer.
    assert_eq!(e.write_until(), Some(at(10_100)));
    assert!(e.may_write(at(10_099)));
    assert!(!e.may_write(at(10_100)), "no write at or after the renew deadline, even without a step");
}

#[test]
fn leader_renews_with_compare_and_swap_and_extends_from_the_send() {
    let mut e = Elector::new(ElectionConfig::new("pod-a"));
    e.step(Observed::Start, at(0));
    let create = e.step(Observed::Read(Ok(None)), at(0)).need;
    e.step(committed(&create, "1"), at(0));
    assert_eq!(e.step(Observed::Tick, at(2_000)).need, Need::Get);
    let renew = e.step(Observed::Read(Ok(Some(held_by("pod-a", "1")))), at(2_000)).need;
    let Need::Replace(record) = &renew else { panic!("{renew:?}") };
    assert_eq!(record.resource_version, "1", "conditional on the version read");
    assert_eq!(record.renew_time, Some(at(2_000)));
    assert_eq!(record.transitions, 3, "a renewal is no transition");
    let step = e.step(committed(&renew, "2"), at(2_500));
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(e.write_until(), Some(at(12_000)));
}

#[test]
fn a_renewal_whose_answer_is_lost_does_not_extend_the_term() {
    let mut e = Elector::new(ElectionConfig::new("pod-a"));
    e.step(Observed::Start, at(0));
    let create = e.step(Observed::Read(Ok(None)), at(0)).need;
    e.step(committed(&create, "1"), at(0));
    e.step(Observed::Tick, at(2_000));
    e.step(Observed::Read(Ok(Some(held_by("pod-a", "1")))), at(2_000));
    let step = e.step(Observed::Written(Err(Failure::Deadline("timeout".into()))), at(4_000));
    assert_eq!(step.need, Need::Wait(secs(2)));
    assert_eq!(e.write_until(), Some(at(10_000)));
    // Reads keep failing: the deadline ends the term, with an event, and the replica is a candidate again.
    e.step(Observed::Tick, at(6_000));
    e.step(Observed::Read(Err(Failure::Unavailable("unreachable".into()))), at(9_000));
    e.step(Observed::Tick, at(9_500));
    let step = e.step(Observed::Read(Err(Failure::Unavailable("unreachable".into()))), at(10_000));
    assert!(matches!(step.events.as_slice(), [Event::Lost { .. }]), "{:?}", step.events);
    assert!(!e.is_leader());
    assert!(!e.may_write(at(10_000)));
}

#[test]
fn a_follower_judges_expiry_by_its_own_observation_not_the_renew_time() {
    let mut e = Elector::new(ElectionConfig::new("pod-b"));
    // The holder's renewTime says an hour ago (its clock is off): nothing is expired before 15 s of this replica's
    // own observation without a new version.
    let stale = LeaseRecord { renew_time: Some(at(-3_600_000)), ..held_by("pod-a", "7") };
    e.step(Observed::Start, at(0));
    assert_eq!(e.step(Observed::Read(Ok(Some(stale.clone()))), at(0)).need, Need::Wait(secs(2)));
    e.step(Observed::Tick, at(14_000));
    assert_eq!(e.step(Observed::Read(Ok(Some(stale.clone()))), at(14_999)).need, Need::Wait(secs(2)));
    // A new version (a renewal) starts the count again.
    let renewed = LeaseRecord { resource_version: "8".into(), ..stale.clone() };
    e.step(Observed::Tick, at(15_000));
    assert_eq!(e.step(Observed::Read(Ok(Some(renewed.clone()))), at(15_000)).need, Need::Wait(secs(2)));
    e.step(Observed::Tick, at(29_999));
    assert_eq!(e.step(Observed::Read(Ok(Some(renewed.clone()))), at(29_999)).need, Need::Wait(secs(2)));
    e.step(Observed::Tick, at(30_000));
    let acquire = e.step(Observed::Read(Ok(Some(renewed))), at(30_000)).need;
    let Need::Replace(record) = &acquire else { panic!("{acquire:?}") };
    assert_eq!(record.holder.as_deref(), Some("pod-b"));
    assert_eq!(record.resource_version, "8", "conditional on the expired version");
    assert_eq!(record.transitions, 4);
    assert_eq!(record.acquire_time, Some(at(30_000)));
}

#[test]
fn the_holders_declared_duration_wins_over_ours() {
    let mut e = Elector::new(ElectionConfig::new("pod-b"));
    let long = LeaseRecord { lease_duration_seconds: Some(60), ..held_by("pod-a", "7") };
    e.step(Observed::Start, at(0));
    e.step(Observed::Read(Ok(Some(long.clone()))), at(0));
    e.step(Observed::Tick, at(59_999));
    assert_eq!(e.step(Observed::Read(Ok(Some(long.clone()))), at(59_999)).need, Need::Wait(secs(2)));
    e.step(Observed::Tick, at(60_000));
    assert!(matches!(e.step(Observed::Read(Ok(Some(long))), at(60_000)).need, Need::Replace(_)));
}

#[test]
fn losing_the_race_reads_again_and_follows() {
    let mut e = Elector::new(ElectionConfig::new("pod-b"));
    e.step(Observed::Start, at(0));
    e.step(Observed::Read(Ok(Some(LeaseRecord { holder: None, ..held_by("x", "7") }))), at(0));
    let step = e.step(Observed::Written(Err(Failure::Conflict("conflict".into()))), at(10));
    assert_eq!(step.need, Need::Get);
    assert_eq!(e.step(Observed::Read(Ok(Some(held_by("pod-c", "8")))), at(20)).need, Need::Wait(secs(2)));
    assert!(!e.is_leader());
}

#[test]
fn a_leader_that_sees_another_holder_steps_down_at_once() {
    let mut e = Elector::new(ElectionConfig::new("pod-a"));
    e.step(Observed::Start, at(0));
    let create = e.step(Observed::Read(Ok(None)), at(0)).need;
    e.step(committed(&create, "1"), at(0));
    e.step(Observed::Tick, at(2_000));
    let step = e.step(Observed::Read(Ok(Some(held_by("pod-b", "5")))), at(2_000));
    assert!(matches!(step.events.as_slice(), [Event::Lost { why }] if why.contains("pod-b")), "{:?}", step.events);
    assert!(!e.may_write(at(2_000)));
}

#[test]
fn release_ends_the_window_first_and_clears_the_holder_with_compare_and_swap() {
    let mut a = Elector::new(ElectionConfig::new("pod-a"));
    a.step(Observed::Start, at(0));
    let create = a.step(Observed::Read(Ok(None)), at(0)).need;
    a.step(committed(&create, "1"), at(0));
    let release = a.release(at(1_000));
    assert!(!a.may_write(at(1_000)), "no write once the release has started");
    let Need::Replace(record) = &release.need else { panic!("{release:?}") };
    assert_eq!(record.holder, None);
    assert_eq!(record.resource_version, "1");
    assert_eq!(record.lease_duration_seconds, Some(1));
    let step = a.step(committed(&release.need, "2"), at(1_100));
    assert_eq!((step.need, step.events), (Need::Done, vec![Event::Released]));
    assert_eq!(a.step(Observed::Tick, at(5_000)).need, Need::Done, "a released replica never competes again");
    // Another replica takes the released lease at once, without waiting for its duration.
    let mut b = Elector::new(ElectionConfig::new("pod-b"));
    b.step(Observed::Start, at(1_200));
    let released = LeaseRecord { resource_version: "2".into(), ..record.clone() };
    let acquire = b.step(Observed::Read(Ok(Some(released))), at(1_200)).need;
    assert!(matches!(&acquire, Need::Replace(r) if r.holder.as_deref() == Some("pod-b")), "{acquire:?}");
    // A follower has nothing to release.
    let mut c = Elector::new(ElectionConfig::new("pod-c"));
    assert_eq!(c.release(at(0)).need, Need::Done);
}

/// Found by the election model (`a_release_racing_its_own_lease_write_...` in `model/tests/election.rs`): a release
/// sent while a renewal or takeover of ours was in flight conflicted with it, or sent nothing, and the Lease kept
/// naming the stopped replica until it expired. The release now reads the Lease and clears it while it is ours.
#[test]
fn a_release_racing_its_own_lease_write_reads_the_lease_and_clears_it_while_it_is_ours() {
    // A renewal in flight (its answer abandoned by the shutdown) that committed: read, then cleared at its version.
    let mut a = Elector::new(ElectionConfig::new("pod-a"));
    a.step(Observed::Start, at(0));
    let create = a.step(Observed::Read(Ok(None)), at(0)).need;
    a.step(committed(&create, "1"), at(0));
    a.step(Observed::Tick, at(2_000));
    let renewal = a.step(Observed::Read(Ok(Some(held_by("pod-a", "1")))), at(2_000)).need;
    assert!(matches!(renewal, Need::Replace(_)), "{renewal:?}");
    let release = a.release(at(2_100));
    assert_eq!(release.need, Need::Get, "the renewal's outcome is unknown: read first");
    assert!(!a.may_write(at(2_100)));
    let clear = a.step(Observed::Read(Ok(Some(held_by("pod-a", "2")))), at(2_200)).need;
    let Need::Replace(record) = &clear else { panic!("{clear:?}") };
    assert_eq!((record.holder.as_deref(), record.resource_version.as_str()), (None, "2"));
    let done = a.step(committed(&clear, "3"), at(2_300));
    assert_eq!((done.need, done.events), (Need::Done, vec![Event::Released]));

    // A release on a stale version (our renewal committed, its answer came after): the conflict makes it read
    // again and clear the newer version.
    let mut b = Elector::new(ElectionConfig::new("pod-b"));
    b.step(Observed::Start, at(0));
    let create = b.step(Observed::Read(Ok(None)), at(0)).need;
    b.step(committed(&create, "1"), at(0));
    let release = b.release(at(1_000)).need;
    assert!(matches!(&release, Need::Replace(r) if r.resource_version == "1"), "{release:?}");
    assert_eq!(b.step(Observed::Written(Err(Failure::Conflict("conflict".into()))), at(1_100)).need, Need::Get);
    let clear = b.step(Observed::Read(Ok(Some(held_by("pod-b", "2")))), at(1_200)).need;
    assert!(matches!(&clear, Need::Replace(r) if r.holder.is_none() && r.resource_version == "2"), "{clear:?}");
    // Another holder by then: nothing to give back.
    let mut c = b.clone();
    assert_eq!(c.step(Observed::Written(Err(Failure::Conflict("conflict".into()))), at(1_300)).need, Need::Get);
    assert_eq!(c.step(Observed::Read(Ok(Some(held_by("pod-x", "3")))), at(1_400)).need, Need::Done);
    // Someone keeps writing: it gives up after a few tries (the Lease then expires by itself).
    for _ in 0..RELEASE_TRIES {
        let step = b.step(Observed::Written(Err(Failure::Conflict("conflict".into()))), at(1_500));
        if step.need == Need::Done {
            break;
        }
        assert_eq!(step.need, Need::Get);
        assert!(matches!(b.step(Observed::Read(Ok(Some(held_by("pod-b", "9")))), at(1_500)).need, Need::Replace(_)));
    }
    assert_eq!(b.step(Observed::Written(Err(Failure::Conflict("conflict".into()))), at(1_600)).need, Need::Done);

    // A takeover in flight from a candidate: read; cleared if it committed, nothing if it did not.
    let mut d = Elector::new(ElectionConfig::new("pod-d"));
    d.step(Observed::Start, at(0));
    let expired = LeaseRecord { holder: None, ..held_by("x", "4") };
    assert!(matches!(d.step(Observed::Read(Ok(Some(expired))), at(0)).need, Need::Replace(_)));
    let mut e = d.clone();
    assert_eq!(d.release(at(100)).need, Need::Get);
    assert!(matches!(d.step(Observed::Read(Ok(Some(held_by("pod-d", "5")))), at(200)).need, Need::Replace(_)));
    assert_eq!(e.release(at(100)).need, Need::Get);
    assert_eq!(e.step(Observed::Read(Ok(Some(held_by("pod-x", "5")))), at(200)).need, Need::Done);
}

/// Found by the election model after the fix above: a release after the write window lapsed (the Lease still names
/// the replica, a candidate again) or after its own write went unanswered (it may have committed) read nothing and
/// left the Lease held until it expired. Both now read first.
#[test]
fn a_release_reads_after_a_lapsed_window_or_an_unanswered_write_of_its_own() {
    // The window lapsed: a renewal went unanswered past the deadline.
    let mut a = Elector::new(ElectionConfig::new("pod-a"));
    a.step(Observed::Start, at(0));
    let create = a.step(Observed::Read(Ok(None)), at(0)).need;
    a.step(committed(&create, "1"), at(0));
    let lapsed = a.step(Observed::Written(Err(Failure::Deadline("timed out".into()))), at(10_500));
    assert!(matches!(lapsed.events.as_slice(), [Event::Lost { .. }]), "{:?}", lapsed.events);
    assert!(!a.is_leader());
    assert_eq!(a.release(at(10_600)).need, Need::Get);
    let clear = a.step(Observed::Read(Ok(Some(held_by("pod-a", "1")))), at(10_700)).need;
    assert!(matches!(&clear, Need::Replace(r) if r.holder.is_none()), "{clear:?}");
    // Its own create unanswered: it may have committed.
    let mut b = Elector::new(ElectionConfig::new("pod-b"));
    b.step(Observed::Start, at(0));
    assert!(matches!(b.step(Observed::Read(Ok(None)), at(0)).need, Need::Create(_)));
    b.step(Observed::Written(Err(Failure::Deadline("timed out".into()))), at(5_000));
    assert_eq!(b.release(at(5_100)).need, Need::Get);
    assert!(matches!(b.step(Observed::Read(Ok(Some(held_by("pod-b", "1")))), at(5_200)).need, Need::Replace(_)));
    // An unreadable Lease is read again while tries are left.
    let mut c = Elector::new(ElectionConfig::new("pod-c"));
    c.step(Observed::Start, at(0));
    c.step(Observed::Read(Ok(None)), at(0));
    c.step(Observed::Written(Err(Failure::Deadline("timed out".into()))), at(5_000));
    assert_eq!(c.release(at(5_100)).need, Need::Get);
    assert_eq!(c.step(Observed::Read(Err(Failure::Unavailable("unreachable".into()))), at(5_200)).need, Need::Get);
    // A candidate that never wrote has nothing to read.
    let mut d = Elector::new(ElectionConfig::new("pod-d"));
    d.step(Observed::Start, at(0));
    d.step(Observed::Read(Ok(Some(held_by("pod-x", "1")))), at(0));
    assert_eq!(d.release(at(100)).need, Need::Done);
}

// ---------------------------------------------------------------------------------------------------------------
// The harness: replicas over one Lease store, judged against the store's true holder at every step.

/// One scheduling decision of the harness.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// The replica carries out its next need (sends a request, or ends its wait).
    Send,
    /// Its request reaches the store (a read takes its snapshot; a write is applied if its precondition holds).
    Commit,
    /// The answer reaches it (an uncommitted request fails, and never commits).
    Reply,
    /// The answer is lost: it sees a failure; an uncommitted write may still commit later.
    LoseReply,
    /// A write whose answer was lost commits now (if its precondition still holds).
    LateCommit,
    /// Graceful shutdown.
    Release,
    /// The replica's next natural stage: end its wait, send its request, have it commit, or deliver the answer.
    Progress,
}

#[derive(Debug, Clone, Copy)]
struct Op {
    replica: usize,
    act: Act,
    /// Real time passing before the act, in milliseconds.
    dt_ms: i64,
}

enum State {
    Ready(Need),
    InFlight { need: Need, answer: Option<Observed> },
}

struct Replica {
    elector: Elector,
    /// Clock offset (ms) and rate (parts per thousand faster than real time).
    offset_ms: i64,
    rate_permille: i64,
    state: State,
    late: Vec<Need>,
}

impl Replica {
    fn now(&self, real_ms: i64) -> Timestamp {
        at(self.offset_ms + real_ms + real_ms * self.rate_permille / 1000)
    }
}

struct Store {
    lease: Option<LeaseRecord>,
    rv: u64,
}

impl Store {
    fn apply(&mut self, need: &Need) -> Observed {
        match need {
            Need::Get => Observed::Read(Ok(self.lease.clone())),
            Need::Create(record) => {
                if self.lease.is_some() {
                    return Observed::Written(Err(Failure::Conflict("conflict".into())));
                }
                self.put(record)
            }
            Need::Replace(record) => {
                match &self.lease {
                    Some(current) if current.resource_version == record.resource_version => {}
                    _ => return Observed::Written(Err(Failure::Conflict("conflict".into()))),
                }
                self.put(record)
            }
            Need::Wait(_) | Need::Done => unreachable!("not a request"),
        }
    }

    fn put(&mut self, record: &LeaseRecord) -> Observed {
        self.rv += 1;
        let stored = LeaseRecord { resource_version: self.rv.to_string(), ..record.clone() };
        self.lease = Some(stored.clone());
        Observed::Written(Ok(stored))
    }
}

/// Two replicas both allowed to write at one real moment, or one allowed while the store names another holder.
#[derive(Debug)]
struct Violation(String);

/// Runs the schedule; checks after every act that each replica allowed to write is the store's holder (so at most
/// one is).
fn run(config: &ElectionConfig, clocks: &[(i64, i64)], ops: &[Op]) -> Result<(), Violation> {
    run_with(config, clocks, ops, |_, _| ())
}

/// [`run`], then `at_end` with the replicas and the real time at the end.
fn run_with(
    config: &ElectionConfig,
    clocks: &[(i64, i64)],
    ops: &[Op],
    mut at_end: impl FnMut(&[Replica], i64),
) -> Result<(), Violation> {
    let mut replicas: Vec<Replica> = clocks
        .iter()
        .enumerate()
        .map(|(i, &(offset_ms, rate_permille))| {
            let mut elector = Elector::new(ElectionConfig { identity: format!("pod-{i}"), ..config.clone() });
            let need = elector.step(Observed::Start, at(offset_ms)).need;
            Replica { elector, offset_ms, rate_permille, state: State::Ready(need), late: Vec::new() }
        })
        .collect();
    let mut store = Store { lease: None, rv: 0 };
    let mut real = 0i64;
    for op in ops {
        real += op.dt_ms;
        let r = &mut replicas[op.replica % clocks.len()];
        let now = r.now(real);
        let act = match (op.act, &r.state) {
            (Act::Progress, State::Ready(_)) => Act::Send,
            (Act::Progress, State::InFlight { answer: None, .. }) => Act::Commit,
            (Act::Progress, State::InFlight { answer: Some(_), .. }) => Act::Reply,
            (act, _) => act,
        };
        match act {
            Act::Progress => unreachable!("resolved above"),
            Act::Send => {
                if let State::Ready(need) = &r.state {
                    r.state = match need.clone() {
                        Need::Wait(_) => State::Ready(r.elector.step(Observed::Tick, now).need),
                        Need::Done => State::Ready(Need::Done),
                        need => State::InFlight { need, answer: None },
                    };
                }
            }
            Act::Commit => {
                if let State::InFlight { need, answer: answer @ None } = &mut r.state {
                    *answer = Some(store.apply(need));
                }
            }
            Act::Reply | Act::LoseReply => {
                if let State::InFlight { need, answer } = &r.state {
                    let lost = matches!(act, Act::LoseReply);
                    let seen = match (answer, need) {
                        (Some(answer), _) if !lost => answer.clone(),
                        (_, Need::Get) => Observed::Read(Err(Failure::Unavailable("timeout".into()))),
                        _ => Observed::Written(Err(Failure::Deadline("timeout".into()))),
                    };
                    if lost && answer.is_none() && !matches!(need, Need::Get) {
                        r.late.push(need.clone());
                    }
                    r.state = State::Ready(r.elector.step(seen, now).need);
                }
            }
            Act::LateCommit => {
                if !r.late.is_empty() {
                    let need = r.late.remove(0);
                    store.apply(&need);
                }
            }
            Act::Release => {
                if !matches!(r.state, State::Ready(Need::Done)) {
                    // A request in flight is abandoned (it may still commit late).
                    if let State::InFlight { need, answer: None } = &r.state
                        && !matches!(need, Need::Get)
                    {
                        r.late.push(need.clone());
                    }
                    r.state = State::Ready(r.elector.release(now).need);
                    if let State::Ready(need @ Need::Replace(_)) = &r.state {
                        r.state = State::InFlight { need: need.clone(), answer: None };
                    }
                }
            }
        }
        let holder = store.lease.as_ref().and_then(|l| l.holder.clone());
        for r in &replicas {
            if r.elector.may_write(r.now(real)) && holder.as_deref() != Some(r.elector.config().identity.as_str()) {
                let writers: Vec<_> = replicas
                    .iter()
                    .filter(|o| o.elector.may_write(o.now(real)))
                    .map(|o| o.elector.config().identity.clone())
                    .collect();
                return Err(Violation(format!(
                    "at {real} ms {} may write but the lease is held by {holder:?} (writers: {writers:?})",
                    r.elector.config().identity
                )));
            }
        }
    }
    at_end(&replicas, real);
    Ok(())
}

fn op(replica: usize, act: Act, dt_ms: i64) -> Op {
    Op { replica, act, dt_ms }
}

/// A's clock runs 2 % slow and B's 2 % fast; A acquires at 0, B sees it at once and takes over once 15 s have
/// passed by its clock (14.7 s of real time), while A's window, by A's clock, has not ended.
fn drift_schedule() -> Vec<Op> {
    use Act::*;
    vec![
        op(0, Send, 0),
        op(0, Commit, 0),
        op(0, Reply, 0),
        op(0, Send, 0),
        op(0, Commit, 0),
        op(0, Reply, 0), // A leads from 0
        op(1, Send, 0),
        op(1, Commit, 0),
        op(1, Reply, 0), // B observes A's version at 0 and waits
        op(1, Send, 14_710),
        op(1, Send, 0),
        op(1, Commit, 0),
        op(1, Reply, 0), // B: expired by its clock; acquires
        op(1, Send, 0),
        op(1, Commit, 0),
        op(1, Reply, 0),
    ]
}

#[test]
fn a_renew_deadline_as_long_as_the_lease_lets_two_replicas_lead_under_clock_drift() {
    // The known-bug variant (renew deadline equal to the lease, no skew margin): the harness finds the overlap.
    let broken = ElectionConfig { renew_deadline: secs(15), clock_skew: Duration::ZERO, ..ElectionConfig::new("") };
    let clocks = [(0, -20), (5_000, 20)];
    let found = run(&broken, &clocks, &drift_schedule());
    assert!(found.is_err(), "the harness must catch the broken configuration");
    // The defaults end A's window 5 s earlier: the same schedule is safe.
    run(&ElectionConfig::new(""), &clocks, &drift_schedule()).unwrap();
}

fn act() -> impl Strategy<Value = Act> {
    // Mostly each replica's natural next stage (so schedules go deep: many renewals and takeovers), with early
    // answers (a request that fails without committing), lost answers, late commits and releases mixed in.
    prop_oneof![
        60 => Just(Act::Progress),
        8 => Just(Act::Send),
        8 => Just(Act::Commit),
        6 => Just(Act::Reply),
        6 => Just(Act::LoseReply),
        6 => Just(Act::LateCommit),
        1 => Just(Act::Release),
    ]
}

fn ops(replicas: usize) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (0..replicas, act(), prop_oneof![3 => 0i64..500, 2 => 500i64..4_000, 1 => 4_000i64..20_000])
            .prop_map(|(replica, act, dt_ms)| Op { replica, act, dt_ms }),
        1..300,
    )
}

/// Offsets of any size (expiry never compares two replicas' clocks); rates within 2 % of real time, which the
/// defaults' 5 s between window and lease cover many times over.
fn clocks(replicas: usize) -> impl Strategy<Value = Vec<(i64, i64)>> {
    prop::collection::vec((-3_600_000i64..3_600_000, -20i64..=20), replicas)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Two candidates, any interleaving of sends, commits, answers, lost answers, late commits and releases: never
    /// may one write while the store names another holder (so never two at once).
    #[test]
    fn two_candidates_never_both_may_write(clocks in clocks(2), ops in ops(2)) {
        run(&ElectionConfig::new(""), &clocks, &ops).map_err(|v| TestCaseError::fail(v.0))?;
    }

    /// The same with three replicas and the tightest valid tuning (renew deadline one second under the lease).
    #[test]
    fn three_candidates_never_both_may_write_with_tight_tuning(clocks in clocks(3), ops in ops(3)) {
        let tight = ElectionConfig {
            lease_duration: secs(3),
            renew_deadline: secs(2),
            retry_period: Duration::from_millis(500),
            clock_skew: Duration::from_millis(500),
            ..ElectionConfig::new("")
        };
        let clocks: Vec<_> = clocks.into_iter().map(|(o, r)| (o, r / 4)).collect();
        run(&tight, &clocks, &ops).map_err(|v| TestCaseError::fail(v.0))?;
    }

    /// Liveness under a calm network: whatever happened before, once requests are answered in turn and time
    /// passes, some replica leads.
    #[test]
    fn a_calm_network_elects_someone(clocks in clocks(2), ops in ops(2)) {
        let config = ElectionConfig::new("");
        let mut calm = ops.clone();
        for _ in 0..12 {
            for replica in 0..2 {
                calm.extend([
                    op(replica, Act::Send, 0),
                    op(replica, Act::Commit, 0),
                    op(replica, Act::Reply, 0),
                    op(replica, Act::Send, 0),
                    op(replica, Act::Commit, 0),
                    op(replica, Act::Reply, 0),
                ]);
            }
            calm.push(op(0, Act::Commit, 2_000));
        }
        prop_assert!(run(&config, &clocks, &calm).is_ok());
        // Released replicas never lead again: unless every one was released, someone must lead.
        let all_released = (0..2).all(|r| ops.iter().any(|o| o.replica == r && matches!(o.act, Act::Release)));
        if !all_released {
            prop_assert!(leads_after(&config, &clocks, &calm), "nobody leads after a calm period");
        }
    }
}

/// Whether a replica may write at the end of the schedule.
fn leads_after(config: &ElectionConfig, clocks: &[(i64, i64)], ops: &[Op]) -> bool {
    let mut leaders = 0;
    let checked = run_with(config, clocks, ops, |replicas, real| {
        leaders = replicas.iter().filter(|r| r.elector.may_write(r.now(real))).count();
    });
    checked.is_ok() && leaders == 1
}
