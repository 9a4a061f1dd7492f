//! The model's state: each replica (its elector, what it is doing, its clock), the Lease as the API server holds
//! it, the requests and answers in flight, the judge's true time; hashed without the parts that cannot differ; and
//! the steps between states.

use super::*;

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
