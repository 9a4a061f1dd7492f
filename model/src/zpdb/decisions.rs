//! The decisions: each eviction, the drain's and the controller's, the core's step machine driven one need at a
//! time against the truth, a read or write of pods a model step of its own; the deciders naming their intents.

use super::*;

/// The name a decider gives its intent key: the controller's, or the drain's `k`-th request (its AdmissionReview's
/// uid, in a real cluster).
fn decider_name(decider: usize) -> String {
    if decider == 0 {
        rollout_core::zpdb::flow::ROLLOUT_CONTROLLER.to_string()
    } else {
        format!("drain-request-{decider}")
    }
}

fn decider_of_key(key: &str) -> Option<usize> {
    (0..DECIDERS).find(|d| keys::eviction_intent_key(&decider_name(*d)) == key)
}

/// The key of decider `decider`'s intent about the pod `uid`, expiring at `until`, on a StatefulSet (the
/// controller's names the pod and the expiry).
pub(super) fn statefulset_key(decider: usize, uid: &str, until: Timestamp) -> String {
    match decider {
        0 => rollout_core::zpdb::flow::controller_statefulset_intent_key(uid, until),
        d => keys::eviction_intent_key(&decider_name(d)),
    }
}

impl ZpdbModel {
    fn settings() -> EvictionSettings {
        EvictionSettings {
            namespace: NAMESPACE.to_string(),
            serialisation: Serialisation::Intents,
            intent_lifetime: INTENT_LIFETIME,
        }
    }

    /// One step of a decision (started when `decision` is `None`) against the truth: the decision after it, and the
    /// truth after its writes. Memoised.
    pub(super) fn step_decision(
        &self,
        decision: Option<&Decision>,
        truth: &mut World,
        target: (u8, u8),
        who: Who,
    ) -> Decision {
        let (zone, pod) = target;
        let decider = match who {
            Who::Controller => 0,
            // The drain's requests in order: each names its own intent.
            Who::Drain(request) => request,
        };
        let started = decision.is_none().then_some(decider);
        let key = (started, decision.map_or(0, |d| d.fingerprint), zone, pod, truth.clone());
        if let Some((d, after)) = self.decisions.lock().ok().and_then(|m| m.get(&key).cloned()) {
            *truth = after;
            return d;
        }
        let d = match decision {
            None => self.start(truth, zone, pod, who, decider),
            Some(d) => {
                let mut d = d.clone();
                self.advance(&mut d, truth);
                d
            }
        };
        if let Ok(mut m) = self.decisions.lock() {
            m.insert(key, (d.clone(), truth.clone()));
        }
        d
    }

    /// Starts a decision about pod `pod` of zone `zone`: the request arrives and the pod is read.
    fn start(&self, truth: &mut World, zone: u8, pod: u8, who: Who, decider: u8) -> Decision {
        let name = format!("{}-{pod}", STATEFULSETS[zone as usize]);
        let request = match who {
            // As the reconciler asks: its StatefulSet's `rollout-max-unavailable`, resolved (the model never
            // changes it, so the cache and the truth agree on it).
            Who::Controller => {
                let sts = self.statefulset(truth, zone as usize);
                EvictionRequest::for_rollout(&name, NAMESPACE, sts.settings.max_unavailable.resolve(sts.replicas))
            }
            // As the webhook reads an admission request for `pods/eviction`.
            Who::Drain(_) => EvictionRequest {
                pod: name,
                namespace: NAMESPACE.to_string(),
                dry_run: false,
                max_unavailable_override: None,
                requester: Requester::Webhook,
                decider: decider_name(usize::from(decider)),
            },
        };
        let mut machine = EvictPod::new(request, Self::settings());
        let next = (self.evictor)(&mut machine, Observed::Start, now());
        let mut d = Decision::new(zone, pod, machine, next);
        self.advance(&mut d, truth);
        d
    }

