//! Leader election over a `coordination.k8s.io/v1` Lease, as an explicit step machine in the manner of
//! [`crate::zpdb::flow`]: every read and write of the Lease it needs is a named [`Need`], every decision between
//! them is taken here on what the shell observed and the `now` it passes with each observation.
//!
//! Must not do I/O, read a clock or sleep: the shell's driver loop carries out each need and feeds back what it saw.
//! The shell should pass a clock that does not jump (a monotonic clock mapped to timestamps), since every
//! comparison below is between two readings of the caller's own clock.
//!
//! How one replica reasons (the guarantee: at no moment do two replicas both see [`Elector::may_write`] true):
//! - **Expiry is judged by observation, never by another replica's clock.** A follower notes, with its own clock,
//!   when it first saw each resourceVersion of the Lease; the Lease is expired for it only once the holder's
//!   declared `leaseDurationSeconds` have passed since then without a new version. Clock offsets between nodes
//!   therefore do not matter; only how fast clocks run relative to each other does, and that is what
//!   [`ElectionConfig::clock_skew`] bounds.
//! - **Every write is a compare-and-swap** on the resourceVersion last seen: of two replicas that both find the
//!   Lease expired, one wins; a late renewal of a deposed holder fails.
//! - **A holder counts its term from before it sent the write** (the write commits later, so every other replica
//!   observes it later still), and may write only until `renew_deadline`, capped at `lease_duration -
//!   clock_skew`, after the send of its last successful renewal. A renewal whose answer is lost does not extend
//!   the term. Past that point it stops writing, whatever its network does, and goes back to candidate.
//! - **Release** (graceful shutdown) first ends the write window, then clears the holder with a compare-and-swap,
//!   so another replica takes over at once instead of after the lease duration.

use crate::failure::Failure;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use std::time::Duration;

/// How the election is tuned (`-leader-election.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionConfig {
    /// This replica's identity, written as the Lease's `holderIdentity` (the pod name). Must be unique per replica.
    pub identity: String,
    /// How long a holder's Lease lasts after its last renewal, as other replicas count it.
    pub lease_duration: Duration,
    /// How long a holder keeps writing without a successful renewal; shorter than `lease_duration`.
    pub renew_deadline: Duration,
    /// How often a candidate tries to acquire, and a holder to renew.
    pub retry_period: Duration,
    /// The most that any two replicas' clocks can disagree about the length of one lease duration (rate drift),
    /// plus what a write already sent may take to commit; the write window ends this long before the Lease can
    /// expire anywhere.
    pub clock_skew: Duration,
}

/// Why an [`ElectionConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("the leader election identity must not be empty")]
    NoIdentity,
    #[error(
        "-leader-election.renew-deadline ({renew:?}) must be shorter than -leader-election.lease-duration ({lease:?})"
    )]
    RenewNotShorterThanLease { renew: Duration, lease: Duration },
    #[error(
        "-leader-election.retry-period ({retry:?}) must be positive and shorter than -leader-election.renew-deadline ({renew:?})"
    )]
    RetryNotShorterThanRenew { retry: Duration, renew: Duration },
    #[error("-leader-election.lease-duration ({0:?}) must be a whole number of seconds")]
    LeaseNotWholeSeconds(Duration),
    #[error(
        "-leader-election.lease-duration ({lease:?}) must be longer than the {skew:?} kept as a margin for clock skew: a holder may write only until that margin before its lease ends, so it could never write; use at least {skew:?} plus 1s"
    )]
    LeaseWithinClockSkew { lease: Duration, skew: Duration },
    #[error(
        "the leader's write window ({window:?}: -leader-election.renew-deadline, capped at -leader-election.lease-duration less the {skew:?} clock-skew margin) must be longer than -leader-election.retry-period ({retry:?}), or the leader loses its term between two renewals"
    )]
    WindowNotLongerThanRetry { window: Duration, retry: Duration, skew: Duration },
}

