//! Tower layers of the Kubernetes client, innermost first: the API server's URL in every transport error; then, as
//! the reference installs them, request metrics
//! (`rollout_operator_kubernetes_api_client_request_duration_seconds{path,method,status_code}`, which therefore
//! exclude the wait for a token) and the per-API-group client-side rate limiter (`-kubernetes.client-qps`,
//! `-kubernetes.client-burst`, `rollout_operator_kubernetes_api_client_rate_limited_requests_total{api_group}`).
//!
//! The rate limiter never reserves future tokens: a request that waits sleeps until a token should be there and
//! tries again, so a waiter that is given up (a webhook past its deadline drops the call) leaves nothing behind.
//! The reference's token bucket made reservations that ran away under eviction storms. A request that cannot get a
//! token within `max_wait` fails without being sent.

use crate::ops::metrics::KubeClientMetrics;
use futures::future::BoxFuture;
use http::Request;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, Service};

/// What `path` of a request to the API server is about, as the reference labels it: `core/v1/pods collection`,
/// `apps/v1/statefulsets object`, `core/v1/pods object status subresource`; a path that is not a resource path
/// (`/api`, `/apis/apps/v1`) is reported as is.
pub fn describe_path(path: &str) -> String {
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", version, rest @ ..] => (format!("core/{version}"), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return path.to_string(),
    };
    let rest = match rest {
        ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
        other => other,
    };
    match rest {
        [resource] => format!("{group}/{resource} collection"),
        [resource, _name] => format!("{group}/{resource} object"),
        [resource, _name, sub] => format!("{group}/{resource} object {sub} subresource"),
        _ => path.to_string(),
    }
}

/// The bucket a request draws from: `core` for `/api/...`, the group for `/apis/<group>/...`, `apis` for `/apis`,
/// else `/` and the first path segment.
pub fn api_group_of(path: &str) -> String {
    let mut parts = path.trim_start_matches('/').split('/');
    match (parts.next(), parts.next()) {
        (Some("api"), _) => "core".to_string(),
        (Some("apis"), Some(group)) if !group.is_empty() => group.to_string(),
        (Some("apis"), _) => "apis".to_string(),
        (Some(first), _) => format!("/{first}"),
        (None, _) => "/".to_string(),
    }
}

/// Measures every request to the API server.
#[derive(Clone)]
pub struct ApiMetricsLayer {
    metrics: KubeClientMetrics,
}

impl ApiMetricsLayer {
    pub fn new(metrics: KubeClientMetrics) -> Self {
        ApiMetricsLayer { metrics }
    }
}

impl<S> Layer<S> for ApiMetricsLayer {
    type Service = ApiMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiMetrics { inner, metrics: self.metrics.clone() }
    }
}

#[derive(Clone)]
pub struct ApiMetrics<S> {
    inner: S,
    metrics: KubeClientMetrics,
}

impl<S, B, RB> Service<Request<B>> for ApiMetrics<S>
where
    S: Service<Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<'static, Result<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let path = describe_path(request.uri().path());
        let method = request.method().as_str().to_string();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let call = self.inner.call(request);
        Box::pin(async move {
            let result = call.await;
            let status = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            metrics.observe_request(&path, &method, &status, started.elapsed());
            result
        })
    }
}

/// Names the API server in the error of every request that failed without an answer: a transport error (`client
/// error (Connect)`, a timeout) does not say where the request went. Installed innermost, so the metrics and the
/// rate limiter see the same errors as before.
#[derive(Clone)]
pub struct ApiServerLayer {
    server: Arc<str>,
}

impl ApiServerLayer {
    /// `server`: the API server's URL as configured.
    pub fn new(server: impl Into<String>) -> Self {
        ApiServerLayer { server: Arc::from(server.into()) }
    }
}

impl<S> Layer<S> for ApiServerLayer {
    type Service = ApiServer<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ApiServer { inner, server: self.server.clone() }
    }
}

/// The service made by [`ApiServerLayer`].
#[derive(Clone)]
pub struct ApiServer<S> {
    inner: S,
    server: Arc<str>,
}

