//! A pod as the budget decisions read it: the lean view the rollout uses, plus the two annotations budgets
//! need (`grafana.com/ready-time` and our eviction intent), and what the `grafana.com/ready-time` tracker must
//! change on it (reference 5.6).

use crate::downscale::format_timestamp;
use crate::keys;
use crate::settings::parse_timestamp;
use crate::view::{PodView, StatefulSetView, ViewError};
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A live list of a budget's pods, as the decisions see it: shared, not copied, by every decision that joined the
/// same list (a drain burst judges one list hundreds of times).
pub type BudgetPods = Arc<[BudgetPod]>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetPod {
    pub pod: PodView,
    /// `grafana.com/ready-time`, as written.
    pub ready_time: Option<String>,
    /// The latest expiry of the eviction intents on the pod (each decision writes its own); `None` when there is
    /// none, or none readable (only the operator writes them, and an unreadable one must not block evictions
    /// forever).
    pub intent_until: Option<Timestamp>,
}

impl BudgetPod {
    pub fn from_k8s(pod: &Pod) -> Result<Self, ViewError> {
        let annotations = pod.metadata.annotations.as_ref();
        let annotation = |key: &str| annotations.and_then(|a| a.get(key)).cloned();
        Ok(BudgetPod {
            pod: PodView::from_k8s(pod)?,
            ready_time: annotation(keys::READY_TIME),
            intent_until: annotations
                .into_iter()
                .flatten()
                .filter(|(key, _)| keys::is_eviction_intent(key))
                .filter_map(|(_, value)| parse_timestamp(value).ok())
                .max(),
        })
    }

    /// A pod without either annotation.
    pub fn plain(pod: PodView) -> Self {
        BudgetPod { pod, ready_time: None, intent_until: None }
    }

    pub fn name(&self) -> &str {
        &self.pod.name
    }

    pub fn uid(&self) -> &str {
        &self.pod.uid
    }

    /// Whether an eviction of this pod is being allowed somewhere (its intent has not expired at `now`).
    pub fn has_live_intent(&self, now: Timestamp) -> bool {
        self.intent_until.is_some_and(|until| until > now)
    }

    /// "Running and ready" in our sense: running, not terminating, every container ready and running (a pod with
    /// no container statuses is not), Ready condition true.
    pub fn is_running_and_ready(&self, now: Timestamp) -> bool {
        self.pod.is_available(0, now)
    }

    /// The reference's step 3: evicting a pod that is not running (or already being deleted) takes nothing away.
    pub fn is_not_running(&self) -> bool {
        matches!(self.pod.phase.as_str(), "Succeeded" | "Failed" | "Pending") || self.pod.is_terminating()
    }
}

/// An eviction intent kept on the pod's StatefulSet (where pods cannot be patched): the pod it is about, by uid, so
/// a pod recreated under the same name is not held by it, and its expiry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatefulSetIntent {
    pub until: Timestamp,
    pub pod: String,
    pub uid: String,
}

impl StatefulSetIntent {
    /// The annotation value: `<expiry> <pod name> <pod uid>`.
    pub fn value(&self) -> String {
        format!("{} {} {}", format_timestamp(self.until), self.pod, self.uid)
    }

    /// Reads an annotation value; `None` when it is not one (only the operator writes them, and an unreadable one
    /// must not block evictions forever).
    pub fn parse(value: &str) -> Option<Self> {
        let mut parts = value.split_whitespace();
        let (until, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        Some(StatefulSetIntent { until: parse_timestamp(until).ok()?, pod: pod.to_string(), uid: uid.to_string() })
    }
}

/// The latest expiry of the intents kept on `statefulsets`, by pod uid.
pub fn statefulset_intents(statefulsets: &[StatefulSetView]) -> BTreeMap<String, Timestamp> {
    let mut intents: BTreeMap<String, Timestamp> = BTreeMap::new();
    let all = statefulsets.iter().flat_map(|s| s.annotations.iter());
    for intent in all.filter(|(key, _)| keys::is_eviction_intent(key)).filter_map(|(_, v)| StatefulSetIntent::parse(v))
    {
        let until = intents.entry(intent.uid).or_insert(intent.until);
        *until = (*until).max(intent.until);
    }
    intents
}

/// The intent keys on `statefulset` that no longer hold at `now` (expired, or unreadable): removed with the next
/// intent written there, so they do not pile up.
pub fn stale_statefulset_intents(statefulset: &StatefulSetView, now: Timestamp) -> Vec<String> {
    statefulset
        .annotations
        .iter()
        .filter(|(key, value)| {
            keys::is_eviction_intent(key) && StatefulSetIntent::parse(value).is_none_or(|intent| intent.until <= now)
        })
        .map(|(key, _)| key.clone())
        .collect()
}

/// What the `grafana.com/ready-time` tracker writes on a pod in scope of a budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadyTimeChange {
    /// First seen running and ready: stamp the time (second precision, UTC).
    Set(String),
    /// Seen not running and ready: remove the stamp.
    Remove,
}

/// The tracker's rule (reference 5.6): stamp a running and ready pod that has no stamp (an existing stamp is kept,
/// across restarts too), remove the stamp of a pod that is not running and ready; otherwise nothing.
pub fn ready_time_change(pod: &BudgetPod, now: Timestamp) -> Option<ReadyTimeChange> {
    match (pod.is_running_and_ready(now), pod.ready_time.is_some()) {
        (true, false) => Some(ReadyTimeChange::Set(format_timestamp(now))),
        (false, true) => Some(ReadyTimeChange::Remove),
        _ => None,
    }
}
