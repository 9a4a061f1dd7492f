//! What the eviction step machine speaks with the shell: the request it decides and its settings, the needs it
//! names (every live read and write) and what the shell observed in answer.

use crate::admission::AdmissionRequest;
use crate::failure::Failure;
use crate::view::StatefulSetView;
use crate::zpdb::config::ZpdbConfig;
use crate::zpdb::decision::{EvictionVerdict, Outcome};
use crate::zpdb::pods::{BudgetPod, BudgetPods};
use jiff::Timestamp;
use serde_json::Value;
use std::time::Duration;

/// How concurrent decisions over one budget are kept from spending the same budget twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serialisation {
    /// Through the API: an eviction intent on the pod, then a second live read (see [`super`]).
    Intents,
    /// Through the API as well, where pods cannot be patched but StatefulSets can (the older Helm charts): the
    /// intent on the pod's StatefulSet, naming the pod, and the StatefulSets listed again before the pods.
    StatefulSetIntents,
    /// Through this process only: a lock per budget and a memory of allowed evictions (the reference's way; used
    /// where neither pods nor StatefulSets can be patched).
    InProcess,
}

/// The flow's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionSettings {
    /// The namespace the operator manages.
    pub namespace: String,
    pub serialisation: Serialisation,
    /// How long an intent (or a remembered eviction) holds: longer than the rest of this request (the handler's
    /// deadline) plus the time the API server takes to commit the eviction after our answer.
    pub intent_lifetime: Duration,
}

/// The decider name of the controller's deletions (the reference's username for them).
pub const ROLLOUT_CONTROLLER: &str = "rollout-controller";

/// Who asks for the eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requester {
    /// A client of the pod-eviction webhook (`kubectl drain`, a cluster upgrade).
    Webhook,
    /// The rollout controller, before it deletes a pod it replaces (reference 5.5).
    RolloutController,
}

/// One eviction to decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionRequest {
    pub pod: String,
    pub namespace: String,
    /// Nothing is written for a dry run.
    pub dry_run: bool,
    /// The controller's deletions: the `maxUnavailable` to use where the budget's is 0 (reference 5.5). Under a
    /// partition-aware budget the flow uses 1 instead, as the reference does.
    pub max_unavailable_override: Option<u32>,
    pub requester: Requester,
    /// Names this decision in its eviction intent's key, unique among decisions that can run at once: the
    /// AdmissionReview's uid, or the controller's name (it decides one pod at a time).
    pub decider: String,
}

impl EvictionRequest {
    /// The rollout controller's deletion of `pod`, whose StatefulSet allows `rollout_max_unavailable` pods
    /// unavailable (its `rollout-max-unavailable`, resolved): judged as an eviction, with that value standing in for
    /// a budget's `maxUnavailable` of 0, so rollouts go on where voluntary evictions are switched off (reference
    /// 5.5), while zones and partitions are still kept.
    pub fn for_rollout(pod: &str, namespace: &str, rollout_max_unavailable: u32) -> Self {
        EvictionRequest {
            pod: pod.to_string(),
            namespace: namespace.to_string(),
            dry_run: false,
            max_unavailable_override: Some(rollout_max_unavailable.max(1)),
            requester: Requester::RolloutController,
            decider: ROLLOUT_CONTROLLER.to_string(),
        }
    }

    pub(super) fn is_rollout_deletion(&self) -> bool {
        self.requester == Requester::RolloutController
    }
}

impl EvictionRequest {
    /// Reads an admission request for `pods/eviction` (reference 5.4 step 1). A request that is not one is a
    /// denial with `status.code` 400, not an HTTP error. A dry run is one by the request's `dryRun` or by the
    /// Eviction's `deleteOptions.dryRun`.
    pub fn from_admission(request: &AdmissionRequest) -> Result<Self, EvictionVerdict> {
        let invalid = |message: String| EvictionVerdict::deny(Outcome::INVALID_REQUEST, message);
        if request.operation != "CREATE" {
            return Err(invalid(format!("request operation is not create, got: {}", request.operation)));
        }
        if request.sub_resource != "eviction" {
            return Err(invalid(format!("request SubResource is not eviction, got: {}", request.sub_resource)));
        }
        if request.namespace.is_empty() || request.name.is_empty() {
            return Err(invalid("request did not include both a namespace and a name".to_string()));
        }
        let options_dry_run = match request.object.pointer("/deleteOptions/dryRun") {
            Some(Value::Array(values)) => !values.is_empty(),
            _ => false,
        };
        Ok(EvictionRequest {
            pod: request.name.clone(),
            namespace: request.namespace.clone(),
            dry_run: request.dry_run || options_dry_run,
            max_unavailable_override: None,
            requester: Requester::Webhook,
            decider: request.uid.clone(),
        })
    }
}

/// A live read of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup<T> {
    Found(Box<T>),
    NotFound,
    /// The read failed (refused, API error, deadline), or the object could not be read as what it should be.
    Failed(Failure),
}

