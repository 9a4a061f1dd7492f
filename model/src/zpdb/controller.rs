//! The controller: its cache of the truth (lagging by at most `stale` writes), its memoised pass, the core's
//! execution machine carrying the plan out one need at a time (each deletion judged by the budgets first, through
//! the eviction decision), and hearing of changes and answers.

use super::*;

impl ZpdbModel {
    pub(super) fn statefulset(&self, w: &World, z: usize) -> StatefulSetView {
        let zone = &w.zones[z];
        let mut s =
            fixture::statefulset(GROUP, STATEFULSETS[z], u32::from(self.config.pods), REVISIONS[zone.current as usize]);
        s.resource_version = zone.resource_version.to_string();
        s.settings.max_unavailable = MaxUnavailable::Count(1);
        if let Some(status) = s.status.as_mut() {
            status.update_revision = REVISIONS[zone.update as usize].to_string();
            status.ready_replicas = zone.pods.iter().filter(|p| p.available()).count() as u32;
        }
        for (i, p) in zone.pods.iter().enumerate() {
            let uid = Self::pod_uid(STATEFULSETS[z], i, p);
            for (d, until) in p.kept_on_statefulset.iter().enumerate() {
                if let Some(until) = until {
                    let pod = format!("{}-{i}", STATEFULSETS[z]);
                    let intent = StatefulSetIntent { until: *until, pod, uid: uid.clone() };
                    s.annotations.insert(statefulset_key(d, &uid, *until), intent.value());
                }
            }
        }
        s
    }

    pub(super) fn pod_uid(statefulset: &str, i: usize, p: &Pod) -> String {
        format!("{statefulset}-{i}@{}", p.generation)
    }

    fn pod_view(sts: &StatefulSetView, i: usize, p: &Pod) -> PodView {
        let mut v = fixture::pod(sts, i as u32, REVISIONS[p.revision as usize]);
        v.uid = Self::pod_uid(&sts.name, i, p);
        v.labels.insert(keys::ROLLOUT_GROUP.to_string(), GROUP.to_string());
        if !p.ready {
            v = fixture::not_ready(v);
        }
        if p.terminating {
            v = fixture::terminating(v);
        }
        v
    }

    pub(super) fn budget_pod(sts: &StatefulSetView, i: usize, p: &Pod) -> BudgetPod {
        // As a pod is read from the API: the latest of its intents.
        let intent_until = p.intents.iter().flatten().max().copied();
        BudgetPod { intent_until, ..BudgetPod::plain(Self::pod_view(sts, i, p)) }
    }

    /// The pass's input for the controller's cache.
    fn snapshot(&self, w: &World) -> GroupSnapshot {
        let mut statefulsets = Vec::new();
        let mut pods = Vec::new();
        for (z, zone) in w.zones.iter().enumerate() {
            let s = self.statefulset(w, z);
            pods.extend(zone.pods.iter().enumerate().filter(|(_, p)| p.exists).map(|(i, p)| Self::pod_view(&s, i, p)));
            statefulsets.push(s);
        }
        GroupSnapshot::assemble(GROUP, statefulsets, &pods)
    }

    /// What the controller does on its cache: drop the expectations it shows, then run the whole pass. Memoised:
    /// the pass is pure.
    pub(super) fn plan(&self, view: &World, expectations: &[Exp]) -> PlanMemo {
        let key = (view.clone(), expectations.to_vec());
        if let Some(hit) = self.plans.lock().ok().and_then(|m| m.get(&key).cloned()) {
            return hit;
        }
        let snapshot = self.snapshot(view);
        let retained: Vec<Exp> =
            expectations.iter().copied().filter(|e| !core_expectation(*e).is_observed(&snapshot)).collect();
        let pending: Vec<PendingExpectation> = retained
            .iter()
            .map(|e| PendingExpectation { expectation: core_expectation(*e), expires_at: Timestamp::MAX })
            .collect();
        let pass = plan_pass(&snapshot, &PassInput::new(now(), &pending));
        // The model's StatefulSets carry no scaling annotations.
        let actions = pass.plan.actions.into_iter().filter(|a| to_op(a).is_some()).collect();
        let memo = (retained, actions);
        if let Ok(mut m) = self.plans.lock() {
            m.insert(key, memo.clone());
        }
        memo
    }

