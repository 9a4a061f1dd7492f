//! Live lists of a budget's pods and StatefulSets, shared by the eviction decisions that need one at the same time.
//!
//! A drain burst asks for hundreds of decisions of one budget at once, and each reads the budget's pods live, twice.
//! One list per decision costs the API server a list of the whole group per request and this process the decoding
//! of every pod each time (the reference's failure under drains). Here, per label selector, at most one list is in
//! flight; a decision joins it or the next one, and each list is decoded once.
//!
//! Which list a decision may join keeps the eviction intents' argument (`rollout_core::zpdb` docs) true: the
//! second read of a decision must be linearized after its intent write. A `fresh` read (the flow's `PodsAgain` and
//! `StatefulSetsAgain`, asked for only after the write returned) therefore joins only a list not yet issued: the next one, issued once
//! the one in flight has answered, so its request starts after the write completed. The first read (not needed for
//! safety: the judgement after the intent uses only the second reads) joins the list in flight, if any.
//!
//! Owns the flights per selector. Must not decide anything about an eviction. One table serves one API client (it
//! lives in the process's [`super::Zpdb`]).

use crate::cluster::LiveReads;
use futures::FutureExt;
use futures::future::{BoxFuture, Shared};
use rollout_core::Failure;
use rollout_core::StatefulSetView;
use rollout_core::zpdb::BudgetPod;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The least time a shared list is given to answer (see [`SharedLists::list_before`]).
pub const MIN_LIST_LIMIT: Duration = Duration::from_secs(5);

/// What can be listed by label selector, as the decisions read it.
pub trait Listable: Send + Sync + Sized + 'static {
    /// The request, for messages ("list pods").
    const WHAT: &'static str;

    fn list<C: LiveReads>(api: C, selector: String) -> BoxFuture<'static, Result<Vec<Self>, Failure>>;
}

impl Listable for BudgetPod {
    const WHAT: &'static str = "list pods";

    fn list<C: LiveReads>(api: C, selector: String) -> BoxFuture<'static, Result<Vec<Self>, Failure>> {
        async move {
            let pods = api.list_pods(&selector).await.map_err(|err| Failure::from(&err))?;
            Ok(pods.iter().filter_map(|p| BudgetPod::from_k8s(p).ok()).collect())
        }
        .boxed()
    }
}

impl Listable for StatefulSetView {
    const WHAT: &'static str = "list statefulsets";

    fn list<C: LiveReads>(api: C, selector: String) -> BoxFuture<'static, Result<Vec<Self>, Failure>> {
        async move {
            let listed = api.list_statefulsets(&selector).await.map_err(|err| Failure::from(&err))?;
            Ok(listed.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect())
        }
        .boxed()
    }
}

/// One list's outcome, as every decision that joined it sees it (shared, not copied).
pub type Listed<T = BudgetPod> = Result<Arc<[T]>, Failure>;

type Flight<T> = Shared<BoxFuture<'static, Listed<T>>>;

struct Slot<T> {
    /// The list issued and not answered yet.
    current: Option<(u64, Flight<T>)>,
    /// The list to issue once `current` has answered; not issued yet, so a fresh read may join it.
    next: Option<(u64, Flight<T>)>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot { current: None, next: None }
    }
}

struct Table<T> {
    flights: u64,
    slots: HashMap<String, Slot<T>>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table { flights: 0, slots: HashMap::new() }
    }
}

/// The lists in flight, per label selector.
pub struct SharedLists<T> {
    table: Arc<Mutex<Table<T>>>,
}

/// The budgets' pod lists.
pub type PodLists = SharedLists<BudgetPod>;
/// The budgets' StatefulSet lists.
pub type StatefulSetLists = SharedLists<StatefulSetView>;

impl<T> Clone for SharedLists<T> {
    fn clone(&self) -> Self {
        SharedLists { table: self.table.clone() }
    }
}

impl<T> Default for SharedLists<T> {
    fn default() -> Self {
        SharedLists { table: Arc::default() }
    }
}

impl<T> std::fmt::Debug for SharedLists<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLists").finish_non_exhaustive()
    }
}

impl<T: Listable> SharedLists<T> {
    fn table(&self) -> MutexGuard<'_, Table<T>> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The budget's objects by `selector`: from a list issued after this call when `fresh`, else possibly from the
    /// one in flight. `limit` bounds a list this call issues (those joining it bound their own wait).
    pub async fn list<C: LiveReads>(&self, api: &C, selector: &str, fresh: bool, limit: Duration) -> Listed<T> {
        let flight = {
            let mut table = self.table();
            let table = &mut *table;
            let slot = table.slots.entry(selector.to_string()).or_default();
            match (&slot.current, &slot.next) {
                (Some((_, current)), _) if !fresh => current.clone(),
                (_, Some((_, next))) => next.clone(),
                (current, None) => {
                    table.flights += 1;
                    let id = table.flights;
                    let before = current.as_ref().map(|(_, c)| c.clone());
                    let flight = self.flight(id, api.clone(), selector.to_string(), before, limit);
                    slot.next = Some((id, flight.clone()));
                    flight
                }
            }
        };
        flight.await
    }

