//! Test-only planners (and eviction deciders) that re-introduce, one at a time, failures of the reference operator
//! or of designs we rejected. Each wraps the production code and changes only what the bug changed. The model
//! checker and the simulator use them to show that they catch real bugs; production code never depends on this
//! crate.

use jiff::Timestamp;
use rollout_core::execution::{
    Execution, Need as ExecutionNeed, Observed as ExecutionObserved, Outcome as ExecutionOutcome,
};
use rollout_core::fixture;
use rollout_core::zpdb::{EvictPod, EvictionVerdict, KnownBudgets, Need, Observed, Outcome};
use rollout_core::{GroupPlan, GroupSnapshot, PlanContext, Planner, RolloutPlanner};

/// Readiness taken from the StatefulSet's status counts (the reference before v0.13.0): when `readyReplicas`
/// says everything is ready, missing pods and unready pods are not noticed.
pub struct StatusCountReadiness;

impl Planner for StatusCountReadiness {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            let Some(status) = m.sts.status.clone() else { continue };
            if status.ready_replicas < status.replicas {
                continue;
            }
            // The status says "all ready": present every pod as ready (keeping its identity), and the missing ones as
            // ready updated pods.
            for p in &mut m.pods {
                *p = as_ready(&m.sts, p);
            }
            for i in 0..m.sts.replicas {
                if !m.pods.iter().any(|p| ordinal(&m.sts.name, &p.name) == i) {
                    m.pods.push(fixture::pod(&m.sts, i, &status.update_revision));
                }
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// A paused StatefulSet is skipped even while it has unavailable pods (reference bug 9.2-F).
pub struct PausedLetsOthersProceed;

impl Planner for PausedLetsOthersProceed {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in group.members.iter_mut().filter(|m| m.sts.settings.paused) {
            let update = m.sts.status.as_ref().map(|s| s.update_revision.clone()).unwrap_or_default();
            let present: Vec<u32> = m.pods.iter().map(|p| ordinal(&m.sts.name, &p.name)).collect();
            for p in &mut m.pods {
                *p = as_ready(&m.sts, p);
            }
            for i in (0..m.sts.replicas).filter(|i| !present.contains(i)) {
                m.pods.push(fixture::pod(&m.sts, i, &update));
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// No expectations and no uid preconditions (the reference had neither): plans on a stale cache act as if the
/// controller's own recent writes had not happened.
pub struct NoExpectations;

impl Planner for NoExpectations {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut plan = RolloutPlanner.plan(group, &PlanContext::new(ctx.now, &[]));
        for a in &mut plan.actions {
            if let rollout_core::Action::DeletePod { uid, .. } = a {
                uid.clear();
            }
        }
        plan
    }
}

/// Terminating pods that still report Ready count as ready (the reference before v0.1.2).
pub struct TerminatingCountsAsReady;

impl Planner for TerminatingCountsAsReady {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for p in group.members.iter_mut().flat_map(|m| m.pods.iter_mut()) {
            p.deletion_timestamp = None;
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// The same pod (name, uid, revision) presented as running and Ready: the bug misjudges readiness, not identity, so
/// a deletion it plans still carries the real pod's uid precondition.
fn as_ready(sts: &rollout_core::StatefulSetView, p: &rollout_core::PodView) -> rollout_core::PodView {
    let mut ready = fixture::pod(sts, ordinal(&sts.name, &p.name), p.revision().unwrap_or_default());
    ready.uid = p.uid.clone();
    ready
}

fn ordinal(sts: &str, pod: &str) -> u32 {
    rollout_core::natural::pod_ordinal(sts, pod).unwrap_or(u32::MAX)
}

/// The controller's follower downscales ignore the min time between zone downscales and the group downscale record
/// (the reference with `-use-zone-tracker`: its controller-side check read only the `last-downscale` annotations,
/// which nobody wrote any more, and it never recorded its own downscales).
pub struct SkipsMinTimeCheck;

impl Planner for SkipsMinTimeCheck {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            m.sts.downscale.min_time_between_zones = None;
        }
        let mut plan = RolloutPlanner.plan(&group, &PlanContext::new(ctx.now, ctx.expectations));
        for a in &mut plan.actions {
            if let rollout_core::Action::Scale { coordinated_downscale, .. } = a {
                *coordinated_downscale = false;
            }
        }
        plan
    }
}

/// Ignores the prepare-downscale webhook's in-progress markers (no rollout step while a downscale is prepared): pods
/// are replaced while a downscale of the group is being prepared.
pub struct IgnoresDownscalesInProgress;

impl Planner for IgnoresDownscalesInProgress {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        RolloutPlanner.plan(group, &PlanContext { downscales_in_progress: &[], ..*ctx })
    }
}

/// Missing pods spend no unavailability budget: a pod that has terminated and is not yet recreated is not counted
/// as unavailable (as if readiness were counted over existing pods only), so the next pod of the zone is deleted
/// while the previous one is still missing.
pub struct MissingPodsSpendNoBudget;

impl Planner for MissingPodsSpendNoBudget {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            let update = m.sts.status.as_ref().map(|s| s.update_revision.clone()).unwrap_or_default();
            // Only while the zone still has pods to replace: the bug is in the replacement budget, not in when a
            // zone counts as rolled out.
            if !m.pods.iter().any(|p| p.revision().is_some_and(|r| r != update)) {
                continue;
            }
            let present: Vec<u32> = m.pods.iter().map(|p| ordinal(&m.sts.name, &p.name)).collect();
            for i in (0..m.sts.replicas).filter(|i| !present.contains(i)) {
                m.pods.push(fixture::pod(&m.sts, i, &update));
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// Follower downscales are not held by the rest of the group (no downscale during a rollout, the controller's own
/// downscales): the scaling decision is taken as if every StatefulSet of the group were rolled out and Ready.
pub struct DownscalesDuringRollouts;

impl Planner for DownscalesDuringRollouts {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let real = RolloutPlanner.plan(group, ctx);
        if real.actions.iter().any(|a| matches!(a, rollout_core::Action::Scale { .. })) {
            return real;
        }
        let mut settled = group.clone();
        for m in &mut settled.members {
            let Some(status) = m.sts.status.as_mut() else { continue };
            status.current_revision = status.update_revision.clone();
            status.observed_generation = m.sts.generation;
            let update = status.update_revision.clone();
            let present: Vec<u32> = m.pods.iter().map(|p| ordinal(&m.sts.name, &p.name)).collect();
            for p in &mut m.pods {
                let uid = p.uid.clone();
                *p = fixture::pod(&m.sts, ordinal(&m.sts.name, &p.name), &update);
                p.uid = uid;
            }
            for i in (0..m.sts.replicas).filter(|i| !present.contains(i)) {
                m.pods.push(fixture::pod(&m.sts, i, &update));
            }
        }
        let blind = RolloutPlanner.plan(&settled, ctx);
        let downscale =
            blind.actions.into_iter().find(|a| matches!(a, rollout_core::Action::Scale { from, to, .. } if to < from));
        match downscale {
            Some(scale) => GroupPlan { actions: vec![scale], ..real },
            None => real,
        }
    }
}

/// `rollout-max-unavailable` given as a percentage read as a count (`40%` as 40 pods at a time).
pub struct PercentAsCount;

impl Planner for PercentAsCount {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            if let rollout_core::MaxUnavailable::Percent(p) = m.sts.settings.max_unavailable {
                m.sts.settings.max_unavailable = rollout_core::MaxUnavailable::Count(p);
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// `spec.minReadySeconds` ignored: a pod counts as available the moment it is Ready.
pub struct IgnoresMinReadySeconds;

impl Planner for IgnoresMinReadySeconds {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            m.sts.min_ready_seconds = 0;
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

// ---- Test-only evictors: each wraps one step of the production eviction decision
// (`rollout_core::zpdb::EvictPod::step`) and changes only what the bug changed. Their signature is the model's
// `rollout_model::zpdb::Evictor`.

/// Skips the ZoneAwarePodDisruptionBudget check: the budgets are read as if none selected the pod, so every
/// eviction is "not in scope" and allowed (as a shell that failed to load its budgets and allowed anyway would).
pub fn skips_the_budget_check(flow: &mut EvictPod, observed: Observed, now: Timestamp) -> Need {
    match observed {
        Observed::Budgets(_) => flow.step(Observed::Budgets(KnownBudgets::Known(Vec::new())), now),
        other => flow.step(other, now),
    }
}

/// Checks the budget without serialising: the intent is never written (the flow is told it was), so two decisions
/// that judge the same budget at once each see nothing of the other.
pub fn writes_no_intent(flow: &mut EvictPod, observed: Observed, now: Timestamp) -> Need {
    match flow.step(observed, now) {
        Need::WriteIntent { .. } => flow.step(Observed::IntentWritten(Ok(())), now),
        need => need,
    }
}

/// Writes its intent but answers on its first judgement, without the second read that would see a rival's intent
/// written meanwhile.
pub fn skips_the_second_read(flow: &mut EvictPod, observed: Observed, now: Timestamp) -> Need {
    match flow.step(observed, now) {
        Need::PodsAgain { .. } => {
            Need::Answer(EvictionVerdict::allow_with_message(Outcome::ALLOWED, "allowed on the first read"))
        }
        need => need,
    }
}

/// The rollout step is finished after a deletion whose answer was lost (a design we rejected: "the pass is over, so
/// its step is"). The deletion may still commit after the step's end, while the prepare-downscale webhook, seeing no
/// step, prepares a downscale in another zone.
pub struct FinishesStepWhileOutcomeUnknown;

impl Planner for FinishesStepWhileOutcomeUnknown {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        RolloutPlanner.plan(group, ctx)
    }

    fn next_need(&self, execution: &mut Execution, observed: ExecutionObserved, now: Timestamp) -> ExecutionNeed {
        let claimed = execution.step_claimed_until();
        let need = execution.step(observed, now);
        match (&need, claimed) {
            (ExecutionNeed::Done(finished), Some(until)) if matches!(&finished.outcome, ExecutionOutcome::Failed(f) if f.outcome_unknown()) => {
                ExecutionNeed::FinishStep { until }
            }
            _ => need,
        }
    }
}
