//! The reconciler tests' harness: the fake cluster's watch streams, delivered to a controller's cache only when a
//! test says so ([`WatchFeed`]), and a controller over the fake cluster driven by hand ([`Harness`]).

use super::{Call, FakeCluster};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use rollout_core::RolloutPlanner;
use rollout_operator::cluster::{ApiError, RolloutApi, WatchEvent};
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::pods::client::{NoPodClient, PodHttpClient};
use rollout_operator::rollout::reconciler::{Controller, ReconcilerConfig};
use std::sync::Arc;

/// The rollout group the harness reconciles.
const GROUP: &str = "ingester";

/// Drives a controller by hand: watch events are applied to its cache only when `pump` is called. `H` is its pod
/// HTTP client (none by default; the scaling tests' serves local pod endpoints).
pub struct Harness<H: PodHttpClient = NoPodClient> {
    pub cluster: FakeCluster,
    pub ctrl: Controller<FakeCluster, RolloutPlanner, H>,
    pub metrics: Arc<Metrics>,
    pub feed: WatchFeed,
}

impl Harness {
    /// A controller with the default configuration over `cluster`, its cache holding what the cluster holds.
    pub fn new(cluster: FakeCluster) -> Self {
        let metrics = Arc::new(Metrics::new());
        let ctrl = Controller::new(cluster.clone(), RolloutPlanner, ReconcilerConfig::default(), metrics.clone());
        Harness::with_controller(cluster, ctrl, metrics)
    }
}

impl<H: PodHttpClient> Harness<H> {
    /// Drives `ctrl`, built over `cluster` with `metrics`; its cache holds what the cluster holds.
    pub fn with_controller(
        cluster: FakeCluster,
        ctrl: Controller<FakeCluster, RolloutPlanner, H>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let feed = WatchFeed::new(&cluster);
        let mut h = Harness { cluster, ctrl, metrics, feed };
        h.pump();
        h
    }

    /// Applies every watch event delivered so far to the controller's cache.
    pub fn pump(&mut self) {
        self.feed.pump(self.ctrl.cache_mut());
    }

    /// One pass over the group `ingester` on every event delivered so far; the calls the cluster saw since they
    /// were last taken.
    pub async fn reconcile(&mut self) -> Vec<Call> {
        self.pump();
        self.ctrl.reconcile_group(GROUP).await;
        self.cluster.take_calls()
    }
}

/// The fake cluster's watch streams, delivered to a controller's cache only when a test says so.
pub struct WatchFeed {
    statefulsets: BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>>,
    pods: BoxStream<'static, Result<WatchEvent<Pod>, ApiError>>,
}

impl WatchFeed {
    pub fn new(cluster: &FakeCluster) -> Self {
        WatchFeed { statefulsets: cluster.watch_statefulsets(), pods: cluster.watch_pods() }
    }

    /// Applies every event delivered so far.
    pub fn pump(&mut self, cache: &mut rollout_operator::rollout::cache::ClusterCache) {
        use futures::FutureExt;
        while let Some(Some(Ok(e))) = self.statefulsets.next().now_or_never() {
            cache.apply_statefulset_event(e);
        }
        while let Some(Some(Ok(e))) = self.pods.next().now_or_never() {
            cache.apply_pod_event(e);
        }
    }
}
