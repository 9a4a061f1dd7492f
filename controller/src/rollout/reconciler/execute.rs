//! Carries out a pass's plan: the shell's driver of the core's execution machine ([`rollout_core::execution`]).
//!
//! Owns the I/O of each need (the record's claims, the budgets' live decision, deletions, status and replica writes),
//! the leadership check before every write, the log lines, and the mapping of each API answer to the core's
//! [`Failure`], made once here. Must not decide what comes next: the machine does, on what this module observed.

use super::{Controller, REQUEST_BOUND, ReconcileError, wall_clock};
use crate::cluster::zone_tracker::{StoredRecord, claim_rollout_step, finish_rollout_step};
use crate::cluster::{ApiError, ClusterApi, Preconditions};
use crate::ops::feature_gate::Gate;
use crate::pods::client::PodHttpClient;
use crate::rollout::scaling::{DownscaleClaim, claim, end_claim};
use rollout_core::Failure;
use rollout_core::downscale::COMMIT_MARGIN;
use rollout_core::execution::{
    DownscaleClaimed, Execution, ExecutionSettings, Need, Observed, Outcome, RefusedFeature, StepClaimed,
};
use rollout_core::group::GroupSnapshot;
use rollout_core::zpdb::BudgetHold;
use rollout_core::{Action, GroupPlan, Planner};

/// How a plan's execution ended, for the pass.
pub(super) enum Executed {
    /// The step's claim found the record moved: plan again at once.
    Replan,
    Ended {
        held: Option<Box<BudgetHold>>,
        result: Result<(), ReconcileError>,
    },
}

/// What one need gave: the observation for the machine and, for a failure, the pass's error as read here.
type Answer = (Observed, Option<ReconcileError>);

impl<C: ClusterApi, P: Planner, H: PodHttpClient> Controller<C, P, H> {
    /// Executes `plan` (made on `snapshot`, with the record as `stored`), claiming the rollout step first when
    /// `claims_step`.
    pub(super) async fn execute(
        &mut self,
        group: &str,
        plan: &GroupPlan,
        snapshot: &GroupSnapshot,
        stored: Option<&StoredRecord>,
        claims_step: bool,
    ) -> Executed {
        let settings = ExecutionSettings {
            defences: self.config.defences,
            zone_tracker: self.scaling.zone_tracker_config_map.is_some(),
            budgets: self.budgets.is_some(),
            claim_ttl: self.config.claim_ttl,
            commit_margin: COMMIT_MARGIN,
            request_bound: REQUEST_BOUND,
            lifetimes: self.lifetimes(),
        };
        let claims_step = claims_step && self.scaling.zone_tracker_config_map.is_some();
        let mut exec = Execution::new(plan.actions.clone(), claims_step, settings);
        let mut observed = Observed::Start;
        let mut failed: Option<ReconcileError> = None;
        let executed = loop {
            let need = self.planner.next_need(&mut exec, observed, wall_clock());
            let expected = exec.take_expectations();
            self.expectations.entry(group.to_string()).or_default().extend(expected);
            let need = match need {
                Need::Done(finished) => {
                    if finished.step_expiring {
                        tracing::warn!(
                            rollout_group = group,
                            "the rollout step's claim is about to expire; remaining deletions wait for the next pass"
                        );
                    }
                    let result = match finished.outcome {
                        Outcome::Replan => break Executed::Replan,
                        Outcome::Completed => Ok(()),
                        Outcome::Failed(failure) => {
                            Err(failed.take().unwrap_or_else(|| ReconcileError::FailedClosed {
                                reason: format!("executing the plan failed: {}", failure.message()),
                            }))
                        }
                    };
                    break Executed::Ended { held: finished.held.map(Box::new), result };
                }
                need => need,
            };
            let kind = need.kind();
            match self.carry_out(group, plan, snapshot, stored, need).await {
                Ok((next, error)) => {
                    crate::ops::needs::failed("execution", kind, next.failure().map(|f| f.kind()));
                    failed = error.or(failed);
                    observed = next;
                }
                // Not leading any more: nothing more is written; a claim just made is left to expire.
                Err(not_leader) => break Executed::Ended { held: None, result: Err(not_leader) },
            }
        };
        for action in exec.applied() {
            self.reports.applied(group, action);
        }
        executed
    }