impl ElectionConfig {
    /// The defaults of the flags: 15 s lease, 10 s renew deadline, 2 s retry period, 1 s of clock skew.
    pub fn new(identity: &str) -> Self {
        ElectionConfig {
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            clock_skew: Duration::from_secs(1),
        }
    }

    /// Checks the relations the guarantee rests on.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.identity.is_empty() {
            return Err(ConfigError::NoIdentity);
        }
        if self.lease_duration.subsec_nanos() != 0 || self.lease_duration < Duration::from_secs(1) {
            return Err(ConfigError::LeaseNotWholeSeconds(self.lease_duration));
        }
        // Found by the mutation run: a lease within the margin left an empty write window, and the replica held the
        // Lease forever without ever running the controller.
        if self.lease_duration <= self.clock_skew {
            return Err(ConfigError::LeaseWithinClockSkew { lease: self.lease_duration, skew: self.clock_skew });
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(ConfigError::RenewNotShorterThanLease {
                renew: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period.is_zero() || self.retry_period >= self.renew_deadline {
            return Err(ConfigError::RetryNotShorterThanRenew { retry: self.retry_period, renew: self.renew_deadline });
        }
        // From review: a window shorter than the retry period closes the gate before every next renewal.
        if self.write_window() <= self.retry_period {
            return Err(ConfigError::WindowNotLongerThanRetry {
                window: self.write_window(),
                retry: self.retry_period,
                skew: self.clock_skew,
            });
        }
        Ok(())
    }

    /// How long after sending its last successful renewal a holder may write: the renew deadline, but never closer
    /// than `clock_skew` to the lease duration.
    pub fn write_window(&self) -> Duration {
        self.renew_deadline.min(self.lease_duration.saturating_sub(self.clock_skew))
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// The fields of a Lease the election reads and writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// `None` (or empty in the object): nobody holds it (released).
    pub holder: Option<String>,
    pub acquire_time: Option<Timestamp>,
    pub renew_time: Option<Timestamp>,
    /// The holder's declared lease duration; `None` when the object has none.
    pub lease_duration_seconds: Option<i32>,
    pub transitions: i32,
    /// The object's resourceVersion: as read, or the precondition of a replace (empty for a create).
    pub resource_version: String,
}

impl LeaseRecord {
    /// The view of a Lease object.
    pub fn from_lease(lease: &Lease) -> Self {
        let spec = lease.spec.clone().unwrap_or_default();
        LeaseRecord {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            acquire_time: spec.acquire_time.map(|t| t.0),
            renew_time: spec.renew_time.map(|t| t.0),
            lease_duration_seconds: spec.lease_duration_seconds,
            transitions: spec.lease_transitions.unwrap_or(0),
            resource_version: lease.metadata.resource_version.clone().unwrap_or_default(),
        }
    }

    /// The Lease object `name` with this record (its resourceVersion the precondition, when not empty). Fields of
    /// the spec the election does not own (`strategy`, `preferredHolder`) are left unset.
    pub fn to_lease(&self, name: &str) -> Lease {
        Lease {
            metadata: ObjectMeta {
                name: Some(name.to_string()),
                resource_version: Some(self.resource_version.clone()).filter(|rv| !rv.is_empty()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: self.holder.clone(),
                acquire_time: self.acquire_time.map(MicroTime),
                renew_time: self.renew_time.map(MicroTime),
                lease_duration_seconds: self.lease_duration_seconds,
                lease_transitions: Some(self.transitions),
                ..LeaseSpec::default()
            }),
        }
    }

    fn declared_duration(&self, fallback: Duration) -> Duration {
        match self.lease_duration_seconds {
            Some(s) if s > 0 => Duration::from_secs(s.unsigned_abs().into()),
            _ => fallback,
        }
    }
}

/// What the machine needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Read the Lease; answer with [`Observed::Read`].
    Get,
    /// Create the Lease with this record; answer with [`Observed::Written`].
    Create(LeaseRecord),
    /// Replace the Lease with this record, conditional on its `resource_version`; answer with
    /// [`Observed::Written`].
    Replace(LeaseRecord),
    /// Wait this long, then answer with [`Observed::Tick`].
    Wait(Duration),
    /// Released (or never held): nothing more to do.
    Done,
}

impl Need {
    /// The need's name, as logs and the simulation's reports give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Need::Get => "get",
            Need::Create(_) => "create",
            Need::Replace(_) => "replace",
            Need::Wait(_) => "wait",
            Need::Done => "done",
        }
    }

    /// The needs whose failure the machine observes.
    pub const FALLIBLE: &[&str] = &["get", "create", "replace"];
}

