//! ZoneAwarePodDisruptionBudgets in the shell: the budgets the operator knows, fed by a watch
//! ([`budgets`]); the in-process lock and memory that serialise eviction decisions where eviction intents cannot
//! be written ([`serialisation`]); and the `grafana.com/ready-time` tracker ([`ready_time`]). The eviction and
//! validation webhooks that use them are in `admission::evictions`.
//!
//! Owns the state the core's eviction flow is fed with, and the tasks that keep it. Must not decide: what a budget
//! is, whether an eviction keeps it and what to stamp on a pod are `rollout_core::zpdb`'s.

pub mod budgets;
pub mod decide;
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
    pub metrics: ZpdbMetrics,
}

impl Zpdb {
    /// Budgets not loaded yet (the watch fills them), with these metrics.
    pub fn new(metrics: ZpdbMetrics) -> Self {
        Zpdb { budgets: budgets::BudgetCache::loading(), serialisation: Arc::default(), metrics }
    }

    /// These budgets, known at once (a dump's, a test's).
    pub fn with_budgets(budgets: rollout_core::zpdb::Budgets) -> Self {
        Zpdb { budgets: budgets::BudgetCache::known(budgets), ..Zpdb::default() }
    }
}