    /// Carries out the decision's next need against the truth, then every need after it that reads nothing another
    /// actor changes, until it waits on a read or write of pods, or answers.
    fn advance(&self, d: &mut Decision, truth: &mut World) {
        let mut machine = (*d.machine).clone();
        let mut need = d.next.clone();
        loop {
            if matches!(need, Need::Answer(_)) {
                break;
            }
            let observed = self.carry(&need, truth);
            need = (self.evictor)(&mut machine, observed, now());
            if !is_constant(&need) {
                break;
            }
        }
        *d = Decision::new(d.zone, d.pod, machine, need);
    }

    /// What a need observes of the truth (and the writes it makes there).
    fn carry(&self, need: &Need, truth: &mut World) -> Observed {
        match need {
            Need::Pod { name } => Observed::Pod(match self.locate(truth, name) {
                Some((z, i)) => {
                    let sts = self.statefulset(truth, z);
                    Lookup::Found(Box::new(Self::budget_pod(&sts, i, &truth.zones[z].pods[i])))
                }
                None => Lookup::NotFound,
            }),
            Need::Budgets => Observed::Budgets(KnownBudgets::Known(vec![self.budget.clone()])),
            Need::StatefulSet { name } => Observed::StatefulSet(match STATEFULSETS.iter().position(|s| s == name) {
                Some(z) if z < truth.zones.len() => Lookup::Found(Box::new(self.statefulset(truth, z))),
                _ => Lookup::NotFound,
            }),
            Need::StatefulSets { selector } => Observed::StatefulSets(Ok((0..truth.zones.len())
                .map(|z| self.statefulset(truth, z))
                .filter(|s| selects(selector, &s.labels))
                .collect())),
            Need::Pods { selector } | Need::PodsAgain { selector, .. } => {
                let mut pods = Vec::new();
                for (z, zone) in truth.zones.iter().enumerate() {
                    let sts = self.statefulset(truth, z);
                    for (i, p) in zone.pods.iter().enumerate().filter(|(_, p)| p.exists) {
                        let pod = Self::budget_pod(&sts, i, p);
                        if selects(selector, &pod.pod.labels) {
                            pods.push(pod);
                        }
                    }
                }
                Observed::Pods(Ok(pods.into()))
            }
            Need::WriteIntent { key, .. }
                if !self.config.pod_patch || (!self.config.controller_pod_patch && decider_of_key(key) == Some(0)) =>
            {
                Observed::IntentWritten(Err(Failure::Forbidden("pods is forbidden".into())))
            }
            Need::StatefulSetsAgain { selector, .. } => Observed::StatefulSets(Ok((0..truth.zones.len())
                .map(|z| self.statefulset(truth, z))
                .filter(|s| selects(selector, &s.labels))
                .collect())),
            // The clock does not move, so no intent is stale.
            Need::WriteStatefulSetIntent { key, value, .. } => {
                let Some(intent) = StatefulSetIntent::parse(value) else {
                    return Observed::IntentWritten(Err(Failure::Failed(format!("unreadable intent {value}"))));
                };
                let located = self.locate_incarnation(truth, &intent.pod, &intent.uid);
                let decider = (0..DECIDERS).find(|d| statefulset_key(*d, &intent.uid, intent.until) == *key);
                Observed::IntentWritten(match (located, decider) {
                    (Some((z, i)), Some(d)) => {
                        truth.zones[z].pods[i].kept_on_statefulset[d] = Some(intent.until);
                        Ok(())
                    }
                    // The intent would name a pod that is not there: it could hold nothing.
                    (None, _) => Err(Failure::Failed(format!("pod {} is not {} any more", intent.pod, intent.uid))),
                    (_, None) => Err(Failure::Failed(format!("no decider writes {key}"))),
                })
            }
            Need::RemoveStatefulSetIntent { statefulset, key } => {
                if let Some(z) = STATEFULSETS.iter().position(|s| s == statefulset).filter(|z| *z < truth.zones.len()) {
                    for i in 0..truth.zones[z].pods.len() {
                        let p = &mut truth.zones[z].pods[i];
                        let uid = Self::pod_uid(STATEFULSETS[z], i, p);
                        for d in 0..DECIDERS {
                            if p.kept_on_statefulset[d].is_some_and(|until| statefulset_key(d, &uid, until) == *key) {
                                p.kept_on_statefulset[d] = None;
                            }
                        }
                    }
                }
                Observed::IntentRemoved
            }
            Need::WriteIntent { pod, uid, key, until } => {
                Observed::IntentWritten(match (self.locate_incarnation(truth, pod, uid), decider_of_key(key)) {
                    (Some((z, i)), Some(d)) => {
                        truth.zones[z].pods[i].intents[d] = Some(*until);
                        Ok(())
                    }
                    (None, _) => Err(Failure::Conflict(format!("pod {pod} is not {uid} any more"))),
                    (_, None) => Err(Failure::Failed(format!("no decider writes {key}"))),
                })
            }
            Need::RemoveIntent { pod, uid, key } => {
                if let (Some((z, i)), Some(d)) = (self.locate_incarnation(truth, pod, uid), decider_of_key(key)) {
                    truth.zones[z].pods[i].intents[d] = None;
                }
                Observed::IntentRemoved
            }
            // Pods can always be patched here, so the flow has no reason to fall back to its in-process lock; if
            // it asks anyway, it does not get it (it denies).
            Need::Lock { .. } => Observed::NotLocked,
            Need::Remember { .. } => Observed::Remembered,
            // Every decision as if in a process of its own (see the module docs).
            Need::Claim { .. } => Observed::Claimed { others: Vec::new() },
            Need::Answer(_) => Observed::Start,
        }
    }

