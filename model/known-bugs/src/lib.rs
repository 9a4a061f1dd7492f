//! Test-only planners (and eviction deciders) that re-introduce, one at a time, failures of the reference operator
//! or of designs we rejected. Each wraps the production code and changes only what the bug changed. The model
//! checker and the simulator use them to show that they catch real bugs; production code never depends on this
//! crate.

use jiff::Timestamp;
use rollout_core::execution::{
    DownscaleClaimed, Execution, Need as ExecutionNeed, Observed as ExecutionObserved, Outcome as ExecutionOutcome,
    StepClaimed,
};
use rollout_core::fixture;
use rollout_core::health_check::{
    self, Answer, GateTarget, GateTimes, GateVerdict, HealthCheckConfig, Policy, QueryRequest, Targets,
};
use rollout_core::keys;
use rollout_core::zpdb::{EvictPod, EvictionVerdict, KnownBudgets, Need, Observed, Outcome};
use rollout_core::{GroupPlan, GroupSnapshot, PlanContext, Planner, RolloutPlanner};
use std::collections::BTreeSet;

/// Readiness taken from the StatefulSet's status counts (the reference before v0.13.0): when `readyReplicas`
/// says everything is ready, missing pods and unready pods are not noticed.
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
pub struct IgnoresDownscalesInProgress;

impl Planner for IgnoresDownscalesInProgress {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        RolloutPlanner.plan(group, &PlanContext { downscales_in_progress: &[], ..*ctx })
    }
}

/// Missing pods spend no unavailability budget: a pod that has terminated and is not yet recreated is not counted
/// as unavailable (as if readiness were counted over existing pods only), so the next pod of the zone is deleted
/// while the previous one is still missing.
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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
#[derive(Debug, Clone, Copy)]
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

/// Until when a claim the shell never made is taken to hold, by the planners that misread a refusal as a claim.
fn claimed_until(now: Timestamp) -> Timestamp {
    now + jiff::SignedDuration::from_secs(90)
}

/// A rollout step claim refused as stale (the record moved since the pass read it) taken as made: the pass deletes
/// as planned. What moved the record may be the prepare-downscale webhook's in-progress marker, written after the
/// pass's read: the deletion then lands while a downscale of another zone is being prepared.
#[derive(Debug, Clone, Copy)]
pub struct DeletesOnAStaleStepClaim;

impl Planner for DeletesOnAStaleStepClaim {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        RolloutPlanner.plan(group, ctx)
    }

    fn next_need(&self, execution: &mut Execution, observed: ExecutionObserved, now: Timestamp) -> ExecutionNeed {
        let observed = match observed {
            ExecutionObserved::StepClaimed(Ok(StepClaimed::Stale)) => {
                ExecutionObserved::StepClaimed(Ok(StepClaimed::Claimed { until: claimed_until(now) }))
            }
            observed => observed,
        };
        execution.step(observed, now)
    }
}

/// A follower's downscale claim refused (another downscale or a rollout step holds the record, or the min time has
/// not elapsed) taken as made: the replicas are patched anyway, with no entry in the record.
#[derive(Debug, Clone, Copy)]
pub struct PatchesOnARefusedDownscaleClaim;

impl Planner for PatchesOnARefusedDownscaleClaim {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        RolloutPlanner.plan(group, ctx)
    }

    fn next_need(&self, execution: &mut Execution, observed: ExecutionObserved, now: Timestamp) -> ExecutionNeed {
        let observed = match observed {
            ExecutionObserved::DownscaleClaimed(Ok(DownscaleClaimed::Refused(_))) => {
                ExecutionObserved::DownscaleClaimed(Ok(DownscaleClaimed::Claimed {
                    previous: None,
                    until: claimed_until(now),
                }))
            }
            observed => observed,
        };
        execution.step(observed, now)
    }
}

/// A downscale's claim given back after its replica patch's answer was lost, as after a definite failure ("the
/// patch failed, so the downscale did not happen"). The patch may have committed: the record then says the zone was
/// not downscaled, and another zone's downscale is let through within the min time.
#[derive(Debug, Clone, Copy)]
pub struct GivesBackAClaimWhoseOutcomeIsUnknown;

