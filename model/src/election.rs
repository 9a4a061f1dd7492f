//! A stateright model of leader election: two operator replicas, each driving the real election step
//! machine ([`rollout_core::election::Elector`]), competing for one Lease held by the API server.
//!
//! Every decision is the core's: when to read, create, take over or renew the Lease, what a write's answer means,
//! and until when a replica may write ([`Elector::step`], [`Elector::release`], [`Elector::may_write`]). The model
//! owns only the environment, and carries out each [`Need`] the way the shell's loop (`controller/src/election`)
//! does:
//! - **the API server**: the Lease with a resourceVersion counter; a replace is a compare-and-swap on that version
//!   and a create fails when the Lease exists (both answered as a conflict), a read returns the Lease as committed;
//! - **the network**: each request and each answer is a message in flight, delivered in any order with the other
//!   actors' steps, the answer at most `message_delay` ticks of true time after its request was sent (so a request
//!   may commit late, or its answer come late), or lost (`losses`); a replica whose answer does not come times out
//!   after the shell's request timeout (half the renew deadline, at least the retry period), and its request may
//!   still commit at the API server after that;
//! - **time**: a global true time in ticks (the judge's), and per replica a clock reading (its `now`): its own
//!   offset (they differ by hours: expiry never compares two replicas' clocks) plus the true time run through its
//!   rate; one replica's clock runs `drift_permille` slow and the other's as much fast (either may lead, so a slow
//!   leader and a fast one are both explored). A running replica acts on what is due (a wait over, a timeout)
//!   before time passes;
//! - **pauses**: a paused replica (a stopped process) takes no step while time passes; its clock keeps running, so
//!   on resume it reads the real time, but it acts on its stale state first (its answers and timeouts wait for it).
//!   Only a replica that believes it leads is paused (a paused candidate only comes back to a compare-and-swap);
//! - **the controller**: a replica may send a controller write whenever the shell's pre-write check
//!   ([`Elector::may_write`] on its clock) allows it; the write commits at the API server later, at most
//!   `write_delay` ticks after it was sent (one write in flight at a time: writes do not interact, each is judged
//!   alone); graceful shutdown (`releases`) happens only once the replica's controller has stopped with no write in
//!   flight (the shell stops the controller after its current pass, whose writes were answered, and releases
//!   after, as in `main.rs`), and only before the network settles (see below);
//! - **the release**, as the shell's loop carries it out: a read in flight or a wait is dropped and
//!   [`Elector::release`] called at once; a Lease write in flight (a create or a replace) is let finish first, and
//!   the release called once its answer, or its timeout, has been fed to the core. The release's own reads and
//!   compare-and-swaps are messages in flight like any other (delayed, lost, timed out) until the core is done.
//!
//! Judged (always-properties):
//! - [`WRITE_UNDER_LEASE`]: no controller write **commits** while its issuer is not the Lease's holder as the API
//!   server holds it, or after that holder's Lease has expired by true time (the true time of the holder's last
//!   committed write of the Lease plus its declared `leaseDurationSeconds`);
//! - [`ONE_MAY_WRITE`]: at no true time do both replicas see [`Elector::may_write`] true on their own clocks. A
//!   window opens only at a step (a tick instant) and closes by the clock, so checking every state at its true time
//!   finds every overlap;
//! - [`LEADER_WITHIN_BOUND`] (bounded liveness, with `settle_by`): the environment declares the network stable at
//!   some point up to tick `settle_by` (no replica paused, no more losses or pauses, and every message delivered
//!   before time passes); from then on some replica may write within [`ElectionModel::lead_within`] ticks. This
//!   is an always-property over every reachable state (a state at least that long after stabilisation must have
//!   seen a leader since), so the checker's exhaustive search is sound for it; stateright's `eventually` is not
//!   used because it misses violations that end in a cycle, and our paths end at the time horizon, where "not yet"
//!   is no counterexample. A release counts as a fault here: a release may leave the Lease to expire (a write
//!   that commits after it), so the bound counts from the last release;
//! - [`RELEASE_HANDS_OVER`] (with a release): once a release is complete (done, nothing of its replica in flight),
//!   the Lease does not name its replica, unless a Lease write that replica abandoned at its timeout committed
//!   after the release's last request (no read of the release can see it: [`ElectionState::late_commit`]). The
//!   model found three cases in the core that broke it (a release racing its own renewal or takeover; a release
//!   after the write window lapsed; a release after its own write went unanswered), all fixed; see
//!   [`ElectionModel::handed_over`].
//!
//! The assumption the core states for its `clock_skew` margin, made explicit here: two replicas' clocks disagree
//! about one lease duration by at most `2 * drift * lease`, and a controller write sent takes at most `write_delay`
//! ticks to commit; together they must fit in `clock_skew` ([`ElectionModelConfig::assumption_holds`]: a production
//! configuration that breaks it is refused, since its counterexamples would show the assumption, not the code).
//! What a write may take is bounded only for controller writes: Lease requests and answers may take any time up to
//! `message_delay` (the election does not rely on a bound there; the model bounds it to stay finite).
//!
//! Abstractions: time is discrete (every step happens at a tick instant, so a write is checked at a tick and the
//! last one of a window can come up to a tick before the window closes by the clock, where a real one could come
//! just before; `write_delay` counts whole ticks from the check to the commit); the check before a write and its
//! send are one step (a pause between them would be a longer write delay, which no lease without
//! fencing tokens can cover); two replicas; the time horizon bounds every run; crashes with a restart are not
//! modelled (a restart under the same identity is a replica reading its own Lease, which the core's unit tests
//! cover).
//!
//! Test-only faults ([`ElectionBug`]) are switches in the environment, not copies of the core: one skips the
//! shell's pre-write check, one tunes the core without its margin.

