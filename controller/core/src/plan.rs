//! The rollout planner: one pass over one rollout group, as a pure function of the snapshot, the expectations and
//! `now`. It returns the actions to take, in order, each with its reason, and the group's state.
//!
//! Rules (the Go operator's, with the divergences of docs/reference/differences.md):
//! - every StatefulSet of the group must use the `OnDelete` update strategy, or the group is blocked;
//! - nothing is decided while one of the controller's own writes is unobserved (expectations);
//! - if more than one StatefulSet is not ready, the group waits; the one not-ready StatefulSet is handled first,
//!   then the others in name order, and a StatefulSet is only touched when every one before it is done;
//! - a paused StatefulSet gets no pod deletions; while it is not ready it still blocks the rest of the group;
//! - outdated pods that are already unavailable are replaced first and cost no budget; available outdated pods are
//!   replaced in natural order while `unavailable < rollout-max-unavailable`; terminating pods are waited for;
//! - once every pod is updated and ready, `status.currentRevision` is advanced to `status.updateRevision`.

pub use crate::actions::{Action, PlanContext};
use crate::downscale::{format_timestamp, live_in_progress};
use crate::execution::{Execution, Need, Observed};
use crate::expectations::PendingExpectation;
use crate::group::{GroupSnapshot, MemberSnapshot};
use crate::keys;
use crate::readiness::Readiness;
use crate::scaling::{ScalingError, plan_scaling};
use crate::wait::{Wait, WaitReason};
use jiff::Timestamp;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GroupState {
    /// Actions are being taken.
    Progressing,
    /// Nothing to do until something happens by itself (pods become ready, the cache catches up).
    Waiting,
    /// Every StatefulSet is on its update revision, ready, with currentRevision advanced.
    Done,
    /// Nothing will happen until a person changes something (strategy, pause annotation).
    Blocked,
}

