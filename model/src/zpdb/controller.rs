//! The controller: its cache of the truth (lagging by at most `stale` writes), its memoised pass, its writes one at a
//! time (each deletion asking the budget first), and hearing of changes and answers.

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
        let ops = pass.plan.actions.iter().filter_map(to_op).collect();
        let memo = (retained, ops);
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

    /// The controller's decision has answered (or not yet).
    fn controller_answered(&self, s: &mut ZpdbState) {
        let Ctrl::Acting { ops, deciding: Some(d), heard, .. } = &s.ctrl else { return };
        let (zone, pod, ops, heard) = (d.zone, d.pod, ops.clone(), *heard);
        match d.answer() {
            None => {}
            // As the reconciler: the pass's deletions wait for the next pass, its other writes go on; the group
            // runs again once something else changes (at once if something did meanwhile).
            Some(false) => {
                let rest: Vec<Op> = ops.into_iter().filter(|op| !matches!(op, Op::Delete { .. })).collect();
                s.ctrl = Ctrl::Acting { ops: rest, deciding: None, cleared: false, held: true, heard };
                self.finish_pass(s);
            }
            Some(true) => {
                self.judge(s, zone, pod, Who::Controller);
                s.ctrl = Ctrl::Acting { ops, deciding: None, cleared: true, held: false, heard };
            }
        }
    }

    /// A pass with nothing left to write ends: the controller waits for news if a budget held it back.
    fn finish_pass(&self, s: &mut ZpdbState) {
        if let Ctrl::Acting { ops, held, heard, .. } = &s.ctrl
            && ops.is_empty()
        {
            s.ctrl = Ctrl::Idle { blocked: *held && !*heard };
        }
    }

    pub(super) fn controller_acts(&self, s: &mut ZpdbState) {
        let Ctrl::Acting { ops, deciding, cleared, held, heard } = s.ctrl.clone() else { return };
        let Some(op) = ops.first().copied() else {
            self.finish_pass(s);
            return;
        };
        match (op, deciding, cleared) {
            (Op::Delete { zone, pod, .. }, None, false) => {
                let d = self.step_decision(None, &mut s.truth, (zone, pod), Who::Controller);
                s.ctrl = Ctrl::Acting { ops, deciding: Some(d), cleared: false, held, heard };
                self.controller_answered(s);
            }
            (Op::Delete { .. }, Some(d), _) => {
                let d = self.step_decision(Some(&d), &mut s.truth, (d.zone, d.pod), Who::Controller);
                s.ctrl = Ctrl::Acting { ops, deciding: Some(d), cleared: false, held, heard };
                self.controller_answered(s);
            }
            (Op::Delete { zone, pod, generation }, None, true) => {
                let p = s.truth.zones[zone as usize].pods[pod as usize];
                if !p.exists || p.generation != generation {
                    // The uid precondition fails: the loop stops executing the plan.
                    s.ctrl = Ctrl::Idle { blocked: false };
                    return;
                }
                s.truth.zones[zone as usize].pods[pod as usize].terminating = true;
                s.expectations.push(Exp::PodDeleted { zone, pod, generation });
                s.ctrl = Ctrl::Acting { ops: ops[1..].to_vec(), deciding: None, cleared: false, held, heard };
            }
            (Op::SetCurrent { zone, revision, resource_version }, _, _) => {
                let z = &mut s.truth.zones[zone as usize];
                if z.resource_version != resource_version {
                    s.ctrl = Ctrl::Idle { blocked: false };
                    return;
                }
                z.current = revision;
                z.resource_version = z.resource_version.wrapping_add(1);
                s.expectations.push(Exp::ZoneWritten { zone, resource_version });
                s.ctrl = Ctrl::Acting { ops: ops[1..].to_vec(), deciding: None, cleared: false, held, heard };
            }
        }
        self.finish_pass(s);
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

fn to_op(action: &Action) -> Option<Op> {
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
