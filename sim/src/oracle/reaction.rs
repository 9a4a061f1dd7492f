//! How promptly the controller reacts, measured on committed state.
//!
//! A reaction is the time from the commit that unblocks a rollout group (after it, the production planner run on
//! the committed truth has a pod to delete or replicas to change; typically a replaced pod becoming Ready, or a
//! template push) to the controller's next committed write in that group. A commit after which the truth has
//! nothing to do ends the wait without a sample. Also counted: every API request the controller sends, and its
//! committed writes, for requests per rollout step.
//!
//! Also owned here: the faults' windows as the injectors report them, the time from each fault's heal (while a group
//! has work) to the controller's next committed write answering work that was already there at the heal, and each
//! replaced pod's deletion and replacement (the zones' rollout spans the demo reports).

use crate::Kind;
use std::collections::BTreeMap;
use std::time::Duration;

/// Since when a group has had work for the controller, and the commit that gave it (its watch stream and
/// resourceVersion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub since: Duration,
    pub kind: Kind,
    pub rv: u64,
}

#[derive(Debug, Clone, Default)]
pub struct Reactions {
    /// Per group: since when the truth has had work for the controller.
    unblocked_at: BTreeMap<String, Wait>,
    pub samples: Vec<Duration>,
    /// Of the same reactions, the controller's own part: from consuming the watch event of the commit that gave it
    /// work to handing the write to the network (the rest is the simulated cluster's: the watch's delivery, the
    /// request's flight, the server's answer). Only where the writer remembers consuming that event.
    pub own: Vec<Duration>,
    pub controller_requests: u64,
    pub controller_writes: u64,
    /// Pods the controller deleted, since when (until their replacement is Ready).
    restarting: BTreeMap<String, Duration>,
    /// The pods' own replacement times: the controller's deletion to the new pod's Ready commit.
    pub restarts: Vec<Duration>,
    /// The first moment the controller had work, and the last replacement's Ready commit.
    pub first_work: Option<Duration>,
    pub last_restart_done: Option<Duration>,
    /// Every pod the controller deleted, with its replacement's Ready commit once there was one.
    pub replacements: Vec<Replacement>,
    /// The faults injected, as their injectors report them.
    pub faults: Vec<FaultWindow>,
    /// Faults' heals not reached yet (taken up at the first reaction event at or after them).
    heals_due: Vec<Duration>,
    /// Heals at which some group had work, until a committed controller write answers work that old.
    heals_pending: Vec<Duration>,
    /// From a fault's heal (while a group had work) to the controller's next committed write answering work that was
    /// there at the heal.
    pub heal_to_write: Vec<Duration>,
}

/// A pod the controller deleted: its StatefulSet, when the deletion committed, and when its replacement was
/// committed Ready, on which revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub pod: String,
    pub statefulset: String,
    pub deleted_at: Duration,
    pub ready: Option<(Duration, String)>,
}

/// One injected fault: what it was, in words, and when it began and healed (simulated time since the start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultWindow {
    pub what: String,
    pub from: Duration,
    pub to: Duration,
}

impl Reactions {
    /// The controller's deletion of `pod` (of StatefulSet `statefulset`) committed.
    pub fn pod_deleted_by_controller(&mut self, pod: &str, statefulset: &str, at: Duration) {
        if !self.restarting.contains_key(pod) {
            self.restarting.insert(pod.to_string(), at);
            let (pod, statefulset) = (pod.to_string(), statefulset.to_string());
            self.replacements.push(Replacement { pod, statefulset, deleted_at: at, ready: None });
        }
    }

    /// `pod` was committed Ready, on `revision`.
    pub fn pod_ready(&mut self, pod: &str, revision: &str, at: Duration) {
        if let Some(since) = self.restarting.remove(pod) {
            self.restarts.push(at.saturating_sub(since));
            self.last_restart_done = Some(at);
            if let Some(r) = self.replacements.iter_mut().rev().find(|r| r.pod == pod && r.ready.is_none()) {
                r.ready = Some((at, revision.to_string()));
            }
        }
    }

    /// A fault was injected: `what`, from `from` until it heals at `to` (now or later).
    pub fn fault(&mut self, what: impl Into<String>, from: Duration, to: Duration) {
        self.faults.push(FaultWindow { what: what.into(), from, to });
        self.heals_due.push(to);
    }

    /// Takes up the heals reached by `now`: each counts if some group had work then (the groups' waits change only
    /// at the reaction events, so the waits now are those at the heal).
    fn heals_reached(&mut self, now: Duration) {
        if self.heals_due.iter().all(|h| *h > now) {
            return;
        }
        let (reached, due): (Vec<Duration>, Vec<Duration>) = self.heals_due.iter().partition(|h| **h <= now);
        self.heals_due = due;
        for heal in reached {
            if self.unblocked_at.values().any(|w| w.since <= heal) {
                self.heals_pending.push(heal);
            }
        }
    }

