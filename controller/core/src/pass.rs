//! One whole planning pass over one rollout group: the single entry point that the reconcile loop, `plan`, the
//! model and the simulation all run.
//!
//! Owns every decision of a pass that is not I/O: whether the group downscale record must be read and what an
//! unreadable one means (fail closed for groups the prepare-downscale webhook serves), the rollout plan itself
//! ([`crate::plan`]), whether the shell's mirror step is due and how its findings change the plan, whether the pass
//! must claim its rollout step before deleting pods, and which expectation each write leaves behind depending on
//! its outcome. It must not do I/O or read a clock: the shell reads, calls pods and writes, and passes `now`.
//!
//! The protocol, as the shell drives it:
//! 1. [`record_need`]: read the record or not;
//! 2. [`plan_pass`] with what the read gave ([`RecordRead`]), the group's health gate as last evaluated
//!    ([`HealthGating`]) and the budgets known ([`BudgetScope`]): the deletions that would start a zone the gate does
//!    not let start, and a deletion the budgets would refuse, are held back in the plan, with their wait;
//! 3. if [`Pass::mirror_due`], run the mirror step (reference resources, delayed-downscale pod calls) and hand its
//!    findings to [`Pass::with_mirror`];
//! 4. if [`Pass::claims_rollout_step`], claim the step (conditional on the record version read in 1);
//! 5. execute the actions in order, each leaving [`expectation_after`] its outcome; stop at the first failure.

use crate::defences::{Defences, Layer};
use crate::downscale::{DownscaleInProgress, DownscaleRecord, served_by_prepare_downscale, time_after};
use crate::expectations::{Expectation, PendingExpectation};
use crate::group::GroupSnapshot;
use crate::health_check::{HealthGating, hold_by_health_check};
use crate::plan::{Action, GroupPlan, GroupState, PlanContext, Planner};
use crate::scaling::ScalingError;
use crate::wait::{Wait, WaitReason};
use crate::zpdb::{BudgetScope, hold_of_deletion};
use jiff::Timestamp;
use std::collections::BTreeSet;
use std::time::Duration;

/// How a pass needs the group downscale record (the zone tracker's ConfigMap).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordNeed {
    /// Not read: there is no zone tracker, or nothing in the group depends on the record.
    NotNeeded,
    /// Followers' downscales are checked against it. Unreadable, the pass goes on without it: a follower's claim
    /// reads it again before any downscale.
    Advisory,
    /// The prepare-downscale webhook serves the group: the record's in-progress markers say whether a downscale is
    /// being prepared, so a pass that cannot read it must not replace pods (fail closed).
    Required,
}

/// Whether the zone tracker (`-use-zone-tracker`) is in use for this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneTracker {
    /// Off (the reference's default): no ConfigMap is read or written.
    Off,
    On,
    /// On, but its ConfigMap was refused (403) recently: claims cannot be made, so coordinated downscales are
    /// scaling errors and rollout steps are not claimed (the webhook, with the same rights, denies every downscale).
    Forbidden,
}

/// Which record the pass needs, from the group alone.
pub fn record_need(group: &GroupSnapshot, zone_tracker: ZoneTracker) -> RecordNeed {
    if zone_tracker == ZoneTracker::Off {
        return RecordNeed::NotNeeded;
    }
    if served_by_prepare_downscale(group) {
        RecordNeed::Required
    } else if group.members.iter().any(|m| m.sts.scaling.leader.is_some()) {
        RecordNeed::Advisory
    } else {
        RecordNeed::NotNeeded
    }
}

/// What reading the record gave.
#[derive(Debug, Clone, Copy)]
pub enum RecordRead<'a> {
    /// Not read (not needed).
    NotRead,
    /// No record exists yet: no downscale was ever claimed.
    Absent,
    Read {
        record: &'a DownscaleRecord,
        markers: &'a [DownscaleInProgress],
    },
    /// 403: the webhook (same service account) cannot use the record either, so it denies every downscale and none
    /// can be in progress; the group is rolled without it.
    Forbidden,
    /// Any other failure, as the shell describes it.
    Unreadable {
        error: &'a str,
    },
}

