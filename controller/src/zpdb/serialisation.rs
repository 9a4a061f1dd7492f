//! How this process serialises eviction decisions, and the reference's way, kept for where no eviction intent can be
//! written. Intents go on the pod; where pods cannot be patched (older Helm charts grant no `patch` on pods), on the
//! pod's StatefulSet; where that is refused too, a lock per budget in this process, held from before the budget's
//! pods are read until the answer, and a memory of the evictions this process allowed (by pod uid, until their
//! expiry), which serialises one replica's decisions only. Each step down is a feature gate's refusal (said once in the log
//! and in `rollout_operator_feature_disabled`, tried again after a while); the mode is read from the gates
//! (`Zpdb::serialisation_mode`).
//!
//! Also the decisions under way in this process ([`UnderWay`]), whichever the mode: the core's first judgement
//! counts their pods, so a burst in one process does not write intents that would only deny each other.
//!
//! Owns the lock table, the memory, and the decisions under way. Must not decide anything about an
//! eviction.

use jiff::Timestamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard};

#[derive(Debug, Default)]
pub struct InProcess {
    locks: Mutex<HashMap<String, Arc<AsyncMutex<()>>>>,
    memory: Mutex<BTreeMap<String, Timestamp>>,
}

impl InProcess {
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

/// The decisions under way in this process, by budget: each registered by its claim until it is answered (its
/// [`Claim`] dropped).
#[derive(Debug, Default)]
pub struct UnderWay {
    next: std::sync::atomic::AtomicU64,
    /// Budget name -> claim number -> pod uid.
    claims: Mutex<HashMap<String, BTreeMap<u64, String>>>,
}

/// One decision's registration; dropping it ends it.
#[derive(Debug)]
pub struct Claim {
    under_way: Arc<UnderWay>,
    budget: String,
    number: u64,
}

impl UnderWay {
    /// Registers a decision about the pod `uid` under `budget`; with the pods of the others under way there, in one
    /// step (two decisions claiming at once: the later sees the earlier).
    pub fn claim(self: &Arc<Self>, budget: &str, uid: &str) -> (Claim, Vec<String>) {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let mut claims = self.claims.lock().unwrap_or_else(|e| e.into_inner());
        let of_budget = claims.entry(budget.to_string()).or_default();
        let others = of_budget.values().cloned().collect();
        of_budget.insert(number, uid.to_string());
        (Claim { under_way: Arc::clone(self), budget: budget.to_string(), number }, others)
    }

    /// The decisions under way under `budget` now.
    pub fn count(&self, budget: &str) -> usize {
        self.claims.lock().unwrap_or_else(|e| e.into_inner()).get(budget).map_or(0, BTreeMap::len)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut claims = self.under_way.claims.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(of_budget) = claims.get_mut(&self.budget) {
            of_budget.remove(&self.number);
            if of_budget.is_empty() {
                claims.remove(&self.budget);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_claim_sees_the_others_under_way_and_ends_when_dropped() {
        let under_way = Arc::new(UnderWay::default());
        let (first, others) = under_way.claim("budget", "uid-a");
        assert!(others.is_empty());
        let (second, others) = under_way.claim("budget", "uid-b");
        assert_eq!(others, vec!["uid-a".to_string()]);
        let (_elsewhere, others) = under_way.claim("other-budget", "uid-c");
        assert!(others.is_empty(), "claims are per budget");
        drop(first);
        let (_third, others) = under_way.claim("budget", "uid-a");
        assert_eq!(others, vec!["uid-b".to_string()]);
        drop(second);
        assert_eq!(under_way.count("budget"), 1);
    }
}