impl Planner for GivesBackAClaimWhoseOutcomeIsUnknown {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        RolloutPlanner.plan(group, ctx)
    }

    fn next_need(&self, execution: &mut Execution, observed: ExecutionObserved, now: Timestamp) -> ExecutionNeed {
        let scaling = matches!(execution.current_action(), Some(rollout_core::Action::Scale { .. }));
        let observed = match observed {
            ExecutionObserved::Written(Err(f)) if scaling && f.outcome_unknown() => {
                ExecutionObserved::Written(Err(rollout_core::Failure::Conflict(f.message().to_string())))
            }
            observed => observed,
        };
        execution.step(observed, now)
    }
}

/// `status.observedGeneration` ignored: every StatefulSet's status is taken to describe its latest spec, so a
/// template push the StatefulSet controller has not observed yet looks like a settled StatefulSet (its pods all on
/// the status's stale `updateRevision`).
#[derive(Debug, Clone, Copy)]
pub struct IgnoresObservedGeneration;

impl Planner for IgnoresObservedGeneration {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            let generation = m.sts.generation;
            if let Some(status) = m.sts.status.as_mut() {
                status.observed_generation = generation;
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// Readiness counted by number (the bug sim seeds 62 and 112 found, scale-downs interleaved with a rollout): a
/// Ready pod above `spec.replicas`, condemned by a scale-down and kept by OrderedReady until every kept pod is Ready,
/// is presented in the slot of a missing kept pod, so the StatefulSet looks complete. Only pods on the update
/// revision stand in (so none is planned for deletion under its borrowed name).
#[derive(Debug, Clone, Copy)]
pub struct CondemnedPodFillsMissingSlot;

impl Planner for CondemnedPodFillsMissingSlot {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            let update = m.sts.status.as_ref().map(|s| s.update_revision.clone()).unwrap_or_default();
            let prefix = format!("{}-", m.sts.name);
            let ordinal = |name: &str| name.strip_prefix(&prefix).and_then(|o| o.parse::<u32>().ok());
            let present: Vec<u32> = m.pods.iter().filter_map(|p| ordinal(&p.name)).collect();
            let mut missing = (0..m.sts.replicas).filter(|i| !present.contains(i));
            for p in &mut m.pods {
                let condemned = ordinal(&p.name).is_some_and(|o| o >= m.sts.replicas);
                if condemned && p.revision() == Some(update.as_str()) && p.is_available(0, ctx.now) {
                    let Some(slot) = missing.next() else { break };
                    p.name = format!("{prefix}{slot}");
                }
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// Availability read from the Ready condition alone: a pod whose sidecar has crashed, while the kubelet still
/// reports it Ready, counts as serving.
#[derive(Debug, Clone, Copy)]
pub struct IgnoresContainerReadiness;

impl Planner for IgnoresContainerReadiness {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for p in group.members.iter_mut().flat_map(|m| m.pods.iter_mut()) {
            if p.container_count > 0 {
                p.containers_ready_and_running = true;
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// Followers scale up to their leader at once, ignoring `grafana.com/rollout-upscale-only-when-leader-ready`.
#[derive(Debug, Clone, Copy)]
pub struct UpscalesBeforeLeaderReady;

impl Planner for UpscalesBeforeLeaderReady {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            m.sts.scaling.upscale_only_when_leader_ready = false;
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// The min-time check off by one second: every last downscale (the group record's entries and the
/// `grafana.com/last-downscale` annotations) is read a second early, as rounding a date down instead of up (or
/// counting elapsed whole seconds up) would. The planner is the controller's half; the webhook's half is
/// [`min_time_checked_a_second_late`], the clock the simulation gives the real webhook router with this planner. The
/// controller's shell re-checks the min time (the same `check_min_time`) when it claims a follower downscale in the
/// record, so the planner's half alone is masked: what the simulation catches is the webhook's.
#[derive(Debug, Clone, Copy)]
pub struct MinTimeSecondEarly;

impl Planner for MinTimeSecondEarly {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let second = jiff::SignedDuration::from_secs(1);
        let mut group = group.clone();
        for m in &mut group.members {
            if let Some(Ok(at)) = m.sts.downscale.last_downscale.as_mut() {
                *at = at.checked_sub(second).unwrap_or(*at);
            }
        }
        let record = ctx.downscale_record.map(|r| {
            let mut r = r.clone();
            for at in r.last_downscaled.values_mut() {
                *at = at.checked_sub(second).unwrap_or(*at);
            }
            r
        });
        RolloutPlanner.plan(&group, &PlanContext { downscale_record: record.as_ref(), ..*ctx })
    }
}

/// The webhook's half of [`MinTimeSecondEarly`]: the time its min-time check (and everything else it dates) is asked
/// at, a second after `now`.
pub fn min_time_checked_a_second_late(now: Timestamp) -> Timestamp {
    now + jiff::SignedDuration::from_secs(1)
}

// ---- Test-only health gates: each replaces one seam of the shell's gate (the rollout model's `GateShell`: which
// gate the pass meets, and how one evaluation runs) and changes only what the bug changed.

/// The gate is looked for once a zone has started: the shell evaluates the RolloutHealthCheck of the StatefulSet
/// being rolled (pods on its update revision and pods still to update) instead of the one about to start. Between
/// zones the shell evaluates nothing: the pass holds the next zone's first deletion as not evaluated yet, for ever
/// (a good revision never converges; before the pass held a start without an evaluation, it went ungated).
pub fn gate_after_the_zone_started(
    group: &GroupSnapshot,
    _now: Timestamp,
    _cleared: &BTreeSet<String>,
) -> Option<GateTarget> {
    group.members.iter().find_map(|m| {
        let update = m.sts.status.as_ref().map(|s| s.update_revision.as_str())?;
        let updated = m.pods.iter().filter(|p| p.revision() == Some(update)).count();
        let health_check = m.sts.annotations.get(keys::ROLLOUT_HEALTH_CHECK)?;
        (updated > 0 && updated < m.pods.len()).then(|| GateTarget {
            statefulset: m.sts.name.clone(),
            health_check: health_check.clone(),
            started: true,
        })
    })
}

/// Every zone that has started counts as cleared, as the reference's contract reads ("once a zone has started,
/// readiness alone governs it"): a later zone someone else started (an evicted pod recreated on the update
/// revision) is finished on a revision the gate never passed.
pub fn every_started_zone_cleared(group: &GroupSnapshot, mut cleared: BTreeSet<String>) -> BTreeSet<String> {
    let none = BTreeSet::new();
    let started = group.members.iter().filter_map(|m| health_check::targets::gate_of(group, m, &none));
    cleared.extend(started.filter(|t| t.started).map(|t| t.statefulset));
    cleared
}

/// The baseline taken from the candidate side: the pod sets are swapped, so the baseline query reads the updated
/// pods (at the baseline time, when they still ran the old revision) and the current query the stable ones. A bad
/// revision is compared with the old one on both sides, and passes.
pub fn baseline_from_the_candidate_side(
    config: &HealthCheckConfig,
    targets: Targets,
    times: GateTimes,
    ask: &mut dyn FnMut(&QueryRequest) -> Answer,
) -> GateVerdict {
    let swapped = Targets { candidate: targets.stable, stable: targets.candidate, namespace: targets.namespace };
    health_check::evaluate(config, swapped, times, ask).0
}

/// No data counts as a pass: a check whose query has no data (the updated pods' series not ingested yet) lets the
/// next zone start, as if its `onNoData` were `Disabled`.
pub fn no_data_passes(
    config: &HealthCheckConfig,
    targets: Targets,
    times: GateTimes,
    ask: &mut dyn FnMut(&QueryRequest) -> Answer,
) -> GateVerdict {
    let mut config = config.clone();
    for check in &mut config.checks {
        check.on_no_data = Policy::Disabled;
    }
    health_check::evaluate(&config, targets, times, ask).0
}

/// The soak counted from each evaluation: the candidate side is taken to have served since the evaluation's own
/// time, so every evaluation finds it still soaking and the gate never judges (a good revision never gets past
/// its first zone).
pub fn soak_from_each_evaluation(
    config: &HealthCheckConfig,
    targets: Targets,
    times: GateTimes,
    ask: &mut dyn FnMut(&QueryRequest) -> Answer,
) -> GateVerdict {
    let times = GateTimes { candidates_serving_since: Some(times.now), ..times };
    health_check::evaluate(config, targets, times, ask).0
}