    /// Drops the pending heals no group's work reaches back to any more (its work went away unanswered).
    fn heals_unanswerable(&mut self) {
        let waits: Vec<Duration> = self.unblocked_at.values().map(|w| w.since).collect();
        self.heals_pending.retain(|h| waits.iter().any(|since| since <= h));
    }

    /// A commit in `group` left the truth with work for the controller (`actionable`) or not.
    pub fn group_committed(&mut self, group: &str, actionable: bool, commit: Wait) {
        self.heals_reached(commit.since);
        if actionable {
            self.first_work.get_or_insert(commit.since);
            self.unblocked_at.entry(group.to_string()).or_insert(commit);
        } else {
            self.unblocked_at.remove(group);
        }
    }

    /// Whether some group has work the controller has not done yet.
    pub fn has_work(&self) -> bool {
        !self.unblocked_at.is_empty()
    }

    /// Takes the wait of `group` before a write is tried at `now` (the write's own commit re-evaluates the group).
    pub fn take_wait(&mut self, group: &str, now: Duration) -> Option<Wait> {
        self.heals_reached(now);
        self.heals_unanswerable();
        self.unblocked_at.remove(group)
    }

    /// A write of `group` that waited (`waited`) was tried: committed, it is a sample, with the controller's own part
    /// `own` when known; refused, the wait goes on from the earlier time.
    pub fn write_tried(
        &mut self,
        group: &str,
        waited: Option<Wait>,
        committed: bool,
        at: Duration,
        own: Option<Duration>,
    ) {
        self.heals_reached(at);
        match (committed, waited) {
            (true, waited) => {
                self.controller_writes += 1;
                if let Some(waited) = waited {
                    self.samples.push(at.saturating_sub(waited.since));
                    self.own.extend(own);
                    let (answered, pending) = self.heals_pending.iter().partition(|h| waited.since <= **h);
                    self.heals_pending = pending;
                    self.heal_to_write.extend(answered.into_iter().map(|h: Duration| at.saturating_sub(h)));
                }
            }
            (false, Some(waited)) => {
                let wait = self.unblocked_at.entry(group.to_string()).or_insert(waited);
                if waited.since < wait.since {
                    *wait = waited;
                }
            }
            (false, None) => {}
        }
        self.heals_unanswerable();
    }
}

/// The `q` quantile (0..=1) of `samples`, nearest rank.
pub fn quantile(samples: &[Duration], q: f64) -> Option<Duration> {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// Reaction times over a batch, summarised.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub samples: Vec<Duration>,
    /// The controller's own part of the samples that have one.
    pub own: Vec<Duration>,
    pub requests: u64,
    pub writes: u64,
    /// Faults' heals to the controller's next needed write.
    pub heal_to_write: Vec<Duration>,
    /// Faults injected.
    pub faults: u64,
}

impl Summary {
    pub fn add(&mut self, r: &Reactions) {
        self.samples.extend(&r.samples);
        self.own.extend(&r.own);
        self.heal_to_write.extend(&r.heal_to_write);
        self.faults += r.faults.len() as u64;
        self.requests += r.controller_requests;
        self.writes += r.controller_writes;
    }

