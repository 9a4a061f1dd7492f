//! The eviction decision as an explicit step machine, in the manner of
//! [`crate::admission::prepare_flow::PrepareDownscale`]: every live read and write it needs is a named [`Need`],
//! every decision between them (and its allow-or-deny policy) is taken here, on what the shell observed and the
//! `now` it passes with each observation. The pod-eviction webhook, `review`, the simulation and a model all drive
//! this machine, and so does the rollout controller before each pod it deletes ([`EvictionRequest::for_rollout`]).
//!
//! Must not do I/O, read a clock or know about deadlines: the shell's driver loop carries out each need (within
//! the handler's deadline, a timeout being an observed failure) and feeds back what it saw.
//!
//! The flow (reference 5.4, with the differences in [`super`]'s docs):
//! 1. the request checked (CREATE of the `eviction` subresource, with a name);
//! 2. the pod read live; a pod that is not running is allowed at once;
//! 3. the budget that selects it, from the operator's known budgets; none: allowed;
//! 4. the budget's StatefulSets listed live; among them the pod's controller, a StatefulSet (read live by name
//!    when it is not in the list); the effective `maxUnavailable` (0: denied with 403); then enough StatefulSets;
//! 5. (in-process serialisation only) the budget's lock, with the evictions this process remembers;
//! 6. the budget's pods listed (the list in flight will do: they are listed again after the intent); the partition;
//!    the claim among the decisions under way in this process; the judgement, counting their pods too;
//! 7. allowed: a dry run answers here; otherwise the intent is written on the pod, the pods are listed again and
//!    judged again with every other live intent counted as unavailable; denied then, the intent is removed.
//!    Where the pod cannot be patched, the intent goes on the pod's StatefulSet, and the StatefulSets are listed
//!    again before the pods; where that is refused too, the flow falls back to the lock (5) and this process's
//!    memory.

