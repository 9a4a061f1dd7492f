//! What the reconcile loop tells people about each rollout group, after the core has planned a pass: a log line when
//! the group's state or reason changes, its state metrics, whether it is stuck (the core's progress clock and
//! verdict, `rollout_core::progress`), and Events: what the pass did (pods replaced, a revision advanced, a replica
//! change), what the group waits for when that changes, invalid settings and scaling errors when they appear, and
//! the group getting stuck or moving again.
//!
//! Owns the per-group memory of what was last said, so that people hear about changes rather than every pass. Must
//! not decide anything about the rollout: it reads the snapshot and the plan the core made, and the writes that were
//! applied.

use crate::ops::events::{EventRecord, EventRecorder, EventType, ObjectRef};
use crate::ops::metrics::{GroupReport, Metrics, StatefulSetReport};
use jiff::Timestamp;
use rollout_core::duration::format_go_duration;
use rollout_core::group::GroupSnapshot;
use rollout_core::natural::pod_ordinal;
use rollout_core::progress::{ProgressClock, judge};
use rollout_core::scaling::{ignored_force_replicas, rollout_in_progress};
use rollout_core::{Action, GroupPlan, GroupState, Readiness, Wait, WaitReason};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Default of `-rollout.progress-deadline`.
pub const DEFAULT_PROGRESS_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// The reporter of every group the loop reconciles.
pub struct Reports {
    metrics: Arc<Metrics>,
    events: EventRecorder,
    /// `-rollout.progress-deadline`; zero: no stuck detection.
    deadline: Duration,
    groups: HashMap<String, Memory>,
}

/// What was last said about one group.
#[derive(Default)]
struct Memory {
    logged: Option<(GroupState, String)>,
    /// The last wait an Event told people about (by [`told_as`]), since the group was last done.
    told: Option<(WaitReason, Option<String>)>,
    clock: Option<ProgressClock>,
    /// Reported stuck, about this StatefulSet (`Some(None)`: about the group as a whole).
    stuck: Option<Option<String>>,
    warnings: BTreeSet<String>,
    scaling_errors: BTreeSet<String>,
    /// Writes of the current pass that the API applied.
    applied: Vec<Action>,
}

/// The key under which a wait is told: pod waits of one StatefulSet are one wait (a replaced pod goes from
/// terminating to missing to not ready in a few seconds; telling each would be an Event storm).
fn told_as(wait: &Wait) -> (WaitReason, Option<String>) {
    let reason = match wait.reason {
        WaitReason::PodsMissing | WaitReason::PodsTerminating => WaitReason::PodsNotReady,
        other => other,
    };
    (reason, wait.statefulset.clone())
}

impl Reports {
    pub fn new(metrics: Arc<Metrics>, events: EventRecorder, deadline: Duration) -> Self {
        Reports { metrics, events, deadline, groups: HashMap::new() }
    }

    /// The same reporter with `events` and `deadline`.
    pub fn with(self, events: EventRecorder, deadline: Duration) -> Self {
        Reports { events, deadline, ..self }
    }

