//! Carries out the core's eviction decision ([`rollout_core::zpdb::EvictPod`]) against the cluster: one driver
//! loop shared by the pod-eviction webhook and the rollout controller (before each pod it deletes), so an eviction
//! and a controller deletion are decided, serialised and counted the same way.
//!
//! Owns the I/O of each need within a deadline (live reads of the pod, its StatefulSet and the budget's StatefulSets
//! and pods; the eviction intent written and removed, on the pod or on its StatefulSet; the in-process lock and
//! memory where intents are refused; the decision's claim among those under way in this process, held until its
//! answer) and the `rollout_operator_zpdb_*` counts of every answer. Must not decide: every verdict is the core's.

use super::Zpdb;
use super::serialisation::Claim;
use crate::cluster::{ApiError, LiveReads, PodAnnotations, StatefulSetAnnotations};
use crate::ops::feature_gate::Gate;
use jiff::Timestamp;
use rollout_core::Failure;
use rollout_core::StatefulSetView;
use rollout_core::downscale::format_timestamp;
use rollout_core::zpdb::flow::Serialisation;
use rollout_core::zpdb::{BudgetPod, BudgetPods, EvictPod, EvictionVerdict, Lookup, Need, Observed};
use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;
use tokio::sync::OwnedMutexGuard;
use tokio::time::Instant;

/// What the driver reads and writes.
pub trait EvictionApi: LiveReads + PodAnnotations + StatefulSetAnnotations {}

impl<T: LiveReads + PodAnnotations + StatefulSetAnnotations> EvictionApi for T {}

/// Drives `flow` to its answer, carrying out each need before `deadline` (a need not met in time is observed as a
/// failure, and the machine applies its policy); an intent taken back gets `undo_deadline` of its own, since the
/// request's may have passed. Counts the answer.
pub async fn decide<A: EvictionApi>(
    api: &A,
    zpdb: &Zpdb,
    mut flow: EvictPod,
    now: &(dyn Fn() -> Timestamp + Send + Sync),
    deadline: Instant,
    undo_deadline: Duration,
) -> EvictionVerdict {
    let _inflight = zpdb.metrics.inflight();
    // This process's lock of the budget, when the machine asked for it; released when the decision is answered.
    let mut lock: Option<OwnedMutexGuard<()>> = None;
    // This decision's registration among those under way in this process, when the machine claimed; ended when the
    // decision is answered.
    let mut claim: Option<Claim> = None;
    // The budget's pods, listed together with its StatefulSets (the flow asks for them next, by the same selector):
    // one API round trip less per decision. Used only where no lock was taken in between, since under in-process
    // serialisation the pods must be read under the lock.
    let mut prefetched: Option<Result<BudgetPods, Failure>> = None;
    // The same for the read after the intent, listed together with the StatefulSets read again.
    let mut prefetched_again: Option<Result<BudgetPods, Failure>> = None;
    let mut observed = Observed::Start;
    loop {
        let need = flow.step(observed, now());
        let kind = need.kind();
        match need {
            Need::Answer(answer) => {
                drop(lock);
                drop(claim);
                zpdb.metrics.eviction_decided(answer.outcome.reason, answer.outcome.status);
                return answer;
            }
            Need::StatefulSets { selector } if zpdb.serialisation_mode() != Serialisation::InProcess => {
                // Both may join the lists in flight: the first reads are not needed for safety (both are listed
                // again after the intent, and the second judgement uses only those).
                let (statefulsets, pods) = tokio::join!(
                    zpdb.statefulset_lists.list_before(api, &selector, false, deadline),
                    zpdb.pod_lists.list_before(api, &selector, false, deadline)
                );
                prefetched = Some(pods);
                observed = Observed::StatefulSets(statefulsets.map(|list| list.to_vec()));
            }
            Need::Pods { .. } if lock.is_none() && prefetched.is_some() => {
                observed =
                    Observed::Pods(prefetched.take().unwrap_or_else(|| Err(Failure::Failed("no list".to_string()))));
            }
            // After the intent: the StatefulSets and the pods (which the flow asks for next) listed at once, both
            // issued after the intent was written.
            Need::StatefulSetsAgain { selector, after } if lock.is_none() => {
                tokio::time::sleep(after.min(deadline.saturating_duration_since(Instant::now()))).await;
                let (statefulsets, pods) = tokio::join!(
                    zpdb.statefulset_lists.list_before(api, &selector, true, deadline),
                    zpdb.pod_lists.list_before(api, &selector, true, deadline)
                );
                prefetched_again = Some(pods);
                observed = Observed::StatefulSets(statefulsets.map(|list| list.to_vec()));
            }
            Need::PodsAgain { after, .. } if after.is_zero() && lock.is_none() && prefetched_again.is_some() => {
                observed = Observed::Pods(
                    prefetched_again.take().unwrap_or_else(|| Err(Failure::Failed("no list".to_string()))),
                );
            }
            Need::Claim { budget, uid } => {
                let (registered, others) = zpdb.under_way.claim(&budget, &uid);
                claim = Some(registered);
                observed = Observed::Claimed { others };
            }
            need => observed = carry_out(api, zpdb, need, &mut lock, now, deadline, undo_deadline).await,
        }
        crate::ops::needs::failed("eviction", kind, observed.failure().map(|f| f.kind()));
    }
}