impl GroupState {
    pub fn as_str(self) -> &'static str {
        match self {
            GroupState::Progressing => "progressing",
            GroupState::Waiting => "waiting",
            GroupState::Done => "done",
            GroupState::Blocked => "blocked",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroupPlan {
    pub group: String,
    pub state: GroupState,
    pub reason: String,
    /// What the group waits for (the part after "then" when it also acts); `None` when nothing holds it. Not in
    /// `plan -o json`, whose shape is documented; `status -o json` shows it.
    #[serde(skip)]
    pub wait: Option<Wait>,
    pub actions: Vec<Action>,
    /// Invalid annotations and similar findings that did not stop planning.
    #[serde(skip)]
    pub warnings: Vec<String>,
    /// Scaling problems, per StatefulSet; they did not stop the rest of the group.
    #[serde(rename = "scalingErrors", skip_serializing_if = "Vec::is_empty")]
    pub scaling_errors: Vec<ScalingError>,
}

impl GroupPlan {
    /// Adds scaling errors found by the shell (mirror resolution, pod calls) to the plan and its reason.
    pub fn add_scaling_errors(&mut self, errors: Vec<ScalingError>) {
        if errors.is_empty() {
            return;
        }
        let joined = errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
        if self.scaling_errors.is_empty() {
            self.reason.push_str("; scaling errors: ");
        } else {
            self.reason.push_str("; ");
        }
        self.reason.push_str(&joined);
        self.scaling_errors.extend(errors);
    }

    /// The plan once the budgets hold back the deletion of `hold.pod`: that deletion and every later one wait for
    /// the next pass (the pods the budget counts must come back first, and deleting others meanwhile could only
    /// spend what the held one waits for); the deletions before it and the other writes stay. The group then waits
    /// on the budget, or acts and then waits on it.
    pub fn held_by_budget(&mut self, hold: &crate::zpdb::BudgetHold) {
        let is_held = |a: &Action| matches!(a, Action::DeletePod { pod, .. } if *pod == hold.pod);
        let Some(at) = self.actions.iter().position(is_held) else { return };
        let mut index = 0;
        self.actions.retain(|a| {
            index += 1;
            index <= at || !matches!(a, Action::DeletePod { .. })
        });
        let held = hold.describe();
        let reason = if self.actions.is_empty() {
            self.state = GroupState::Waiting;
            held
        } else {
            self.state = GroupState::Progressing;
            format!("{}; then {held}", summarize(&self.actions))
        };
        self.reason = with_scaling_errors(reason, &self.scaling_errors);
        self.wait = Some(Wait::on(WaitReason::HeldByBudget, &hold.statefulset));
    }

    /// The plan once a RolloutHealthCheck holds back the deletions of `statefulset` (its start, or with `started`
    /// its further replacements): they wait (the other writes stay), and the group waits on the gate, or acts and
    /// then waits on it.
    pub fn held_by_health_check(&mut self, statefulset: &str, started: bool, why: &str) {
        let before = self.actions.len();
        self.actions.retain(|a| !matches!(a, Action::DeletePod { statefulset: s, .. } if s == statefulset));
        if self.actions.len() == before {
            return;
        }
        let held = format!("StatefulSet {statefulset} {}: {why}", crate::health_check::targets::held_phrase(started));
        let reason = if self.actions.is_empty() {
            self.state = GroupState::Waiting;
            held
        } else {
            self.state = GroupState::Progressing;
            format!("{}; then {held}", summarize(&self.actions))
        };
        self.reason = with_scaling_errors(reason, &self.scaling_errors);
        self.wait = Some(Wait::on(WaitReason::HeldByHealthCheck, statefulset));
    }

    /// Adds scaling that is due but waits (found by the shell); a group that was done is then waiting.
    pub fn add_scaling_waits(&mut self, waits: &[String]) {
        for wait in waits {
            self.reason.push_str("; ");
            self.reason.push_str(wait);
        }
        if !waits.is_empty() && self.state == GroupState::Done {
            self.state = GroupState::Waiting;
            self.wait = Some(Wait::new(WaitReason::ScalingScheduled, None));
        }
    }
}

/// Decides one pass over a rollout group. The production planner is [`RolloutPlanner`]; tests and the model
/// substitute others through this trait.
pub trait Planner {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan;

    /// The next need of a plan's execution, given what the last one gave: the core's machine, unchanged. Only test
    /// planners that put a known execution bug back override it, so the model and the simulation show they catch it.
    fn next_need(&self, execution: &mut Execution, observed: Observed, now: Timestamp) -> Need {
        execution.step(observed, now)
    }
}

/// The production planner.
#[derive(Debug, Clone, Copy, Default)]
pub struct RolloutPlanner;

impl Planner for RolloutPlanner {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        plan_group(group, ctx)
    }
}

/// Why the walk over a group's StatefulSets stopped early: something must happen before it can go on.
struct Halt(Wait, String);

/// The class of a wait for a StatefulSet's pods: missing ones first (nothing else can help them).
fn pods_wait(sts: &str, readiness: &Readiness) -> Wait {
    Wait::on(if readiness.missing > 0 { WaitReason::PodsMissing } else { WaitReason::PodsNotReady }, sts)
}

pub fn plan_group(group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
    let mut warnings = group.warnings.clone();
    for m in &group.members {
        warnings.extend(m.sts.settings.errors.iter().map(ToString::to_string));
        warnings.extend(crate::scaling::ignored_force_replicas(&m.sts));
    }
    let mut scaling_errors: Vec<ScalingError> = Vec::new();
    let finish = |state, reason: String, wait, actions, warnings, scaling_errors: &Vec<ScalingError>| GroupPlan {
        group: group.name.clone(),
        state,
        reason: with_scaling_errors(reason, scaling_errors),
        wait,
        actions,
        warnings,
        scaling_errors: scaling_errors.clone(),
    };

    let pending: Vec<&PendingExpectation> = ctx.expectations.iter().filter(|e| e.is_pending(group, ctx.now)).collect();
    if let Some(first) = pending.first() {
        let reason = format!(
            "waiting for the cache to observe {}{}",
            first.expectation.describe(),
            if pending.len() > 1 { format!(" and {} more of our writes", pending.len() - 1) } else { String::new() }
        );
        let wait = Wait::on(WaitReason::OwnWrites, first.expectation.statefulset());
        return finish(GroupState::Waiting, reason, Some(wait), Vec::new(), warnings, &scaling_errors);
    }

    // Scaling first (reference 3). A pass that changes replicas does nothing else in the group: the snapshot is
    // stale once the StatefulSet controller starts adding or removing pods.
    let scaling = plan_scaling(group, ctx);
    scaling_errors = scaling.errors;
    if let Some(scale) = scaling.scale {
        let mut reason = format!(
            "{}; no pod deletions in this group in this pass (its view is stale after a replica change)",
            summarize(std::slice::from_ref(&scale))
        );
        for wait in &scaling.waits {
            reason.push_str("; ");
            reason.push_str(wait);
        }
        return finish(GroupState::Progressing, reason, None, vec![scale], warnings, &scaling_errors);
    }
    let scaling_waits = scaling.waits;
    if let Some(m) = group.members.iter().find(|m| m.sts.update_strategy != keys::ON_DELETE) {
        let reason = format!(
            "StatefulSet {} has {} update strategy while OnDelete is expected, skipping reconcile",
            m.sts.name, m.sts.update_strategy
        );
        let wait = Wait::on(WaitReason::UpdateStrategy, &m.sts.name);
        return finish(GroupState::Blocked, reason, Some(wait), Vec::new(), warnings, &scaling_errors);
    }
    if let Some(marker) = live_in_progress(ctx.downscales_in_progress, &group.name, None, ctx.now) {
        let reason = format!(
            "a downscale of StatefulSet {} is being prepared (until {} at the latest); no pod is replaced meanwhile",
            marker.statefulset,
            format_timestamp(marker.until)
        );
        let wait = Wait::on(WaitReason::DownscaleInProgress, &marker.statefulset);
        return finish(GroupState::Waiting, reason, Some(wait), Vec::new(), warnings, &scaling_errors);
    }
    if let Some(m) = group.members.iter().find(|m| m.sts.status.is_none()) {
        let reason = format!("waiting for StatefulSet {} to report a status", m.sts.name);
        let wait = Wait::on(WaitReason::StatusNotCurrent, &m.sts.name);
        return finish(GroupState::Waiting, reason, Some(wait), Vec::new(), warnings, &scaling_errors);
    }

    let readiness: Vec<Readiness> = group.members.iter().map(|m| Readiness::of(m, ctx.now)).collect();
    let not_ready: Vec<usize> = (0..group.members.len()).filter(|&i| !readiness[i].is_ready()).collect();
    if not_ready.len() > 1 {
        let detail = not_ready
            .iter()
            .map(|&i| format!("{} ({})", group.members[i].sts.name, readiness[i].describe()))
            .collect::<Vec<_>>()
            .join(", ");
        let reason =
            format!("{} StatefulSets have not-ready pods, waiting until at most one does: {detail}", not_ready.len());
        let wait = Wait::on(WaitReason::SeveralNotReady, &group.members[not_ready[0]].sts.name);
        return finish(GroupState::Waiting, reason, Some(wait), Vec::new(), warnings, &scaling_errors);
    }
    // The one not-ready StatefulSet (if any) goes first; the others keep name order.
    let mut order: Vec<usize> = not_ready.clone();
    order.extend((0..group.members.len()).filter(|i| !not_ready.contains(i)));

    let mut actions = Vec::new();
    let mut paused_outdated: Vec<(String, String)> = Vec::new();
    let mut stop = None;
    for i in order {
        match plan_member(&group.members[i], &readiness[i], ctx.now, &mut actions) {
            MemberOutcome::Settled => {}
            MemberOutcome::PausedOutdated(n) => {
                let name = &group.members[i].sts.name;
                paused_outdated.push((name.clone(), format!("{name} ({} not on the update revision)", count_pods(n))))
            }
            MemberOutcome::Stop(s) => {
                stop = Some(s);
                break;
            }
        }
    }

    // Deletions go first: the rollout waits on them, while a settled StatefulSet's currentRevision is bookkeeping
    // that no deletion depends on (each action stands on this snapshot alone). The shell runs the plan in order,
    // so a status write ahead of them would add its round trip to every step that ends a zone.
    actions.sort_by_key(|a| matches!(a, Action::SetCurrentRevision { .. }));

    let scaling_note = |mut reason: String| {
        for wait in &scaling_waits {
            reason.push_str("; ");
            reason.push_str(wait);
        }
        reason
    };
    if !actions.is_empty() {
        let mut reason = summarize(&actions);
        let mut wait = None;
        if let Some(Halt(w, r)) = stop {
            reason.push_str("; then ");
            reason.push_str(&r);
            wait = Some(w);
        }
        return finish(GroupState::Progressing, scaling_note(reason), wait, actions, warnings, &scaling_errors);
    }
    match stop {
        Some(Halt(w, r)) => finish(GroupState::Waiting, scaling_note(r), Some(w), actions, warnings, &scaling_errors),
        None if !paused_outdated.is_empty() => {
            let names: Vec<&str> = paused_outdated.iter().map(|(_, d)| d.as_str()).collect();
            let reason = format!("rollout paused ({}=true) on {}", keys::ROLLOUT_PAUSED, names.join(", "));
            let wait = Wait::on(WaitReason::Paused, &paused_outdated[0].0);
            finish(GroupState::Blocked, scaling_note(reason), Some(wait), actions, warnings, &scaling_errors)
        }
        // Rolled out, but a replica change is still due: not done until it happens.
        None if !scaling_waits.is_empty() => {
            let reason =
                format!("all StatefulSets are on their update revision and ready; {}", scaling_waits.join("; "));
            let wait = Wait::new(WaitReason::ScalingScheduled, None);
            finish(GroupState::Waiting, reason, Some(wait), actions, warnings, &scaling_errors)
        }
        None => {
            let reason = "all StatefulSets are on their update revision and ready".to_string();
            finish(GroupState::Done, reason, None, actions, warnings, &scaling_errors)
        }
    }
}

/// Scaling errors are part of the plan's reason, so people see them wherever the reason is shown.
fn with_scaling_errors(mut reason: String, errors: &[ScalingError]) -> String {
    if !errors.is_empty() {
        reason.push_str("; scaling errors: ");
        reason.push_str(&errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "));
    }
    reason
}

enum MemberOutcome {
    /// Nothing more to do here; the next StatefulSet may proceed.
    Settled,
    /// Paused and ready, with this many outdated pods left alone; the next StatefulSet may proceed.
    PausedOutdated(usize),
    /// The walk ends at this StatefulSet (it is being rolled, or must become ready first).
    Stop(Halt),
}

fn plan_member(
    member: &MemberSnapshot,
    readiness: &Readiness,
    now: Timestamp,
    actions: &mut Vec<Action>,
) -> MemberOutcome {
    let sts = &member.sts;
    let Some(status) = sts.status.as_ref() else {
        let wait = Wait::on(WaitReason::StatusNotCurrent, &sts.name);
        return MemberOutcome::Stop(Halt(wait, format!("waiting for StatefulSet {} to report a status", sts.name)));
    };
    if readiness.status_stale {
        return MemberOutcome::Stop(Halt(
            Wait::on(WaitReason::StatusNotCurrent, &sts.name),
            format!(
                "waiting for the StatefulSet controller to observe generation {} of {}",
                sts.generation.unwrap_or_default(),
                sts.name
            ),
        ));
    }
    if status.update_revision.is_empty() {
        return MemberOutcome::Stop(Halt(
            Wait::on(WaitReason::StatusNotCurrent, &sts.name),
            format!("waiting for StatefulSet {} to report status.updateRevision", sts.name),
        ));
    }
    let update_revision = status.update_revision.as_str();
    let outdated: Vec<_> = member.pods.iter().filter(|p| p.revision() != Some(update_revision)).collect();

    if sts.settings.paused {
        if !readiness.is_ready() {
            return MemberOutcome::Stop(Halt(
                Wait::on(WaitReason::Paused, &sts.name),
                format!(
                    "StatefulSet {} is paused and not ready ({}); the rest of the group waits",
                    sts.name,
                    readiness.describe()
                ),
            ));
        }
        if !outdated.is_empty() {
            return MemberOutcome::PausedOutdated(outdated.len());
        }
        // Pausing stops pod deletions only: a paused StatefulSet that is fully updated still gets its revision.
    }

    if !outdated.is_empty() {
        let max_unavailable = sts.settings.max_unavailable.resolve(sts.replicas);
        let unavailable = readiness.unavailable();
        let before = actions.len();
        // Replacing a pod that is already unavailable costs nothing: it is not serving either way, and leaving it
        // (a crash loop on the old revision) would stall the rollout forever. Only a pod that is not Ready at all
        // counts: one Ready but still within minReadySeconds is about to serve (by the time the deletion lands, it
        // may), so it waits for the budget like an available one (sim seed 1468).
        for pod in outdated.iter().filter(|p| !p.is_terminating() && !p.is_available(0, now)) {
            actions.push(Action::DeletePod {
                statefulset: sts.name.clone(),
                pod: pod.name.clone(),
                uid: pod.uid.clone(),
                reason: format!(
                    "pod is not on update revision {update_revision} and is already unavailable; replacing it does not reduce availability"
                ),
            });
        }
        let budget = max_unavailable.saturating_sub(unavailable) as usize;
        for pod in outdated.iter().filter(|p| p.is_available(sts.min_ready_seconds, now)).take(budget) {
            actions.push(Action::DeletePod {
                statefulset: sts.name.clone(),
                pod: pod.name.clone(),
                uid: pod.uid.clone(),
                reason: format!(
                    "pod is not on update revision {update_revision}; {unavailable} of max {max_unavailable} pods unavailable before this pass"
                ),
            });
        }
        let deleted = actions.len() - before;
        let terminating = outdated.iter().filter(|p| p.is_terminating()).count();
        let remaining = outdated.len() - deleted - terminating;
        let halt = if remaining == 0 && terminating == 0 {
            Halt(pods_wait(&sts.name, readiness), format!("waiting for replaced pods of {} to become ready", sts.name))
        } else if remaining == 0 {
            Halt(
                Wait::on(WaitReason::PodsTerminating, &sts.name),
                format!("waiting for {terminating} terminating {} of {} to go away", pods_word(terminating), sts.name),
            )
        } else {
            Halt(
                pods_wait(&sts.name, readiness),
                format!(
                    "{} has {remaining} more {} to update but max unavailable ({max_unavailable}) has been reached; waiting for pods to become ready",
                    sts.name,
                    pods_word(remaining)
                ),
            )
        };
        return MemberOutcome::Stop(halt);
    }
    if !readiness.is_ready() {
        return MemberOutcome::Stop(Halt(
            pods_wait(&sts.name, readiness),
            format!("StatefulSet {} pods are all updated but it is not ready: {}", sts.name, readiness.describe()),
        ));
    }
    if status.current_revision != status.update_revision {
        actions.push(Action::SetCurrentRevision {
            statefulset: sts.name.clone(),
            revision: status.update_revision.clone(),
            resource_version: sts.resource_version.clone(),
            reason: format!("all {} pods are on revision {update_revision} and ready", readiness.expected),
        });
    }
    MemberOutcome::Settled
}

/// One line for people: what this pass does.
fn summarize(actions: &[Action]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let deletions: Vec<&str> = actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { pod, .. } => Some(pod.as_str()),
            _ => None,
        })
        .collect();
    for a in actions {
        match a {
            Action::SetCurrentRevision { statefulset, revision, .. } => {
                parts.push(format!("advancing currentRevision of {statefulset} to {revision}"))
            }
            Action::Scale { statefulset, from, to, reason, .. } => {
                parts.push(format!("scaling {statefulset} from {from} to {to} replicas ({reason})"))
            }
            Action::DeletePod { .. } => {}
        }
    }
    if let Some(first) = actions.iter().find(|a| matches!(a, Action::DeletePod { .. })) {
        parts.push(format!(
            "replacing {} of {}: {}",
            count_pods(deletions.len()),
            first.statefulset(),
            deletions.join(", ")
        ));
    }
    parts.join("; ")
}

/// `1 pod`, `2 pods`.
fn count_pods(n: usize) -> String {
    format!("{n} {}", pods_word(n))
}

fn pods_word(n: usize) -> &'static str {
    if n == 1 { "pod" } else { "pods" }
}