    /// After the core planned a pass of `snapshot`'s group at `now`: log, metrics, stuck verdict and Events.
    pub fn planned(&mut self, snapshot: &GroupSnapshot, plan: &GroupPlan, now: Timestamp) {
        let group = plan.group.clone();
        let memory = self.groups.entry(group.clone()).or_default();
        let mut logged = plan.clone();
        add_setting_warnings(&mut logged, snapshot);
        log_if_changed(memory, &logged);

        let previous = memory.clock.take();
        let clock = ProgressClock::observe(previous.as_ref(), snapshot, plan.state, now);
        let stuck = judge(&clock, plan, now, self.deadline);
        let without_progress =
            if plan.state == GroupState::Done { Duration::ZERO } else { clock.without_progress(now) };
        let first = snapshot.members.first().map(|m| &m.sts);
        let about = |name: Option<&str>| -> Option<ObjectRef> {
            let sts = name.and_then(|n| snapshot.member(n)).map(|m| &m.sts).or(first)?;
            Some(ObjectRef::statefulset(&sts.name, Some(&sts.uid)))
        };
        let mut events = Vec::new();
        match (&stuck, memory.stuck.clone()) {
            (Some(verdict), None) => {
                let wait = verdict.wait.as_ref().map(|w| w.reason.as_str()).unwrap_or("none");
                let stuck_for = format_go_duration(whole(verdict.without_progress));
                tracing::warn!(rollout_group = %group, wait, stuck_for, reason = %verdict.reason,
                    "rollout group is stuck");
                let sts = verdict.wait.as_ref().and_then(|w| w.statefulset.clone());
                let note = verdict.describe();
                events.extend(
                    about(sts.as_deref()).map(|r| event(r, EventType::Warning, "RolloutStuck", "CheckProgress", note)),
                );
                memory.stuck = Some(sts);
            }
            (None, Some(sts)) => {
                let stalled = previous.map(|p| whole(p.without_progress(now))).unwrap_or_default();
                let note = if plan.state == GroupState::Done {
                    format!("the rollout group is done, after {} without progress", format_go_duration(stalled))
                } else {
                    format!("progress resumed after {} without progress: {}", format_go_duration(stalled), plan.reason)
                };
                tracing::info!(rollout_group = %group, "rollout group is no longer stuck: {note}");
                events.extend(
                    about(sts.as_deref()).map(|r| event(r, EventType::Normal, "RolloutResumed", "CheckProgress", note)),
                );
                memory.stuck = None;
            }
            _ => {}
        }
        memory.clock = Some(clock);

        // Waits are told when the group stops on one (a pass that acts is told by its writes), once until it changes.
        let stopped = matches!(plan.state, GroupState::Waiting | GroupState::Blocked);
        match &plan.wait {
            _ if plan.state == GroupState::Done => memory.told = None,
            Some(wait) if stopped && !wait.reason.is_routine() && memory.told.as_ref() != Some(&told_as(wait)) => {
                memory.told = Some(told_as(wait));
                // A warning when a person is needed, or when it holds up a rollout (several zones scaling up at once
                // are not news).
                let blocking = plan.state == GroupState::Blocked
                    || (wait.reason.needs_attention() && rollout_in_progress(snapshot).is_some());
                let (type_, reason) = if blocking {
                    (EventType::Warning, "RolloutBlocked")
                } else {
                    (EventType::Normal, "RolloutWaiting")
                };
                let note = format!("{} ({}): {}", plan.state.as_str(), wait.reason, plan.reason);
                events.extend(about(wait.statefulset.as_deref()).map(|r| event(r, type_, reason, "Wait", note)));
            }
            _ => {}
        }

        // Settings people wrote that cannot be used or are ignored (naming the key and value), and pods that claim a
        // StatefulSet without matching it; not the pass's passing troubles (an unreadable record), which the log tells.
        let mut warnings: BTreeMap<String, Option<&str>> =
            snapshot.warnings.iter().map(|w| (w.clone(), None)).collect();
        for m in &snapshot.members {
            warnings.extend(m.sts.settings.errors.iter().map(|e| (e.to_string(), Some(m.sts.name.as_str()))));
            warnings.extend(downscale_setting_warnings(&m.sts).into_iter().map(|w| (w, Some(m.sts.name.as_str()))));
            warnings.extend(ignored_force_replicas(&m.sts).map(|w| (w, Some(m.sts.name.as_str()))));
        }
        for (warning, sts) in &warnings {
            if !memory.warnings.contains(warning) {
                let regarding = about(*sts);
                events.extend(
                    regarding.map(|r| event(r, EventType::Warning, "InvalidSetting", "ReadSettings", warning.clone())),
                );
            }
        }
        memory.warnings = warnings.into_keys().collect();
        let errors: BTreeMap<String, &str> =
            plan.scaling_errors.iter().map(|e| (e.to_string(), e.statefulset.as_str())).collect();
        for (error, sts) in &errors {
            if !memory.scaling_errors.contains(error) {
                let regarding = about(Some(sts));
                events.extend(regarding.map(|r| event(r, EventType::Warning, "ScalingFailed", "Scale", error.clone())));
            }
        }
        memory.scaling_errors = errors.into_keys().collect();

        for e in events {
            self.events.record(e);
        }
        let report = GroupReport {
            state: plan.state,
            waiting: plan.wait.as_ref().map(|w| w.reason),
            stuck: stuck.is_some(),
            without_progress,
            statefulsets: snapshot.members.iter().map(|m| statefulset_report(m, now)).collect(),
        };
        self.metrics.group_report(&group, &report);
    }

