//! The reference's serialisation, kept for where eviction intents cannot be written (pods `patch` refused): a lock
//! per budget in this process, held from before the budget's pods are read until the answer, and a memory of the
//! evictions this process allowed (by pod uid, until their expiry). It serialises one replica's decisions only;
//! the first refused intent says so once in the log and in `rollout_operator_feature_disabled`.
//!
//! Owns the lock table, the memory and the mode. Must not decide anything about an eviction.

use jiff::Timestamp;
use rollout_core::zpdb::Serialisation;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

/// The feature named in `rollout_operator_feature_disabled` when intents are refused.
pub const INTENTS_FEATURE: &str = "zpdb-eviction-intents";

#[derive(Debug, Default)]
pub struct InProcess {
    /// Set once the API refused an intent: from then on this process serialises in memory.
    intents_forbidden: AtomicBool,
    locks: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
    memory: Mutex<BTreeMap<String, Timestamp>>,
}

impl InProcess {
    /// How decisions are serialised now.
    pub fn mode(&self) -> Serialisation {
        if self.intents_forbidden.load(Ordering::Relaxed) { Serialisation::InProcess } else { Serialisation::Intents }
    }

    /// Records that intents are refused; true the first time (the caller says so once).
    pub fn forbid_intents(&self) -> bool {
        !self.intents_forbidden.swap(true, Ordering::Relaxed)
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