use jiff::{SignedDuration, Timestamp};
use rollout_core::Failure;
use rollout_core::election::{ElectionConfig, Elector, LeaseRecord, Need, Observed};
use stateright::{Model, Property};
use std::fmt::Write as _;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::Duration;

/// The replicas' identities (their pod names).
pub const REPLICAS: [&str; 2] = ["operator-a", "operator-b"];

/// Always: a controller write commits only from the Lease's true holder, before its Lease expires by true time.
pub const WRITE_UNDER_LEASE: &str = "a controller write commits only under its issuer's live lease";
/// Always: never two replicas that may write at the same true time.
pub const ONE_MAY_WRITE: &str = "never two replicas that may write at once";
/// Always (bounded liveness): a stable network has a replica that may write within the bound.
pub const LEADER_WITHIN_BOUND: &str = "a stable network has a leader within the bound";
/// Sometimes: the Lease is taken over (from the other replica, or after a release).
pub const TAKEOVER: &str = "the lease is taken over";
/// Sometimes: a controller write is in flight after a takeover (the model is not vacuous).
pub const WRITE_AFTER_TAKEOVER: &str = "a controller write is in flight after a takeover";
/// Sometimes: a replica runs (not paused) still believing it leads, its window over, while the other may write (a
/// paused leader resumed after the takeover, on its stale state).
pub const DEPOSED_LEADER_RUNS: &str = "a deposed leader runs while the other may write";
/// Always (with a release): once a release is complete, the Lease does not name its replica (graceful shutdown hands
/// over at once, docs/install.md "High availability"), unless a write it abandoned committed after the release's last
/// request: see [`ElectionModel::handed_over`].
pub const RELEASE_HANDS_OVER: &str = "a completed release leaves the lease free";
/// Sometimes (with a release): a release waits for its replica's Lease write in flight (the race the release
/// once lost is explored).
pub const RELEASE_WAITS_FOR_WRITE: &str = "a release waits for its lease write in flight";
/// Sometimes: the network stays stable for the whole liveness bound.
pub const STABLE_LONG_ENOUGH: &str = "the network is stable for the bound";

mod violation {
    pub const WRITE_UNDER_LEASE: u8 = 1;
    pub const ONE_MAY_WRITE: u8 = 2;
}

/// A test-only fault, showing that the safety properties catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionBug {
    /// The controller writes whenever its replica believes it holds the term it won ([`Elector::is_leader`]: until
    /// its next step notices the term is over), without the shell's check of [`Elector::may_write`] on the clock
    /// right before each write.
    NoPreWriteCheck,
    /// The renew deadline equal to the lease duration and no skew margin (built without
    /// [`ElectionConfig::validate`], which refuses it): the write window lasts as long as the Lease.
    NoMargin,
    /// The tuning taken as configured, without [`ElectionConfig::validate`] or the model's check that the skew
    /// margin covers its drift: shows what a tuning the flag check refuses would do (a lease no longer than the skew
    /// margin leaves an empty write window).
    Unvalidated,
}

/// The environment's bounds and the election's tuning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionModelConfig {
    /// True time per tick.
    pub tick: Duration,
    /// `-leader-election.lease-duration` (whole seconds).
    pub lease_duration: Duration,
    /// `-leader-election.renew-deadline`.
    pub renew_deadline: Duration,
    /// `-leader-election.retry-period`.
    pub retry_period: Duration,
    /// The core's margin for clock rates and write commits.
    pub clock_skew: Duration,
    /// How far each replica's clock rate is off true time, per mille (one slow, one fast).
    pub drift_permille: u16,
    /// Ticks a Lease request and its answer may take together (the round trip, from the send of the request to the
    /// arrival of the answer).
    pub message_delay: u8,
    /// Ticks a controller write may take from its send (and check) to its commit.
    pub write_delay: u8,
    /// Lease requests or answers that may be lost.
    pub losses: u8,
    /// Replica pauses.
    pub pauses: u8,
    /// Graceful shutdowns (at most one: a replica must be left to lead).
    pub releases: u8,
    /// Replicas send controller writes (off: a smaller state space for the liveness check).
    pub writes: bool,
    /// The network becomes stable at some tick up to this one (it must), and the liveness bound is checked; the
    /// horizon must leave the bound's ticks after it.
    pub settle_by: Option<u8>,
    /// Ticks of true time explored.
    pub horizon: u8,
    pub bug: Option<ElectionBug>,
    /// Replica 0's own `-leader-election.lease-duration` and `-leader-election.renew-deadline`, when they differ
    /// from the others' (a flag changed in a rolling update: each replica declares its own duration in the Lease it
    /// holds, and a follower must wait out the holder's, not its own).
    pub replica0_tuning: Option<(Duration, Duration)>,
    /// The run starts with a Lease that names replica 0 and declares this many seconds (left by its previous
    /// incarnation, started with another lease duration), committed at tick 0: replica 0 renews it as its own.
    pub stale_lease_seconds: Option<i32>,
}

