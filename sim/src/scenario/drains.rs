//! The drains world's settings: the ZoneAwarePodDisruptionBudget over the group (its mode and limit), how many
//! operator replicas serve the eviction webhook, and which evictor they run (the real one or a test-only one).

use crate::environment::client::BudgetFeed;
use serde::{Deserialize, Serialize};

/// How the budget counts unavailable pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum BudgetMode {
    /// Zone mode: unavailable pods in one zone at a time, at most `maxUnavailable` there.
    Zones,
    /// Partition mode: per partition (the pod's ordinal, by `podNamePartitionRegex`), at most `maxUnavailable`
    /// unavailable across the zones.
    Partitions,
}

/// Which eviction webhook the operator replicas serve: the real one, or one re-introducing a known bug (test-only,
/// sim-local: each changes only what the webhook is given, never its decision code).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Evictor {
    Real,
    /// The re-read after the eviction intent is answered from the first read (a cache, as the reference's
    /// in-memory view was): the intents of concurrent decisions are never seen, so nothing serialises them.
    NoSecondRead,
    /// The operator knows no budget (its cache never fed): every eviction is out of scope and allowed.
    IgnoresBudget,
}

impl Evictor {
    pub const ALL: [Evictor; 3] = [Evictor::Real, Evictor::NoSecondRead, Evictor::IgnoresBudget];

    pub fn name(self) -> &'static str {
        match self {
            Evictor::Real => "real",
            Evictor::NoSecondRead => "no-second-read",
            Evictor::IgnoresBudget => "ignores-budget",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// The drains world's settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drains {
    pub mode: BudgetMode,
    /// The budget's `maxUnavailable`.
    pub max_unavailable: u32,
    /// The budget's `maxUnavailablePercentage` instead (of the evicted pod's StatefulSet's replicas).
    pub percentage: Option<u32>,
    pub evictor: Evictor,
    /// Operator replicas serving the eviction webhook (each eviction goes to one of them at random).
    pub replicas: usize,
    /// How many node drains start during the fault phase (a range, inclusive).
    pub drains: (u64, u64),
    /// The budget is edited during the run ([`edit_budgets`]), and the operator watches it.
    pub budget_edits: bool,
    /// A user re-applies the StatefulSets from their manifests (`kubectl replace`) every 2-10 s of the fault phase,
    /// which drops any eviction intent kept on them.
    pub intent_wipes: bool,
    /// Evictions chase the controller during the fault phase: the moment a pod of a StatefulSet first shows Ready
    /// (the controller's next deletion there follows it) and the moment a controller's deletion of one of its pods
    /// reaches the API server, two evictions of that StatefulSet's other pods and one of a neighbouring zone's leave
    /// within 0-20 ms, each to a replica picked at random: the replicas' decisions (reads, shared lists, intents,
    /// re-reads) and the controller's deletions overlap within milliseconds on the same zone.
    pub chase: bool,
}

impl Default for Drains {
    fn default() -> Self {
        Drains {
            mode: BudgetMode::Zones,
            max_unavailable: 1,
            percentage: None,
            evictor: Evictor::Real,
            replicas: 2,
            drains: (4, 8),
            budget_edits: false,
            intent_wipes: false,
            chase: false,
        }
    }
}

impl Drains {
    /// How the operator's clients learn the budgets: watched when they change during the run, listed once
    /// otherwise (as the drains worlds always did, so their seeds replay).
    pub fn feed(&self) -> BudgetFeed {
        if self.budget_edits { BudgetFeed::Watch } else { BudgetFeed::ListOnce }
    }
}

/// The budget's name.
pub const BUDGET: &str = "ingester-rollout";

/// Nodes per zone: node `k` of a zone hosts the zone's pods whose ordinal is `k` modulo this.
pub const NODES_PER_ZONE: u32 = 2;

/// Partition mode's `crossZoneEvictionDelay`.
pub const CROSS_ZONE_EVICTION_DELAY: &str = "10s";

/// The ZoneAwarePodDisruptionBudget over `group`'s pods and StatefulSets.
pub fn budget_object(group: &str, drains: &Drains) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "selector": {"matchLabels": {rollout_core::keys::ROLLOUT_GROUP: group}},
    });
    match drains.percentage {
        Some(p) => spec["maxUnavailablePercentage"] = serde_json::json!(p),
        None => spec["maxUnavailable"] = serde_json::json!(drains.max_unavailable),
    }
    if drains.mode == BudgetMode::Partitions {
        spec["podNamePartitionRegex"] = serde_json::json!("[a-z\\-]+-zone-[a-z]-([0-9]+)");
        spec["podNameRegexGroup"] = serde_json::json!(1);
        // A peer counts as ready only once stamped ready this long ago by the replicas' ready-time trackers.
        spec["crossZoneEvictionDelay"] = serde_json::json!(CROSS_ZONE_EVICTION_DELAY);
    }
    serde_json::json!({
        "apiVersion": "rollout-operator.grafana.com/v1",
        "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": BUDGET, "namespace": crate::environment::objects::NAMESPACE, "uid": format!("uid-{BUDGET}"),
            "generation": 1, "resourceVersion": "1"},
        "spec": spec,
    })
}