/// What the shell saw when it carried out the last need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    Start,
    Tick,
    /// The Lease as read (`None`: it does not exist), or why it could not be read.
    Read(Result<Option<LeaseRecord>, Failure>),
    /// The Lease as written, or why the write failed: a conflict (another replica wrote first, or the Lease already
    /// exists) is known not to have committed; anything else is taken as possibly committed.
    Written(Result<LeaseRecord, Failure>),
}

impl Observed {
    /// The failure it reports, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Observed::Read(Err(f)) | Observed::Written(Err(f)) => Some(f),
            _ => None,
        }
    }
}

/// Something the shell reports (logs, metrics) and acts on (start or stop the controller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// This replica now holds the Lease (`transitions`: the Lease's transition count).
    Acquired { transitions: i32 },
    /// This replica's write window ended: it must stop the controller and drop what it knew.
    Lost { why: String },
    /// The Lease was given back.
    Released,
}

/// One step's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub need: Need,
    /// In order: a step can end a term and start the next one.
    pub events: Vec<Event>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Candidate,
    /// Holds the Lease: may write until `write_until`.
    Leader {
        write_until: Timestamp,
    },
    /// Giving the Lease back, or done: never writes again.
    Releasing,
}

/// A write in flight, and when it was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Pending {
    None,
    Read,
    Acquire {
        sent_at: Timestamp,
    },
    Renew {
        sent_at: Timestamp,
    },
    /// Reading the Lease to give it back (`tries`: release writes already tried).
    ReleaseRead {
        tries: u32,
    },
    Release {
        tries: u32,
    },
}

/// How many times a release writes before it gives up (the Lease then expires by itself): a release can race a
/// renewal of its own that commits first, so one conflict is expected; more mean someone else is writing.
const RELEASE_TRIES: u32 = 3;

/// One replica's side of the election.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Elector {
    config: ElectionConfig,
    role: Role,
    pending: Pending,
    /// The last resourceVersion seen, its record, and when (this replica's clock) it was first seen.
    observed: Option<(LeaseRecord, Timestamp)>,
    /// The last Lease write of ours failed without an answer: it may have committed, so a release must read.
    own_write_unknown: bool,
}

impl Elector {
    pub fn new(config: ElectionConfig) -> Self {
        Elector { config, role: Role::Candidate, pending: Pending::None, observed: None, own_write_unknown: false }
    }

    pub fn config(&self) -> &ElectionConfig {
        &self.config
    }

    /// True while this replica holds a Lease it renewed recently enough that no other replica can consider it
    /// expired: the controller checks it right before every write.
    pub fn may_write(&self, now: Timestamp) -> bool {
        self.write_until().is_some_and(|until| now < until)
    }

    /// Until when this replica may write (`None`: not the leader).
    pub fn write_until(&self) -> Option<Timestamp> {
        match self.role {
            Role::Leader { write_until } => Some(write_until),
            _ => None,
        }
    }

    /// Whether this replica believes it holds the Lease (its write window may already have ended: see
    /// [`Elector::may_write`]).
    pub fn is_leader(&self) -> bool {
        matches!(self.role, Role::Leader { .. })
    }

    /// Advances the machine with what the shell saw at `now`.
    pub fn step(&mut self, observed: Observed, now: Timestamp) -> Step {
        let mut events: Vec<Event> = self.check_deadline(now).into_iter().collect();
        let need = match observed {
            Observed::Start | Observed::Tick => self.read(),
            Observed::Read(result) => self.after_read(result, now, &mut events),
            Observed::Written(result) => self.after_write(result, now, &mut events),
        };
        Step { need, events }
    }

