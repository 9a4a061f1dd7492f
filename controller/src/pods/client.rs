//! The pod HTTP client port: direct HTTP calls from the operator to pods (delayed downscale's prepare/cancel
//! endpoints, the prepare-downscale webhook's prepare-shutdown endpoints).
//!
//! This module owns the port ([`PodHttpClient`]), its request/response/error types, the bounded-concurrency fan-out
//! ([`call_all`]), the metrics of pod calls ([`PodClientMetrics`]) and the client of controllers given none
//! ([`NoPodClient`]); the real implementation over hyper is `pods::hyper_client`. It must not interpret what a pod
//! answers (that is the caller's business, e.g. `rollout-core`'s delayed-downscale rules) and never retries: a
//! failed call is reported once, and the next reconcile decides again. The simulator supplies its own
//! implementation of the port.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::future::Future;
use std::time::Duration;
use thiserror::Error;

/// Default limit of concurrent calls to pods of one StatefulSet (as in the reference).
pub const DEFAULT_CONCURRENCY: usize = 32;

/// HTTP status with which a pod's cluster-validation middleware rejects a call meant for another cluster.
pub const CLUSTER_VALIDATION_STATUS: u16 = 511;

/// The HTTP methods the operator uses on pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PodMethod {
    /// Prepare (delayed downscale, prepare-downscale).
    Post,
    /// Cancel a preparation.
    Delete,
}

impl PodMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            PodMethod::Post => "POST",
            PodMethod::Delete => "DELETE",
        }
    }
}

/// One call to one pod. The body is always empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRequest {
    pub method: PodMethod,
    /// Absolute URL, host already replaced by the pod's DNS name.
    pub url: String,
    /// Send `Content-Type: application/json` (the prepare-downscale webhook does; delayed downscale does not).
    pub json_content_type: bool,
}

impl PodRequest {
    pub fn post(url: impl Into<String>) -> Self {
        PodRequest { method: PodMethod::Post, url: url.into(), json_content_type: false }
    }

    pub fn delete(url: impl Into<String>) -> Self {
        PodRequest { method: PodMethod::Delete, url: url.into(), json_content_type: false }
    }
}

/// What a pod answered (any status; interpreting it is the caller's job).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

impl PodResponse {
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text, lossily, for logs and error messages (truncated to keep logs readable).
    pub fn body_text(&self) -> String {
        const MAX: usize = 512;
        let text = String::from_utf8_lossy(&self.body);
        if text.len() > MAX {
            let mut end = MAX;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}...", &text[..end])
        } else {
            text.into_owned()
        }
    }
}

