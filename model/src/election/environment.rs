//! The environment carrying out each need the way the shell's loop does: requests sent, answers fed to the core,
//! timeouts, releases, what is due before time passes, and the API server serving the Lease.

use super::*;

impl ElectionModel {
    pub(super) fn tick_ms(&self) -> i64 {
        i64::try_from(self.config.tick.as_millis()).unwrap_or(i64::MAX)
    }

    pub(super) fn now(&self, s: &ElectionState, i: usize) -> Timestamp {
        self.clock(s, i, s.t)
    }

    /// Whether replica `i`'s controller may send a write now: the shell's check, or the bug's.
    pub(super) fn may_send(&self, s: &ElectionState, i: usize) -> bool {
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

    pub(super) fn step(&self, s: &mut ElectionState, i: usize, observed: Observed) {
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
    pub(super) fn release(&self, s: &mut ElectionState, i: usize) {
        s.replicas[i].releasing = true;
        Self::abandon(s, i);
        let now = self.now(s, i);
        let need = s.replicas[i].elector.release(now).need;
        self.carry_out(s, i, need);
    }

    /// The replica stops waiting for its request: the request may still commit, its answer is dropped.
    pub(super) fn abandon(s: &mut ElectionState, i: usize) {
        if let Some(request) = s.replicas[i].request.take() {
            s.orphans.push(request);
            s.orphans.sort_by_key(|r| (r.sent, r.from, format!("{:?}", r.call)));
        }
        s.replicas[i].answer = None;
    }

    pub(super) fn due(&self, s: &ElectionState, i: usize) -> Option<ElectionStep> {
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
    pub(super) fn may_tick(&self, s: &ElectionState) -> bool {
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
    pub(super) fn serve(&self, s: &mut ElectionState, call: &Need) -> Observed {
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
}