/// The budgets the operator knows, as the shell has them.
#[derive(Debug, Clone, PartialEq)]
pub enum KnownBudgets {
    Known(Vec<ZpdbConfig>),
    /// Not listed yet (the watch is starting or retrying): deciding without them could break a budget.
    NotLoaded(String),
    /// Cannot be read (forbidden): the same, and retrying does not help.
    Unreadable(String),
}

/// What the flow needs next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Need {
    /// Read the pod live.
    Pod { name: String },
    /// The known budgets.
    Budgets,
    /// Read the pod's StatefulSet live.
    StatefulSet { name: String },
    /// Take this process's lock of the budget (held until the flow answers) and tell what this process
    /// remembers of evictions being allowed.
    Lock { budget: String },
    /// List the StatefulSets the budget selects, live, by this label selector.
    StatefulSets { selector: String },
    /// List the pods the budget selects, live, by this label selector.
    Pods { selector: String },
    /// Write the eviction intent on the pod under `key`, this decision's own (`uid` a precondition): it holds until
    /// `until`.
    WriteIntent { pod: String, uid: String, key: String, until: Timestamp },
    /// List the budget's pods again, `after` a pause, now that the intent is written (or the lock taken).
    PodsAgain { selector: String, after: Duration },
    /// List the budget's StatefulSets again, `after` a pause, now that the intent is written on one of them (the
    /// pods are listed again next).
    StatefulSetsAgain { selector: String, after: Duration },
    /// Set the eviction intent `key` on the StatefulSet to `value` (a [`StatefulSetIntent`]), and remove the
    /// `stale` intent keys there (expired ones), in one merge patch of its annotations.
    WriteStatefulSetIntent { statefulset: String, key: String, value: String, stale: Vec<String> },
    /// Remove our intent (`key`) from the StatefulSet (a failure is only logged: it expires).
    RemoveStatefulSetIntent { statefulset: String, key: String },
    /// Remove our intent (`key`) from the pod (`uid` a precondition; a failure is only logged: it expires). Other
    /// decisions' intents about the same pod stay.
    RemoveIntent { pod: String, uid: String, key: String },
    /// Remember in this process that the pod's eviction is being allowed, until `until`.
    Remember { uid: String, until: Timestamp },
    /// Register in this process that this decision is under way under the budget for the pod (`uid`), until it is
    /// answered, and tell the pods of the other decisions under way there: the first judgement counts them as
    /// unavailable, so of a burst in one process only the decisions that could all be allowed go on to write
    /// intents (the others would only deny each other after their second reads).
    Claim { budget: String, uid: String },
    /// The answer.
    Answer(EvictionVerdict),
}

impl Need {
    /// The need's name, as logs and the simulation's reports give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Need::Pod { .. } => "pod",
            Need::Budgets => "budgets",
            Need::StatefulSet { .. } => "statefulset",
            Need::Lock { .. } => "lock",
            Need::StatefulSets { .. } => "statefulsets",
            Need::Pods { .. } => "pods",
            Need::WriteIntent { .. } => "write-intent",
            Need::PodsAgain { .. } => "pods-again",
            Need::StatefulSetsAgain { .. } => "statefulsets-again",
            Need::WriteStatefulSetIntent { .. } => "write-statefulset-intent",
            Need::RemoveStatefulSetIntent { .. } => "remove-statefulset-intent",
            Need::RemoveIntent { .. } => "remove-intent",
            Need::Remember { .. } => "remember",
            Need::Claim { .. } => "claim",
            Need::Answer(_) => "answer",
        }
    }

    /// The needs whose failure the machine observes: the live reads and the intents' writes.
    pub const FALLIBLE: &[&str] = &[
        "pod",
        "statefulset",
        "statefulsets",
        "pods",
        "write-intent",
        "pods-again",
        "statefulsets-again",
        "write-statefulset-intent",
    ];
}

/// What the shell saw when it carried out the last need.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed {
    Start,
    Pod(Lookup<BudgetPod>),
    Budgets(KnownBudgets),
    StatefulSet(Lookup<StatefulSetView>),
    /// The lock is held; the evictions this process remembers, by pod uid, with their expiry.
    Locked {
        remembered: Vec<(String, Timestamp)>,
    },
    /// The lock could not be taken in time (another decision of the budget holds it).
    NotLocked,
    StatefulSets(Result<Vec<StatefulSetView>, Failure>),
    Pods(Result<BudgetPods, Failure>),
    /// The intent was written, or why not (refused by RBAC: serialised another way; a conflict or not found: the
    /// pod changed since it was read).
    IntentWritten(Result<(), Failure>),
    IntentRemoved,
    Remembered,
    /// Registered; the pods (by uid) of the other decisions under way under the budget in this process.
    Claimed {
        others: Vec<String>,
    },
}

impl Observed {
    /// The failure it reports, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Observed::Pod(Lookup::Failed(f))
            | Observed::StatefulSet(Lookup::Failed(f))
            | Observed::StatefulSets(Err(f))
            | Observed::Pods(Err(f))
            | Observed::IntentWritten(Err(f)) => Some(f),
            _ => None,
        }
    }
}
