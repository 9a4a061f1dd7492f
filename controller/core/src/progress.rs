//! Stuck-rollout detection: whether a group with work to do has made no progress for longer than a deadline.
//!
//! Owns what counts as progress and the stuck verdict, as pure functions: the shell keeps one [`ProgressClock`] per
//! group between passes (`observe` after each plan) and asks [`judge`] with `now` and the deadline. It must not read
//! a clock or remember anything itself.
//!
//! Progress is a new high-water mark of the group's [`score`] (pods on their update revision and available, plus
//! StatefulSets whose currentRevision reached their update revision) for an unchanged [`Target`] (every StatefulSet's
//! update revision and desired replicas). A pod that flaps Ready and not Ready makes no new high (a crash loop is not
//! progress); a new revision or a replica change is a new target, and the clock starts again. A group that is done
//! has nothing to make progress on: its clock starts again at every pass, and again at the first pass that finds
//! work (a done group is reconciled only now and then: its last pass may be long before the work appeared).

use crate::duration::format_go_duration;
use crate::group::GroupSnapshot;
use crate::natural::pod_ordinal;
use crate::plan::{GroupPlan, GroupState};
use crate::wait::Wait;
use jiff::Timestamp;
use std::time::Duration;

/// What a group is rolling toward: each StatefulSet's name, update revision and desired replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target(Vec<(String, String, u32)>);

impl Target {
    pub fn of(group: &GroupSnapshot) -> Self {
        Target(
            group
                .members
                .iter()
                .map(|m| {
                    let update = m.sts.status.as_ref().map(|s| s.update_revision.clone()).unwrap_or_default();
                    (m.sts.name.clone(), update, m.sts.replicas)
                })
                .collect(),
        )
    }
}

/// How far toward its target the group is: pods below `spec.replicas` that are on their StatefulSet's update revision
/// and available, plus one per StatefulSet whose currentRevision is its update revision.
pub fn score(group: &GroupSnapshot, now: Timestamp) -> u32 {
    let mut score = 0u32;
    for m in &group.members {
        let Some(status) = m.sts.status.as_ref() else { continue };
        let update = status.update_revision.as_str();
        let rolled = m
            .pods
            .iter()
            .filter(|p| pod_ordinal(&m.sts.name, &p.name).is_some_and(|o| o < m.sts.replicas))
            .filter(|p| p.revision() == Some(update) && p.is_available(m.sts.min_ready_seconds, now))
            .count();
        score = score.saturating_add(rolled as u32);
        score = score.saturating_add(u32::from(!update.is_empty() && status.current_revision == update));
    }
    score
}

/// When a group last made progress toward its current target. Plain data the shell keeps between passes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgressClock {
    target: Target,
    best: u32,
    since: Timestamp,
    /// The pass that set it found the group done.
    done: bool,
}

impl ProgressClock {
    /// The clock after a pass that planned `state` on `group` at `now`: started again when there was none, the
    /// target changed, or this pass or the one before found the group done; moved to `now` when the score beat its
    /// best; otherwise unchanged.
    pub fn observe(previous: Option<&ProgressClock>, group: &GroupSnapshot, state: GroupState, now: Timestamp) -> Self {
        let target = Target::of(group);
        let score = score(group, now);
        let done = state == GroupState::Done;
        match previous {
            Some(p) if p.target == target && !done && !p.done => {
                if score > p.best {
                    ProgressClock { target, best: score, since: now, done }
                } else {
                    p.clone()
                }
            }
            _ => ProgressClock { target, best: score, since: now, done },
        }
    }

    /// The last progress (or the start of the clock). For this module's tests: production asks `without_progress`.
    #[cfg(test)]
    pub fn since(&self) -> Timestamp {
        self.since
    }

    /// How long the group has gone without progress at `now`.
    pub fn without_progress(&self, now: Timestamp) -> Duration {
        Duration::try_from(now.duration_since(self.since)).unwrap_or(Duration::ZERO)
    }
}

/// A group reported stuck: how long without progress, and what held it at the last pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stuck {
    pub without_progress: Duration,
    pub wait: Option<Wait>,
    /// The plan's reason at the last pass.
    pub reason: String,
}

impl Stuck {
    /// One line for logs and Events.
    pub fn describe(&self) -> String {
        let class = self.wait.as_ref().map(|w| format!(" ({})", w.reason)).unwrap_or_default();
        format!("no progress for {}{class}: {}", format_go_duration(whole_seconds(self.without_progress)), self.reason)
    }
}

fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// Whether the group planned as `plan` is stuck at `now`: it has work to do (not done, and not held only by a wait
/// that cannot be stuck, see [`crate::wait::WaitReason::can_be_stuck`]) and has made no progress for longer than
/// `deadline`. A zero deadline turns detection off.
pub fn judge(clock: &ProgressClock, plan: &GroupPlan, now: Timestamp, deadline: Duration) -> Option<Stuck> {
    if deadline.is_zero() || plan.state == GroupState::Done {
        return None;
    }
    if plan.wait.as_ref().is_some_and(|w| !w.reason.can_be_stuck()) {
        return None;
    }
    let without_progress = clock.without_progress(now);
    (without_progress > deadline).then(|| Stuck {
        without_progress,
        wait: plan.wait.clone(),
        reason: plan.reason.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{not_ready, pod, statefulset};
    use crate::group::build_groups;
    use crate::pass::{PassInput, plan_pass};
    use crate::wait::WaitReason;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    const DEADLINE: Duration = Duration::from_secs(600);

    /// Zone a rolled to r1 with `new_ready` of its 3 pods on r1 Ready (the rest on r1, not ready), zone b on r0.
    fn group(new_ready: u32, current_advanced: bool) -> GroupSnapshot {
        let mut a = statefulset("g", "a", 3, "r0");
        let status = a.status.as_mut().unwrap();
        status.update_revision = "r1".into();
        if current_advanced {
            status.current_revision = "r1".into();
        }
        let b = statefulset("g", "b", 3, "r0");
        let mut pods: Vec<_> =
            (0..3).map(|i| if i < new_ready { pod(&a, i, "r1") } else { not_ready(pod(&a, i, "r1")) }).collect();
        pods.extend((0..3).map(|i| pod(&b, i, "r0")));
        build_groups(vec![a, b], &pods).remove(0)
    }

    fn pass(group: &GroupSnapshot, now: Timestamp) -> GroupPlan {
        plan_pass(group, &PassInput::new(now, &[])).plan
    }

    #[test]
    fn the_score_counts_updated_available_pods_and_advanced_revisions() {
        // Zone b: three pods on its update revision r0, and its currentRevision is r0.
        assert_eq!(score(&group(0, false), t(0)), 4);
        assert_eq!(score(&group(2, false), t(0)), 6);
        assert_eq!(score(&group(3, true), t(0)), 8);
    }

    #[test]
    fn a_crash_looping_new_revision_is_stuck_after_the_deadline_with_its_wait() {
        let g = group(1, false);
        let clock = ProgressClock::observe(None, &g, GroupState::Waiting, t(0));
        let plan = pass(&g, t(0));
        assert_eq!(plan.wait, Some(Wait::on(WaitReason::PodsNotReady, "a")), "{plan:?}");
        // A pod that goes unready and Ready again makes no new high: not progress.
        let flapped = ProgressClock::observe(Some(&clock), &group(0, false), GroupState::Waiting, t(300));
        let clock = ProgressClock::observe(Some(&flapped), &g, GroupState::Waiting, t(500));
        assert_eq!(clock.since(), t(0));
        assert_eq!(judge(&clock, &plan, t(600), DEADLINE), None, "exactly at the deadline is not yet stuck");
        let stuck = judge(&clock, &plan, t(601), DEADLINE).expect("stuck");
        assert_eq!(stuck.without_progress, Duration::from_secs(601));
        assert_eq!(stuck.wait, plan.wait);
        assert!(
            stuck.describe().starts_with("no progress for 10m1s (pods-not-ready): StatefulSet a pods are all updated"),
            "{}",
            stuck.describe()
        );
    }

    #[test]
    fn a_new_high_a_new_target_or_being_done_restarts_the_clock() {
        let clock = ProgressClock::observe(None, &group(1, false), GroupState::Waiting, t(0));
        let better = ProgressClock::observe(Some(&clock), &group(2, false), GroupState::Waiting, t(700));
        assert_eq!(better.since(), t(700));
        let mut pushed = group(2, false);
        pushed.members[0].sts.status.as_mut().unwrap().update_revision = "r2".into();
        let retargeted = ProgressClock::observe(Some(&better), &pushed, GroupState::Waiting, t(800));
        assert_eq!(retargeted.since(), t(800), "a new revision is a new target");
        let mut scaled = group(2, false);
        scaled.members[1].sts.replicas = 4;
        assert_eq!(ProgressClock::observe(Some(&better), &scaled, GroupState::Waiting, t(900)).since(), t(900));
        let done = ProgressClock::observe(Some(&better), &group(2, false), GroupState::Done, t(1000));
        assert_eq!(done.since(), t(1000));
    }

    /// Regression (simulation seed 1 of `--faults never-ready,quota`): a done group is reconciled only every resync;
    /// when a push gives it work, its clock must start then, not at its last (done) pass minutes earlier.
    #[test]
    fn work_after_a_done_pass_starts_the_clock_when_it_appears() {
        let mut g = group(3, true);
        g.members[0].sts.status.as_mut().unwrap().update_revision = "r1".into();
        let done = ProgressClock::observe(None, &g, GroupState::Done, t(0));
        // 144 s later the template was pushed; the StatefulSet controller has not observed it yet (same target).
        let pushed = ProgressClock::observe(Some(&done), &g, GroupState::Waiting, t(144));
        assert_eq!(pushed.since(), t(144));
        let plan = GroupPlan { state: GroupState::Waiting, ..pass(&g, t(144)) };
        assert_eq!(judge(&pushed, &plan, t(144), Duration::from_secs(120)), None);
    }

    #[test]
    fn done_scheduled_and_foreign_groups_are_never_stuck_and_a_zero_deadline_turns_detection_off() {
        let g = group(1, false);
        let clock = ProgressClock::observe(None, &g, GroupState::Waiting, t(0));
        let mut plan = pass(&g, t(0));
        assert!(judge(&clock, &plan, t(10_000), DEADLINE).is_some());
        assert_eq!(judge(&clock, &plan, t(10_000), Duration::ZERO), None);
        for reason in [WaitReason::ScalingScheduled, WaitReason::UpdateStrategy] {
            plan.wait = Some(Wait::new(reason, None));
            assert_eq!(judge(&clock, &plan, t(10_000), DEADLINE), None, "{reason}");
        }
        plan.wait = None;
        plan.state = GroupState::Progressing;
        assert!(judge(&clock, &plan, t(10_000), DEADLINE).is_some(), "acting without progress (writes that fail)");
        plan.state = GroupState::Done;
        assert_eq!(judge(&clock, &plan, t(10_000), DEADLINE), None);
    }
}