/// Everything a pass decides on besides the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct PassInput<'a> {
    pub now: Timestamp,
    /// The controller's writes its cache has not shown yet (already re-checked at expiry, see
    /// [`expectation_after_expiry`]).
    pub expectations: &'a [PendingExpectation],
    pub zone_tracker: ZoneTracker,
    pub record: RecordRead<'a>,
    /// Replica changes were refused (403), why: due ones are scaling errors instead of the pass's action.
    pub scaling_forbidden: Option<&'a str>,
    /// The defences in depth in force (all of them but in the harness's tests of each layer alone).
    pub defences: Defences,
    /// The ZoneAwarePodDisruptionBudgets and what they select, when the controller honours them: each deletion
    /// the pass plans is judged by them as the controller judges it before deleting.
    pub budgets: Option<BudgetScope<'a>>,
    /// The group's health gate as the shell last evaluated it, or gates off (the feature is off). With gates on,
    /// the deletions that would start a gated zone are held unless it passes (without it: not evaluated yet).
    pub health_gate: HealthGating<'a>,
}

impl<'a> PassInput<'a> {
    /// A pass with no zone tracker, no record and every permission: what `plan` and the rollout model run.
    pub fn new(now: Timestamp, expectations: &'a [PendingExpectation]) -> Self {
        PassInput {
            now,
            expectations,
            zone_tracker: ZoneTracker::Off,
            record: RecordRead::NotRead,
            scaling_forbidden: None,
            defences: Defences::ALL,
            budgets: None,
            health_gate: HealthGating::Off,
        }
    }
}

/// The complete pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pass {
    pub plan: GroupPlan,
    /// Set when the pass must do nothing and count as failed (retried with backoff): why.
    pub failed_closed: Option<String>,
    /// The shell's mirror step must run before the actions, and its findings be applied with [`Pass::with_mirror`].
    pub mirror_due: bool,
    /// The actions delete pods of a group the prepare-downscale webhook serves: the rollout step must be claimed in
    /// the record first, conditional on the version this pass read.
    pub claims_rollout_step: bool,
    /// The gated StatefulSets a passing health gate let roll (and whose deletions the budgets did not hold back):
    /// once the pass's deletions are made, the shell keeps them cleared for the group's current revisions
    /// ([`crate::health_check::GroupGates::cleared`]).
    pub cleared_by_health_check: Vec<String>,
}

/// Why the coordinated downscales of a pass cannot be claimed while the zone tracker is forbidden.
const TRACKER_FORBIDDEN: &str =
    "the zone tracker's ConfigMap is forbidden (grant get, update and create on configmaps)";

/// Plans one pass with the production planner.
pub fn plan_pass(group: &GroupSnapshot, input: &PassInput<'_>) -> Pass {
    plan_pass_with(&crate::plan::RolloutPlanner, group, input)
}