    /// Graceful shutdown: the write window ends now, and a held Lease is given back (its holder cleared, with a
    /// compare-and-swap on the version this replica last wrote). The shell must have stopped the controller first,
    /// and should let a Lease write in flight finish and feed its answer before releasing. A write of ours whose
    /// outcome is unknown (no answer), or a release that conflicts (our own renewal committed first), makes the
    /// release read the Lease and clear it while it still names this replica (found by the election model: a release
    /// racing its own write left the Lease held until it expired).
    pub fn release(&mut self, now: Timestamp) -> Step {
        let held = self.is_leader();
        let unknown = self.own_write_unknown || matches!(self.pending, Pending::Acquire { .. } | Pending::Renew { .. });
        self.role = Role::Releasing;
        let last = self.observed.as_ref().map(|(record, _)| record.clone());
        let need = match last {
            Some(record) if held && !unknown && self.ours(&record) => self.give_back(record, 0, now),
            // Also when the Lease last seen names us though we no longer lead (the write window lapsed while a
            // renewal went unanswered): it may still name us (found by the election model).
            last if held || unknown || last.as_ref().is_some_and(|r| self.ours(r)) => {
                self.pending = Pending::ReleaseRead { tries: 0 };
                Need::Get
            }
            _ => {
                self.pending = Pending::None;
                Need::Done
            }
        };
        Step { need, events: Vec::new() }
    }

    /// Clears the holder of `record`, ours, with a compare-and-swap on its version.
    fn give_back(&mut self, record: LeaseRecord, tries: u32, now: Timestamp) -> Need {
        self.pending = Pending::Release { tries: tries + 1 };
        Need::Replace(LeaseRecord {
            holder: None,
            acquire_time: record.acquire_time,
            renew_time: Some(now),
            lease_duration_seconds: Some(1),
            transitions: record.transitions,
            resource_version: record.resource_version,
        })
    }

    /// Ends a leader's term whose write window has passed.
    fn check_deadline(&mut self, now: Timestamp) -> Option<Event> {
        match self.role {
            Role::Leader { write_until } if now >= write_until => {
                self.role = Role::Candidate;
                Some(Event::Lost { why: "the lease was not renewed before the renew deadline".to_string() })
            }
            _ => None,
        }
    }

    fn read(&mut self) -> Need {
        if self.role == Role::Releasing {
            return Need::Done;
        }
        self.pending = Pending::Read;
        Need::Get
    }

    fn wait(&mut self) -> Need {
        self.pending = Pending::None;
        if self.role == Role::Releasing { Need::Done } else { Need::Wait(self.config.retry_period) }
    }

    fn observe(&mut self, record: &LeaseRecord, now: Timestamp) {
        let same = self.observed.as_ref().is_some_and(|(seen, _)| seen.resource_version == record.resource_version);
        if !same {
            self.observed = Some((record.clone(), now));
        }
    }

    fn ours(&self, record: &LeaseRecord) -> bool {
        record.holder.as_deref() == Some(self.config.identity.as_str())
    }