/// Runs `call` before `deadline`; a call still running then fails, saying what it was.
async fn before<T>(
    deadline: Instant,
    what: &str,
    call: impl Future<Output = Result<T, ApiError>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), call).await {
        Ok(result) => result.map_err(|err| Failure::from(&err)),
        Err(_) => Err(Failure::Deadline(format!("API unavailable: {what}: the deadline passed"))),
    }
}

async fn carry_out<A: EvictionApi>(
    api: &A,
    zpdb: &Zpdb,
    need: Need,
    lock: &mut Option<OwnedMutexGuard<()>>,
    now: &(dyn Fn() -> Timestamp + Send + Sync),
    deadline: Instant,
    undo_deadline: Duration,
) -> Observed {
    match need {
        Need::Pod { name } => {
            let read = tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), api.get_pod(&name));
            Observed::Pod(match read.await {
                Ok(Ok(Some(pod))) => {
                    match BudgetPod::from_k8s(&pod).inspect(|_| zpdb.metrics.gates.granted(Gate::BudgetPodReads)) {
                        Ok(pod) => Lookup::Found(Box::new(pod)),
                        Err(err) => Lookup::Failed(Failure::Unreadable(err.to_string())),
                    }
                }
                Ok(Ok(None)) => Lookup::NotFound,
                Ok(Err(err)) => {
                    if let ApiError::Forbidden(_) = err {
                        zpdb.metrics.gates.refused(Gate::BudgetPodReads, &err);
                    }
                    Lookup::Failed(Failure::from(&err))
                }
                Err(_) => {
                    Lookup::Failed(Failure::Deadline("API unavailable: get pod: the deadline passed".to_string()))
                }
            })
        }
        Need::Budgets => Observed::Budgets(zpdb.budgets.snapshot()),
        Need::StatefulSet { name } => {
            Observed::StatefulSet(match before(deadline, "get statefulset", api.get_statefulset(&name)).await {
                Ok(Some(sts)) => match StatefulSetView::from_k8s(&sts) {
                    Ok(view) => Lookup::Found(Box::new(view)),
                    Err(err) => Lookup::Failed(Failure::Unreadable(err.to_string())),
                },
                Ok(None) => Lookup::NotFound,
                Err(err) => Lookup::Failed(err),
            })
        }
        Need::Lock { budget } => {
            let wait = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(wait, zpdb.serialisation.lock(&budget)).await {
                Ok(guard) => {
                    *lock = Some(guard);
                    Observed::Locked { remembered: zpdb.serialisation.remembered(now()) }
                }
                Err(_) => Observed::NotLocked,
            }
        }
        Need::StatefulSets { selector } => Observed::StatefulSets(
            before(deadline, "list statefulsets", api.list_statefulsets(&selector))
                .await
                .map(|list| list.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect()),
        ),
        // Shared with the decisions of the same budget in flight (`zpdb::reads`): the first read may join the list
        // in flight; the read again, after the intent was written, only a list issued after now.
        Need::Pods { selector } => Observed::Pods(zpdb.pod_lists.list_before(api, &selector, false, deadline).await),
        Need::PodsAgain { selector, after } => {
            tokio::time::sleep(after.min(deadline.saturating_duration_since(Instant::now()))).await;
            Observed::Pods(zpdb.pod_lists.list_before(api, &selector, true, deadline).await)
        }
        // Another decision of this process was refused intents since this one started: no request that would be
        // refused too (the refusal was said once already).
        Need::WriteIntent { .. } if zpdb.serialisation_mode() != Serialisation::Intents => {
            Observed::IntentWritten(Err(Failure::Forbidden("eviction intents are refused (patch pods)".into())))
        }
        Need::WriteStatefulSetIntent { .. } if zpdb.serialisation_mode() == Serialisation::InProcess => {
            Observed::IntentWritten(Err(Failure::Forbidden(
                "eviction intents are refused (patch pods, patch statefulsets)".into(),
            )))
        }
        Need::WriteStatefulSetIntent { statefulset, key, value, stale } => {
            let mut changes: BTreeMap<String, Option<String>> = stale.into_iter().map(|k| (k, None)).collect();
            changes.insert(key, Some(value));
            let written = tokio::time::timeout(
                deadline.saturating_duration_since(Instant::now()),
                api.merge_statefulset_annotations(&statefulset, &changes),
            )
            .await;
            Observed::IntentWritten(match written {
                Ok(Ok(_)) => {
                    zpdb.metrics.gates.granted(Gate::StatefulSetIntents);
                    Ok(())
                }
                Ok(Err(err @ ApiError::Forbidden(_))) => {
                    zpdb.metrics.gates.refused(Gate::StatefulSetIntents, &err);
                    Err(Failure::from(&err))
                }
                // Not the pod changing: the intent was simply not recorded.
                Ok(Err(err)) => Err(Failure::Failed(err.to_string())),
                Err(_) => Err(Failure::Deadline("the deadline passed".to_string())),
            })
        }
        Need::RemoveStatefulSetIntent { statefulset, key } => {
            let changes = BTreeMap::from([(key, None)]);
            let removal = tokio::time::timeout(
                undo_deadline.min(Duration::from_secs(5)),
                api.merge_statefulset_annotations(&statefulset, &changes),
            )
            .await;
            match removal {
                Ok(Ok(_)) | Ok(Err(ApiError::NotFound(_))) => {}
                Ok(Err(err)) => tracing::warn!(statefulset = %statefulset, error = %err,
                    "could not remove the eviction intent; it expires"),
                Err(_) => {
                    tracing::warn!(statefulset = %statefulset, "removing the eviction intent timed out; it expires")
                }
            }
            Observed::IntentRemoved
        }
        // After our intent on a StatefulSet: a list issued now, never one in flight from before the write.
        Need::StatefulSetsAgain { selector, after } => {
            tokio::time::sleep(after.min(deadline.saturating_duration_since(Instant::now()))).await;
            Observed::StatefulSets(
                zpdb.statefulset_lists.list_before(api, &selector, true, deadline).await.map(|l| l.to_vec()),
            )
        }
        Need::WriteIntent { pod, uid, key, until } => {
            let changes = BTreeMap::from([(key, Some(format_timestamp(until)))]);
            let written = tokio::time::timeout(
                deadline.saturating_duration_since(Instant::now()),
                api.patch_pod_annotations(&pod, &uid, &changes),
            )
            .await;
            Observed::IntentWritten(match written {
                Ok(Ok(_)) => {
                    zpdb.metrics.gates.granted(Gate::PodIntents);
                    Ok(())
                }
                Ok(Err(err @ ApiError::Forbidden(_))) => {
                    zpdb.metrics.gates.refused(Gate::PodIntents, &err);
                    Err(Failure::from(&err))
                }
                Ok(Err(err @ (ApiError::Conflict(_) | ApiError::NotFound(_)))) => Err(Failure::from(&err)),
                Ok(Err(err)) => Err(Failure::from(&err)),
                Err(_) => Err(Failure::Deadline("the deadline passed".to_string())),
            })
        }
        Need::RemoveIntent { pod, uid, key } => {
            // With its own deadline: the request's may have passed, and a left intent blocks others until it expires.
            let changes = BTreeMap::from([(key, None)]);
            let removal = tokio::time::timeout(
                undo_deadline.min(Duration::from_secs(5)),
                api.patch_pod_annotations(&pod, &uid, &changes),
            )
            .await;
            match removal {
                Ok(Ok(_)) | Ok(Err(ApiError::NotFound(_) | ApiError::Conflict(_))) => {}
                Ok(Err(err)) => {
                    tracing::warn!(pod = %pod, error = %err, "could not remove the eviction intent; it expires")
                }
                Err(_) => tracing::warn!(pod = %pod, "removing the eviction intent timed out; it expires"),
            }
            Observed::IntentRemoved
        }
        Need::Remember { uid, until } => {
            zpdb.serialisation.remember(&uid, until);
            Observed::Remembered
        }
        // The driver returns answers and registers claims itself.
        Need::Answer(_) | Need::Claim { .. } => Observed::IntentRemoved,
    }
}