/// Plans one pass with `planner` (tests and the model substitute planners with known bugs).
pub fn plan_pass_with<P: Planner + ?Sized>(planner: &P, group: &GroupSnapshot, input: &PassInput<'_>) -> Pass {
    let need = record_need(group, input.zone_tracker);
    let defences = input.defences;
    let (record, markers): (Option<&DownscaleRecord>, &[DownscaleInProgress]) = match input.record {
        RecordRead::Read { record, markers } => (Some(record), markers),
        RecordRead::Unreadable { error } if need == RecordNeed::Required && defences.has(Layer::RecordFailsClosed) => {
            let why = format!("cannot read the group downscale record: {error}");
            let plan = GroupPlan {
                group: group.name.clone(),
                state: GroupState::Waiting,
                reason: format!(
                    "{why}; no pod is replaced until it can be read (a downscale of the group may be being prepared)"
                ),
                wait: Some(Wait::new(WaitReason::DownscaleRecordUnreadable, None)),
                actions: Vec::new(),
                warnings: Vec::new(),
                scaling_errors: Vec::new(),
            };
            return Pass {
                plan,
                failed_closed: Some(why),
                mirror_due: false,
                claims_rollout_step: false,
                cleared_by_health_check: Vec::new(),
            };
        }
        RecordRead::NotRead | RecordRead::Absent | RecordRead::Forbidden | RecordRead::Unreadable { .. } => (None, &[]),
    };
    let tracker_forbidden =
        input.zone_tracker == ZoneTracker::Forbidden || matches!(input.record, RecordRead::Forbidden);
    // Without the expectations layer the pass plans as if none of its own writes were still unobserved.
    let expectations = if defences.has(Layer::Expectations) { input.expectations } else { &[] };
    let ctx = PlanContext::new(input.now, expectations)
        .with_downscale_record(record)
        .with_downscales_in_progress(markers)
        .with_scaling_forbidden(input.scaling_forbidden)
        .with_coordinated_downscales_forbidden(tracker_forbidden.then_some(TRACKER_FORBIDDEN));
    let mut plan = planner.plan(group, &ctx);
    // The gate first: a zone it holds back spends no budget.
    let mut cleared_by_health_check = hold_by_health_check(&mut plan, group, input.health_gate);
    if let Some(scope) = &input.budgets {
        hold_by_budgets(&mut plan, group, scope, input.now);
    }
    // Cleared only where the pass still deletes: a start the budgets held back is gated again when it comes.
    cleared_by_health_check.retain(|s| {
        plan.actions.iter().any(|a| matches!(a, Action::DeletePod { statefulset, .. } if statefulset == s))
    });
    if let (RecordRead::Unreadable { error }, RecordNeed::Advisory) = (input.record, need) {
        plan.warnings.push(format!("cannot read the group downscale record: {error}"));
    }

    let has_mirrors = group.members.iter().any(|m| matches!(m.sts.scaling.mirror, Some(Ok(_))));
    let nothing_pending = !expectations.iter().any(|e| e.is_pending(group, input.now));
    let plans_scale = plan.actions.iter().any(|a| matches!(a, Action::Scale { .. }));
    let mut mirror_due = false;
    if let (true, Some(why)) = (has_mirrors, input.scaling_forbidden) {
        plan.add_scaling_waits(&[format!("mirror scaling skipped: {why}")]);
    } else {
        // A pass that already changes replicas, or waits for its own writes, leaves mirrors for the next pass.
        mirror_due = has_mirrors && nothing_pending && !plans_scale;
    }
    let deletes = plan.actions.iter().any(|a| matches!(a, Action::DeletePod { .. }));
    let claims_rollout_step = deletes
        && input.zone_tracker != ZoneTracker::Off
        && !tracker_forbidden
        && served_by_prepare_downscale(group)
        && defences.has(Layer::RolloutStepClaims);
    Pass { plan, failed_closed: None, mirror_due, claims_rollout_step, cleared_by_health_check }
}

/// The plan's deletions judged by the budgets in order, as the controller carries them out: the first one held back
/// holds the rest (see [`GroupPlan::held_by_budget`]); the ones before it count as going for the later ones.
fn hold_by_budgets(plan: &mut GroupPlan, group: &GroupSnapshot, scope: &BudgetScope<'_>, now: Timestamp) {
    let mut going = BTreeSet::new();
    let deletions: Vec<(String, String, String)> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { statefulset, pod, uid, .. } => Some((statefulset.clone(), pod.clone(), uid.clone())),
            _ => None,
        })
        .collect();
    for (statefulset, pod, uid) in deletions {
        let rollout_max_unavailable =
            group.member(&statefulset).map_or(1, |m| m.sts.settings.max_unavailable.resolve(m.sts.replicas));
        if let Some(hold) = hold_of_deletion(scope, &statefulset, &pod, rollout_max_unavailable, &going, now) {
            plan.held_by_budget(&hold);
            return;
        }
        going.insert(uid);
    }
}

/// A replica change the mirror step decided (from the reference resource's `scale`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorScale {
    pub statefulset: String,
    pub from: u32,
    pub to: u32,
    pub reason: String,
    /// The StatefulSet's resourceVersion the decision was made from (the patch's precondition).
    pub resource_version: String,
}