    /// Carries out one need. `Err` only when this replica may not write any more.
    async fn carry_out(
        &mut self,
        group: &str,
        plan: &GroupPlan,
        snapshot: &GroupSnapshot,
        stored: Option<&StoredRecord>,
        need: Need,
    ) -> Result<Answer, ReconcileError> {
        let reason_of = |pod_or_sts: &str| {
            plan.actions
                .iter()
                .find_map(|a| match a {
                    Action::DeletePod { pod, reason, .. } if pod == pod_or_sts => Some(reason.clone()),
                    Action::Scale { statefulset, reason, .. } if statefulset == pod_or_sts => Some(reason.clone()),
                    _ => None,
                })
                .unwrap_or_default()
        };
        Ok(match need {
            Need::ClaimStep { until } => {
                self.may_write(&|| "the rollout step's claim".to_string())?;
                let Some(config_map) = self.scaling.zone_tracker_config_map.clone() else {
                    return Ok((Observed::StepClaimed(Ok(StepClaimed::Stale)), None));
                };
                match claim_rollout_step(&self.api, &config_map, stored, snapshot, wall_clock(), until).await {
                    Ok(claimed) => (Observed::StepClaimed(Ok(claimed)), None),
                    Err(error) if error.is_forbidden() => {
                        self.zone_tracker_refused(&error);
                        (Observed::StepClaimed(Err(Failure::Forbidden(error.to_string()))), None)
                    }
                    Err(source) => {
                        let failure = Failure::from(&source);
                        (Observed::StepClaimed(Err(failure)), Some(ReconcileError::ClaimRolloutStep { source }))
                    }
                }
            }
            Need::JudgeDeletion { statefulset, pod } => {
                // Before the budgets' decision (which may write an eviction intent on the pod).
                self.may_write(&|| format!("the deletion of pod {pod}"))?;
                let hold = self.budget_denies(snapshot, &statefulset, &pod).await;
                if let Some(hold) = &hold {
                    tracing::info!(rollout_group = group, pod = %pod, reason = %hold.describe(),
                        "ZoneAwarePodDisruptionBudget holds the pod's replacement back; waiting");
                }
                (Observed::Judged(hold), None)
            }
            Need::DeletePod { pod, uid, .. } => {
                self.may_write(&|| format!("the deletion of pod {pod}"))?;
                match self.api.delete_pod(&pod, &Preconditions { uid, resource_version: None }).await {
                    Ok(()) => {
                        tracing::info!(rollout_group = group, pod = %pod, reason = %reason_of(&pod), "terminating pod");
                        (Observed::Written(Ok(())), None)
                    }
                    Err(ApiError::NotFound(message)) => {
                        tracing::info!(rollout_group = group, pod = %pod, "pod already deleted");
                        (Observed::Written(Err(Failure::NotFound(message))), None)
                    }
                    Err(source) => {
                        let failure = Failure::from(&source);
                        (Observed::Written(Err(failure)), Some(ReconcileError::DeletePod { pod, source }))
                    }
                }
            }
            Need::SetCurrentRevision { statefulset, revision, resource_version } => {
                // `update_current_revision` asks for the write window itself.
                let watched = self.cache.statefulset_at(&statefulset, &resource_version).cloned();
                match self.update_current_revision(&statefulset, &revision, &resource_version, watched).await {
                    Ok(_) => {
                        tracing::info!(rollout_group = group, statefulset = %statefulset, %revision,
                            "advanced StatefulSet currentRevision");
                        (Observed::Written(Ok(())), None)
                    }
                    Err(error) => {
                        let failure = match &error {
                            ReconcileError::UpdateStatus { source, .. } => Failure::from(source),
                            other => Failure::Failed(other.to_string()),
                        };
                        (Observed::Written(Err(failure)), Some(error))
                    }
                }
            }
            Need::ClaimDownscale { statefulset, now, until } => {
                self.may_write(&|| format!("the replica change of statefulset {statefulset}"))?;
                let Some(config_map) = self.scaling.zone_tracker_config_map.clone() else {
                    return Ok((Observed::DownscaleClaimed(Ok(DownscaleClaimed::Refused(String::new()))), None));
                };
                let defences = self.config.defences;
                match claim(&self.api, &config_map, snapshot, &statefulset, now, until, defences).await {
                    Ok(DownscaleClaim::Claimed { previous, until }) => {
                        (Observed::DownscaleClaimed(Ok(DownscaleClaimed::Claimed { previous, until })), None)
                    }
                    Ok(DownscaleClaim::Refused(why)) => {
                        tracing::info!(rollout_group = group, statefulset = %statefulset, reason = %why,
                            "downscale refused by the group downscale record; not scaling");
                        (Observed::DownscaleClaimed(Ok(DownscaleClaimed::Refused(why))), None)
                    }
                    Err(error) if error.is_forbidden() => {
                        self.zone_tracker_refused(&error);
                        (Observed::DownscaleClaimed(Err(Failure::Forbidden(error.to_string()))), None)
                    }
                    Err(source) => {
                        let failure = Failure::from(&source);
                        let error = ReconcileError::DownscaleRecord { statefulset, source };
                        (Observed::DownscaleClaimed(Err(failure)), Some(error))
                    }
                }
            }
            Need::PatchReplicas { statefulset, to, resource_version, last_downscale } => {
                self.may_write(&|| format!("the replica change of statefulset {statefulset}"))?;
                let annotations: std::collections::BTreeMap<String, String> = last_downscale
                    .map(|at| {
                        let value = rollout_core::downscale::format_timestamp(at);
                        (rollout_core::keys::LAST_DOWNSCALE.to_string(), value)
                    })
                    .into_iter()
                    .collect();
                match self.api.patch_statefulset_replicas(&statefulset, to, &resource_version, &annotations).await {
                    Ok(_) => {
                        self.metrics.gates().granted(Gate::Scaling);
                        tracing::info!(rollout_group = group, statefulset = %statefulset, to,
                            reason = %reason_of(&statefulset), "scaled StatefulSet");
                        (Observed::Written(Ok(())), None)
                    }
                    Err(source) => {
                        let failure = Failure::from(&source);
                        (Observed::Written(Err(failure)), Some(ReconcileError::Scale { statefulset, source }))
                    }
                }
            }
            // Ended even if the term has just ended: it dates (or takes back) a write whose outcome is known, under
            // the record's compare-and-swap, which every replica's webhooks write under too.
            Need::EndClaim { statefulset, until, end } => {
                if let Some(config_map) = self.scaling.zone_tracker_config_map.clone() {
                    end_claim(&self.api, &config_map, &statefulset, until, end, self.config.defences).await;
                }
                (Observed::Acknowledged, None)
            }
            Need::TurnOff { feature: RefusedFeature::ZoneTracker, .. } => (Observed::Acknowledged, None),
            Need::TurnOff { feature: RefusedFeature::Scaling, failure } => {
                self.metrics.gates().refused(Gate::Scaling, &failure);
                self.scaling_forbidden =
                    Some(format!("the operator may not patch StatefulSets ({})", failure.message()));
                (Observed::Acknowledged, None)
            }
            Need::FinishStep { until } => {
                if let Some(config_map) = &self.scaling.zone_tracker_config_map
                    && self.may_write(&|| "the end of the rollout step".to_string()).is_ok()
                    && let Err(error) = finish_rollout_step(&self.api, config_map, group, until).await
                {
                    tracing::warn!(rollout_group = group, %error,
                        "could not end the rollout step in the group downscale record; it expires by itself");
                }
                (Observed::Acknowledged, None)
            }
            Need::Done(_) => (Observed::Acknowledged, None),
        })
    }
}
