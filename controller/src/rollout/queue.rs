//! The per-group work queue: when each rollout group's next pass runs.
//!
//! Owns the schedule only: debounced events, retries, and a per-group pass budget. It never decides what a pass does
//! and never postpones work because of work of another group.
//!
//! The semantics are kube-runtime's scheduler (`kube::runtime::scheduler`) for one key per rollout group: a key is
//! queued at most once, and scheduling it again keeps the earlier of the two times (events never delay work); a
//! popped key is not popped again until it is rescheduled, so a group never runs concurrently with itself. On top,
//! a token bucket per group protects the API server from event storms: a pass spends a token; tokens refill at a
//! steady rate up to a burst; a due group without a token waits for the next one. The burst is sized so that a
//! normal rollout never waits on it (a replaced pod's handful of events each cost a pass at most). Written by hand
//! so the simulation controls every timer.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// How many passes a group may run back to back, and how fast that allowance comes back.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PassBudget {
    pub burst: u32,
    pub per_second: f64,
}

impl Default for PassBudget {
    /// 20 passes at once, then 5 a second: a rollout's events (a pod's deletion, creation, start and readiness,
    /// the StatefulSet's status) come a few a second at most, debounced; a storm of thousands costs 5 passes a second.
    fn default() -> Self {
        PassBudget { burst: 20, per_second: 5.0 }
    }
}

/// One group's tokens.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(self, budget: PassBudget, now: Instant) -> Bucket {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        Bucket { tokens: (self.tokens + elapsed * budget.per_second).min(f64::from(budget.burst)), at: now }
    }

    /// When the next whole token is there.
    fn next_token_at(self, budget: PassBudget) -> Instant {
        if self.tokens >= 1.0 || budget.per_second <= 0.0 {
            return self.at;
        }
        self.at + Duration::from_secs_f64((1.0 - self.tokens) / budget.per_second)
    }
}

/// The schedule of every rollout group's next pass.
#[derive(Debug)]
pub struct WorkQueue {
    budget: PassBudget,
    due: BTreeMap<String, Instant>,
    buckets: HashMap<String, Bucket>,
    /// Passes that waited for a token (for the metric and the tests).
    held_by_budget: u64,
}

impl Default for WorkQueue {
    fn default() -> Self {
        WorkQueue::new(PassBudget::default())
    }
}

impl WorkQueue {
    pub fn new(budget: PassBudget) -> Self {
        // A budget that never refills would stop a group for good: at least one pass a minute.
        let budget = PassBudget { burst: budget.burst.max(1), per_second: budget.per_second.max(1.0 / 60.0) };
        WorkQueue { budget, due: BTreeMap::new(), buckets: HashMap::new(), held_by_budget: 0 }
    }

    /// Queues `group` to run at `at`, unless it is already due sooner (events never delay work).
    pub fn schedule(&mut self, group: &str, at: Instant) {
        self.due.entry(group.to_string()).and_modify(|d| *d = (*d).min(at)).or_insert(at);
    }

    pub fn next_due(&self) -> Option<Instant> {
        self.due.values().min().copied()
    }

    /// Takes the group that is due soonest at `now` and has a token to spend (ties go to the smaller name). A due
    /// group without a token is moved to when its next token comes.
    pub fn pop_due(&mut self, now: Instant) -> Option<String> {
        loop {
            let (group, _) = self.due.iter().filter(|(_, at)| **at <= now).min_by_key(|(_, at)| **at)?;
            let group = group.clone();
            let full = Bucket { tokens: f64::from(self.budget.burst), at: now };
            let bucket = self.buckets.get(&group).copied().unwrap_or(full).refilled(self.budget, now);
            if bucket.tokens >= 1.0 {
                self.due.remove(&group);
                self.buckets.insert(group.clone(), Bucket { tokens: bucket.tokens - 1.0, ..bucket });
                return Some(group);
            }
            self.held_by_budget += 1;
            self.buckets.insert(group.clone(), bucket);
            self.due.insert(group, bucket.next_token_at(self.budget).max(now + Duration::from_millis(1)));
        }
    }