/// What the shell's mirror step found for a group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorFindings {
    /// At most one StatefulSet to patch (the first in name order that needs it).
    pub scale: Option<MirrorScale>,
    pub waits: Vec<String>,
    pub errors: Vec<ScalingError>,
}

impl Pass {
    /// The pass once the mirror step's findings are in: errors and waits join the plan's reason, and a replica
    /// change due replaces the rollout step (no pod deletions in a pass that changes replicas: the group's view is
    /// stale once the StatefulSet controller adds or removes pods).
    pub fn with_mirror(mut self, findings: MirrorFindings) -> Pass {
        self.plan.add_scaling_errors(findings.errors);
        self.plan.add_scaling_waits(&findings.waits);
        if let Some(scale) = findings.scale {
            self.plan.reason = format!(
                "scaling {} from {} to {} replicas ({}); no pod deletions in this group in this pass (its view is \
                 stale after a replica change)",
                scale.statefulset, scale.from, scale.to, scale.reason
            );
            self.plan.state = GroupState::Progressing;
            self.plan.wait = None;
            self.plan.actions = vec![Action::Scale {
                statefulset: scale.statefulset,
                from: scale.from,
                to: scale.to,
                reason: scale.reason,
                resource_version: scale.resource_version,
                coordinated_downscale: false,
            }];
            self.claims_rollout_step = false;
        }
        self.mirror_due = false;
        self
    }
}

/// How a write of the pass ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// The API answered success (or, for a deletion, that the pod was already gone).
    Applied,
    /// No answer: the write may or may not have been applied.
    Unknown,
    /// The API refused it: nothing changed.
    Refused,
}

/// How long an unobserved write blocks its group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExpectationLifetimes {
    /// A write the API confirmed: it will show unless a watch event is lost.
    pub applied: Duration,
    /// A write whose outcome is unknown: it may never show, but may still be in flight, so this is longer than a
    /// request can take (the live check at expiry then sees it if it happened).
    pub unknown: Duration,
}

/// The expectation a write leaves behind: planning as if a write that may have happened had not could act twice.
pub fn expectation_after(
    action: &Action,
    outcome: WriteOutcome,
    now: Timestamp,
    lifetimes: &ExpectationLifetimes,
) -> Option<PendingExpectation> {
    let ttl = match outcome {
        WriteOutcome::Applied => lifetimes.applied,
        WriteOutcome::Unknown => lifetimes.unknown,
        WriteOutcome::Refused => return None,
    };
    Some(PendingExpectation { expectation: action.expectation(), expires_at: time_after(now, ttl) })
}

/// What the live object says of a write whose expectation expired unobserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveCheck {
    /// The write happened (the pod is gone or replaced, the StatefulSet moved on): the cache is behind.
    Happened,
    /// It did not happen.
    NotHappened,
    /// The live read failed.
    Unknown,
}

/// An expectation that expired unobserved is not simply dropped: the write may have happened while the cache has
/// not caught up, and planning on that cache would act as if it had not (sim seed 3500). Only a write seen not to
/// have happened is given up on; otherwise it is waited for again, as long as a write of unknown outcome.
pub fn expectation_after_expiry(
    expectation: Expectation,
    check: LiveCheck,
    now: Timestamp,
    lifetimes: &ExpectationLifetimes,
) -> Option<PendingExpectation> {
    match check {
        LiveCheck::NotHappened => None,
        LiveCheck::Happened | LiveCheck::Unknown => {
            Some(PendingExpectation { expectation, expires_at: time_after(now, lifetimes.unknown) })
        }
    }
}