/// Why a call to a pod produced no usable HTTP response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PodCallError {
    #[error("invalid pod URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("pod URL {url:?} has unsupported scheme {scheme:?} (expected http or https)")]
    UnsupportedScheme { url: String, scheme: String },
    #[error("{method} {url}: no complete response within {after:?} (-pods.client-timeout)")]
    Timeout { method: &'static str, url: String, after: Duration },
    #[error("{method} {url}: cannot connect: {message}")]
    Connect { method: &'static str, url: String, message: String },
    #[error("{method} {url}: {message}")]
    Transport { method: &'static str, url: String, message: String },
    /// The pod rejected the call because its cluster validation label differs (HTTP 511 with a JSON body).
    #[error("{method} {url}: request rejected by the server: {message}")]
    ClusterValidation { method: &'static str, url: String, message: String },
    #[error("cannot build the pod HTTP client: {0}")]
    Setup(String),
    /// Not sent, or abandoned in flight, because another call of the same fan-out failed first.
    #[error("{method} {url}: cancelled after another pod call failed")]
    Cancelled { method: &'static str, url: String },
}

/// The port through which the operator calls pods.
pub trait PodHttpClient: Clone + Send + Sync + 'static {
    /// Sends one request and returns whatever status the pod answered; `Err` only when there is no response.
    fn call(&self, request: PodRequest) -> impl Future<Output = Result<PodResponse, PodCallError>> + Send;
}

/// A pod client for controllers that are not given one: every call fails, so delayed downscale never removes a pod.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoPodClient;

impl PodHttpClient for NoPodClient {
    async fn call(&self, _request: PodRequest) -> Result<PodResponse, PodCallError> {
        Err(PodCallError::Setup("no pod HTTP client configured".to_string()))
    }
}

/// A call's outcome counts as failed for [`call_all`]'s early stop when there is no response or it is not 2xx.
fn failed(result: &Result<PodResponse, PodCallError>) -> bool {
    !matches!(result, Ok(response) if response.is_success())
}

/// Sends `requests` with at most `concurrency` in flight and returns one result per request, in request order.
///
/// With `stop_at_first_error`, the first call that fails (no response, or a non-2xx status) stops the fan-out:
/// requests not yet sent and calls still in flight are dropped and reported as [`PodCallError::Cancelled`].
pub async fn call_all<C: PodHttpClient>(
    client: &C,
    requests: Vec<PodRequest>,
    concurrency: usize,
    stop_at_first_error: bool,
) -> Vec<Result<PodResponse, PodCallError>> {
    let concurrency = concurrency.max(1);
    let mut results: Vec<Option<Result<PodResponse, PodCallError>>> = vec![None; requests.len()];
    let mut pending = requests.iter().cloned().enumerate();
    let mut in_flight = FuturesUnordered::new();
    let mut stopped = false;
    loop {
        while !stopped && in_flight.len() < concurrency {
            match pending.next() {
                Some((index, request)) => {
                    let client = client.clone();
                    in_flight.push(async move { (index, client.call(request).await) });
                }
                None => break,
            }
        }
        match in_flight.next().await {
            Some((index, result)) => {
                if stop_at_first_error && failed(&result) {
                    stopped = true;
                }
                results[index] = Some(result);
                if stopped {
                    break;
                }
            }
            None => break,
        }
    }
    // Dropping the remaining futures abandons their calls.
    drop(in_flight);
    results
        .into_iter()
        .zip(requests)
        .map(|(result, request)| {
            result.unwrap_or(Err(PodCallError::Cancelled { method: request.method.as_str(), url: request.url }))
        })
        .collect()
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodCallLabels {
    pub path: String,
    pub method: String,
    pub status_code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InvalidClusterLabels {
    pub method: String,
    pub protocol: String,
    pub request_cluster: String,
}

/// dskit's instrumentation buckets (as used by the reference's HTTP client histograms).
use crate::ops::metrics::dskit_histogram;

/// Metrics of pod calls, with the reference's names.
#[derive(Clone)]
pub struct PodClientMetrics {
    pub request_duration: Family<PodCallLabels, Histogram, fn() -> Histogram>,
    pub invalid_cluster: Family<InvalidClusterLabels, Counter>,
}

impl Default for PodClientMetrics {
    fn default() -> Self {
        PodClientMetrics {
            request_duration: Family::new_with_constructor(dskit_histogram),
            invalid_cluster: Family::default(),
        }
    }
}

impl PodClientMetrics {
    /// Creates the metrics and registers them in a registry prefixed `rollout_operator`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = PodClientMetrics::default();
        registry.register(
            "pod_http_client_request_duration_seconds",
            "Time spent on HTTP requests to pods.",
            metrics.request_duration.clone(),
        );
        registry.register(
            "client_invalid_cluster_validation_label_requests",
            "Requests rejected by the server because of a wrong cluster validation label.",
            metrics.invalid_cluster.clone(),
        );
        metrics
    }

    /// Records one call; `status` is `None` when there was no response.
    pub fn observe(&self, path: &str, method: PodMethod, status: Option<u16>, took: Duration) {
        let labels = PodCallLabels {
            path: path.to_string(),
            method: method.as_str().to_string(),
            status_code: status.map_or_else(|| "error".to_string(), |s| s.to_string()),
        };
        self.request_duration.get_or_create(&labels).observe(took.as_secs_f64());
    }
}

/// The message of a cluster-validation rejection: a 511 whose JSON body names the reason. Other 511s are ordinary
/// responses.
pub fn cluster_validation_message(status: u16, content_type: Option<&str>, body: &[u8]) -> Option<String> {
    if status != CLUSTER_VALIDATION_STATUS || !content_type.is_some_and(|ct| ct.starts_with("application/json")) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Rejection {
        cluster_validation_error_message: String,
    }
    serde_json::from_slice::<Rejection>(body).ok().map(|r| r.cluster_validation_error_message)
}
