//! The budgets' say over the rollout controller's deletions, judged on a snapshot: the pass asks it for every pod it
//! would delete, so that `plan`, `status`, the state metrics and Events say "held by a budget" exactly when the
//! controller would hold the deletion back.
//!
//! Owns the driver that runs the eviction step machine ([`super::flow::EvictPod`]) as a dry run against data already
//! read (the budgets known, the namespace's StatefulSets and pods), answering each read from it. The machine, and so
//! every rule of the decision, is the one the controller runs live before each deletion; only the serialisation
//! differs (a dry run writes no intent): the deletions planned earlier in the same pass are counted as if their
//! intents were written, as they are when the controller carries them out one after the other. Must not do I/O.

use super::config::ZpdbConfig;
use super::decision::EvictionVerdict;
use super::flow::{EvictPod, EvictionRequest, EvictionSettings, KnownBudgets, Lookup, Need, Observed, Serialisation};
use super::pods::{BudgetPod, BudgetPods};
use crate::view::StatefulSetView;
use jiff::Timestamp;
use std::collections::BTreeSet;
use std::time::Duration;

/// What a pass knows of the budgets and of the objects they select.
#[derive(Debug, Clone, Copy)]
pub struct BudgetScope<'a> {
    pub known: &'a KnownBudgets,
    /// The namespace the operator manages.
    pub namespace: &'a str,
    /// Every StatefulSet of the namespace (a budget may select beyond one rollout group).
    pub statefulsets: &'a [StatefulSetView],
    /// Every pod of the namespace, with its `grafana.com/ready-time` stamp and eviction intents.
    pub pods: &'a [BudgetPod],
}

/// A deletion the budgets hold back, for people.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BudgetHold {
    pub statefulset: String,
    pub pod: String,
    /// The budget that selects the pod, when one was found.
    pub budget: Option<String>,
    /// The decision's message (the reference's wording, e.g. `1 pod not ready in ingester-zone-b`).
    pub message: String,
    /// The pods the budget counted as unavailable.
    pub unavailable: Vec<String>,
}

impl BudgetHold {
    /// The hold described by the budgets' denial of the deletion of `pod` (of `statefulset`).
    pub fn from_denial(statefulset: &str, pod: &str, denial: &EvictionVerdict) -> Self {
        BudgetHold {
            statefulset: statefulset.to_string(),
            pod: pod.to_string(),
            budget: denial.holder.as_ref().and_then(|h| h.budget.clone()),
            message: denial.message().to_string(),
            unavailable: denial.holder.as_ref().map(|h| h.unavailable.clone()).unwrap_or_default(),
        }
    }

    /// One line: which budget holds which pod back, and why.
    pub fn describe(&self) -> String {
        let budget = match &self.budget {
            Some(name) => format!("ZoneAwarePodDisruptionBudget {name}"),
            None => "the ZoneAwarePodDisruptionBudgets".to_string(),
        };
        let counted = if self.unavailable.is_empty() {
            String::new()
        } else {
            format!(" (unavailable: {})", self.unavailable.join(", "))
        };
        format!("{budget} holds the replacement of pod {} back: {}{counted}", self.pod, self.message)
    }
}

/// Most needs a dry run can have (it ends after its first judgement); a bound, so that a flow that asked for
/// something a dry run never needs cannot loop.
const MAX_STEPS: usize = 16;

/// The budgets' answer to the controller deleting `pod` (of `statefulset`, whose `rollout-max-unavailable` resolves
/// to `rollout_max_unavailable`) on `scope` at `now`, counting the pods in `going` (uids: deletions planned earlier
/// in the same pass) as being evicted. `None` when the budgets allow it.
pub fn hold_of_deletion(
    scope: &BudgetScope<'_>,
    statefulset: &str,
    pod: &str,
    rollout_max_unavailable: u32,
    going: &BTreeSet<String>,
    now: Timestamp,
) -> Option<BudgetHold> {
    let request = EvictionRequest {
        dry_run: true,
        ..EvictionRequest::for_rollout(pod, scope.namespace, rollout_max_unavailable)
    };
    let settings = EvictionSettings {
        namespace: scope.namespace.to_string(),
        serialisation: Serialisation::Intents,
        intent_lifetime: Duration::ZERO,
    };
    let mut flow = EvictPod::new(request, settings);
    // An earlier deletion of the pass counts as the controller's intent on it would make it count.
    let far = Timestamp::MAX;
    let as_seen = |p: &BudgetPod| {
        let mut p = p.clone();
        if going.contains(p.uid()) {
            p.intent_until = Some(far);
        }
        p
    };
    let config_of = |selector: &str| -> Option<ZpdbConfig> {
        match scope.known {
            KnownBudgets::Known(budgets) => budgets.iter().find(|c| c.label_selector() == selector).cloned(),
            _ => None,
        }
    };
    let mut observed = Observed::Start;
    for _ in 0..MAX_STEPS {
        observed = match flow.step(observed, now) {
            Need::Answer(answer) if answer.allowed() => return None,
            Need::Answer(denial) => return Some(BudgetHold::from_denial(statefulset, pod, &denial)),
            Need::Budgets => Observed::Budgets(scope.known.clone()),
            Need::Pod { name } => Observed::Pod(match scope.pods.iter().find(|p| p.name() == name) {
                Some(found) => Lookup::Found(Box::new(as_seen(found))),
                None => Lookup::NotFound,
            }),
            Need::StatefulSet { name } => {
                Observed::StatefulSet(match scope.statefulsets.iter().find(|s| s.name == name) {
                    Some(found) => Lookup::Found(Box::new(found.clone())),
                    None => Lookup::NotFound,
                })
            }
            Need::StatefulSets { selector } => Observed::StatefulSets(Ok(config_of(&selector)
                .map(|c| scope.statefulsets.iter().filter(|s| c.selects(&s.labels)).cloned().collect())
                .unwrap_or_default())),
            Need::Pods { selector } => {
                let pods: BudgetPods = config_of(&selector)
                    .map(|c| scope.pods.iter().filter(|p| c.selects(&p.pod.labels)).map(as_seen).collect())
                    .unwrap_or_default();
                Observed::Pods(Ok(pods))
            }
            Need::Lock { .. } => Observed::Locked { remembered: Vec::new() },
            Need::Claim { .. } => Observed::Claimed { others: Vec::new() },
            // A dry run writes nothing; anything else is a need it never has.
            other => {
                let message = format!("internal error: a dry run of the eviction flow asked for {other:?}");
                let denial = EvictionVerdict::deny(super::Outcome::POD_STATUS_NOT_DETERMINED, message);
                return Some(BudgetHold::from_denial(statefulset, pod, &denial));
            }
        };
    }
    let denial = EvictionVerdict::deny(
        super::Outcome::POD_STATUS_NOT_DETERMINED,
        format!("internal error: the eviction flow did not answer within {MAX_STEPS} steps"),
    );
    Some(BudgetHold::from_denial(statefulset, pod, &denial))
}
