//! The judgement: each controller write judged as it commits, the release's hand-over, the write window by each
//! replica's clock; and a state and a path told for people.

use super::*;

impl ElectionModel {
    /// Judges a controller write of replica `i` committing now.
    pub(super) fn judge_commit(&self, s: &mut ElectionState, i: usize) {
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

    pub(super) fn may_write_now(&self, s: &ElectionState, i: usize) -> bool {
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