    /// The `q` quantile (0..=1) of the reactions, nearest rank.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.samples, q)
    }

    /// The `q` quantile of the controller's own part.
    pub fn own_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.own, q)
    }

    /// The `q` quantile of the heal-to-write times.
    pub fn heal_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.heal_to_write, q)
    }

    /// For a rollout that replaces pods one after another: its span (first work to the last replacement Ready), the
    /// pods' own replacement times summed (the lower bound), and the share of the span that is not the pods' own.
    pub fn rollout_share(r: &Reactions) -> Option<(Duration, Duration, f64)> {
        let span = r.last_restart_done?.checked_sub(r.first_work?)?;
        let own: Duration = r.restarts.iter().sum();
        let share = 1.0 - own.as_secs_f64() / span.as_secs_f64().max(1e-9);
        Some((span, own, share))
    }

    pub fn describe(&self) -> String {
        let ms = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3));
        let ms1 = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.1} ms", d.as_secs_f64() * 1e3));
        let mean = if self.samples.is_empty() {
            0.0
        } else {
            self.samples.iter().map(Duration::as_secs_f64).sum::<f64>() / self.samples.len() as f64
        };
        let over_1s = self.samples.iter().filter(|d| d.as_secs_f64() > 1.0).count();
        format!(
            "controller reaction (pod Ready -> next write in its group), {} samples: p50 {}, p90 {}, p99 {}, max {}, \
             mean {:.0} ms, {} over 1 s; {} API requests for {} writes ({:.1} per write)\n\
             of which the controller's own part (watch event of that commit consumed -> write sent), {} samples: \
             p50 {}, p90 {}, p99 {}, max {}\n\
             fault healed (while a group had work) -> the controller's next write answering that work, {} samples \
             of {} faults: p50 {}, p99 {}, max {}",
            self.samples.len(),
            ms(self.quantile(0.5)),
            ms(self.quantile(0.9)),
            ms(self.quantile(0.99)),
            ms(self.quantile(1.0)),
            mean * 1e3,
            over_1s,
            self.requests,
            self.writes,
            self.requests as f64 / (self.writes.max(1)) as f64,
            self.own.len(),
            ms1(self.own_quantile(0.5)),
            ms1(self.own_quantile(0.9)),
            ms1(self.own_quantile(0.99)),
            ms1(self.own_quantile(1.0)),
            self.heal_to_write.len(),
            self.faults,
            ms(self.heal_quantile(0.5)),
            ms(self.heal_quantile(0.99)),
            ms(self.heal_quantile(1.0)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);
    const MS: Duration = Duration::from_millis(1);

    /// A pod commit at `at` (its resourceVersion: the second it was made at).
    fn commit(r: &mut Reactions, group: &str, actionable: bool, at: Duration) {
        r.group_committed(group, actionable, Wait { since: at, kind: Kind::Pods, rv: at.as_secs() });
    }

    /// A write committed (or refused) at `at`; the controller consumed the commit it waited on `own` before sending.
    fn write(r: &mut Reactions, group: &str, committed: bool, at: Duration) -> Option<Wait> {
        let waited = r.take_wait(group, at);
        r.write_tried(group, waited, committed, at, waited.map(|_| MS));
        waited
    }

    #[test]
    fn a_reaction_runs_from_the_first_commit_with_work_to_the_next_committed_write() {
        let mut r = Reactions::default();
        commit(&mut r, "g", false, S); // nothing to do
        commit(&mut r, "g", true, 2 * S); // unblocked
        commit(&mut r, "g", true, 3 * S); // still: the wait runs from 2 s
        commit(&mut r, "h", true, 3 * S);
        write(&mut r, "g", false, 4 * S); // refused: the wait goes on
        let waited = write(&mut r, "g", true, 5 * S);
        assert_eq!(waited.map(|w| w.rv), Some(2), "the commit that gave the work, kept across the refusal");
        assert_eq!(r.samples, vec![3 * S]);
        write(&mut r, "g", true, 6 * S); // a write with no wait before it gives no sample
        commit(&mut r, "h", false, 7 * S); // h's work went away (say, the push was undone): no sample
        write(&mut r, "h", true, 8 * S);
        commit(&mut r, "g", true, 8 * S);
        write(&mut r, "g", true, 8 * S + 40 * MS);
        assert_eq!(r.samples, vec![3 * S, 40 * MS]);
        assert_eq!(r.own, vec![MS, MS], "one own part per sample, none for the refused write");
        let mut s = Summary::default();
        s.add(&r);
        assert_eq!(s.quantile(0.5), Some(40 * MS));
        assert_eq!(s.quantile(1.0), Some(3 * S));
        assert_eq!(s.own_quantile(1.0), Some(MS));
        assert_eq!(s.writes, 4, "committed writes only");
    }

    #[test]
    fn a_heal_counts_from_its_end_to_the_next_write_answering_work_older_than_it() {
        let mut r = Reactions::default();
        r.fault("partition", S, 3 * S); // heals at 3 s
        r.fault("loss", 4 * S, 20 * S); // heals at 20 s, when nothing has work
        commit(&mut r, "g", true, 2 * S); // work since 2 s: there at the 3 s heal
        commit(&mut r, "g", true, 5 * S);
        write(&mut r, "g", false, 6 * S); // refused: no sample yet
        write(&mut r, "g", true, 9 * S);
        assert_eq!(r.heal_to_write, vec![6 * S], "from the heal at 3 s to the write at 9 s");
        commit(&mut r, "g", false, 10 * S);
        commit(&mut r, "g", true, 21 * S); // work only after the 20 s heal
        write(&mut r, "g", true, 22 * S);
        assert_eq!(r.heal_to_write, vec![6 * S], "no group had work at the 20 s heal");
        r.fault("crash", 23 * S, 25 * S);
        commit(&mut r, "g", true, 24 * S);
        commit(&mut r, "g", false, 26 * S); // the work went away unanswered
        write(&mut r, "g", true, 27 * S);
        assert_eq!(r.heal_to_write, vec![6 * S], "the heal's work went away: no sample");
        assert_eq!(r.faults.len(), 3);
    }
}
