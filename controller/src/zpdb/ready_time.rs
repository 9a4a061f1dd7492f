//! The `grafana.com/ready-time` tracker: watches the namespace's pods and, for each pod a known
//! budget selects, writes what `rollout_core::zpdb::ready_time_change` says (stamp a pod first seen running and
//! ready, remove the stamp of one seen otherwise), each patch bounded by `-zpdb.pod-ready-annotation-patch-timeout`.
//! When the budgets change, every pod is looked at again (a pod that came into scope is stamped without waiting for
//! its next event).
//!
//! Owns the tracker's task and its view of the pods. Must not decide what to write (the core does). A failed patch
//! is logged and tried again after [`RETRY_AFTER`] (the reference only logs it: a Ready pod whose stamp failed
//! never changes again, so under a partition budget with `crossZoneEvictionDelay` its partition's evictions, and
//! the controller's deletions, would be denied forever); a refused one (no `patch` on pods) stops the tracker's
//! writes through its feature gate (`Gate::ReadyTime`: one log line, `rollout_operator_feature_disabled`), tried
//! again after a while.

use super::budgets::BudgetCache;
use crate::cluster::{ApiError, PodAnnotations, RolloutApi, WatchEvent};
use crate::ops::feature_gate::Gate;
use crate::ops::metrics::ZpdbMetrics;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use rollout_core::keys;
use rollout_core::zpdb::{BudgetPod, ReadyTimeChange, ready_time_change};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How long after a failed patch the tracker looks at the pod again.
pub const RETRY_AFTER: Duration = Duration::from_secs(5);

pub struct Tracker<C> {
    api: C,
    budgets: BudgetCache,
    patch_timeout: Duration,
    clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
    metrics: ZpdbMetrics,
    pods: BTreeMap<String, Pod>,
    /// Pods whose last patch failed, looked at again at `retry_at`.
    failed: BTreeSet<String>,
    retry_at: Option<Instant>,
}

impl<C: RolloutApi + PodAnnotations> Tracker<C> {
    pub fn new(
        api: C,
        budgets: BudgetCache,
        patch_timeout: Duration,
        clock: Arc<dyn Fn() -> Timestamp + Send + Sync>,
        metrics: ZpdbMetrics,
    ) -> Self {
        Tracker {
            api,
            budgets,
            patch_timeout,
            clock,
            metrics,
            pods: BTreeMap::new(),
            failed: BTreeSet::new(),
            retry_at: None,
        }
    }

    /// Runs until `stop` resolves.
    pub async fn run(mut self, stop: impl Future<Output = ()>) {
        let mut events = self.api.watch_pods();
        let mut budgets = self.budgets.subscribe();
        tokio::pin!(stop);
        loop {
            let retry_at = self.retry_at;
            // In order, not at random: the simulation must replay a seed exactly.
            tokio::select! {
                biased;
                () = &mut stop => return,
                () = sleep_until_opt(retry_at), if retry_at.is_some() => {
                    self.retry_at = None;
                    for name in std::mem::take(&mut self.failed) {
                        self.track(&name).await;
                    }
                }
                changed = budgets.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let names: Vec<String> = self.pods.keys().cloned().collect();
                    for name in names {
                        self.track(&name).await;
                    }
                }
                item = events.next() => match item {
                    None => return,
                    Some(Ok(WatchEvent::Init)) => self.pods.clear(),
                    Some(Ok(WatchEvent::InitApply(pod) | WatchEvent::Apply(pod))) => {
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        self.pods.insert(name.clone(), pod);
                        self.track(&name).await;
                    }
                    Some(Ok(WatchEvent::Delete(pod))) => {
                        let name = pod.metadata.name.as_deref().unwrap_or_default();
                        self.pods.remove(name);
                        self.failed.remove(name);
                    }
                    Some(Ok(WatchEvent::InitDone)) => {}
                    Some(Err(err)) => {
                        tracing::debug!(error = %err, "pod watch of the ready-time tracker failed; retrying");
                    }
                },
            }
        }
    }

    /// Writes what the pod needs, if a budget selects it.
    async fn track(&mut self, name: &str) {
        if !self.metrics.gates.may_try(Gate::ReadyTime) {
            return;
        }
        let Some(pod) = self.pods.get(name) else { return };
        if !self.budgets.any_selects(pod.metadata.labels.as_ref().unwrap_or(&BTreeMap::new())) {
            return;
        }
        let Ok(view) = BudgetPod::from_k8s(pod) else { return };
        let Some(change) = ready_time_change(&view, (self.clock)()) else { return };
        let value = match change {
            ReadyTimeChange::Set(at) => Some(at),
            ReadyTimeChange::Remove => None,
        };
        let changes = BTreeMap::from([(keys::READY_TIME.to_string(), value)]);
        let patched =
            tokio::time::timeout(self.patch_timeout, self.api.patch_pod_annotations(name, view.uid(), &changes)).await;
        match patched {
            // Keep what the API answered, so a later look at this pod does not write the same again.
            Ok(Ok(pod)) => {
                self.metrics.gates.granted(Gate::ReadyTime);
                self.pods.insert(name.to_string(), pod);
            }
            Ok(Err(ApiError::Forbidden(message))) => {
                self.metrics.gates.refused(Gate::ReadyTime, &format!("pod {name}: {message}"));
            }
            Ok(Err(err)) => {
                tracing::warn!(pod = %name, error = %err, "could not update {}; trying again", keys::READY_TIME);
                self.retry(name);
            }
            Err(_) => {
                tracing::warn!(pod = %name, timeout = ?self.patch_timeout, "updating {} timed out; trying again",
                    keys::READY_TIME);
                self.retry(name);
            }
        }
    }

    fn retry(&mut self, name: &str) {
        self.failed.insert(name.to_string());
        self.retry_at.get_or_insert_with(|| Instant::now() + RETRY_AFTER);
    }
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