    /// A write of the current pass of `group` was applied.
    pub fn applied(&mut self, group: &str, action: &Action) {
        self.groups.entry(group.to_string()).or_default().applied.push(action.clone());
    }

    /// The pass's writes are done: one Event per StatefulSet for the pods it replaced, one per other write.
    pub fn executed(&mut self, snapshot: &GroupSnapshot) {
        let Some(memory) = self.groups.get_mut(&snapshot.name) else { return };
        let applied = std::mem::take(&mut memory.applied);
        let uid = |sts: &str| snapshot.member(sts).map(|m| m.sts.uid.clone());
        let mut deleted: BTreeMap<&str, Vec<(&str, &str)>> = BTreeMap::new();
        for action in &applied {
            let regarding = ObjectRef::statefulset(action.statefulset(), uid(action.statefulset()).as_deref());
            match action {
                Action::DeletePod { statefulset, pod, reason, .. } => {
                    deleted.entry(statefulset).or_default().push((pod, reason));
                }
                Action::SetCurrentRevision { revision, reason, .. } => self.events.record(event(
                    regarding,
                    EventType::Normal,
                    "RevisionAdvanced",
                    "UpdateStatus",
                    format!("currentRevision set to {revision}: {reason}"),
                )),
                Action::Scale { from, to, reason, .. } => self.events.record(event(
                    regarding,
                    EventType::Normal,
                    "Scaled",
                    "Scale",
                    format!("scaled from {from} to {to} replicas: {reason}"),
                )),
            }
        }
        for (sts, pods) in deleted {
            let names: Vec<&str> = pods.iter().map(|(p, _)| *p).collect();
            let note = format!(
                "deleted {} to replace {}: {}",
                plural_pods(&names),
                if names.len() == 1 { "it" } else { "them" },
                pods[0].1
            );
            let pod_uid =
                snapshot.member(sts).and_then(|m| m.pods.iter().find(|p| p.name == names[0])).map(|p| p.uid.clone());
            let mut e = event(
                ObjectRef::statefulset(sts, uid(sts).as_deref()),
                EventType::Normal,
                "ReplacingPods",
                "DeletePods",
                note,
            );
            e.related = Some(ObjectRef::pod(names[0], pod_uid.as_deref()));
            self.events.record(e);
        }
    }

    /// The group is gone.
    pub fn forget(&mut self, group: &str) {
        self.groups.remove(group);
    }
}

/// The downscale settings of `sts` that cannot be used (`grafana.com/min-time-between-zones-downscale`,
/// `grafana.com/last-downscale`), as setting warnings: reported when they are read, not only once a downscale that
/// needs them is due (which they then refuse).
pub fn downscale_setting_warnings(sts: &rollout_core::StatefulSetView) -> Vec<String> {
    let downscale = &sts.downscale;
    let min_time = downscale.min_time_between_zones.as_ref().and_then(|v| v.as_ref().err());
    let last = downscale.last_downscale.as_ref().and_then(|v| v.as_ref().err());
    min_time.into_iter().chain(last).map(|e| format!("{e}; a downscale that needs it is refused")).collect()
}

/// Appends to `plan` the setting warnings the core pass leaves to the shell ([`downscale_setting_warnings`]), each
/// once.
pub fn add_setting_warnings(plan: &mut GroupPlan, group: &GroupSnapshot) {
    for m in &group.members {
        for warning in downscale_setting_warnings(&m.sts) {
            if !plan.warnings.contains(&warning) {
                plan.warnings.push(warning);
            }
        }
    }
}