/// Whether a deletion of a claimed rollout step may still be sent at `now`: only while the claim (until
/// `step_until`) outlives the longest the request can be in flight (`request_bound`), since a deletion that commits
/// after the claim expired could land while a downscale it no longer holds off is being prepared.
pub fn may_send_step_deletion(now: Timestamp, step_until: Timestamp, request_bound: Duration) -> bool {
    time_after(now, request_bound) < step_until
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::group::build_groups;
    use crate::keys;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    const LIFETIMES: ExpectationLifetimes =
        ExpectationLifetimes { applied: Duration::from_secs(300), unknown: Duration::from_secs(70) };

    #[test]
    fn each_write_outcome_leaves_its_own_expectation() {
        let delete =
            Action::DeletePod { statefulset: "a".into(), pod: "a-0".into(), uid: "u".into(), reason: String::new() };
        let applied = expectation_after(&delete, WriteOutcome::Applied, t(0), &LIFETIMES).unwrap();
        assert_eq!(applied.expires_at, t(300));
        let unknown = expectation_after(&delete, WriteOutcome::Unknown, t(0), &LIFETIMES).unwrap();
        assert_eq!(unknown.expires_at, t(70));
        assert_eq!(expectation_after(&delete, WriteOutcome::Refused, t(0), &LIFETIMES), None);
    }

    #[test]
    fn an_expired_expectation_is_kept_unless_the_write_is_seen_not_to_have_happened() {
        let e = Expectation::PodDeleted { statefulset: "a".into(), pod: "a-0".into(), uid: "u".into() };
        assert_eq!(expectation_after_expiry(e.clone(), LiveCheck::NotHappened, t(0), &LIFETIMES), None);
        for check in [LiveCheck::Happened, LiveCheck::Unknown] {
            let kept = expectation_after_expiry(e.clone(), check, t(10), &LIFETIMES).unwrap();
            assert_eq!(kept.expires_at, t(80), "{check:?}");
        }
    }

    #[test]
    fn a_step_deletion_is_sent_only_while_its_claim_outlives_the_request() {
        let bound = Duration::from_secs(60);
        assert!(may_send_step_deletion(t(0), t(61), bound));
        assert!(!may_send_step_deletion(t(0), t(60), bound));
        assert!(!may_send_step_deletion(t(30), t(60), bound));
    }

    /// A group of one StatefulSet `a` with `pods` pods on r0 and update revision r1, the webhook serving it or not.
    fn rolling(pods: u32, served: bool) -> GroupSnapshot {
        let mut a = fixture::statefulset("ingester", "a", pods, "r0");
        if let Some(status) = a.status.as_mut() {
            status.update_revision = "r1".to_string();
        }
        if served {
            a = fixture::label(a, keys::PREPARE_DOWNSCALE, "true");
        }
        let pods: Vec<_> = (0..pods).map(|i| fixture::pod(&a, i, "r0")).collect();
        build_groups(vec![a], &pods).remove(0)
    }

    #[test]
    fn the_record_is_needed_only_with_the_tracker_and_required_only_for_webhook_served_groups() {
        let plain = rolling(1, false);
        let served = rolling(1, true);
        assert_eq!(record_need(&plain, ZoneTracker::On), RecordNeed::NotNeeded);
        assert_eq!(record_need(&served, ZoneTracker::On), RecordNeed::Required);
        assert_eq!(record_need(&served, ZoneTracker::Forbidden), RecordNeed::Required);
        assert_eq!(record_need(&served, ZoneTracker::Off), RecordNeed::NotNeeded);
    }

    #[test]
    fn an_unreadable_record_fails_a_webhook_served_group_closed() {
        let group = rolling(2, true);
        let input = PassInput {
            zone_tracker: ZoneTracker::On,
            record: RecordRead::Unreadable { error: "timeout" },
            ..PassInput::new(t(0), &[])
        };
        let pass = plan_pass(&group, &input);
        assert!(pass.plan.actions.is_empty(), "{:?}", pass.plan);
        assert_eq!(pass.failed_closed.as_deref(), Some("cannot read the group downscale record: timeout"));
        // Readable and empty: the rollout goes on, with its step claimed first.
        let input = PassInput { record: RecordRead::Absent, ..input };
        let pass = plan_pass(&group, &input);
        assert_eq!(pass.failed_closed, None);
        assert!(matches!(pass.plan.actions[0], Action::DeletePod { .. }), "{:?}", pass.plan);
        assert!(pass.claims_rollout_step);
        // Forbidden: rolled without the record and without a claim (none can be made).
        let pass = plan_pass(&group, &PassInput { record: RecordRead::Forbidden, ..input });
        assert!(matches!(pass.plan.actions[0], Action::DeletePod { .. }));
        assert!(!pass.claims_rollout_step);
    }

    /// The test-only switches of the pass's defences (`crate::defences`): each removes exactly its layer.
    #[test]
    fn each_defence_of_the_pass_can_be_switched_off_alone() {
        use crate::defences::Layer;
        let group = rolling(2, true);
        let unreadable = PassInput {
            zone_tracker: ZoneTracker::On,
            record: RecordRead::Unreadable { error: "timeout" },
            ..PassInput::new(t(0), &[])
        };
        let open = PassInput { defences: Defences::ALL.without(&[Layer::RecordFailsClosed]), ..unreadable };
        let pass = plan_pass(&group, &open);
        assert_eq!(pass.failed_closed, None);
        assert!(matches!(pass.plan.actions[0], Action::DeletePod { .. }), "{:?}", pass.plan);
        assert!(pass.claims_rollout_step, "the claim is the other layer: still made");
        let unclaimed = PassInput {
            record: RecordRead::Absent,
            defences: Defences::ALL.without(&[Layer::RolloutStepClaims]),
            ..unreadable
        };
        let pass = plan_pass(&group, &unclaimed);
        assert!(matches!(pass.plan.actions[0], Action::DeletePod { .. }));
        assert!(!pass.claims_rollout_step);
        // A deletion not yet observed holds the group, unless the expectations layer is off.
        let Action::DeletePod { statefulset, pod, uid, .. } = pass.plan.actions[0].clone() else { unreachable!() };
        let pending =
            [PendingExpectation { expectation: Expectation::PodDeleted { statefulset, pod, uid }, expires_at: t(300) }];
        let waiting = plan_pass(&group, &PassInput::new(t(0), &pending));
        assert!(waiting.plan.actions.is_empty(), "{:?}", waiting.plan);
        let blind =
            PassInput { defences: Defences::ALL.without(&[Layer::Expectations]), ..PassInput::new(t(0), &pending) };
        assert!(!plan_pass(&group, &blind).plan.actions.is_empty());
    }

    #[test]
    fn a_live_marker_in_the_record_holds_the_rollout() {
        let group = rolling(1, true);
        let record = DownscaleRecord::default();
        let markers = [DownscaleInProgress { statefulset: "a".into(), group: group.name.clone(), until: t(100) }];
        let input = PassInput {
            zone_tracker: ZoneTracker::On,
            record: RecordRead::Read { record: &record, markers: &markers },
            ..PassInput::new(t(50), &[])
        };
        let pass = plan_pass(&group, &input);
        assert!(pass.plan.actions.is_empty());
        assert!(pass.plan.reason.contains("is being prepared"), "{}", pass.plan.reason);
        let pass = plan_pass(&group, &PassInput { now: t(100), ..input });
        assert!(!pass.plan.actions.is_empty(), "the marker expired");
    }

    #[test]
    fn a_mirror_scale_replaces_the_rollout_step_and_its_claim() {
        let group = rolling(1, true);
        let input =
            PassInput { zone_tracker: ZoneTracker::On, record: RecordRead::Absent, ..PassInput::new(t(0), &[]) };
        let pass = plan_pass(&group, &input).with_mirror(MirrorFindings {
            scale: Some(MirrorScale {
                statefulset: "a".into(),
                from: 1,
                to: 3,
                reason: "reference wants 3".into(),
                resource_version: "7".into(),
            }),
            waits: vec!["b: waiting".into()],
            errors: vec![ScalingError::new("c", "broken")],
        });
        assert_eq!(pass.plan.state, GroupState::Progressing);
        assert!(matches!(&pass.plan.actions[..], [Action::Scale { to: 3, .. }]), "{:?}", pass.plan.actions);
        assert!(!pass.claims_rollout_step);
        assert!(pass.plan.reason.starts_with("scaling a from 1 to 3 replicas (reference wants 3)"));
        assert_eq!(pass.plan.scaling_errors, vec![ScalingError::new("c", "broken")]);
    }
}
