//! How this process serialises eviction decisions, and the reference's way, kept for where no eviction intent can be
//! written. Intents go on the pod; where pods cannot be patched (older Helm charts grant no `patch` on pods), on the
//! pod's StatefulSet; where that is refused too, a lock per budget in this process, held from before the budget's
//! pods are read until the answer, and a memory of the evictions this process allowed (by pod uid, until their
//! expiry), which serialises one replica's decisions only. Each step down is said once in the log and in
//! `rollout_operator_feature_disabled`.
//!
//! Owns the lock table, the memory and the mode. Must not decide anything about an eviction.

use jiff::Timestamp;
use rollout_core::zpdb::Serialisation;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The feature named in `rollout_operator_feature_disabled` when intents on pods are refused.
pub const INTENTS_FEATURE: &str = "zpdb-eviction-intents";
/// The same, when intents on StatefulSets are refused too (decisions are then serialised per replica only).
pub const STATEFULSET_INTENTS_FEATURE: &str = "zpdb-eviction-intents-on-statefulsets";

#[derive(Debug, Default)]
pub struct InProcess {
    /// How many kinds of intent the API refused: 0 none (intents on pods), 1 on pods (on StatefulSets), 2 both
    /// (in this process's memory).
    refused: AtomicU8,
    locks: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
    memory: Mutex<BTreeMap<String, Timestamp>>,
}

impl InProcess {
    /// How decisions are serialised now.
    pub fn mode(&self) -> Serialisation {
        match self.refused.load(Ordering::Relaxed) {
            0 => Serialisation::Intents,
            1 => Serialisation::StatefulSetIntents,
            _ => Serialisation::InProcess,
        }
    }

    /// Records that the API refused intents written the way of `mode`; true the first time (the caller says so
    /// once).
    pub fn refuse(&self, mode: Serialisation) -> bool {
        let level = match mode {
            Serialisation::Intents => 1,
            Serialisation::StatefulSetIntents | Serialisation::InProcess => 2,
        };
        self.refused.fetch_max(level, Ordering::Relaxed) < level
    }

    /// Takes the budget's lock (waits for the decision holding it).
    pub async fn lock(&self, budget: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(budget.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// The evictions remembered and not expired at `now` (expired ones are forgotten).
    pub fn remembered(&self, now: Timestamp) -> Vec<(String, Timestamp)> {
        let mut memory = self.memory.lock().unwrap_or_else(|e| e.into_inner());
        memory.retain(|_, until| *until > now);
        memory.iter().map(|(uid, until)| (uid.clone(), *until)).collect()
    }

    pub fn remember(&self, uid: &str, until: Timestamp) {
        self.memory.lock().unwrap_or_else(|e| e.into_inner()).insert(uid.to_string(), until);
    }
}