    /// The `maxUnavailable` the controller's eviction requests carry for a budget that allows none (reference 5.5):
    /// the StatefulSet's `rollout-max-unavailable`, or 1 under a partition-aware budget.
    pub(super) fn controller_override(&self) -> u32 {
        match self.config.mode {
            BudgetMode::Partitions => 1,
            BudgetMode::Zones => MaxUnavailable::Count(1).resolve(u32::from(self.config.pods)),
        }
    }

    /// A change of the truth: the controller hears of a change someone else made (a blocked controller plans
    /// again; one acting will run again), and its cache sees what the pass reads of it at once when fresh, else in
    /// order, lagging by at most `stale` writes.
    pub(super) fn changed(&self, last: &World, s: &mut ZpdbState, own: bool) {
        if s.truth == *last {
            return;
        }
        match &mut s.ctrl {
            Ctrl::Idle { blocked } if !own => *blocked = false,
            Ctrl::Acting { heard, .. } if !own => *heard = true,
            _ => {}
        }
        let seen = s.truth.planner_view();
        if seen == last.planner_view() {
            return;
        }
        if self.config.stale == 0 {
            s.view = seen;
        } else {
            s.pending.push(seen);
            if s.pending.len() > self.config.stale as usize {
                s.view = s.pending.remove(0);
            }
        }
    }

    /// A decision of the drain's replica `r` has answered (or not yet).
    pub(super) fn drain_answered(&self, s: &mut ZpdbState, r: usize) {
        let Drain::Deciding(d) = &s.drains[r] else { return };
        let (zone, pod) = (d.zone, d.pod);
        match d.answer() {
            None => {}
            Some(false) => s.drains[r] = Drain::Idle,
            Some(true) => {
                self.judge(s, zone, pod, Who::Drain(0));
                let p = s.truth.zones[zone as usize].pods[pod as usize];
                s.drains[r] = if p.exists && !p.terminating {
                    Drain::Committing { zone, pod, generation: p.generation }
                } else {
                    // Nothing left to evict (the pod is already going): the API server has nothing to commit.
                    Drain::Idle
                };
            }
        }
    }

    /// The reconciler's execution settings for this model's cluster: every deletion judged by the budgets, no zone
    /// tracker (the model's clock never moves).
    fn execution_settings() -> ExecutionSettings {
        crate::execution_settings(Defences::ALL, false, true)
    }

    /// Starts carrying out a pass's plan (nothing to do: the controller stays idle).
    pub(super) fn execute(&self, s: &mut ZpdbState, actions: Vec<Action>) {
        let exec = Box::new(Execution::new(actions, false, Self::execution_settings()));
        self.feed(s, exec, ExecutionObserved::Start, false);
    }

    /// Feeds what the controller saw to its execution and moves on to the next need; the expectations its writes
    /// left join the controller's. Once done, the controller waits for news if a budget held a deletion back.
    fn feed(&self, s: &mut ZpdbState, mut exec: Box<Execution>, observed: ExecutionObserved, heard: bool) {
        let need = exec.step(observed, now());
        s.expectations.extend(exec.take_expectations().iter().filter_map(model_expectation));
        s.ctrl = match need {
            ExecutionNeed::Done(finished) => Ctrl::Idle { blocked: finished.held.is_some() && !heard },
            need => Ctrl::Acting { exec, need, deciding: None, heard },
        };
    }

    /// The controller's decision has answered (or not yet): the budgets' judgement goes to the execution.
    fn controller_answered(&self, s: &mut ZpdbState) {
        let Ctrl::Acting {
            exec,
            need: ExecutionNeed::JudgeDeletion { statefulset, pod: name },
            deciding: Some(d),
            heard,
        } = s.ctrl.clone()
        else {
            return;
        };
        let judged = match &d.next {
            Need::Answer(verdict) if verdict.allowed() => {
                self.judge(s, d.zone, d.pod, Who::Controller);
                None
            }
            Need::Answer(denial) => Some(rollout_core::zpdb::BudgetHold::from_denial(&statefulset, &name, denial)),
            _ => return,
        };
        self.feed(s, exec, ExecutionObserved::Judged(judged), heard);
    }