impl Default for ElectionModelConfig {
    /// A 2 s lease renewed every 500 ms and written within 1 s of a renewal (the defaults' relations: the window is
    /// capped by the skew margin), 500 ms ticks, clocks 4 % off true time, one loss and one pause, 3 s of true time.
    fn default() -> Self {
        ElectionModelConfig {
            tick: Duration::from_millis(500),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(500),
            clock_skew: Duration::from_secs(1),
            drift_permille: 40,
            message_delay: 1,
            write_delay: 1,
            losses: 1,
            pauses: 1,
            releases: 0,
            writes: true,
            settle_by: None,
            horizon: 6,
            bug: None,
            replica0_tuning: None,
            stale_lease_seconds: None,
        }
    }
}

impl ElectionModelConfig {
    /// Whether the margin covers what the model lets happen: the two clocks' disagreement over one lease plus the
    /// longest controller write fit in `clock_skew`.
    pub fn assumption_holds(&self) -> bool {
        let drift = self.longest_lease().as_millis() * 2 * u128::from(self.drift_permille) / 1000;
        let write = self.tick.as_millis() * u128::from(self.write_delay);
        drift + write <= self.clock_skew.as_millis()
    }

    /// Ticks after the network settles by which some replica may write (the bounded-liveness bound): a Lease left
    /// by a replica that no longer renews is seen within a request timeout (a read lost before the network settled)
    /// and a retry period, expires a lease duration later, and is taken at the next retry, plus a tick for the
    /// answer; each wait measured by the slowest clock and rounded up
    /// to whole ticks (a replica acts only at a tick).
    pub fn lead_within(&self) -> u8 {
        let ticks = |d: Duration| {
            let per_tick = self.tick.as_millis() * u128::from(1000 - self.drift_permille);
            (d.as_millis() * 1000).div_ceil(per_tick)
        };
        let bound = ticks(self.request_timeout()) + 2 * ticks(self.retry_period) + ticks(self.longest_lease()) + 1;
        u8::try_from(bound).unwrap_or(u8::MAX)
    }

    /// How long the shell's loop waits for an answer: long enough for a loaded API server, no longer than a retry
    /// period past half the renew deadline (`controller/src/election`); the longer of the two replicas' when their
    /// tuning differs.
    pub fn request_timeout(&self) -> Duration {
        REPLICAS.iter().map(|identity| self.request_timeout_of(identity)).max().unwrap_or(self.retry_period)
    }

    /// Replica `identity`'s wait for an answer, from its own tuning, as the shell derives it.
    fn request_timeout_of(&self, identity: &str) -> Duration {
        (self.election_config(identity).renew_deadline / 2).max(self.retry_period)
    }

    /// The longest lease any replica declares.
    fn longest_lease(&self) -> Duration {
        self.replica0_tuning.map_or(self.lease_duration, |(lease, _)| lease.max(self.lease_duration))
    }

    /// The election's tuning for replica `identity`, as the shell would build it (or, for [`ElectionBug::NoMargin`],
    /// as the flag check would refuse it).
    fn election_config(&self, identity: &str) -> ElectionConfig {
        let (lease_duration, renew_deadline) = match self.replica0_tuning {
            Some(tuning) if identity == REPLICAS[0] => tuning,
            _ => (self.lease_duration, self.renew_deadline),
        };
        let mut config = ElectionConfig {
            identity: identity.to_string(),
            lease_duration,
            renew_deadline,
            retry_period: self.retry_period,
            clock_skew: self.clock_skew,
        };
        if self.bug == Some(ElectionBug::NoMargin) {
            config.renew_deadline = config.lease_duration;
            config.clock_skew = Duration::ZERO;
        }
        config
    }
}

/// A request to the API server, and the tick it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub from: u8,
    pub call: Need,
    pub sent: u8,
}

/// An answer on its way back, and the tick its request was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub observed: Observed,
    pub sent: u8,
}

/// What a replica's election loop is doing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Doing {
    /// Waiting until its clock reads `until` (the core's [`Need::Wait`]).
    Waiting { until: Timestamp },
    /// Waiting for the answer to a request sent at `sent_at` (its clock).
    Calling { read: bool, sent_at: Timestamp },
    /// Nothing more to do (released).
    Done,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub elector: Elector,
    pub doing: Doing,
    /// The request it waits on, while in flight.
    pub request: Option<Request>,
    /// Its answer, while in flight.
    pub answer: Option<Answer>,
    pub paused: bool,
    /// A controller write in flight, and the tick it was sent.
    pub write: Option<u8>,
    /// Per mille its clock runs off true time.
    pub rate: i16,
    /// It was shut down gracefully: its controller has stopped (the shell's release signal fired).
    pub released: bool,
    /// [`Elector::release`] was called (at the signal, or once the Lease write in flight then was answered or timed
    /// out).
    pub releasing: bool,
    /// The API server has handled a request of its release (a read or a compare-and-swap whose answer it awaited).
    pub release_handled: bool,
}

/// The Lease as the API server holds it, with the true time (tick) of its last commit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredLease {
    pub record: LeaseRecord,
    pub committed_at: u8,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionState {
    /// True time, in ticks.
    pub t: u8,
    pub lease: Option<StoredLease>,
    /// The last resourceVersion handed out.
    pub version: u8,
    pub replicas: [Replica; 2],
    /// Requests whose sender stopped waiting for them (timed out, or released): they may still commit.
    pub orphans: Vec<Request>,
    pub losses_left: u8,
    pub pauses_left: u8,
    pub releases_left: u8,
    /// When the network became stable.
    pub stable_at: Option<u8>,
    /// A replica could write since the network became stable.
    pub led_since_stable: bool,
    /// Per replica: a Lease write of its own that it abandoned (timed out) committed, naming it, after the last
    /// request of its release that the API server handled (no read of the release can have seen it). The one case a
    /// release cannot hand over without waiting a lease duration. A release that sent nothing does not count: it
    /// could have read.
    pub late_commit: [bool; 2],
    pub violations: u8,
}

