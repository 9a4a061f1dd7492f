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
//!
//! Owns the machine itself ([`EvictPod`]: its phases and the step from one need to the next); the vocabulary it
//! speaks with the shell (the request, settings, needs and observations) is in `needs`, and the intent with the
//! judgements around it (writing and taking back intents, the rival order, the judgement counting the pending
//! evictions) in `intents`.

mod intents;
mod needs;

pub use intents::{RIVAL_WAIT, RIVAL_WAITS, controller_statefulset_intent_key, rival_wait};
pub use needs::{
    EvictionRequest, EvictionSettings, KnownBudgets, Lookup, Need, Observed, ROLLOUT_CONTROLLER, Requester,
    Serialisation,
};

use super::config::{MultipleBudgets, ZpdbConfig, budget_for};
use super::decision::{EvictionVerdict, Outcome, max_unavailable, same_statefulset};
use super::pods::{BudgetPod, BudgetPods, statefulset_intents};
use crate::admission::{AdmissionRequest, foreign_namespace};
use crate::failure::Failure;
use crate::view::StatefulSetView;
use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

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
    listed: Option<Result<Vec<StatefulSetView>, Failure>>,
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
                Lookup::Failed(err) if err.is_forbidden() && self.is_rollout_deletion() => {
                    self.answer(EvictionVerdict::allow_with_warning(
                        Outcome::POD_NOT_IN_SCOPE,
                        format!("the operator may not read pods ({err}); replacing the pod without budgets"),
                    ))
                }
                Lookup::Failed(err) => self.answer(EvictionVerdict::deny(Outcome::POD_NOT_FOUND, err.to_string())),
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
                Err(Failure::Forbidden(_)) if self.serialisation == Serialisation::Intents => {
                    self.serialisation = Serialisation::StatefulSetIntents;
                    self.write_statefulset_intent(now)
                }
                // No permission to write intents at all: serialise in this process, as the reference does, and
                // judge again under the lock (the first judgement was made without it).
                Err(Failure::Forbidden(_)) => {
                    self.serialisation = Serialisation::InProcess;
                    self.our_statefulset_intent = None;
                    self.lock(true)
                }
                // Policy: deny with 429 (the client retries and the next attempt reads the pod afresh).
                Err(err @ (Failure::Conflict(_) | Failure::NotFound(_))) => self.answer(EvictionVerdict::deny(
                    Outcome::DENIED,
                    format!("pod {} changed while its eviction was being decided ({err}); retry", self.pod_name()),
                )),
                // Policy: deny: without its intent, another decision could spend the same budget.
                Err(err) => self.answer(EvictionVerdict::deny(
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
    fn statefulsets_read(&mut self, listed: Result<Vec<StatefulSetView>, Failure>) -> Need {
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
            Lookup::Failed(err) => {
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

    fn statefulsets_listed(&mut self, listed: Result<Vec<StatefulSetView>, Failure>) -> Need {
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