    pub(super) fn controller_acts(&self, s: &mut ZpdbState) {
        let Ctrl::Acting { exec, need, deciding, heard } = s.ctrl.clone() else { return };
        let front = exec.current_action().and_then(to_op);
        match (need, front) {
            (need @ ExecutionNeed::JudgeDeletion { .. }, Some(Op::Delete { zone, pod, .. })) => {
                let d = self.step_decision(deciding.as_deref(), &mut s.truth, (zone, pod), Who::Controller);
                s.ctrl = Ctrl::Acting { exec, need, deciding: Some(Box::new(d)), heard };
                self.controller_answered(s);
            }
            (ExecutionNeed::DeletePod { .. }, Some(Op::Delete { zone, pod, generation })) => {
                let p = &mut s.truth.zones[zone as usize].pods[pod as usize];
                // As the API server answers a deletion with a uid precondition.
                let written = if !p.exists {
                    Err(Failure::NotFound(format!("pod {pod} of zone {zone} not found")))
                } else if p.generation != generation {
                    Err(Failure::Conflict(format!("pod {pod} of zone {zone}: uid precondition failed")))
                } else {
                    p.terminating = true;
                    Ok(())
                };
                self.feed(s, exec, ExecutionObserved::Written(written), heard);
            }
            (ExecutionNeed::SetCurrentRevision { .. }, Some(Op::SetCurrent { zone, revision, resource_version })) => {
                let z = &mut s.truth.zones[zone as usize];
                let written = if z.resource_version != resource_version {
                    Err(Failure::Conflict(format!("zone {zone}: resourceVersion precondition failed")))
                } else {
                    z.current = revision;
                    z.resource_version = z.resource_version.wrapping_add(1);
                    Ok(())
                };
                self.feed(s, exec, ExecutionObserved::Written(written), heard);
            }
            // Needs this model's plans never raise (claims, replica changes, features turned off): the pass ends.
            _ => s.ctrl = Ctrl::Idle { blocked: false },
        }
    }
}

/// The model's form of an expectation the execution left.
fn model_expectation(pending: &PendingExpectation) -> Option<Exp> {
    let zone_of = |name: &str| STATEFULSETS.iter().position(|s| *s == name).map(|z| z as u8);
    match &pending.expectation {
        Expectation::PodDeleted { uid, pod, statefulset } => Some(Exp::PodDeleted {
            zone: zone_of(statefulset)?,
            pod: pod_ordinal(statefulset, pod)? as u8,
            generation: uid.rsplit_once('@').and_then(|(_, g)| g.parse().ok())?,
        }),
        Expectation::StatefulSetWritten { statefulset, previous_resource_version } => Some(Exp::ZoneWritten {
            zone: zone_of(statefulset)?,
            resource_version: previous_resource_version.parse().ok()?,
        }),
    }
}

fn core_expectation(e: Exp) -> Expectation {
    match e {
        Exp::PodDeleted { zone, pod, generation } => {
            let statefulset = STATEFULSETS[zone as usize].to_string();
            let name = format!("{statefulset}-{pod}");
            Expectation::PodDeleted { uid: format!("{name}@{generation}"), pod: name, statefulset }
        }
        Exp::ZoneWritten { zone, resource_version } => Expectation::StatefulSetWritten {
            statefulset: STATEFULSETS[zone as usize].to_string(),
            previous_resource_version: resource_version.to_string(),
        },
    }
}

pub(super) fn to_op(action: &Action) -> Option<Op> {
    let zone_of = |name: &str| STATEFULSETS.iter().position(|s| *s == name).map(|z| z as u8);
    match action {
        Action::DeletePod { statefulset, pod, uid, .. } => Some(Op::Delete {
            zone: zone_of(statefulset)?,
            pod: pod_ordinal(statefulset, pod)? as u8,
            generation: uid.rsplit_once('@').and_then(|(_, g)| g.parse().ok())?,
        }),
        Action::SetCurrentRevision { statefulset, revision, resource_version, .. } => Some(Op::SetCurrent {
            zone: zone_of(statefulset)?,
            revision: REVISIONS.iter().position(|r| r == revision)? as u8,
            resource_version: resource_version.parse().ok()?,
        }),
        // The model's StatefulSets carry no scaling annotations.
        Action::Scale { .. } => None,
    }
}