impl Hash for ElectionState {
    fn hash<H: Hasher>(&self, h: &mut H) {
        (self.t, self.version, self.losses_left, self.pauses_left, self.releases_left).hash(h);
        (self.stable_at, self.led_since_stable, self.late_commit, self.violations).hash(h);
        if let Some(lease) = &self.lease {
            hash_record(&lease.record, h);
            lease.committed_at.hash(h);
        }
        for r in &self.orphans {
            r.from.hash(h);
            hash_need(&r.call, h);
            r.sent.hash(h);
        }
        for r in &self.replicas {
            // The core's machine carries no `Hash`; its debug form holds every field.
            let mut w = HashWriter(DefaultHasher::new());
            let _ = write!(w, "{:?}", r.elector);
            w.0.finish().hash(h);
            match &r.doing {
                Doing::Waiting { until } => (0u8, until).hash(h),
                Doing::Calling { read, sent_at } => (1u8, read, sent_at).hash(h),
                Doing::Done => 2u8.hash(h),
            }
            if let Some(q) = &r.request {
                hash_need(&q.call, h);
                q.sent.hash(h);
            }
            if let Some(a) = &r.answer {
                match &a.observed {
                    Observed::Read(Ok(Some(record))) | Observed::Written(Ok(record)) => hash_record(record, h),
                    other => std::mem::discriminant(other).hash(h),
                }
                a.sent.hash(h);
            }
            (r.paused, r.write, r.rate, r.released, r.releasing, r.release_handled).hash(h);
        }
    }
}

fn hash_record<H: Hasher>(r: &LeaseRecord, h: &mut H) {
    (&r.holder, r.acquire_time, r.renew_time, r.lease_duration_seconds, r.transitions, &r.resource_version).hash(h);
}

fn hash_need<H: Hasher>(need: &Need, h: &mut H) {
    std::mem::discriminant(need).hash(h);
    if let Need::Create(r) | Need::Replace(r) = need {
        hash_record(r, h);
    }
}

struct HashWriter(DefaultHasher);

impl std::fmt::Write for HashWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.write(s.as_bytes());
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionStep {
    /// True time advances one tick.
    Tick,
    /// The API server handles replica `i`'s request and sends the answer.
    ServerHandles(u8),
    /// The API server handles an abandoned request (its answer goes nowhere).
    ServerHandlesOrphan(u8),
    /// Replica `i` gets its answer and steps.
    AnswerArrives(u8),
    RequestLost(u8),
    AnswerLost(u8),
    OrphanLost(u8),
    /// Replica `i`'s request timed out: it steps with the failure.
    TimesOut(u8),
    /// Replica `i`'s wait is over: it steps.
    Wakes(u8),
    Pauses(u8),
    Resumes(u8),
    /// Replica `i`'s controller sends a write.
    ControllerWrites(u8),
    /// Replica `i`'s controller write commits.
    WriteCommits(u8),
    /// Replica `i` shuts down gracefully and gives the Lease back.
    Releases(u8),
    /// From now on: no replica paused, no losses, every message delivered before time passes.
    NetworkSettles,
}

#[derive(Clone)]
pub struct ElectionModel {
    pub config: ElectionModelConfig,
    configs: [ElectionConfig; 2],
    base: Timestamp,
    /// The replicas' clock offsets from true time (ms).
    offsets: [i64; 2],
    /// Each replica's wait for an answer.
    request_timeouts: [Duration; 2],
}

/// A configuration the election model cannot check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElectionModelError {
    /// A replica's election settings, refused as the operator refuses them at start.
    #[error(transparent)]
    Election(#[from] rollout_core::election::ConfigError),
    /// The skew margin is smaller than the drift the model's clocks make over a lease and a write.
    #[error(
        "clock_skew {clock_skew:?} does not cover the clocks' drift over a lease plus a write delay of {write_delay} ticks"
    )]
    SkewTooSmall { clock_skew: Duration, write_delay: u8 },
    /// The run ends before a leader is due after the network settles.
    #[error("the horizon must leave {lead_within} ticks after settle_by")]
    HorizonTooShort { lead_within: u8 },
    /// Outside what the model explores in reasonable time.
    #[error("need a tick > 0, at most one release, a horizon of at most 60 ticks, drift < 500")]
    OutOfBounds,
}

impl ElectionModel {
    pub fn new(config: ElectionModelConfig) -> Result<Self, ElectionModelError> {
        let configs = [config.election_config(REPLICAS[0]), config.election_config(REPLICAS[1])];
        if !matches!(config.bug, Some(ElectionBug::NoMargin | ElectionBug::Unvalidated)) {
            for config in &configs {
                config.validate()?;
            }
            if !config.assumption_holds() {
                return Err(ElectionModelError::SkewTooSmall {
                    clock_skew: config.clock_skew,
                    write_delay: config.write_delay,
                });
            }
        }
        if config.settle_by.is_some_and(|by| by.saturating_add(config.lead_within()) > config.horizon) {
            return Err(ElectionModelError::HorizonTooShort { lead_within: config.lead_within() });
        }
        if config.tick.is_zero() || config.releases > 1 || config.horizon > 60 || config.drift_permille >= 500 {
            return Err(ElectionModelError::OutOfBounds);
        }
        let request_timeouts = [config.request_timeout_of(REPLICAS[0]), config.request_timeout_of(REPLICAS[1])];
        Ok(ElectionModel {
            config,
            configs,
            base: Timestamp::UNIX_EPOCH + SignedDuration::from_hours(24 * 365 * 56),
            offsets: [0, 3 * 3_600_000 + 17_321],
            request_timeouts,
        })
    }

