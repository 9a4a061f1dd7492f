//! The controller: deciding with the planner on its cache (memoised), executing the plan one need at a time with
//! the real execution machine, its writes reaching the truth, and what it learns of them.

use super::*;

impl RolloutModel {
    /// What the controller does with its cache, its expectations and the record it reads live: drop the
    /// expectations the cache shows, then run the whole pass (only when no plan is in flight). Memoised: many
    /// states share the controller's view.
    pub(super) fn decide(
        &self,
        view: &World,
        expectations: &[Exp],
        planning: bool,
        record: Record,
        gate: Option<&GateMemo>,
        cleared: u8,
    ) -> Decision {
        let key =
            (view.clone(), expectations.to_vec(), planning, (record.marker, record.unreadable), gate.cloned(), cleared);
        if let Some(hit) = self.decisions.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return hit;
        }
        let snapshot = self.snapshot(view);
        let retained: Vec<Exp> =
            expectations.iter().copied().filter(|e| !to_core_expectation(*e).is_observed(&snapshot)).collect();
        let (plan, claims, held, newly_cleared) = if planning {
            let pending: Vec<PendingExpectation> = retained
                .iter()
                .map(|e| PendingExpectation { expectation: to_core_expectation(*e), expires_at: jiff::Timestamp::MAX })
                .collect();
            let markers: Vec<DownscaleInProgress> = if record.marker {
                // Another zone's downscale, live for longer than the run (the model has no clock).
                vec![DownscaleInProgress {
                    statefulset: ZONES[0].to_string(),
                    group: GROUP.to_string(),
                    until: jiff::Timestamp::MAX,
                }]
            } else {
                Vec::new()
            };
            let empty = DownscaleRecord::default();
            let gates = self.handed_gates(&snapshot, &self.view_gate(view, cleared), gate, cleared);
            let mut input = PassInput::new(jiff::Timestamp::UNIX_EPOCH, &pending);
            input.defences = self.config.defences;
            if self.health.is_some() {
                input.health_gate = HealthGating::On(&gates);
            }
            if self.uses_record() {
                input.zone_tracker = ZoneTracker::On;
                input.record = if record.unreadable {
                    RecordRead::Unreadable { error: "the record cannot be read" }
                } else {
                    RecordRead::Read { record: &empty, markers: &markers }
                };
            }
            let pass = plan_pass_with(&*self.planner, &snapshot, &input);
            let held = pass.plan.wait.as_ref().is_some_and(|w| w.reason == WaitReason::HeldByHealthCheck);
            // This model's zones carry no scaling annotations, so the planner never scales them; replica changes
            // are the scaling model's.
            let actions = pass.plan.actions.into_iter().filter(|a| !matches!(a, Action::Scale { .. })).collect();
            let newly_cleared =
                pass.cleared_by_health_check.iter().filter_map(|s| zone_index(s)).fold(0, |m, z| m | 1 << z);
            (actions, pass.claims_rollout_step, held, newly_cleared)
        } else {
            (Vec::new(), false, false, 0)
        };
        let decision = (retained, plan, claims, held, newly_cleared);
        if let Ok(mut m) = self.decisions.lock() {
            m.insert(key, decision.clone());
        }
        decision
    }

    /// The next plan as the controller would execute it: the core's execution machine over the pass's actions.
    pub(super) fn next_plan(&self, s: &State) -> (Vec<Exp>, Option<Box<Execution>>) {
        let (retained, actions, claims, _, _) =
            self.decide(&s.view, &s.expectations, s.exec.is_none(), s.record, s.gate.as_ref(), s.cleared);
        let exec = (!actions.is_empty()).then(|| Box::new(Execution::new(actions, claims, self.execution_settings())));
        (retained, exec)
    }

    /// The controller's execution settings (this model has no budgets and no replica changes, and no clock: every
    /// need is answered at the same instant).
    fn execution_settings(&self) -> ExecutionSettings {
        crate::execution_settings(self.config.defences, self.uses_record(), false)
    }

    /// Moves the execution on to `need`: the expectations its writes left join the controller's, needs with no
    /// effect on this model's world are acknowledged at once, and the next write becomes the state's `need`.
    pub(super) fn advance(&self, s: &mut State, mut exec: Execution, read_version: Option<u8>, mut need: Need) {
        loop {
            s.expectations.extend(exec.take_expectations().into_iter().filter_map(|e| to_model_expectation(&e)));
            let observed = match &need {
                Need::Done(finished) => {
                    if finished.outcome == rollout_core::execution::Outcome::Completed && finished.held.is_none() {
                        s.cleared |= s.clearing;
                    }
                    s.clearing = 0;
                    s.exec = None;
                    s.need = None;
                    return;
                }
                Need::DeletePod { statefulset, pod, uid } => {
                    s.need = pod_op(statefulset, pod, uid.as_deref());
                    break;
                }
                Need::SetCurrentRevision { statefulset, revision, resource_version } => {
                    s.need = revision_op(statefulset, revision, resource_version);
                    break;
                }
                Need::ClaimStep { .. } => {
                    s.need = Some(Op::ClaimStep { version: read_version });
                    break;
                }
                Need::FinishStep { .. } => {
                    s.need = Some(Op::FinishStep);
                    break;
                }
                Need::JudgeDeletion { .. } => Observed::Judged(None),
                Need::EndClaim { .. } | Need::TurnOff { .. } => Observed::Acknowledged,
                Need::ClaimDownscale { .. } | Need::PatchReplicas { .. } => {
                    Observed::Written(Err(Failure::Failed("not modelled".to_string())))
                }
            };
            need = self.planner.next_need(&mut exec, observed, jiff::Timestamp::UNIX_EPOCH);
        }
        if s.need.is_none() {
            // A write this model cannot express: the execution is abandoned (never reached with this model's plans).
            s.exec = None;
            return;
        }
        s.exec = Some(Box::new((exec, read_version)));
    }

    /// A controller's deletion reaches the truth (its preconditions held). Judged on the truth: no deletion commits
    /// while a downscale is being prepared.
    pub(super) fn commit_deletion(&self, s: &mut State, op: Op) {
        let Op::DeletePod { zone, pod, .. } = op else { return };
        if s.record.marker {
            s.violations |= violation::NO_ROLLOUT_DURING_DOWNSCALE;
        }
        self.judge_bad_release_deletion(s, zone);
        let p = &mut s.truth.zones[zone as usize].pods[pod as usize];
        if !p.terminating {
            p.terminating = true;
            self.record_write(s, Some(op));
        }
    }

    /// The controller's knowledge: its cache plus its own writes the cache has not shown yet.
    pub fn believed(&self, s: &State) -> World {
        let mut w = s.view.clone();
        for op in s.pending.iter().filter_map(|(_, op)| *op) {
            apply_own_write(&mut w, op);
        }
        w
    }

    /// Records a change of the truth: the cache sees it at once when fresh, else it queues (forcing the oldest
    /// queued write into the cache when the lag bound is reached).
    pub(super) fn record_write(&self, s: &mut State, op: Option<Op>) {
        if !self.config.status_lag {
            for z in &mut s.truth.zones {
                z.ready_replicas = z.actual_ready();
            }
        }
        if self.config.stale == 0 {
            s.view = s.truth.clone();
        } else {
            s.pending.push((s.truth.clone(), op));
            if s.pending.len() > self.config.stale as usize {
                s.view = s.pending.remove(0).0;
            }
        }
    }

    /// Checks a controller write against what the controller knew when it planned, before it is applied, then
    /// adds the write to that knowledge.
    pub(super) fn check_write(&self, s: &mut State, op: Op) {
        let believed = s.plan_basis.clone().unwrap_or_else(|| self.believed(s));
        match op {
            Op::DeletePod { zone, pod, .. } => {
                let z = &believed.zones[zone as usize];
                // The pod deleted is another incarnation than the one the plan was made on: the decision was about
                // a pod the controller never saw.
                let known = z.pods[pod as usize];
                if !known.exists || known.generation != s.truth.zones[zone as usize].pods[pod as usize].generation {
                    s.violations |= violation::ONLY_SEEN_PODS_DELETED;
                }
                let others_ready =
                    believed.zones.iter().enumerate().all(|(i, o)| i == zone as usize || o.all_available());
                if !others_ready {
                    s.violations |= violation::ONE_ZONE_AT_A_TIME;
                }
                if z.pods[pod as usize].available() && z.unavailable() + 1 > self.config.max_unavailable as usize {
                    s.violations |= violation::MAX_UNAVAILABLE;
                }
                if z.paused {
                    s.violations |= violation::PAUSED_IS_LEFT_ALONE;
                }
            }
            Op::SetCurrentRevision { zone, revision, .. } => {
                let z = &believed.zones[zone as usize];
                if !z.pods.iter().all(|p| p.available() && p.revision == revision) {
                    s.violations |= violation::ONLY_READY_COUNTS_AS_READY;
                }
            }
            Op::ClaimStep { .. } | Op::FinishStep => {}
        }
    }
}