/// A request to the API server at `server` failed without an answer; `source` says how.
#[derive(Debug, thiserror::Error)]
#[error("request to the Kubernetes API server at {server} failed")]
pub struct ApiServerError {
    pub server: String,
    #[source]
    pub source: tower::BoxError,
}

impl<S, B> Service<Request<B>> for ApiServer<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        let server = &self.server;
        self.inner
            .poll_ready(cx)
            .map_err(|source| ApiServerError { server: server.to_string(), source: source.into() }.into())
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let server = self.server.clone();
        let call = self.inner.call(request);
        Box::pin(async move {
            call.await.map_err(|source| ApiServerError { server: server.to_string(), source: source.into() }.into())
        })
    }
}

/// `-kubernetes.client-qps` / `-kubernetes.client-burst`; either `<= 0` means no limit.
#[derive(Debug, Clone, Copy)]
pub struct RateLimits {
    pub qps: f64,
    pub burst: i64,
    /// The longest a request waits for a token before it fails unsent.
    pub max_wait: Duration,
}

impl RateLimits {
    fn unlimited(&self) -> bool {
        self.qps <= 0.0 || self.burst <= 0
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    refilled_at: Instant,
}

/// An independent token bucket per API group, created on first use.
#[derive(Clone)]
pub struct RateLimitLayer {
    limits: RateLimits,
    buckets: Arc<Mutex<HashMap<String, Bucket>>>,
    metrics: KubeClientMetrics,
}

impl RateLimitLayer {
    pub fn new(limits: RateLimits, metrics: KubeClientMetrics) -> Self {
        RateLimitLayer { limits, buckets: Arc::default(), metrics }
    }

    /// Takes a token of `group` if one is there; else how long until one should be.
    fn try_take(&self, group: &str, now: Instant) -> Result<(), Duration> {
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let burst = self.limits.burst as f64;
        let bucket = buckets.entry(group.to_string()).or_insert(Bucket { tokens: burst, refilled_at: now });
        let elapsed = now.saturating_duration_since(bucket.refilled_at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.limits.qps).min(burst);
        bucket.refilled_at = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - bucket.tokens) / self.limits.qps))
        }
    }

    /// Waits for a token of `group`, at most `max_wait`.
    pub async fn acquire(&self, group: &str) -> Result<(), RateLimited> {
        if self.limits.unlimited() {
            return Ok(());
        }
        let deadline = Instant::now() + self.limits.max_wait;
        // Counts a waiter that is given up (dropped) as rate limited, as the reference counts a cancelled wait.
        let mut waiting = WaitGuard { metrics: &self.metrics, group, done: false };
        loop {
            let now = Instant::now();
            match self.try_take(group, now) {
                Ok(()) => {
                    waiting.done = true;
                    return Ok(());
                }
                Err(wait) if now + wait > deadline => {
                    waiting.done = true;
                    self.metrics.rate_limited(group);
                    return Err(RateLimited { group: group.to_string(), waited: self.limits.max_wait });
                }
                Err(wait) => tokio::time::sleep(wait).await,
            }
        }
    }
}

struct WaitGuard<'a> {
    metrics: &'a KubeClientMetrics,
    group: &'a str,
    done: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.metrics.rate_limited(self.group);
        }
    }
}

/// A request that got no token in time (not sent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "client-side rate limiter for Kubernetes API group \"{group}\": no token within {waited:?} (raise \
     -kubernetes.client-qps / -kubernetes.client-burst, or 0 to disable)"
)]
pub struct RateLimited {
    pub group: String,
    pub waited: Duration,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit { inner: Arc::new(tokio::sync::Mutex::new(inner)), limiter: self.clone() }
    }
}

/// The service made by [`RateLimitLayer`]. The inner service is shared behind a lock held only to make it ready and
/// start a call (kube's stack below is not `Clone`); responses are awaited without it.
pub struct RateLimit<S> {
    inner: Arc<tokio::sync::Mutex<S>>,
    limiter: RateLimitLayer,
}