    fn locate(&self, truth: &World, name: &str) -> Option<(usize, usize)> {
        let z = (0..truth.zones.len()).find(|z| name.starts_with(STATEFULSETS[*z]))?;
        let i = pod_ordinal(STATEFULSETS[z], name)? as usize;
        truth.zones[z].pods.get(i).filter(|p| p.exists).map(|_| (z, i))
    }

    fn locate_incarnation(&self, truth: &World, name: &str, uid: &str) -> Option<(usize, usize)> {
        let (z, i) = self.locate(truth, name)?;
        (format!("{name}@{}", truth.zones[z].pods[i].generation) == uid).then_some((z, i))
    }
}

/// Needs the model answers without reading anything another actor changes (see the module docs).
fn is_constant(need: &Need) -> bool {
    matches!(
        need,
        Need::Budgets
            | Need::StatefulSet { .. }
            | Need::StatefulSets { .. }
            | Need::Lock { .. }
            | Need::Remember { .. }
            | Need::Claim { .. }
    )
}

pub(super) fn need_name(need: &Need) -> &'static str {
    match need {
        Need::Pod { .. } => "reading the pod",
        Need::Budgets => "the budgets",
        Need::StatefulSet { .. } => "reading its StatefulSet",
        Need::Lock { .. } => "the lock",
        Need::StatefulSets { .. } => "listing StatefulSets",
        Need::Pods { .. } => "listing pods",
        Need::WriteIntent { .. } => "writing its intent",
        Need::PodsAgain { .. } => "listing pods again",
        Need::StatefulSetsAgain { .. } => "listing StatefulSets again",
        Need::WriteStatefulSetIntent { .. } => "writing its intent on the StatefulSet",
        Need::RemoveStatefulSetIntent { .. } => "removing its intent from the StatefulSet",
        Need::RemoveIntent { .. } => "removing its intent",
        Need::Remember { .. } => "remembering",
        Need::Claim { .. } => "claiming",
        Need::Answer(v) if v.allowed() => "nothing (allowed)",
        Need::Answer(_) => "nothing (denied)",
    }
}

/// Whether a label selector (`k=v,k2=v2`, as the flow asks) selects these labels.
fn selects(selector: &str, labels: &std::collections::BTreeMap<String, String>) -> bool {
    selector.split(',').filter(|t| !t.is_empty()).all(|term| match term.split_once('=') {
        Some((k, v)) => labels.get(k).is_some_and(|l| l == v),
        None => false,
    })
}