/// What the controller learns from its own successful write.
pub(super) fn apply_own_write(w: &mut World, op: Op) {
    match op {
        Op::DeletePod { zone, pod, .. } => w.zones[zone as usize].pods[pod as usize].terminating = true,
        Op::SetCurrentRevision { zone, revision, .. } => w.zones[zone as usize].current = revision,
        Op::ClaimStep { .. } | Op::FinishStep => {}
    }
}

fn to_core_expectation(e: Exp) -> Expectation {
    match e {
        Exp::PodDeleted { zone, pod, generation } => {
            let name = format!("{}-{pod}", ZONES[zone as usize]);
            Expectation::PodDeleted {
                statefulset: ZONES[zone as usize].to_string(),
                uid: format!("{name}@{generation}"),
                pod: name,
            }
        }
        Exp::ZoneWritten { zone, resource_version } => Expectation::StatefulSetWritten {
            statefulset: ZONES[zone as usize].to_string(),
            previous_resource_version: resource_version.to_string(),
        },
    }
}

pub(super) fn zone_index(name: &str) -> Option<u8> {
    ZONES.iter().position(|z| *z == name).map(|i| i as u8)
}

/// The model's write for the execution's deletion of `pod` (with the uid precondition when given).
fn pod_op(statefulset: &str, pod: &str, uid: Option<&str>) -> Option<Op> {
    let zone = zone_index(statefulset)?;
    let ordinal = pod_ordinal(statefulset, pod)? as u8;
    let generation = uid.and_then(|uid| uid.rsplit_once('@')).and_then(|(_, g)| g.parse().ok());
    Some(Op::DeletePod { zone, pod: ordinal, generation })
}

/// The model's write for the execution's status update.
fn revision_op(statefulset: &str, revision: &str, resource_version: &str) -> Option<Op> {
    Some(Op::SetCurrentRevision {
        zone: zone_index(statefulset)?,
        revision: REVISIONS.iter().position(|r| *r == revision)? as u8,
        resource_version: resource_version.parse().ok()?,
    })
}

/// The model's form of an expectation the execution left (see [`to_core_expectation`]).
fn to_model_expectation(e: &PendingExpectation) -> Option<Exp> {
    match &e.expectation {
        Expectation::PodDeleted { statefulset, pod, uid } => {
            let (_, generation) = uid.rsplit_once('@')?;
            Some(Exp::PodDeleted {
                zone: zone_index(statefulset)?,
                pod: pod_ordinal(statefulset, pod)? as u8,
                generation: generation.parse().ok()?,
            })
        }
        Expectation::StatefulSetWritten { statefulset, previous_resource_version } => Some(Exp::ZoneWritten {
            zone: zone_index(statefulset)?,
            resource_version: previous_resource_version.parse().ok()?,
        }),
    }
}