    /// See [`ElectionModelConfig::lead_within`].
    pub fn lead_within(&self) -> u8 {
        self.config.lead_within()
    }

    /// Replica `i`'s clock at tick `t`.
    pub fn clock(&self, s: &ElectionState, i: usize, t: u8) -> Timestamp {
        let rate = i64::from(1000 + s.replicas[i].rate);
        let ms = self.offsets[i] + i64::from(t) * self.tick_ms() * rate / 1000;
        self.base + SignedDuration::from_millis(ms)
    }

    fn tick_ms(&self) -> i64 {
        i64::try_from(self.config.tick.as_millis()).unwrap_or(i64::MAX)
    }

    fn now(&self, s: &ElectionState, i: usize) -> Timestamp {
        self.clock(s, i, s.t)
    }

    /// Whether replica `i`'s controller may send a write now: the shell's check, or the bug's.
    fn may_send(&self, s: &ElectionState, i: usize) -> bool {
        let elector = &s.replicas[i].elector;
        match self.config.bug {
            Some(ElectionBug::NoPreWriteCheck) => elector.is_leader(),
            _ => elector.may_write(self.now(s, i)),
        }
    }

    /// Carries out what replica `i`'s elector needs next, as the shell's loop does.
    fn carry_out(&self, s: &mut ElectionState, i: usize, need: Need) {
        let now = self.now(s, i);
        let t = s.t;
        let r = &mut s.replicas[i];
        r.doing = match need {
            Need::Get | Need::Create(_) | Need::Replace(_) => {
                let read = need == Need::Get;
                r.request = Some(Request { from: i as u8, call: need, sent: t });
                Doing::Calling { read, sent_at: now }
            }
            Need::Wait(d) => Doing::Waiting { until: now + SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX) },
            Need::Done => Doing::Done,
        };
    }

    fn step(&self, s: &mut ElectionState, i: usize, observed: Observed) {
        let now = self.now(s, i);
        let need = s.replicas[i].elector.step(observed, now).need;
        let r = &s.replicas[i];
        // The release signal fired while a Lease write was in flight: now that its answer (or timeout) is in, the
        // shell's loop releases before carrying out anything else (a core step after a write never asks for
        // another write).
        if r.released && !r.releasing && !matches!(need, Need::Create(_) | Need::Replace(_)) {
            self.release(s, i);
        } else {
            self.carry_out(s, i, need);
        }
    }

    /// The shell's release: the replica drops a read in flight or a wait, calls [`Elector::release`] and carries
    /// out its needs (through [`Self::step`]) until it is done.
    fn release(&self, s: &mut ElectionState, i: usize) {
        s.replicas[i].releasing = true;
        Self::abandon(s, i);
        let now = self.now(s, i);
        let need = s.replicas[i].elector.release(now).need;
        self.carry_out(s, i, need);
    }

    /// The replica stops waiting for its request: the request may still commit, its answer is dropped.
    fn abandon(s: &mut ElectionState, i: usize) {
        if let Some(request) = s.replicas[i].request.take() {
            s.orphans.push(request);
            s.orphans.sort_by_key(|r| (r.sent, r.from, format!("{:?}", r.call)));
        }
        s.replicas[i].answer = None;
    }

    fn due(&self, s: &ElectionState, i: usize) -> Option<ElectionStep> {
        let r = &s.replicas[i];
        let now = self.now(s, i);
        match r.doing {
            Doing::Waiting { until } if now >= until => Some(ElectionStep::Wakes(i as u8)),
            Doing::Calling { sent_at, .. }
                if now
                    >= sent_at + SignedDuration::try_from(self.request_timeouts[i]).unwrap_or(SignedDuration::MAX) =>
            {
                Some(ElectionStep::TimesOut(i as u8))
            }
            _ => None,
        }
    }

    /// The longest a message may stay in flight now.
    fn delay_bound(&self, s: &ElectionState) -> u8 {
        if s.stable_at.is_some() { 0 } else { self.config.message_delay }
    }

    /// Whether time may pass: nothing is overdue.
    fn may_tick(&self, s: &ElectionState) -> bool {
        let bound = self.delay_bound(s);
        let overdue = |sent: u8, bound: u8| sent.saturating_add(bound) <= s.t;
        s.t < self.config.horizon
            && !(s.stable_at.is_none() && self.config.settle_by.is_some_and(|by| s.t >= by))
            && s.orphans.iter().all(|r| !overdue(r.sent, bound))
            && s.replicas.iter().enumerate().all(|(i, r)| {
                r.write.is_none_or(|sent| !overdue(sent, self.config.write_delay))
                    && r.request.as_ref().is_none_or(|q| !overdue(q.sent, bound))
                    // A paused replica's answer waits in its socket.
                    && (r.paused || r.answer.as_ref().is_none_or(|a| !overdue(a.sent, bound)))
                    && (r.paused || self.due(s, i).is_none())
            })
    }

    /// The API server handles `call`, committing it at the current tick.
    fn serve(&self, s: &mut ElectionState, call: &Need) -> Observed {
        let written = |s: &mut ElectionState, record: &LeaseRecord| {
            s.version = s.version.saturating_add(1);
            let record = LeaseRecord { resource_version: s.version.to_string(), ..record.clone() };
            s.lease = Some(StoredLease { record: record.clone(), committed_at: s.t });
            Observed::Written(Ok(record))
        };
        let current = s.lease.as_ref().map(|l| l.record.resource_version.clone());
        match (call, current) {
            (Need::Get, _) => Observed::Read(Ok(s.lease.as_ref().map(|l| l.record.clone()))),
            (Need::Create(_), Some(_)) => Observed::Written(Err(Failure::Conflict("already exists".into()))),
            (Need::Create(record), None) => written(s, record),
            (Need::Replace(record), Some(version)) if version == record.resource_version => written(s, record),
            (Need::Replace(_), Some(_)) => Observed::Written(Err(Failure::Conflict("resourceVersion".into()))),
            (Need::Replace(_), None) => Observed::Written(Err(Failure::NotFound("not found".into()))),
            (Need::Wait(_) | Need::Done, _) => unreachable!("only Lease calls are sent"),
        }
    }

    /// Judges a controller write of replica `i` committing now.
    fn judge_commit(&self, s: &mut ElectionState, i: usize) {
        let live = s.lease.as_ref().is_some_and(|l| {
            let declared = match l.record.lease_duration_seconds {
                Some(secs) if secs > 0 => i64::from(secs) * 1000,
                _ => i64::try_from(self.config.lease_duration.as_millis()).unwrap_or(i64::MAX),
            };
            let expires = i64::from(l.committed_at) * self.tick_ms() + declared;
            l.record.holder.as_deref() == Some(REPLICAS[i]) && i64::from(s.t) * self.tick_ms() < expires
        });
        if !live {
            s.violations |= violation::WRITE_UNDER_LEASE;
        }
    }

    /// Whether every replica whose release is complete (it called [`Elector::release`], carried out its needs until
    /// done, and has no Lease request left in flight, its orphans included) is no longer named by the Lease, unless
    /// a Lease write it abandoned committed after the release's last request was handled
    /// ([`ElectionState::late_commit`]: no read of the release can have seen it, so only its expiry frees the Lease).
    ///
    /// The excluded case needs a round trip at least as long as the request timeout (`message_delay` 2 here): a
    /// create times out in flight, the release reads no Lease, and the create commits after.
    ///
    /// Broken by the core, before the fixes, in two more cases than the first race (findings of this model; safety
    /// was not affected, the next leader took over once the Lease expired instead of at once): a replica whose
    /// write window lapsed (its renewal answered late or not at all) while the Lease still named it was a candidate
    /// again, and its release read nothing; and a create or takeover of its own whose answer was lost committed,
    /// the shell fed the timeout to the core as a failed write, the core forgot that its outcome was unknown, and
    /// the release of a replica that did not lead read nothing. The release now reads in both cases.
    pub fn handed_over(s: &ElectionState) -> bool {
        (0..2).all(|i| {
            let r = &s.replicas[i];
            let settled = r.releasing
                && r.doing == Doing::Done
                && r.request.is_none()
                && r.answer.is_none()
                && s.orphans.iter().all(|o| usize::from(o.from) != i);
            !settled
                || s.late_commit[i]
                || s.lease.as_ref().is_none_or(|l| l.record.holder.as_deref() != Some(REPLICAS[i]))
        })
    }

    fn may_write_now(&self, s: &ElectionState, i: usize) -> bool {
        s.replicas[i].elector.may_write(self.now(s, i))
    }

    /// Replica `i`'s state in one line, for timelines.
    fn describe(&self, s: &ElectionState, i: usize) -> String {
        let r = &s.replicas[i];
        let now = self.now(s, i);
        let window = match r.elector.write_until() {
            Some(until) if r.elector.may_write(now) => {
                format!("may write for {}ms", until.duration_since(now).as_millis())
            }
            Some(_) => "leader, window over".to_string(),
            None => "not leader".to_string(),
        };
        let doing = match &r.doing {
            Doing::Waiting { until } => format!("waits {}ms", until.duration_since(now).as_millis().max(0)),
            Doing::Calling { read: true, .. } => "reads".to_string(),
            Doing::Calling { read: false, .. } => "writes the lease".to_string(),
            Doing::Done => "done".to_string(),
        };
        format!(
            "{}{}: {window}, {doing}{}",
            REPLICAS[i],
            if r.paused { " (paused)" } else { "" },
            if r.write.is_some() { ", a controller write in flight" } else { "" }
        )
    }

    /// A counterexample, one line per step with the true time, the Lease and each replica's belief.
    pub fn timeline(&self, steps: &[(ElectionState, Option<ElectionStep>)]) -> String {
        let mut out = String::new();
        let mut taken: Option<ElectionStep> = None;
        for (s, next) in steps {
            let lease = match &s.lease {
                Some(l) => format!(
                    "lease v{} {} committed at {}ms for {}s",
                    l.record.resource_version,
                    l.record.holder.as_deref().unwrap_or("(no holder)"),
                    i64::from(l.committed_at) * self.tick_ms(),
                    l.record.lease_duration_seconds.unwrap_or(0)
                ),
                None => "no lease".to_string(),
            };
            let _ = writeln!(
                out,
                "{:>6}ms {:<24} -> {lease} | {} | {}",
                i64::from(s.t) * self.tick_ms(),
                taken.map(|st| format!("{st:?}")).unwrap_or_else(|| "(start)".to_string()),
                self.describe(s, 0),
                self.describe(s, 1),
            );
            taken = *next;
        }
        out
    }
}

