//! How promptly the controller reacts (issue 15), measured on committed state.
//!
//! A reaction is the time from the commit that unblocks a rollout group (after it, the production planner run on
//! the committed truth has a pod to delete or replicas to change; typically a replaced pod becoming Ready, or a
//! template push) to the controller's next committed write in that group. A commit after which the truth has
//! nothing to do ends the wait without a sample. Also counted: every API request the controller sends, and its
//! committed writes, for requests per rollout step.

use std::collections::BTreeMap;
use std::time::Duration;

#[derive(Debug, Clone, Default)]
pub struct Reactions {
    /// Per group: since when the truth has had work for the controller.
    unblocked_at: BTreeMap<String, Duration>,
    pub samples: Vec<Duration>,
    pub controller_requests: u64,
    pub controller_writes: u64,
    /// Pods the controller deleted, since when (until their replacement is Ready).
    restarting: BTreeMap<String, Duration>,
    /// The pods' own replacement times: the controller's deletion to the new pod's Ready commit.
    pub restarts: Vec<Duration>,
    /// The first moment the controller had work, and the last replacement's Ready commit.
    pub first_work: Option<Duration>,
    pub last_restart_done: Option<Duration>,
}

impl Reactions {
    /// The controller's deletion of `pod` committed.
    pub fn pod_deleted_by_controller(&mut self, pod: &str, at: Duration) {
        self.restarting.entry(pod.to_string()).or_insert(at);
    }

    /// `pod` was committed Ready.
    pub fn pod_ready(&mut self, pod: &str, at: Duration) {
        if let Some(since) = self.restarting.remove(pod) {
            self.restarts.push(at.saturating_sub(since));
            self.last_restart_done = Some(at);
        }
    }

    /// A commit in `group` left the truth with work for the controller (`actionable`) or not.
    pub fn group_committed(&mut self, group: &str, actionable: bool, at: Duration) {
        if actionable {
            self.first_work.get_or_insert(at);
            self.unblocked_at.entry(group.to_string()).or_insert(at);
        } else {
            self.unblocked_at.remove(group);
        }
    }

    /// Whether some group has work the controller has not done yet.
    pub fn has_work(&self) -> bool {
        !self.unblocked_at.is_empty()
    }

    /// Takes the wait of `group` before a write is tried (the write's own commit re-evaluates the group).
    pub fn take_wait(&mut self, group: &str) -> Option<Duration> {
        self.unblocked_at.remove(group)
    }

    /// A write of `group` that waited since `since` was tried: committed, it is a sample; refused, the wait goes on
    /// from the earlier time.
    pub fn write_tried(&mut self, group: &str, since: Option<Duration>, committed: bool, at: Duration) {
        match (committed, since) {
            (true, since) => {
                self.controller_writes += 1;
                if let Some(since) = since {
                    self.samples.push(at.saturating_sub(since));
                }
            }
            (false, Some(since)) => {
                let wait = self.unblocked_at.entry(group.to_string()).or_insert(since);
                *wait = (*wait).min(since);
            }
            (false, None) => {}
        }
    }
}

/// Reaction times over a batch, summarised.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub samples: Vec<Duration>,
    pub requests: u64,
    pub writes: u64,
}

impl Summary {
    pub fn add(&mut self, r: &Reactions) {
        self.samples.extend(&r.samples);
        self.requests += r.controller_requests;
        self.writes += r.controller_writes;
    }

    /// The `q` quantile (0..=1), nearest rank.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let mut sorted = self.samples.clone();
        sorted.sort();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(rank - 1).copied()
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
        let mean = if self.samples.is_empty() {
            0.0
        } else {
            self.samples.iter().map(Duration::as_secs_f64).sum::<f64>() / self.samples.len() as f64
        };
        let over_1s = self.samples.iter().filter(|d| d.as_secs_f64() > 1.0).count();
        format!(
            "controller reaction (pod Ready -> next write in its group), {} samples: p50 {}, p90 {}, p99 {}, max {}, \
             mean {:.0} ms, {} over 1 s; {} API requests for {} writes ({:.1} per write)",
            self.samples.len(),
            ms(self.quantile(0.5)),
            ms(self.quantile(0.9)),
            ms(self.quantile(0.99)),
            ms(self.quantile(1.0)),
            mean * 1e3,
            over_1s,
            self.requests,
            self.writes,
            self.requests as f64 / (self.writes.max(1)) as f64
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn write(r: &mut Reactions, group: &str, committed: bool, at: Duration) {
        let since = r.take_wait(group);
        r.write_tried(group, since, committed, at);
    }

    #[test]
    fn a_reaction_runs_from_the_first_commit_with_work_to_the_next_committed_write() {
        let mut r = Reactions::default();
        r.group_committed("g", false, S); // nothing to do
        r.group_committed("g", true, 2 * S); // unblocked
        r.group_committed("g", true, 3 * S); // still: the wait runs from 2 s
        r.group_committed("h", true, 3 * S);
        write(&mut r, "g", false, 4 * S); // refused: the wait goes on
        write(&mut r, "g", true, 5 * S);
        assert_eq!(r.samples, vec![3 * S]);
        write(&mut r, "g", true, 6 * S); // a write with no wait before it gives no sample
        r.group_committed("h", false, 7 * S); // h's work went away (say, the push was undone): no sample
        write(&mut r, "h", true, 8 * S);
        r.group_committed("g", true, 8 * S);
        write(&mut r, "g", true, 8 * S + Duration::from_millis(40));
        assert_eq!(r.samples, vec![3 * S, Duration::from_millis(40)]);
        let mut s = Summary::default();
        s.add(&r);
        assert_eq!(s.quantile(0.5), Some(Duration::from_millis(40)));
        assert_eq!(s.quantile(1.0), Some(3 * S));
        assert_eq!(s.writes, 4, "committed writes only");
    }
}