    fn after_read(
        &mut self,
        result: Result<Option<LeaseRecord>, Failure>,
        now: Timestamp,
        events: &mut Vec<Event>,
    ) -> Need {
        if let Pending::ReleaseRead { tries } = self.pending {
            self.pending = Pending::None;
            return match result {
                Ok(Some(record)) if self.ours(&record) => {
                    self.observe(&record, now);
                    self.give_back(record, tries, now)
                }
                // Unreadable: read again while tries are left.
                Err(_) if tries < RELEASE_TRIES => {
                    self.pending = Pending::ReleaseRead { tries: tries + 1 };
                    Need::Get
                }
                // Not ours (any more), gone, or still unreadable: nothing this replica can give back.
                _ => Need::Done,
            };
        }
        if self.pending != Pending::Read || self.role == Role::Releasing {
            return self.wait();
        }
        let record = match result {
            Err(_) => return self.wait(),
            Ok(None) => {
                // No Lease yet: create it, holding it.
                self.pending = Pending::Acquire { sent_at: now };
                return Need::Create(LeaseRecord {
                    holder: Some(self.config.identity.clone()),
                    acquire_time: Some(now),
                    renew_time: Some(now),
                    lease_duration_seconds: Some(self.config.lease_seconds()),
                    transitions: 0,
                    resource_version: String::new(),
                });
            }
            Ok(Some(record)) => record,
        };
        self.observe(&record, now);
        if self.ours(&record) {
            // Ours (a renewal, or a write of ours whose answer was lost, or a restart under the same identity):
            // renew; the term counts from this send.
            let leader = self.is_leader();
            self.pending = if leader { Pending::Renew { sent_at: now } } else { Pending::Acquire { sent_at: now } };
            return Need::Replace(LeaseRecord {
                renew_time: Some(now),
                lease_duration_seconds: Some(self.config.lease_seconds()),
                acquire_time: if leader { record.acquire_time.or(Some(now)) } else { Some(now) },
                ..record
            });
        }
        if self.is_leader() {
            self.role = Role::Candidate;
            events.push(Event::Lost {
                why: format!("the lease is held by {}", record.holder.as_deref().unwrap_or("nobody")),
            });
        }
        let expired = match &self.observed {
            _ if record.holder.is_none() => true,
            Some((seen, seen_at)) => now >= time_after(*seen_at, seen.declared_duration(self.config.lease_duration)),
            None => false,
        };
        if !expired {
            return self.wait();
        }
        self.pending = Pending::Acquire { sent_at: now };
        Need::Replace(LeaseRecord {
            holder: Some(self.config.identity.clone()),
            acquire_time: Some(now),
            renew_time: Some(now),
            lease_duration_seconds: Some(self.config.lease_seconds()),
            transitions: record.transitions.saturating_add(1),
            resource_version: record.resource_version,
        })
    }

    fn after_write(&mut self, result: Result<LeaseRecord, Failure>, now: Timestamp, events: &mut Vec<Event>) -> Need {
        let pending = std::mem::replace(&mut self.pending, Pending::None);
        if matches!(pending, Pending::Acquire { .. } | Pending::Renew { .. }) {
            // Unanswered (timed out, or an error that may follow a commit): found by the election model, a create
            // whose answer was lost left the Lease naming a replica that then released nothing.
            self.own_write_unknown = matches!(&result, Err(failure) if !matches!(failure, Failure::Conflict(_)));
        }
        match (pending, result) {
            (Pending::Release { .. }, Ok(record)) => {
                self.observe(&record, now);
                events.push(Event::Released);
                Need::Done
            }
            // The Lease moved on, or the answer is unknown: read it and try again while it still names us.
            (Pending::Release { tries }, Err(_)) if tries < RELEASE_TRIES => {
                self.pending = Pending::ReleaseRead { tries };
                Need::Get
            }
            // Not given back: it expires by itself.
            (Pending::Release { .. }, Err(_)) => Need::Done,
            (Pending::Acquire { sent_at } | Pending::Renew { sent_at }, Ok(record))
                if self.role != Role::Releasing && self.ours(&record) =>
            {
                self.observe(&record, now);
                let write_until = time_after(sent_at, self.config.write_window());
                if now < write_until {
                    if !self.is_leader() {
                        events.push(Event::Acquired { transitions: record.transitions });
                    }
                    self.role = Role::Leader { write_until };
                }
                self.wait()
            }
            // Someone wrote first: look again at once.
            (Pending::Acquire { .. } | Pending::Renew { .. }, Err(Failure::Conflict(_)))
                if self.role != Role::Releasing =>
            {
                self.read()
            }
            // Unanswered or refused: the term is not extended; the deadline ends it if this goes on.
            _ => self.wait(),
        }
    }
}

fn time_after(at: Timestamp, d: Duration) -> Timestamp {
    let span = jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    at.checked_add(span).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests;