impl Model for ElectionModel {
    type State = ElectionState;
    type Action = ElectionStep;

    fn init_states(&self) -> Vec<ElectionState> {
        // One slow clock and one fast: either replica may lead, so this covers a slow leader and a fast one.
        let d = i16::try_from(self.config.drift_permille).unwrap_or(0);
        [[-d, d]]
            .iter()
            .map(|rates| {
                let replica = |i: usize| Replica {
                    elector: Elector::new(self.configs[i].clone()),
                    doing: Doing::Done,
                    request: None,
                    answer: None,
                    paused: false,
                    write: None,
                    rate: rates[i],
                    released: false,
                    releasing: false,
                    release_handled: false,
                };
                let stale = self.config.stale_lease_seconds.map(|secs| StoredLease {
                    record: LeaseRecord {
                        holder: Some(REPLICAS[0].to_string()),
                        acquire_time: Some(self.base),
                        renew_time: Some(self.base),
                        lease_duration_seconds: Some(secs),
                        transitions: 0,
                        resource_version: "1".to_string(),
                    },
                    committed_at: 0,
                });
                let mut s = ElectionState {
                    t: 0,
                    // Past the stale Lease's version: an API server never gives a changed object a version it
                    // gave before, and a reused one fooled the follower's dating of a changed record (it kept the
                    // stale record's 2 s) into a takeover under a live 4 s Lease.
                    version: u8::from(stale.is_some()),
                    lease: stale,
                    replicas: [replica(0), replica(1)],
                    orphans: Vec::new(),
                    losses_left: self.config.losses,
                    pauses_left: self.config.pauses,
                    releases_left: self.config.releases,
                    stable_at: None,
                    led_since_stable: false,
                    late_commit: [false; 2],
                    violations: 0,
                };
                for i in 0..2 {
                    self.step(&mut s, i, Observed::Start);
                }
                s
            })
            .collect()
    }

