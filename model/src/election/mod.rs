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
//!
//! Cut along its seams: the configuration and its faults ([`config`]); the state, the replicas, the Lease as the
//! API server holds it and the messages in flight ([`state`]); the environment carrying out each need, serving the
//! API server's side and moving time ([`environment`]); and the judgement of each committed write, with a state and
//! a path told for people ([`judgement`]). This module owns the model itself and its steps.

mod config;
mod environment;
mod judgement;
mod state;

pub use config::{ElectionBug, ElectionModelConfig};
pub use state::{Answer, Doing, ElectionState, ElectionStep, Replica, Request, StoredLease};

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
