//! The eviction intent and the judgements around it: the intent written (on the pod or its StatefulSet) or the
//! eviction remembered once the first judgement allows, taken back on a denial, the order between rival intents
//! and how long a decision waits for later ones, and the judgement that counts every pending eviction.

use super::{EvictPod, Need, Phase, Serialisation, not_ready_replaced};
use crate::downscale::{round_up_to_second, time_after};
use crate::view::StatefulSetView;
use crate::zpdb::decision::{AbsentPeer, Breach, EvictionVerdict, Holder, Judged, Outcome, judge, unavailable_pods};
use crate::zpdb::pods::{BudgetPod, StatefulSetIntent, stale_statefulset_intents};
use jiff::Timestamp;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a decision that goes first waits, the first time, for the later ones it races with to take their
/// intents back. A rival gives way one pod patch after the read that showed it ours, so the first wait is short;
/// each further wait doubles (see [`rival_wait`]), so a rival slowed by a busy replica is still waited for.
pub const RIVAL_WAIT: Duration = Duration::from_millis(5);
/// How many times it waits before it gives up (denies, and takes its own intent back): 5 ms doubling seven times
/// is 635 ms of patience in all.
pub const RIVAL_WAITS: u32 = 7;

/// The wait before the read numbered `waited` (0 for the first) of a decision waiting for its rivals.
pub fn rival_wait(waited: u32) -> Duration {
    RIVAL_WAIT.saturating_mul(1 << waited.min(16))
}

impl EvictPod {
    /// The first judgement allowed the eviction.
    pub(super) fn allowed_once(&mut self, allowed: EvictionVerdict, now: Timestamp) -> Need {
        let dry_run = self.request.as_ref().is_ok_and(|r| r.dry_run);
        if dry_run {
            return self.answer(allowed);
        }
        match self.serialisation {
            Serialisation::InProcess => self.remember(allowed, now),
            Serialisation::StatefulSetIntents => self.write_statefulset_intent(now),
            Serialisation::Intents => {
                let Some(pod) = self.pod.as_ref() else { return self.internal("no pod") };
                let until = self.until(now);
                let key = self.intent_key();
                let need = Need::WriteIntent { pod: pod.name().to_string(), uid: pod.uid().to_string(), key, until };
                self.intent_until = Some(until);
                self.phase = Phase::IntentWritten;
                need
            }
        }
    }

    pub(super) fn remember(&mut self, allowed: EvictionVerdict, now: Timestamp) -> Need {
        if self.request.as_ref().is_ok_and(|r| r.dry_run) {
            return self.answer(allowed);
        }
        let uid = self.pod.as_ref().map(|p| p.uid().to_string()).unwrap_or_default();
        self.phase = Phase::Remembered(allowed);
        Need::Remember { uid, until: self.until(now) }
    }

    /// The intent written on the pod's StatefulSet, with the stale intents there removed in the same write.
    pub(super) fn write_statefulset_intent(&mut self, now: Timestamp) -> Need {
        let (Some(pod), Some(owner)) = (self.pod.as_ref(), self.owner.as_ref()) else {
            return self.internal("no pod or StatefulSet");
        };
        let until = self.until(now);
        let intent = StatefulSetIntent { until, pod: pod.name().to_string(), uid: pod.uid().to_string() };
        let statefulset = owner.name.clone();
        let stale_keys = stale_statefulset_intents(owner, now);
        self.intent_until = Some(until);
        let key = self.statefulset_intent_key();
        let stale = stale_keys.into_iter().filter(|k| *k != key).collect();
        let value = intent.value();
        self.our_statefulset_intent = Some((statefulset.clone(), key.clone(), value.clone()));
        self.phase = Phase::IntentWritten;
        Need::WriteStatefulSetIntent { statefulset, key, value, stale }
    }

    pub(super) fn remove_intent(&self) -> Need {
        if self.serialisation == Serialisation::StatefulSetIntents {
            let statefulset = self.owner.as_ref().map(|o| o.name.clone()).unwrap_or_default();
            return Need::RemoveStatefulSetIntent { statefulset, key: self.statefulset_intent_key() };
        }
        let (pod, uid) = self.pod.as_ref().map(|p| (p.name().to_string(), p.uid().to_string())).unwrap_or_default();
        Need::RemoveIntent { pod, uid, key: self.intent_key() }
    }

    fn intent_key(&self) -> String {
        crate::keys::eviction_intent_key(self.request.as_ref().map(|r| r.decider.as_str()).unwrap_or_default())
    }

    /// The intent's key on a StatefulSet, which holds the intents about all its pods: a webhook decision's is its own
    /// (one pod per request). The controller decides one pod after another under one name, so its key names the
    /// pod (by uid) and the intent's expiry: an intent of its previous deletion in the zone may still be relied on
    /// (its commit in flight) and must not be overwritten, and a key is never reused with another expiry, so a
    /// decider that read it expired and removes it as stale cannot remove a live one.
    fn statefulset_intent_key(&self) -> String {
        match (self.is_rollout_deletion(), self.pod.as_ref(), self.intent_until) {
            (true, Some(pod), Some(until)) => controller_statefulset_intent_key(pod.uid(), until),
            _ => self.intent_key(),
        }
    }