impl<S> Clone for RateLimit<S> {
    fn clone(&self) -> Self {
        RateLimit { inner: self.inner.clone(), limiter: self.limiter.clone() }
    }
}

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
    B: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the inner service is awaited per call, after the token.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let limiter = self.limiter.clone();
        Box::pin(async move {
            let group = api_group_of(request.uri().path());
            limiter.acquire(&group).await?;
            let response = {
                let mut service = inner.lock().await;
                use tower::ServiceExt;
                service.ready().await.map_err(Into::into)?.call(request)
            };
            response.await.map_err(Into::into)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_described_as_the_reference_does() {
        assert_eq!(describe_path("/api/v1/namespaces/mimir/pods"), "core/v1/pods collection");
        assert_eq!(describe_path("/api/v1/namespaces/mimir/pods/ingester-zone-a-0"), "core/v1/pods object");
        assert_eq!(
            describe_path("/apis/apps/v1/namespaces/mimir/statefulsets/ingester-zone-a/status"),
            "apps/v1/statefulsets object status subresource"
        );
        assert_eq!(
            describe_path("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"),
            "admissionregistration.k8s.io/v1/validatingwebhookconfigurations collection"
        );
        assert_eq!(describe_path("/api/v1/namespaces/mimir"), "core/v1/namespaces object");
        assert_eq!(describe_path("/api"), "/api");
        assert_eq!(describe_path("/apis/apps/v1"), "/apis/apps/v1");
    }

    #[test]
    fn buckets_are_per_api_group() {
        assert_eq!(api_group_of("/api/v1/namespaces/x/pods"), "core");
        assert_eq!(api_group_of("/apis/apps/v1/namespaces/x/statefulsets"), "apps");
        assert_eq!(api_group_of("/apis"), "apis");
        assert_eq!(api_group_of("/version"), "/version");
        assert_eq!(api_group_of("/"), "/");
    }

    fn limiter(qps: f64, burst: i64, max_wait: Duration) -> (RateLimitLayer, KubeClientMetrics) {
        let metrics = KubeClientMetrics::default();
        (RateLimitLayer::new(RateLimits { qps, burst, max_wait }, metrics.clone()), metrics)
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_passes_then_requests_are_paced_per_group() {
        let (l, _) = limiter(10.0, 3, Duration::from_secs(10));
        let t0 = Instant::now();
        for _ in 0..3 {
            l.acquire("core").await.unwrap();
        }
        assert_eq!(Instant::now(), t0, "the burst costs no wait");
        l.acquire("apps").await.unwrap();
        assert_eq!(Instant::now(), t0, "another group has its own bucket");
        l.acquire("core").await.unwrap();
        let waited = Instant::now() - t0;
        assert!(waited >= Duration::from_millis(99) && waited <= Duration::from_millis(101), "{waited:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn no_token_in_time_fails_unsent_and_is_counted_and_given_up_waiters_leave_nothing_behind() {
        let (l, metrics) = limiter(1.0, 1, Duration::from_millis(500));
        l.acquire("core").await.unwrap();
        let err = l.acquire("core").await.unwrap_err();
        assert!(err.to_string().contains("client-side rate limiter for Kubernetes API group \"core\""), "{err}");
        assert_eq!(metrics.rate_limited_count("core"), 1);
        // A hundred waiters abandoned (as a webhook past its deadline drops its call) reserve nothing: once a token
        // is due again, the next request gets it at once.
        for _ in 0..100 {
            let _ = tokio::time::timeout(Duration::from_millis(10), l.acquire("core")).await;
        }
        assert_eq!(metrics.rate_limited_count("core"), 101);
        tokio::time::sleep(Duration::from_secs(1)).await;
        let t = Instant::now();
        l.acquire("core").await.unwrap();
        assert_eq!(Instant::now(), t);
    }

    #[tokio::test(start_paused = true)]
    async fn zero_qps_or_burst_means_unlimited() {
        for (qps, burst) in [(0.0, 10), (5.0, 0), (-1.0, -5)] {
            let (l, _) = limiter(qps, burst, Duration::ZERO);
            let t = Instant::now();
            for _ in 0..1000 {
                l.acquire("core").await.unwrap();
            }
            assert_eq!(Instant::now(), t);
        }
    }
}