    pub fn forget(&mut self, group: &str) {
        self.due.remove(group);
        self.buckets.remove(group);
    }

    pub fn is_queued(&self, group: &str) -> bool {
        self.due.contains_key(group)
    }

    /// How many times a due pass had to wait for its group's budget.
    pub fn held_by_budget(&self) -> u64 {
        self.held_by_budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_burst_of_events_is_one_pass_and_the_next_event_runs_after_the_debounce_only() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.schedule("ingester", t0 + 100 * MS);
        q.schedule("ingester", t0 + 150 * MS);
        assert_eq!(q.next_due(), Some(t0 + 100 * MS), "the earlier schedule wins");
        assert_eq!(q.pop_due(t0), None, "not due yet");
        let t1 = t0 + 100 * MS;
        assert_eq!(q.pop_due(t1).as_deref(), Some("ingester"));
        assert_eq!(q.pop_due(t1), None, "coalesced into one pass");
        // An event right after a pass is not held back by it.
        q.schedule("ingester", t1 + 100 * MS);
        assert_eq!(q.next_due(), Some(t1 + 100 * MS));
        assert_eq!(q.pop_due(t1 + 100 * MS).as_deref(), Some("ingester"));
        assert_eq!(q.held_by_budget(), 0);
    }

    #[test]
    fn a_storm_is_held_to_the_budget_per_group_and_other_groups_are_not() {
        let t0 = Instant::now();
        let budget = PassBudget { burst: 3, per_second: 2.0 };
        let mut q = WorkQueue::new(budget);
        for _ in 0..3 {
            q.schedule("storm", t0);
            assert_eq!(q.pop_due(t0).as_deref(), Some("storm"), "the burst runs at once");
        }
        q.schedule("storm", t0);
        q.schedule("calm", t0);
        assert_eq!(q.pop_due(t0).as_deref(), Some("calm"), "another group is not held back");
        assert_eq!(q.pop_due(t0), None, "the storm's budget is spent");
        assert_eq!(q.held_by_budget(), 1);
        assert_eq!(q.next_due(), Some(t0 + 500 * MS), "its next token comes at 2 a second");
        assert_eq!(q.pop_due(t0 + 499 * MS), None);
        assert_eq!(q.pop_due(t0 + 500 * MS).as_deref(), Some("storm"));
        // Over ten seconds of continuous events it runs at the refill rate, not at the event rate.
        let mut passes = 0;
        let mut t = t0 + 500 * MS;
        while t < t0 + Duration::from_millis(10_500) {
            t += 10 * MS;
            q.schedule("storm", t);
            if q.pop_due(t).is_some() {
                passes += 1;
            }
        }
        assert!((19..=21).contains(&passes), "{passes} passes in 10 s at 2 a second");
    }

    #[test]
    fn a_retry_does_not_postpone_sooner_work_and_forget_drops_the_group() {
        let t0 = Instant::now();
        let mut q = WorkQueue::default();
        q.schedule("a", t0 + Duration::from_secs(1));
        q.schedule("a", t0 + Duration::from_secs(30));
        assert_eq!(q.next_due(), Some(t0 + Duration::from_secs(1)));
        q.forget("a");
        assert_eq!(q.next_due(), None);
        assert!(!q.is_queued("a"));
    }

    #[test]
    fn a_budget_that_never_refills_is_raised_to_one_pass_a_minute() {
        let t0 = Instant::now();
        let mut q = WorkQueue::new(PassBudget { burst: 0, per_second: 0.0 });
        q.schedule("a", t0);
        assert_eq!(q.pop_due(t0).as_deref(), Some("a"));
        q.schedule("a", t0);
        assert_eq!(q.pop_due(t0), None);
        assert!(q.next_due().is_some_and(|at| at <= t0 + Duration::from_secs(60)));
    }
}