    /// Whether the StatefulSets listed still carry our intent as we wrote it (always, where we wrote none there).
    pub(super) fn our_intent_kept(&self, statefulsets: &[StatefulSetView]) -> bool {
        let Some((name, key, value)) = &self.our_statefulset_intent else { return true };
        statefulsets.iter().any(|s| &s.name == name && s.annotations.get(key) == Some(value))
    }

    fn until(&self, now: Timestamp) -> Timestamp {
        round_up_to_second(time_after(now, self.settings.intent_lifetime))
    }

    /// The reads after our intent (or the lock): the StatefulSets, then the pods. The StatefulSets are read again
    /// whichever way this process keeps its intents: another process may keep its intents the other way (one
    /// started before an RBAC change), and the claim needs every intent written before ours in the second reads
    /// (the ZPDB model's `controller_pod_patch: false`); and the second judgement uses them.
    pub(super) fn read_again(&mut self, after: Duration) -> Need {
        self.phase = Phase::StatefulSetsAgain;
        Need::StatefulSetsAgain { selector: self.selector(), after }
    }

    /// The latest expiry of the intents about `pod`, wherever they are kept.
    fn intent_of(&self, pod: &BudgetPod) -> Option<Timestamp> {
        pod.intent_until.max(self.statefulset_intents.get(pod.uid()).copied())
    }

    /// Whether this decision goes before every other pending one that denies it: ordered by intent expiry (the
    /// earlier written first), then pod name, a total order every decider reads the same from the annotations.
    /// True when this eviction keeps the budget once the intents that come after ours are left out.
    pub(super) fn has_way_over_rivals(&self, pods: &[BudgetPod], now: Timestamp) -> bool {
        let (Some(mine), Some(evicted)) = (self.intent_until, &self.pod) else { return false };
        let ours = (mine, evicted.name());
        let later = |p: &BudgetPod| {
            let intent = self.intent_of(p);
            p.uid() != evicted.uid() && intent.is_some_and(|u| u > now) && intent.map(|u| (u, p.name())) > Some(ours)
        };
        pods.iter().any(later) && self.judge_counting(pods, now, |p| !later(p)).is_ok()
    }

    /// Judges on `pods`, counting as unavailable every other pod whose eviction is being allowed.
    pub(super) fn judge(&self, pods: &[BudgetPod], now: Timestamp) -> Result<EvictionVerdict, EvictionVerdict> {
        self.judge_counting(pods, now, |_| true)
    }

    /// Judges on `pods`, counting as unavailable the other pods whose eviction is being allowed and `counted` says.
    fn judge_counting(
        &self,
        pods: &[BudgetPod],
        now: Timestamp,
        counted: impl Fn(&BudgetPod) -> bool,
    ) -> Result<EvictionVerdict, EvictionVerdict> {
        let (Some(config), Some(owner), Some(evicted)) = (&self.config, &self.owner, &self.pod) else {
            return Err(EvictionVerdict::deny(Outcome::POD_STATUS_NOT_DETERMINED, "internal error: nothing to judge"));
        };
        // The controller replaces a pod that is unavailable (as this read shows it) without spending the budget:
        // deleting it takes away nothing that serves (our planner's rule for crash loops; the reference stalls). It
        // goes through the flow all the same, intent and second read included: the pod may turn Ready before the
        // deletion commits, and a decision taken meanwhile must count it as going (found by the model).
        if self.is_rollout_deletion()
            && pods.iter().find(|p| p.uid() == evicted.uid()).is_some_and(|p| !p.is_running_and_ready(now))
        {
            return Ok(not_ready_replaced());
        }
        let remembered: BTreeSet<&str> =
            self.remembered.iter().filter(|(_, until)| *until > now).map(|(uid, _)| uid.as_str()).collect();
        let pending = |pod: &BudgetPod| {
            let live_intent = self.intent_of(pod).is_some_and(|until| until > now);
            pod.uid() != evicted.uid()
                && ((live_intent && counted(pod))
                    || remembered.contains(pod.uid())
                    || self.under_way.contains(pod.uid()))
        };
        let input = Judged {
            config,
            owner,
            statefulsets: &self.statefulsets,
            pods,
            evicted,
            partition: self.partition.as_deref(),
            max_unavailable: self.max_unavailable,
            pending: &pending,
            absent_peer: if self.is_rollout_deletion() {
                AbsentPeer::UnknownForTheLastPod
            } else {
                AbsentPeer::Unknown
            },
            now,
        };
        judge(&input).map(|met| EvictionVerdict::allow_with_message(Outcome::ALLOWED, met)).map_err(|breach| {
            let holder = match &breach {
                Breach::Exceeded { span, .. } if self.is_rollout_deletion() => {
                    Some(Box::new(Holder { budget: None, unavailable: unavailable_pods(&input, span) }))
                }
                _ => None,
            };
            EvictionVerdict { holder, ..breach.verdict() }
        })
    }
}

/// The key of the controller's intent about the pod `uid`, expiring at `until`, on the pod's StatefulSet (see
/// `EvictPod::statefulset_intent_key`): within the 47 characters a key's name part leaves.
pub fn controller_statefulset_intent_key(uid: &str, until: Timestamp) -> String {
    let uid: String = uid.chars().take(24).collect();
    crate::keys::eviction_intent_key(&format!("controller-{uid}-{}", until.as_second()))
}