    fn actions(&self, s: &ElectionState, steps: &mut Vec<ElectionStep>) {
        // A violating state is reported, not explored further.
        if s.violations != 0 {
            return;
        }
        if self.may_tick(s) {
            steps.push(ElectionStep::Tick);
        }
        let faults = s.stable_at.is_none();
        for (i, r) in s.replicas.iter().enumerate() {
            let n = i as u8;
            if r.request.is_some() {
                steps.push(ElectionStep::ServerHandles(n));
                if faults && s.losses_left > 0 {
                    steps.push(ElectionStep::RequestLost(n));
                }
            }
            if r.answer.is_some() {
                if !r.paused {
                    steps.push(ElectionStep::AnswerArrives(n));
                }
                if faults && s.losses_left > 0 {
                    steps.push(ElectionStep::AnswerLost(n));
                }
            }
            if r.write.is_some() {
                steps.push(ElectionStep::WriteCommits(n));
            }
            if r.paused {
                steps.push(ElectionStep::Resumes(n));
                continue;
            }
            if let Some(due) = self.due(s, i) {
                steps.push(due);
            }
            // One controller write in flight at a time: writes do not interact, each is judged against the Lease
            // alone, so two at once would show nothing one at a time does not.
            // A released replica's controller has stopped.
            if self.config.writes && !r.released && s.replicas.iter().all(|r| r.write.is_none()) && self.may_send(s, i)
            {
                steps.push(ElectionStep::ControllerWrites(n));
            }
            if r.doing != Doing::Done {
                // Only a replica that believes it leads is paused: a paused candidate comes back to a compare-and-swap
                // on the version it saw (the core's unit tests cover it), a paused leader to its stale belief.
                if faults && s.pauses_left > 0 && r.elector.is_leader() {
                    steps.push(ElectionStep::Pauses(n));
                }
                // A release belongs to the unsettled period (it is a fault for the liveness bound: the replica
                // stops competing).
                if faults && s.releases_left > 0 && !r.released && r.write.is_none() {
                    steps.push(ElectionStep::Releases(n));
                }
            }
        }
        for (k, _) in s.orphans.iter().enumerate() {
            steps.push(ElectionStep::ServerHandlesOrphan(k as u8));
            if faults && s.losses_left > 0 {
                steps.push(ElectionStep::OrphanLost(k as u8));
            }
        }
        if self.config.settle_by.is_some() && faults && s.replicas.iter().all(|r| !r.paused) {
            steps.push(ElectionStep::NetworkSettles);
        }
    }

