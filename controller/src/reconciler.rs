//! The reconcile loop: per-group work queue fed by watch events, expectations, retries with backoff.
//! (Being built.)

use crate::cluster::ClusterApi;
use crate::health::ReadyFlag;
use crate::metrics::Metrics;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// `-reconcile.interval`: minimum spacing between two reconciles of one rollout group.
    pub min_interval: Duration,
    /// How long an unobserved write blocks its group before it is given up on.
    pub expectation_ttl: Duration,
    /// First and largest delay before retrying a failed reconcile.
    pub initial_backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            min_interval: Duration::from_secs(5),
            expectation_ttl: Duration::from_secs(300),
            initial_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
        }
    }
}

/// Runs the controller until `shutdown` resolves. Sets `ready` once the StatefulSet and pod caches have synced.
pub async fn run<C: ClusterApi>(
    _api: C,
    _config: ReconcilerConfig,
    _metrics: Arc<Metrics>,
    _ready: ReadyFlag,
    shutdown: impl Future<Output = ()> + Send,
) {
    shutdown.await;
}