use super::config::{MultipleBudgets, ZpdbConfig, budget_for};
use super::decision::{
    AbsentPeer, Breach, EvictionVerdict, Holder, Judged, Outcome, judge, max_unavailable, same_statefulset,
    unavailable_pods,
};
use super::pods::{BudgetPod, BudgetPods, StatefulSetIntent, stale_statefulset_intents, statefulset_intents};
use crate::admission::{AdmissionRequest, foreign_namespace};
use crate::downscale::{round_up_to_second, time_after};
use crate::view::StatefulSetView;
use jiff::Timestamp;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
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

    fn is_rollout_deletion(&self) -> bool {
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
    /// The read failed (API error or deadline), or the object could not be read as what it should be.
    Failed(String),
    /// The operator may not read it (403).
    Forbidden(String),
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

/// A failed write of the eviction intent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IntentFailure {
    /// Refused by RBAC (403): the flow falls back to in-process serialisation.
    Forbidden(String),
    /// The pod is gone or was replaced (uid precondition) since it was read.
    Changed(String),
    Failed(String),
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
    StatefulSets(Result<Vec<StatefulSetView>, String>),
    Pods(Result<BudgetPods, String>),
    IntentWritten(Result<(), IntentFailure>),
    IntentRemoved,
    Remembered,
    /// Registered; the pods (by uid) of the other decisions under way under the budget in this process.
    Claimed {
        others: Vec<String>,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Phase {
    Start,
    /// The controller's deletions look at the budgets before the pod: with none known (or none readable) there is
    /// nothing to read live, and no permission beyond the rollout's own is needed.
    BudgetsFirst,
    Pod,
    Budgets,
    StatefulSet,
    /// Waiting for the lock; `again`: taken after a refused intent, so the pods are read again under it.
    Locked {
        again: bool,
    },
    StatefulSets,
    Pods,
    /// The pods listed, waiting for the claim in this process to judge them.
    Claimed(BudgetPods),
    IntentWritten,
    /// After the intent was written (`Intents`) or the lock taken on the way back from a refused intent.
    PodsAgain,
    /// After the intent was written on a StatefulSet.
    StatefulSetsAgain,
    IntentRemoved(EvictionVerdict),
    Remembered(EvictionVerdict),
    Answered(EvictionVerdict),
    Stepping,
}

/// One eviction decision, from the request to its answer.
#[derive(Debug, Clone)]
pub struct EvictPod {
    request: Result<EvictionRequest, EvictionVerdict>,
    settings: EvictionSettings,
    serialisation: Serialisation,
    phase: Phase,
    pod: Option<BudgetPod>,
    config: Option<ZpdbConfig>,
    /// The pod's StatefulSet by its controller reference.
    owner_name: String,
    owner: Option<StatefulSetView>,
    /// The budget's StatefulSets as listed, until the owner's checks are done.
    listed: Option<Result<Vec<StatefulSetView>, String>>,
    max_unavailable: u32,
    statefulsets: Vec<StatefulSetView>,
    partition: Option<String>,
    remembered: Vec<(String, Timestamp)>,
    /// The pods of the other decisions under way in this process when this one claimed: counted in the first
    /// judgement only (a snapshot, stale by the second judgement, which counts the intents instead).
    under_way: BTreeSet<String>,
    locked: bool,
    /// Our intent's expiry, once written.
    intent_until: Option<Timestamp>,
    /// The intents kept on the budget's StatefulSets as last listed: the latest expiry by pod uid.
    statefulset_intents: BTreeMap<String, Timestamp>,
    /// Our intent on a StatefulSet, once written: the StatefulSet, the key and the value.
    our_statefulset_intent: Option<(String, String, String)>,
    /// Times this flow waited for later intents to go.
    rival_waits: u32,
    /// The budgets as the controller's deletion read them first.
    budgets_first: Option<KnownBudgets>,
}

impl EvictPod {
    pub fn new(request: EvictionRequest, settings: EvictionSettings) -> Self {
        Self::start(Ok(request), settings)
    }

    /// The pod-eviction webhook's flow for an admission request (an invalid one is answered at the first step).
    pub fn from_admission(request: &AdmissionRequest, settings: EvictionSettings) -> Self {
        let checked = EvictionRequest::from_admission(request).and_then(|r| {
            match foreign_namespace(request, &settings.namespace) {
                // Outside the managed namespace: nothing of it can be read; no budget of ours covers it.
                Some(verdict) => Err(EvictionVerdict { verdict, outcome: Outcome::POD_NOT_IN_SCOPE, holder: None }),
                None => Ok(r),
            }
        });
        Self::start(checked, settings)
    }

    fn start(request: Result<EvictionRequest, EvictionVerdict>, settings: EvictionSettings) -> Self {
        EvictPod {
            request,
            serialisation: settings.serialisation,
            settings,
            phase: Phase::Start,
            pod: None,
            config: None,
            owner_name: String::new(),
            owner: None,
            listed: None,
            max_unavailable: 0,
            statefulsets: Vec::new(),
            partition: None,
            remembered: Vec::new(),
            under_way: BTreeSet::new(),
            locked: false,
            intent_until: None,
            statefulset_intents: BTreeMap::new(),
            our_statefulset_intent: None,
            rival_waits: 0,
            budgets_first: None,
        }
    }

    fn is_rollout_deletion(&self) -> bool {
        self.request.as_ref().is_ok_and(EvictionRequest::is_rollout_deletion)
    }

    /// Whether the flow holds (or asked for) this process's lock of a budget: the driver releases it when the flow
    /// answers.
    pub fn locked(&self) -> bool {
        self.locked
    }

    /// Takes what the shell observed for the last need (at `now`) and says what is needed next. Once it has
    /// answered, it keeps answering the same.
    pub fn step(&mut self, observed: Observed, now: Timestamp) -> Need {
        let phase = std::mem::replace(&mut self.phase, Phase::Stepping);
        match (phase, observed) {
            (Phase::Start, Observed::Start) => match self.request.clone() {
                Err(verdict) => self.answer(verdict),
                Ok(request) if request.is_rollout_deletion() => {
                    self.phase = Phase::BudgetsFirst;
                    Need::Budgets
                }
                Ok(request) => {
                    self.phase = Phase::Pod;
                    Need::Pod { name: request.pod }
                }
            },
            (Phase::BudgetsFirst, Observed::Budgets(known)) => match known {
                // No budget can select the pod: it is out of scope (as the eviction webhook would find it).
                KnownBudgets::Known(budgets) if budgets.is_empty() => {
                    self.answer(EvictionVerdict::allow(Outcome::POD_NOT_IN_SCOPE))
                }
                // Policy for the controller: go on without budgets. The operator may not read them (a 403, said
                // once by the budget watch and in `rollout_operator_feature_disabled`), so none can be honoured; a
                // missing permission disables the feature, it never stops a rollout.
                KnownBudgets::Unreadable(why) => self.answer(EvictionVerdict::allow_with_warning(
                    Outcome::POD_NOT_IN_SCOPE,
                    format!("ZoneAwarePodDisruptionBudgets cannot be read ({why}); replacing the pod without them"),
                )),
                known => {
                    self.budgets_first = Some(known);
                    self.phase = Phase::Pod;
                    Need::Pod { name: self.pod_name() }
                }
            },
            (Phase::Pod, Observed::Pod(lookup)) => match lookup {
                // Policy: deny (400, as the reference): there is nothing to evict, or we cannot tell.
                Lookup::NotFound => {
                    let message = format!("pods \"{}\" not found", self.pod_name());
                    self.answer(EvictionVerdict::deny(Outcome::POD_NOT_FOUND, message))
                }
                // Policy for the controller: go on without budgets, as when they cannot be read: a permission the
                // deployment does not grant disables the feature, it never stops a rollout (the driver says so once).
                Lookup::Forbidden(err) if self.is_rollout_deletion() => {
                    self.answer(EvictionVerdict::allow_with_warning(
                        Outcome::POD_NOT_IN_SCOPE,
                        format!("the operator may not read pods ({err}); replacing the pod without budgets"),
                    ))
                }
                Lookup::Failed(err) | Lookup::Forbidden(err) => {
                    self.answer(EvictionVerdict::deny(Outcome::POD_NOT_FOUND, err))
                }
                Lookup::Found(pod) if pod.is_not_running() => {
                    self.answer(EvictionVerdict::allow_with_warning(Outcome::POD_NOT_READY, "pod is not ready"))
                }
                Lookup::Found(pod) => {
                    self.pod = Some(*pod);
                    match self.budgets_first.take() {
                        Some(known) => self.find_budget(known),
                        None => {
                            self.phase = Phase::Budgets;
                            Need::Budgets
                        }
                    }
                }
            },
            (Phase::Budgets, Observed::Budgets(known)) => self.find_budget(known),
            (Phase::StatefulSet, Observed::StatefulSet(lookup)) => self.owner_read(lookup),
            (Phase::Locked { again }, Observed::Locked { remembered }) => {
                self.remembered = remembered;
                if again {
                    return self.read_again(Duration::ZERO);
                }
                self.statefulsets_checked()
            }
            // Policy: deny with 429: another decision of this budget is under way; the client retries.
            (Phase::Locked { .. }, Observed::NotLocked) => {
                let budget = self.config.as_ref().map(|c| c.name.clone()).unwrap_or_default();
                self.answer(EvictionVerdict::deny(
                    Outcome::DENIED,
                    format!("another eviction under ZoneAwarePodDisruptionBudget {budget} is being decided; retry"),
                ))
            }
            (Phase::StatefulSets, Observed::StatefulSets(listed)) => self.statefulsets_read(listed),
            (Phase::Pods, Observed::Pods(listed)) => match listed {
                // Policy: deny (500, as the reference): the budget's state is unknown.
                Err(_) => self.answer(not_determined()),
                // Under the in-process lock the lock serialises this process's decisions; a dry run writes nothing,
                // so it claims nothing either.
                Ok(pods) if self.locked || self.request.as_ref().is_ok_and(|r| r.dry_run) => {
                    self.first_judgement(&pods, now)
                }
                Ok(pods) => {
                    let (Some(config), Some(pod)) = (&self.config, &self.pod) else { return self.internal("no pod") };
                    let need = Need::Claim { budget: config.name.clone(), uid: pod.uid().to_string() };
                    self.phase = Phase::Claimed(pods);
                    need
                }
            },
            // Policy: deny with 429: another decision about this very pod is under way here (two drains, or a drain
            // and the controller); its answer decides, and the client's retry finds the pod going or judges it
            // afresh. Spares a second intent and second reads for nothing: the pod goes once either way.
            (Phase::Claimed(_), Observed::Claimed { others })
                if self.pod.as_ref().is_some_and(|pod| others.iter().any(|uid| uid == pod.uid())) =>
            {
                let message = format!("another eviction of pod {} is being decided; retry", self.pod_name());
                self.answer(EvictionVerdict::deny(Outcome::DENIED, message))
            }
            (Phase::Claimed(pods), Observed::Claimed { others }) => {
                self.under_way = others.into_iter().collect();
                let need = self.first_judgement(&pods, now);
                self.under_way.clear();
                need
            }
            (Phase::IntentWritten, Observed::IntentWritten(written)) => match written {
                Ok(()) => self.read_again(Duration::ZERO),
                // No permission to patch the pod: the intent goes on its StatefulSet.
                Err(IntentFailure::Forbidden(_)) if self.serialisation == Serialisation::Intents => {
                    self.serialisation = Serialisation::StatefulSetIntents;
                    self.write_statefulset_intent(now)
                }
                // No permission to write intents at all: serialise in this process, as the reference does, and
                // judge again under the lock (the first judgement was made without it).
                Err(IntentFailure::Forbidden(_)) => {
                    self.serialisation = Serialisation::InProcess;
                    self.our_statefulset_intent = None;
                    self.lock(true)
                }
                // Policy: deny with 429 (the client retries and the next attempt reads the pod afresh).
                Err(IntentFailure::Changed(err)) => self.answer(EvictionVerdict::deny(
                    Outcome::DENIED,
                    format!("pod {} changed while its eviction was being decided ({err}); retry", self.pod_name()),
                )),
                // Policy: deny: without its intent, another decision could spend the same budget.
                Err(IntentFailure::Failed(err)) => self.answer(EvictionVerdict::deny(
                    Outcome::INTENT_NOT_RECORDED,
                    format!("unable to record the eviction of pod {} before allowing it: {err}", self.pod_name()),
                )),
            },
            (Phase::StatefulSetsAgain, Observed::StatefulSets(listed)) => match listed {
                // Policy: deny with 429 (the client retries): our intent is no longer where we wrote it (the
                // StatefulSet was replaced, or someone removed it), so nothing holds the budget for this eviction.
                Ok(statefulsets) if !self.our_intent_kept(&statefulsets) => {
                    let message = format!("the eviction intent of pod {} was lost; retry", self.pod_name());
                    self.deny_after_intent(EvictionVerdict::deny(Outcome::DENIED, message))
                }
                Ok(statefulsets) => self.statefulsets_read_again(statefulsets),
                // Policy: deny (500), taking our intent back: without the intents on the StatefulSets another
                // decision's cannot be seen.
                Err(_) => self.deny_after_intent(not_determined()),
            },
            (Phase::PodsAgain, Observed::Pods(listed)) => {
                // Policy: deny with 429. Our intent is about the pod we read (it went with it, or names its uid):
                // the pod of that name now (if any) is another one, which the API server would evict on our answer
                // without an intent about it, so a later decision could spend the same budget. The client retries
                // and judges the new pod.
                if self.serialisation != Serialisation::InProcess
                    && let Ok(pods) = &listed
                    && !self.pod.as_ref().is_some_and(|evicted| pods.iter().any(|p| p.uid() == evicted.uid()))
                {
                    return self.answer(EvictionVerdict::deny(
                        Outcome::DENIED,
                        format!("pod {} was replaced while its eviction was being decided; retry", self.pod_name()),
                    ));
                }
                let judged = match &listed {
                    Err(_) => Err(not_determined()),
                    Ok(pods) => self.judge(pods, now),
                };
                let through_api = self.serialisation != Serialisation::InProcess;
                match (through_api, judged) {
                    (true, Ok(allowed)) => self.answer(allowed),
                    // Only later intents stand in the way, and they give way to this one: wait for them to go.
                    (true, Err(_))
                        if self.rival_waits < RIVAL_WAITS
                            && listed.as_ref().is_ok_and(|pods| self.has_way_over_rivals(pods, now)) =>
                    {
                        let wait = rival_wait(self.rival_waits);
                        self.rival_waits += 1;
                        self.read_again(wait)
                    }
                    // Lost the race for the budget (or cannot tell): take the intent back.
                    (true, Err(verdict)) => self.deny_after_intent(verdict),
                    (false, Ok(allowed)) => self.remember(allowed, now),
                    (false, Err(verdict)) => self.answer(verdict),
                }
            }
            (Phase::IntentRemoved(verdict), Observed::IntentRemoved) => self.answer(verdict),
            (Phase::Remembered(verdict), Observed::Remembered) => self.answer(verdict),
            (Phase::Answered(verdict), _) => self.answer(verdict),
            // Policy: deny. The shell fed an observation the flow did not ask for: a bug, and an eviction whose
            // checks did not run in order must not go through.
            (phase, observed) => self.answer(EvictionVerdict::deny(
                Outcome::POD_STATUS_NOT_DETERMINED,
                format!(
                    "internal error: the eviction flow expected {} but observed {}",
                    phase_name(&phase),
                    observed_name(&observed)
                ),
            )),
        }
    }

    fn find_budget(&mut self, known: KnownBudgets) -> Need {
        let budgets = match known {
            KnownBudgets::Known(budgets) => budgets,
            // Policy: deny; 429 while the budgets are being loaded (the client retries), 500 when they cannot be.
            KnownBudgets::NotLoaded(why) => {
                return self.answer(EvictionVerdict::deny(
                    Outcome::CFG_NOT_LOADED,
                    format!("ZoneAwarePodDisruptionBudgets are not loaded yet ({why}); retry"),
                ));
            }
            KnownBudgets::Unreadable(why) => {
                return self.answer(EvictionVerdict::deny(
                    Outcome::CFG_NOT_READABLE,
                    format!("ZoneAwarePodDisruptionBudgets cannot be read: {why}"),
                ));
            }
        };
        let Some(pod) = self.pod.as_ref() else { return self.internal("no pod") };
        let config = match budget_for(&budgets, &pod.pod.labels) {
            Err(MultipleBudgets) => {
                return self.answer(EvictionVerdict::deny(Outcome::CFG_NOT_FOUND, MultipleBudgets.to_string()));
            }
            // Regular PodDisruptionBudgets still apply: the API server checks them after us.
            Ok(None) => return self.answer(EvictionVerdict::allow(Outcome::POD_NOT_IN_SCOPE)),
            Ok(Some(config)) => config.clone(),
        };
        let owner = match &pod.pod.owner {
            None => {
                return self
                    .answer(EvictionVerdict::deny(Outcome::STS_NOT_FOUND, "unable to find a StatefulSet pod owner"));
            }
            Some(owner) if owner.kind != "StatefulSet" => {
                let message = format!(
                    "pod owner is not a StatefulSet - {} has owner {} ({})",
                    pod.name(),
                    owner.name,
                    owner.kind
                );
                return self.answer(EvictionVerdict::deny(Outcome::STS_NOT_FOUND, message));
            }
            Some(owner) => owner.name.clone(),
        };
        self.config = Some(config);
        // The budget's StatefulSets first: the pod's own is normally among them, which spares a read of it on every
        // decision (a drain burst makes hundreds). The answers keep the reference's order of checks all the same:
        // the owner's (found, `maxUnavailable`) before the list's (enough StatefulSets).
        self.owner_name = owner;
        self.phase = Phase::StatefulSets;
        Need::StatefulSets { selector: self.selector() }
    }

    /// The budget's StatefulSets listed: the owner taken from the list, or read by name when it is not in it (not
    /// selected by the budget, or the list failed).
    fn statefulsets_read(&mut self, listed: Result<Vec<StatefulSetView>, String>) -> Need {
        let owner = listed.as_ref().ok().and_then(|list| list.iter().find(|s| s.name == self.owner_name)).cloned();
        self.listed = Some(listed);
        match owner {
            Some(owner) => self.owner_read(Lookup::Found(Box::new(owner))),
            None => {
                self.phase = Phase::StatefulSet;
                Need::StatefulSet { name: self.owner_name.clone() }
            }
        }
    }

    /// The list taken by [`Self::statefulsets_read`], judged.
    fn statefulsets_checked(&mut self) -> Need {
        match self.listed.take() {
            Some(listed) => self.statefulsets_listed(listed),
            None => self.internal("no StatefulSets listed"),
        }
    }

    fn owner_read(&mut self, lookup: Lookup<StatefulSetView>) -> Need {
        let name = self.owner_name.clone();
        let owner = match lookup {
            Lookup::Found(owner) => *owner,
            // Policy: deny (500, as the reference).
            Lookup::NotFound => {
                let message =
                    format!("unable to find StatefulSet {name} by name: statefulsets.apps \"{name}\" not found");
                return self.answer(EvictionVerdict::deny(Outcome::STS_NOT_FOUND, message));
            }
            Lookup::Failed(err) | Lookup::Forbidden(err) => {
                let message = format!("unable to find StatefulSet {name} by name: {err}");
                return self.answer(EvictionVerdict::deny(Outcome::STS_NOT_FOUND, message));
            }
        };
        let (Some(config), Ok(request)) = (self.config.as_ref(), self.request.as_ref()) else {
            return self.internal("no budget");
        };
        self.max_unavailable = Self::effective_max_unavailable(config, request, &owner);
        self.owner = Some(owner);
        if self.max_unavailable == 0 {
            return self.answer(EvictionVerdict::deny(Outcome::MAX_UNAVAILABLE_0, "max unavailable = 0"));
        }
        match self.serialisation {
            Serialisation::InProcess => self.lock(false),
            Serialisation::Intents | Serialisation::StatefulSetIntents => self.statefulsets_checked(),
        }
    }

    /// The `maxUnavailable` the eviction is judged against, by the pod's StatefulSet.
    fn effective_max_unavailable(config: &ZpdbConfig, request: &EvictionRequest, owner: &StatefulSetView) -> u32 {
        // The controller's stand-in for a budget's 0 is 1 under a partition-aware budget (reference 5.5).
        let override_zero = request.max_unavailable_override.map(|n| if config.partition.is_some() { 1 } else { n });
        max_unavailable(config, owner, override_zero)
    }

    /// The StatefulSets listed after our intent (or under the lock): their intents, and the StatefulSets the second
    /// judgement uses, so that it rests only on reads issued after the intent (the first list may have been issued
    /// before the request arrived, shared with other decisions: a StatefulSet scaled up since would hide its missing
    /// pods). The pod's own StatefulSet and `maxUnavailable` are taken again from the list when it is there.
    fn statefulsets_read_again(&mut self, mut statefulsets: Vec<StatefulSetView>) -> Need {
        self.statefulset_intents = statefulset_intents(&statefulsets);
        statefulsets.sort_by(|a, b| a.name.cmp(&b.name));
        // Policy: deny (400, as the reference): without the other zones nothing can be judged.
        if statefulsets.len() <= 1 {
            return self.deny_after_intent(min_statefulsets_not_found());
        }
        let owner = self.owner.as_ref().and_then(|o| statefulsets.iter().find(|s| same_statefulset(s, o))).cloned();
        self.statefulsets = statefulsets;
        if let (Some(owner), Some(config), Ok(request)) = (owner, self.config.as_ref(), self.request.as_ref()) {
            self.max_unavailable = Self::effective_max_unavailable(config, request, &owner);
            self.owner = Some(owner);
            // Policy: deny (403, as the reference): the budget allows nothing now.
            if self.max_unavailable == 0 {
                return self
                    .deny_after_intent(EvictionVerdict::deny(Outcome::MAX_UNAVAILABLE_0, "max unavailable = 0"));
            }
        }
        self.phase = Phase::PodsAgain;
        Need::PodsAgain { selector: self.selector(), after: Duration::ZERO }
    }

    /// Denies after the intent was written: takes it back first (under in-process serialisation there is none).
    fn deny_after_intent(&mut self, verdict: EvictionVerdict) -> Need {
        if self.serialisation == Serialisation::InProcess {
            return self.answer(verdict);
        }
        let need = self.remove_intent();
        self.phase = Phase::IntentRemoved(verdict);
        need
    }

    fn lock(&mut self, again: bool) -> Need {
        self.locked = true;
        self.phase = Phase::Locked { again };
        Need::Lock { budget: self.config.as_ref().map(|c| c.name.clone()).unwrap_or_default() }
    }

    fn statefulsets_listed(&mut self, listed: Result<Vec<StatefulSetView>, String>) -> Need {
        let mut statefulsets = match listed {
            // Policy: deny (400, as the reference): without the other zones nothing can be judged.
            Err(_) => return self.answer(min_statefulsets_not_found()),
            Ok(statefulsets) => statefulsets,
        };
        // Intents count wherever they are kept (a decision where pods can be patched still sees those kept on
        // StatefulSets, say by a replica of an older chart during an upgrade).
        self.statefulset_intents = statefulset_intents(&statefulsets);
        // As the API lists them; the reference's messages name the first disrupted zone in this order.
        statefulsets.sort_by(|a, b| a.name.cmp(&b.name));
        // A budget over a single StatefulSet can never allow an eviction (as the reference).
        if statefulsets.len() <= 1 {
            return self.answer(min_statefulsets_not_found());
        }
        self.statefulsets = statefulsets;
        if let (Some(rule), Some(pod)) = (self.config.as_ref().and_then(|c| c.partition.as_ref()), self.pod.as_ref()) {
            match rule.partition_of(pod.name()) {
                Some(partition) => self.partition = Some(partition),
                None => {
                    return self.answer(EvictionVerdict::deny(
                        Outcome::PARTITION_NOT_IDENTIFIED,
                        "failed to extract partition from pod Name regular expression",
                    ));
                }
            }
        }
        self.phase = Phase::Pods;
        Need::Pods { selector: self.selector() }
    }

    /// The judgement before any intent: denied, the answer; allowed, the intent (or the memory) next.
    fn first_judgement(&mut self, pods: &[BudgetPod], now: Timestamp) -> Need {
        match self.judge(pods, now) {
            Err(verdict) => self.answer(verdict),
            Ok(allowed) => self.allowed_once(allowed, now),
        }
    }

    /// The first judgement allowed the eviction.
    fn allowed_once(&mut self, allowed: EvictionVerdict, now: Timestamp) -> Need {
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

    fn remember(&mut self, allowed: EvictionVerdict, now: Timestamp) -> Need {
        if self.request.as_ref().is_ok_and(|r| r.dry_run) {
            return self.answer(allowed);
        }
        let uid = self.pod.as_ref().map(|p| p.uid().to_string()).unwrap_or_default();
        self.phase = Phase::Remembered(allowed);
        Need::Remember { uid, until: self.until(now) }
    }

    /// The intent written on the pod's StatefulSet, with the stale intents there removed in the same write.
    fn write_statefulset_intent(&mut self, now: Timestamp) -> Need {
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

    fn remove_intent(&self) -> Need {
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
    fn our_intent_kept(&self, statefulsets: &[StatefulSetView]) -> bool {
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
    fn read_again(&mut self, after: Duration) -> Need {
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
    fn has_way_over_rivals(&self, pods: &[BudgetPod], now: Timestamp) -> bool {
        let (Some(mine), Some(evicted)) = (self.intent_until, &self.pod) else { return false };
        let ours = (mine, evicted.name());
        let later = |p: &BudgetPod| {
            let intent = self.intent_of(p);
            p.uid() != evicted.uid() && intent.is_some_and(|u| u > now) && intent.map(|u| (u, p.name())) > Some(ours)
        };
        pods.iter().any(later) && self.judge_counting(pods, now, |p| !later(p)).is_ok()
    }

    /// Judges on `pods`, counting as unavailable every other pod whose eviction is being allowed.
    fn judge(&self, pods: &[BudgetPod], now: Timestamp) -> Result<EvictionVerdict, EvictionVerdict> {
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

    fn selector(&self) -> String {
        self.config.as_ref().map(ZpdbConfig::label_selector).unwrap_or_default()
    }

    fn pod_name(&self) -> String {
        self.request.as_ref().map(|r| r.pod.clone()).unwrap_or_default()
    }

    fn internal(&mut self, what: &str) -> Need {
        self.answer(EvictionVerdict::deny(Outcome::POD_STATUS_NOT_DETERMINED, format!("internal error: {what}")))
    }

    fn answer(&mut self, mut verdict: EvictionVerdict) -> Need {
        // The controller tells people which budget holds its deletion back.
        if self.is_rollout_deletion() && !verdict.allowed() {
            let holder = verdict.holder.get_or_insert_default();
            holder.budget = holder.budget.take().or_else(|| self.config.as_ref().map(|c| c.name.clone()));
        }
        self.phase = Phase::Answered(verdict.clone());
        Need::Answer(verdict)
    }
}

/// The key of the controller's intent about the pod `uid`, expiring at `until`, on the pod's StatefulSet (see
/// `EvictPod::statefulset_intent_key`): within the 47 characters a key's name part leaves.
pub fn controller_statefulset_intent_key(uid: &str, until: Timestamp) -> String {
    let uid: String = uid.chars().take(24).collect();
    crate::keys::eviction_intent_key(&format!("controller-{uid}-{}", until.as_second()))
}

fn not_ready_replaced() -> EvictionVerdict {
    EvictionVerdict::allow_with_warning(Outcome::POD_NOT_READY, "pod is not ready")
}

fn min_statefulsets_not_found() -> EvictionVerdict {
    EvictionVerdict::deny(Outcome::MIN_STS_NOT_FOUND, "minimum number of StatefulSets not found")
}

fn not_determined() -> EvictionVerdict {
    EvictionVerdict::deny(Outcome::POD_STATUS_NOT_DETERMINED, "unable to determine pod status in related StatefulSet")
}

fn phase_name(phase: &Phase) -> &'static str {
    match phase {
        Phase::Start => "the start",
        Phase::BudgetsFirst => "the budgets",
        Phase::Pod => "the pod",
        Phase::Budgets => "the budgets",
        Phase::StatefulSet => "the pod's StatefulSet",
        Phase::Locked { .. } => "the lock",
        Phase::StatefulSets => "the budget's StatefulSets",
        Phase::Pods | Phase::PodsAgain => "the budget's pods",
        Phase::Claimed(_) => "the claim",
        Phase::StatefulSetsAgain => "the budget's StatefulSets",
        Phase::IntentWritten => "the intent written",
        Phase::IntentRemoved(_) => "the intent removed",
        Phase::Remembered(_) => "the eviction remembered",
        Phase::Answered(_) | Phase::Stepping => "nothing",
    }
}

fn observed_name(observed: &Observed) -> &'static str {
    match observed {
        Observed::Start => "the start",
        Observed::Pod(_) => "the pod",
        Observed::Budgets(_) => "the budgets",
        Observed::StatefulSet(_) => "a StatefulSet",
        Observed::Locked { .. } | Observed::NotLocked => "the lock",
        Observed::StatefulSets(_) => "the StatefulSets",
        Observed::Pods(_) => "the pods",
        Observed::IntentWritten(_) => "the intent written",
        Observed::IntentRemoved => "the intent removed",
        Observed::Remembered => "the eviction remembered",
        Observed::Claimed { .. } => "the claim",
    }
}