    /// [`SharedLists::list`] within `deadline` (whoever issues the list or joins it): a list not answered by then is
    /// a failure, saying what it was. A list this call issues runs for at least [`MIN_LIST_LIMIT`], whatever is left
    /// of its own deadline: others join it, and a list cut short by a decision about to give up would fail them all
    /// (a failed first list of the StatefulSets is a 400, which `kubectl drain` does not retry).
    pub async fn list_before<C: LiveReads>(
        &self,
        api: &C,
        selector: &str,
        fresh: bool,
        deadline: tokio::time::Instant,
    ) -> Listed<T> {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match tokio::time::timeout(left, self.list(api, selector, fresh, left.max(MIN_LIST_LIMIT))).await {
            Ok(listed) => listed,
            Err(_) => Err(Failure::Deadline(format!("API unavailable: {}: the deadline passed", T::WHAT))),
        }
    }

    /// A list that waits for `before` to answer, then is issued (from then on only non-fresh reads join it).
    fn flight<C: LiveReads>(
        &self,
        id: u64,
        api: C,
        selector: String,
        before: Option<Flight<T>>,
        limit: Duration,
    ) -> Flight<T> {
        let lists = self.clone();
        async move {
            // Whatever it answered: this list only has to start after it.
            if let Some(before) = before {
                let _answered = before.await;
            }
            lists.change(&selector, |slot| {
                if slot.next.as_ref().is_some_and(|(n, _)| *n == id) {
                    slot.current = slot.next.take();
                }
            });
            let listed = match tokio::time::timeout(limit, T::list(api, selector.clone())).await {
                Ok(Ok(items)) => Ok(Arc::from(items)),
                Ok(Err(err)) => Err(err),
                Err(_) => {
                    Err(Failure::Deadline(format!("API unavailable: {}: the webhook's deadline passed", T::WHAT)))
                }
            };
            lists.change(&selector, |slot| {
                if slot.current.as_ref().is_some_and(|(c, _)| *c == id) {
                    slot.current = None;
                }
            });
            listed
        }
        .boxed()
        .shared()
    }

    fn change(&self, selector: &str, change: impl FnOnce(&mut Slot<T>)) {
        let mut table = self.table();
        if let Some(slot) = table.slots.get_mut(selector) {
            change(slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::ApiError;
    use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// Lists one pod named after how many lists were issued before it, after a pause.
    #[derive(Clone, Default)]
    struct Counting {
        issued: Arc<AtomicU32>,
    }

    impl LiveReads for Counting {
        async fn get_statefulset(&self, _: &str) -> Result<Option<StatefulSet>, ApiError> {
            Ok(None)
        }
        async fn get_deployment(&self, _: &str) -> Result<Option<Deployment>, ApiError> {
            Ok(None)
        }
        async fn get_replicaset(&self, _: &str) -> Result<Option<ReplicaSet>, ApiError> {
            Ok(None)
        }
        async fn list_statefulsets(&self, _: &str) -> Result<Vec<StatefulSet>, ApiError> {
            Ok(Vec::new())
        }
        async fn list_pods(&self, _: &str) -> Result<Vec<Pod>, ApiError> {
            let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
            tokio::time::sleep(Duration::from_millis(5)).await;
            let metadata = ObjectMeta { name: Some(format!("list-{n}")), ..Default::default() };
            Ok(vec![Pod { metadata, ..Default::default() }])
        }
        async fn get_pod(&self, _: &str) -> Result<Option<Pod>, ApiError> {
            Ok(None)
        }
    }

    fn names(listed: &Listed) -> Vec<String> {
        listed.as_ref().map(|pods| pods.iter().map(|p| p.name().to_string()).collect()).unwrap_or_default()
    }

    #[tokio::test(start_paused = true)]
    async fn concurrent_reads_share_lists_and_a_fresh_read_never_joins_one_already_issued() {
        let api = Counting::default();
        let lists = PodLists::default();
        let limit = Duration::from_secs(1);
        // Ten first reads at once: one list.
        let first = futures::future::join_all((0..10).map(|_| lists.list(&api, "g", false, limit))).await;
        assert!(first.iter().all(|l| names(l) == ["list-1"]), "{:?}", first.iter().map(names).collect::<Vec<_>>());
        assert_eq!(api.issued.load(Ordering::SeqCst), 1);
        // A read while a list is in flight: a first read joins it, fresh reads wait for the next one, which all
        // of them share.
        let in_flight = lists.list(&api, "g", false, limit).shared();
        let started = in_flight.clone();
        let (early, joined, fresh) = tokio::join!(
            started,
            async {
                tokio::task::yield_now().await;
                lists.list(&api, "g", false, limit).await
            },
            async {
                tokio::task::yield_now().await;
                futures::future::join_all((0..5).map(|_| lists.list(&api, "g", true, limit))).await
            }
        );
        assert_eq!((names(&early), names(&joined)), (vec!["list-2".to_string()], vec!["list-2".to_string()]));
        assert!(fresh.iter().all(|l| names(l) == ["list-3"]), "{:?}", fresh.iter().map(names).collect::<Vec<_>>());
        assert_eq!(api.issued.load(Ordering::SeqCst), 3);
        // Other selectors have their own lists.
        assert_eq!(names(&lists.list(&api, "other", true, limit).await), ["list-4"]);
    }
}
