//! ZoneAwarePodDisruptionBudgets in the shell: the budgets the operator knows, fed by a watch
//! ([`budgets`]); the in-process lock and memory that serialise eviction decisions where eviction intents cannot
//! be written ([`serialisation`]); the live lists of a budget's pods shared by concurrent decisions ([`reads`]);
//! and the `grafana.com/ready-time` tracker ([`ready_time`]). The eviction and
//! validation webhooks that use them are in `admission::evictions`.
//!
//! Owns the state the core's eviction flow is fed with, and the tasks that keep it. Must not decide: what a budget
//! is, whether an eviction keeps it and what to stamp on a pod are `rollout_core::zpdb`'s.

pub mod budgets;
pub mod decide;
pub mod reads;
pub mod ready_time;
pub mod serialisation;

use crate::ops::metrics::ZpdbMetrics;
use std::sync::Arc;

/// What the eviction webhook needs besides the cluster: the known budgets, the in-process serialisation, and
/// the metrics.
#[derive(Clone, Default)]
pub struct Zpdb {
    pub budgets: budgets::BudgetCache,
    pub serialisation: Arc<serialisation::InProcess>,
    /// The decisions under way in this process, by budget.
    pub under_way: Arc<serialisation::UnderWay>,
    pub metrics: ZpdbMetrics,
    /// The budgets' pod lists in flight (for this process's one API client).
    pub pod_lists: reads::PodLists,
    /// The same for their StatefulSets (read again after each intent, since intents may be kept there).
    pub statefulset_lists: reads::StatefulSetLists,
}

impl Zpdb {
    /// Budgets not loaded yet (the watch fills them), with these metrics.
    pub fn new(metrics: ZpdbMetrics) -> Self {
        Zpdb { budgets: budgets::BudgetCache::loading(), metrics, ..Zpdb::default() }
    }

    /// How decisions are serialised now: intents on pods unless refused, then on StatefulSets unless refused too,
    /// else in this process (each refused way tried again after a while, through its feature gate).
    pub fn serialisation_mode(&self) -> rollout_core::zpdb::Serialisation {
        use crate::ops::feature_gate::Gate;
        use rollout_core::zpdb::Serialisation;
        let gates = &self.metrics.gates;
        if gates.may_try(Gate::PodIntents) {
            Serialisation::Intents
        } else if gates.may_try(Gate::StatefulSetIntents) {
            Serialisation::StatefulSetIntents
        } else {
            Serialisation::InProcess
        }
    }

    /// These budgets, known at once (a dump's, a test's).
    pub fn with_budgets(budgets: rollout_core::zpdb::Budgets) -> Self {
        Zpdb { budgets: budgets::BudgetCache::known(budgets), ..Zpdb::default() }
    }
}