/// Logs the plan when its state or reason changed since the last pass (its warnings with it), else at debug.
fn log_if_changed(memory: &mut Memory, plan: &GroupPlan) {
    let key = (plan.state, plan.reason.clone());
    if memory.logged.as_ref() != Some(&key) {
        for w in &plan.warnings {
            tracing::warn!(rollout_group = %plan.group, "{w}");
        }
        let wait = plan.wait.as_ref().map(|w| w.reason.as_str()).unwrap_or("none");
        tracing::info!(rollout_group = %plan.group, state = plan.state.as_str(), wait, reason = %plan.reason, "rollout group");
        memory.logged = Some(key);
    } else {
        tracing::debug!(rollout_group = %plan.group, state = plan.state.as_str(), reason = %plan.reason, "rollout group unchanged");
    }
}

fn event(
    regarding: ObjectRef,
    type_: EventType,
    reason: &'static str,
    action: &'static str,
    note: String,
) -> EventRecord {
    EventRecord { regarding, related: None, type_, reason, action, note }
}

fn whole(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

fn plural_pods(names: &[&str]) -> String {
    match names {
        [one] => format!("pod {one}"),
        many => format!("pods {}", many.join(", ")),
    }
}

/// Desired, updated and unavailable pods of one StatefulSet, as the metrics show them.
pub fn statefulset_report(member: &rollout_core::MemberSnapshot, now: Timestamp) -> StatefulSetReport {
    let sts = &member.sts;
    let update = sts.status.as_ref().map(|s| s.update_revision.as_str()).unwrap_or_default();
    let updated = member
        .pods
        .iter()
        .filter(|p| pod_ordinal(&sts.name, &p.name).is_some_and(|o| o < sts.replicas))
        .filter(|p| !update.is_empty() && p.revision() == Some(update))
        .count() as u32;
    StatefulSetReport {
        name: sts.name.clone(),
        desired: sts.replicas,
        updated,
        unavailable: Readiness::of(member, now).unavailable(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::events::EventQueue;
    use jiff::SignedDuration;
    use rollout_core::fixture::{annotate, not_ready, pod, statefulset};
    use rollout_core::view::{PodView, StatefulSetView};
    use rollout_core::{PassInput, keys, plan_pass};

    const DEADLINE: Duration = Duration::from_secs(600);

    fn at(minutes: i64) -> Timestamp {
        "2026-11-20T12:00:00Z".parse::<Timestamp>().unwrap() + SignedDuration::from_mins(minutes)
    }

    fn reporter() -> (Reports, EventQueue, Arc<Metrics>) {
        let metrics = Arc::new(Metrics::new());
        let (events, queue) = EventRecorder::new(64, metrics.clone());
        (Reports::new(metrics.clone(), events, DEADLINE), queue, metrics)
    }

    fn drain(queue: &mut EventQueue) -> Vec<EventRecord> {
        std::iter::from_fn(|| queue.try_recv()).collect()
    }

    fn reasons(events: &[EventRecord]) -> Vec<(&'static str, &str)> {
        events.iter().map(|e| (e.reason, e.regarding.name.as_str())).collect()
    }

    fn zone(name: &str, current: &str, update: &str) -> StatefulSetView {
        let mut s = statefulset("ingester", name, 2, current);
        s.status.as_mut().unwrap().update_revision = update.into();
        s
    }

    fn snapshot(stss: Vec<StatefulSetView>, pods: Vec<PodView>) -> GroupSnapshot {
        GroupSnapshot::assemble("ingester", stss, &pods)
    }

    /// Plans `g` at `now` and reports it, as the loop does.
    fn pass(reports: &mut Reports, g: &GroupSnapshot, now: Timestamp) -> GroupPlan {
        let plan = plan_pass(g, &PassInput::new(now, &[])).plan;
        reports.planned(g, &plan, now);
        plan
    }

    #[test]
    fn a_wait_is_told_once_until_it_changes_and_pod_waits_of_one_zone_are_one_wait() {
        let (mut reports, mut queue, _) = reporter();
        let a = zone("a", "r0", "r1");
        let b = zone("b", "r0", "r0");
        let others = vec![pod(&b, 0, "r0"), pod(&b, 1, "r0")];
        let with = |a_pods: Vec<PodView>| snapshot(vec![a.clone(), b.clone()], [a_pods, others.clone()].concat());
        // a-0 replaced and not ready yet, then missing, then not ready again: one wait.
        pass(&mut reports, &with(vec![not_ready(pod(&a, 0, "r1")), pod(&a, 1, "r0")]), at(0));
        pass(&mut reports, &with(vec![pod(&a, 1, "r0")]), at(1));
        pass(&mut reports, &with(vec![not_ready(pod(&a, 0, "r1")), pod(&a, 1, "r0")]), at(2));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("RolloutWaiting", "a")], "{told:?}");
        assert_eq!(told[0].type_, EventType::Normal);
        assert!(told[0].note.starts_with("waiting (pods-not-ready): "), "{}", told[0].note);
        // Another zone unready too: the group is blocked, a warning.
        let b_down = snapshot(
            vec![a.clone(), b.clone()],
            vec![not_ready(pod(&a, 0, "r1")), pod(&a, 1, "r0"), not_ready(pod(&b, 0, "r0")), pod(&b, 1, "r0")],
        );
        pass(&mut reports, &b_down, at(3));
        pass(&mut reports, &b_down, at(4));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("RolloutBlocked", "a")], "{told:?}");
        assert_eq!(told[0].type_, EventType::Warning);
        assert!(told[0].note.contains("several-not-ready"), "{}", told[0].note);
    }

    #[test]
    fn a_group_without_progress_is_told_stuck_once_then_resumed_with_the_gauge() {
        let (mut reports, mut queue, metrics) = reporter();
        let a = zone("a", "r0", "r1");
        let crashing = snapshot(vec![a.clone()], vec![not_ready(pod(&a, 0, "r1")), pod(&a, 1, "r0")]);
        for minute in [0, 5, 10] {
            pass(&mut reports, &crashing, at(minute));
        }
        assert!(drain(&mut queue).iter().all(|e| e.reason != "RolloutStuck"), "not before the deadline");
        assert!(metrics.encode().contains("rollout_operator_group_stuck{rollout_group=\"ingester\"} 0"));
        pass(&mut reports, &crashing, at(11));
        pass(&mut reports, &crashing, at(20));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("RolloutStuck", "a")], "once: {told:?}");
        assert_eq!(told[0].type_, EventType::Warning);
        assert!(told[0].note.starts_with("no progress for 11m0s (pods-not-ready): "), "{}", told[0].note);
        let text = metrics.encode();
        assert!(text.contains("rollout_operator_group_stuck{rollout_group=\"ingester\"} 1"), "{text}");
        assert!(text.contains("rollout_operator_group_seconds_without_progress{rollout_group=\"ingester\"} 1200"));
        // The new pod becomes ready: progress.
        pass(&mut reports, &snapshot(vec![a.clone()], vec![pod(&a, 0, "r1"), pod(&a, 1, "r0")]), at(21));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("RolloutResumed", "a")], "{told:?}");
        assert!(told[0].note.starts_with("progress resumed after 21m0s without progress"), "{}", told[0].note);
        assert!(metrics.encode().contains("rollout_operator_group_stuck{rollout_group=\"ingester\"} 0"));
    }

    #[test]
    fn invalid_settings_and_scaling_errors_are_told_when_they_appear() {
        let (mut reports, mut queue, _) = reporter();
        let a = annotate(zone("a", "r0", "r0"), keys::ROLLOUT_MAX_UNAVAILABLE, "lots");
        let b = annotate(zone("b", "r0", "r0"), keys::ROLLOUT_DOWNSCALE_LEADER, "nobody");
        let pods = vec![pod(&a, 0, "r0"), pod(&a, 1, "r0"), pod(&b, 0, "r0"), pod(&b, 1, "r0")];
        let g = snapshot(vec![a, b], pods);
        pass(&mut reports, &g, at(0));
        pass(&mut reports, &g, at(1));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("InvalidSetting", "a"), ("ScalingFailed", "b")], "once each: {told:?}");
        assert!(told[0].note.contains("rollout-max-unavailable value \"lots\""), "{}", told[0].note);
        assert!(told[1].note.contains("could not find leader"), "{}", told[1].note);
    }

    /// A malformed min time between zone downscales or last downscale is told when it is read, in a group with
    /// no downscale due, and once.
    #[test]
    fn malformed_downscale_settings_are_told_when_read() {
        let (mut reports, mut queue, _) = reporter();
        let a = annotate(zone("a", "r0", "r0"), keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "12hours");
        let b = annotate(zone("b", "r0", "r0"), keys::LAST_DOWNSCALE, "yesterday");
        let pods = vec![pod(&a, 0, "r0"), pod(&a, 1, "r0"), pod(&b, 0, "r0"), pod(&b, 1, "r0")];
        let g = snapshot(vec![a, b], pods);
        assert_eq!(pass(&mut reports, &g, at(0)).state, GroupState::Done);
        pass(&mut reports, &g, at(1));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("InvalidSetting", "a"), ("InvalidSetting", "b")], "once each: {told:?}");
        assert!(
            told[0]
                .note
                .starts_with("StatefulSet a: invalid grafana.com/min-time-between-zones-downscale value \"12hours\": "),
            "{}",
            told[0].note
        );
        assert!(told[0].note.ends_with("expected a Go duration such as 12h; a downscale that needs it is refused"));
        assert!(told[1].note.contains("invalid grafana.com/last-downscale value \"yesterday\""), "{}", told[1].note);
    }

    /// A force-replicas annotation nothing reads (neither follower nor mirror) is told once on its StatefulSet,
    /// and the group is still done.
    #[test]
    fn an_ignored_force_replicas_is_told_once_as_an_invalid_setting() {
        let (mut reports, mut queue, _) = reporter();
        let a = annotate(zone("a", "r0", "r0"), keys::ROLLOUT_FORCE_REPLICAS, "5");
        let g = snapshot(vec![a.clone()], vec![pod(&a, 0, "r0"), pod(&a, 1, "r0")]);
        assert_eq!(pass(&mut reports, &g, at(0)).state, GroupState::Done);
        pass(&mut reports, &g, at(1));
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("InvalidSetting", "a")], "once: {told:?}");
        assert!(
            told[0].note.starts_with("grafana.com/rollout-force-replicas=5 on StatefulSet a is ignored"),
            "{told:?}"
        );
    }

    #[test]
    fn applied_writes_are_told_per_pass_with_deletions_of_a_zone_in_one_event() {
        let (mut reports, mut queue, _) = reporter();
        let a = statefulset("ingester", "a", 3, "r0");
        let g = snapshot(vec![a.clone()], (0..3).map(|i| pod(&a, i, "r0")).collect());
        let delete = |p: &str| Action::DeletePod {
            statefulset: "a".into(),
            pod: p.into(),
            uid: format!("uid-{p}"),
            reason: "pod is not on update revision r1".into(),
        };
        reports.applied("ingester", &delete("a-0"));
        reports.applied("ingester", &delete("a-1"));
        reports.applied(
            "ingester",
            &Action::Scale {
                statefulset: "a".into(),
                from: 3,
                to: 5,
                reason: "scaling up to match leader".into(),
                resource_version: "1".into(),
                coordinated_downscale: false,
            },
        );
        reports.executed(&g);
        let told = drain(&mut queue);
        assert_eq!(reasons(&told), [("Scaled", "a"), ("ReplacingPods", "a")], "{told:?}");
        assert_eq!(told[1].note, "deleted pods a-0, a-1 to replace them: pod is not on update revision r1");
        assert_eq!(told[1].related.as_ref().map(|r| r.name.as_str()), Some("a-0"));
        assert_eq!(told[1].regarding.uid.as_deref(), Some("uid-a"));
        reports.executed(&g);
        assert!(drain(&mut queue).is_empty(), "each pass's writes are told once");
    }
}
