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
    /// Set once a live pod read was refused (403), so it is said once.
    pub pod_reads_forbidden: Arc<std::sync::atomic::AtomicBool>,
}

impl Zpdb {
    /// Budgets not loaded yet (the watch fills them), with these metrics.
    pub fn new(metrics: ZpdbMetrics) -> Self {
        Zpdb { budgets: budgets::BudgetCache::loading(), metrics, ..Zpdb::default() }
    }

    /// Records that live pod reads are refused; true the first time (the caller says so once).
    pub fn refuse_pod_reads(&self) -> bool {
        !self.pod_reads_forbidden.swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// These budgets, known at once (a dump's, a test's).
    pub fn with_budgets(budgets: rollout_core::zpdb::Budgets) -> Self {
        Zpdb { budgets: budgets::BudgetCache::known(budgets), ..Zpdb::default() }
    }
}