    fn next_state(&self, last: &ElectionState, step: ElectionStep) -> Option<ElectionState> {
        let mut s = last.clone();
        match step {
            ElectionStep::Tick => s.t += 1,
            ElectionStep::ServerHandles(i) => {
                let i = usize::from(i);
                let request = s.replicas[i].request.take()?;
                let observed = self.serve(&mut s, &request.call);
                if s.replicas[i].releasing {
                    // The release's request sees (or, a compare-and-swap, conflicts with) any write committed
                    // before it.
                    s.replicas[i].release_handled = true;
                    s.late_commit[i] = false;
                }
                // The answer keeps the request's send tick: the bound is on the whole round trip.
                s.replicas[i].answer = Some(Answer { observed, sent: request.sent });
            }
            ElectionStep::ServerHandlesOrphan(k) => {
                let request = s.orphans.remove(usize::from(k));
                let i = usize::from(request.from);
                let committed = matches!(self.serve(&mut s, &request.call), Observed::Written(Ok(_)));
                let names_it = matches!(&request.call, Need::Create(r) | Need::Replace(r)
                    if r.holder.as_deref() == Some(REPLICAS[i]));
                if committed && names_it && s.replicas[i].release_handled {
                    s.late_commit[i] = true;
                }
            }
            ElectionStep::AnswerArrives(i) => {
                let i = usize::from(i);
                let answer = s.replicas[i].answer.take()?;
                self.step(&mut s, i, answer.observed);
            }
            ElectionStep::RequestLost(i) => {
                s.losses_left -= 1;
                s.replicas[usize::from(i)].request = None;
            }
            ElectionStep::AnswerLost(i) => {
                s.losses_left -= 1;
                s.replicas[usize::from(i)].answer = None;
            }
            ElectionStep::OrphanLost(k) => {
                s.losses_left -= 1;
                s.orphans.remove(usize::from(k));
            }
            ElectionStep::TimesOut(i) => {
                let i = usize::from(i);
                let Doing::Calling { read, .. } = s.replicas[i].doing else { return None };
                Self::abandon(&mut s, i);
                let failed = Failure::Deadline("timed out".to_string());
                let observed = if read { Observed::Read(Err(failed)) } else { Observed::Written(Err(failed)) };
                self.step(&mut s, i, observed);
            }
            ElectionStep::Wakes(i) => self.step(&mut s, usize::from(i), Observed::Tick),
            ElectionStep::Pauses(i) => {
                s.pauses_left -= 1;
                s.replicas[usize::from(i)].paused = true;
            }
            ElectionStep::Resumes(i) => {
                s.replicas[usize::from(i)].paused = false;
            }
            ElectionStep::ControllerWrites(i) => s.replicas[usize::from(i)].write = Some(s.t),
            ElectionStep::WriteCommits(i) => {
                let i = usize::from(i);
                s.replicas[i].write = None;
                self.judge_commit(&mut s, i);
            }
            ElectionStep::Releases(i) => {
                let i = usize::from(i);
                s.releases_left -= 1;
                s.replicas[i].released = true;
                // The shell's loop drops a read or a wait and gives the Lease back at once; a Lease write in flight
                // it lets finish first (within the request timeout), and releases once the write's answer is in.
                if !matches!(s.replicas[i].doing, Doing::Calling { read: false, .. }) {
                    self.release(&mut s, i);
                }
            }
            ElectionStep::NetworkSettles => s.stable_at = Some(s.t),
        }
        if (0..2).all(|i| self.may_write_now(&s, i)) {
            s.violations |= violation::ONE_MAY_WRITE;
        }
        if s.stable_at.is_some() && (0..2).any(|i| self.may_write_now(&s, i)) {
            s.led_since_stable = true;
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always(WRITE_UNDER_LEASE, |_: &ElectionModel, s: &ElectionState| {
                s.violations & violation::WRITE_UNDER_LEASE == 0
            }),
            Property::always(ONE_MAY_WRITE, |_: &ElectionModel, s: &ElectionState| {
                s.violations & violation::ONE_MAY_WRITE == 0
            }),
            // Examples, judged on the state alone (a flag remembering them would double the state space).
            Property::sometimes(TAKEOVER, |_: &ElectionModel, s: &ElectionState| {
                s.lease.as_ref().is_some_and(|l| l.record.holder.is_some() && l.record.transitions > 0)
            }),
        ];
        if self.config.writes {
            properties.push(Property::sometimes(WRITE_AFTER_TAKEOVER, |_: &ElectionModel, s: &ElectionState| {
                s.lease.as_ref().is_some_and(|l| l.record.transitions > 0)
                    && s.replicas.iter().any(|r| r.write.is_some())
            }));
        }
        if self.config.pauses > 0 {
            properties.push(Property::sometimes(DEPOSED_LEADER_RUNS, |m: &ElectionModel, s: &ElectionState| {
                (0..2).any(|i| {
                    let r = &s.replicas[i];
                    !r.paused && r.elector.is_leader() && !m.may_write_now(s, i) && m.may_write_now(s, 1 - i)
                })
            }));
        }
        if self.config.releases > 0 {
            properties.push(Property::always(RELEASE_HANDS_OVER, |_: &ElectionModel, s: &ElectionState| {
                Self::handed_over(s)
            }));
            properties.push(Property::sometimes(RELEASE_WAITS_FOR_WRITE, |_: &ElectionModel, s: &ElectionState| {
                s.replicas.iter().any(|r| r.released && !r.releasing)
            }));
        }
        if self.config.settle_by.is_some() {
            properties.push(Property::always(LEADER_WITHIN_BOUND, |m: &ElectionModel, s: &ElectionState| {
                s.stable_at.is_none_or(|at| s.t < at.saturating_add(m.lead_within()) || s.led_since_stable)
            }));
            properties.push(Property::sometimes(STABLE_LONG_ENOUGH, |m: &ElectionModel, s: &ElectionState| {
                s.stable_at.is_some_and(|at| s.t >= at.saturating_add(m.lead_within()))
            }));
        }
        properties
    }

    fn within_boundary(&self, s: &ElectionState) -> bool {
        s.version < u8::MAX - 1
    }
}
