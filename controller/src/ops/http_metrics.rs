//! Request metrics of the operator's two HTTP servers (plain: `/metrics`, `/ready`; TLS: the admission webhooks),
//! with the reference's names, labels and buckets, so its dashboards work unchanged:
//! `rollout_operator_request_duration_seconds{method,route,status_code,ws}`,
//! `rollout_operator_request_message_bytes{method,route}`, `rollout_operator_response_message_bytes{method,route}`
//! and `rollout_operator_inflight_requests{method,route}`.
//!
//! Owns only the measuring layer ([`instrument`]) and the route label; what a route does is the routers' business.

use axum::Router;
use axum::body::HttpBody as _;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Arc;
use tokio::time::Instant;

use crate::ops::metrics::dskit_histogram as duration_histogram;

/// dskit's message-size buckets: 4 bytes, times 4, 15 buckets.
fn size_histogram() -> Histogram {
    Histogram::new(exponential_buckets(4.0, 4.0, 15))
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub method: String,
    pub route: String,
    pub status_code: String,
    /// `"true"` for a websocket upgrade; none of our routes is one.
    pub ws: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabels {
    pub method: String,
    pub route: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// The request metrics, registered once and shared by both servers.
#[derive(Clone)]
pub struct HttpMetrics {
    duration: HistogramFamily<RequestLabels>,
    request_bytes: HistogramFamily<RouteLabels>,
    response_bytes: HistogramFamily<RouteLabels>,
    inflight: Family<RouteLabels, Gauge>,
}

impl HttpMetrics {
    /// Creates the metrics and registers them in a registry prefixed `rollout_operator`.
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let metrics = HttpMetrics {
            duration: Family::new_with_constructor(duration_histogram),
            request_bytes: Family::new_with_constructor(size_histogram),
            response_bytes: Family::new_with_constructor(size_histogram),
            inflight: Family::default(),
        };
        registry.register(
            "request_duration_seconds",
            "Time (in seconds) spent serving HTTP requests.",
            metrics.duration.clone(),
        );
        registry.register("request_message_bytes", "Size (in bytes) of messages received in the request.", {
            metrics.request_bytes.clone()
        });
        registry.register("response_message_bytes", "Size (in bytes) of messages sent in response.", {
            metrics.response_bytes.clone()
        });
        registry.register("inflight_requests", "Current number of inflight requests.", metrics.inflight.clone());
        Arc::new(metrics)
    }
}

/// The reference's route label: the matched path template with every run of characters other than ASCII letters
/// and digits turned into `_`, trimmed of `_`, lowercased (`/admission/pod-eviction` -> `admission_pod_eviction`);
/// `other` for a request no route matched.
pub fn route_label(matched: Option<&str>) -> String {
    let Some(path) = matched else { return "other".to_string() };
    let mut out = String::with_capacity(path.len());
    let mut gap = false;
    for c in path.chars() {
        if c.is_ascii_alphanumeric() {
            if gap && !out.is_empty() {
                out.push('_');
            }
            gap = false;
            out.push(c.to_ascii_lowercase());
        } else {
            gap = true;
        }
    }
    if out.is_empty() { "root".to_string() } else { out }
}

/// Wraps every route of `router`, and its 404 fallback, in the request metrics.
pub fn instrument(router: Router, metrics: Arc<HttpMetrics>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(metrics, measure))
}

async fn measure(State(metrics): State<Arc<HttpMetrics>>, request: Request, next: Next) -> Response {
    let route = route_label(request.extensions().get::<MatchedPath>().map(MatchedPath::as_str));
    let method = request.method().as_str().to_string();
    let route_labels = RouteLabels { method: method.clone(), route: route.clone() };
    // The body as announced (admission reviews and scrapes carry Content-Length) or as far as it is known.
    let request_size = request.body().size_hint().exact().unwrap_or_else(|| request.body().size_hint().lower());
    metrics.request_bytes.get_or_create(&route_labels).observe(request_size as f64);
    let inflight = metrics.inflight.get_or_create(&route_labels).clone();
    inflight.inc();
    let started = Instant::now();
    let response = next.run(request).await;
    inflight.dec();
    let labels =
        RequestLabels { method, route, status_code: response.status().as_u16().to_string(), ws: "false".to_string() };
    metrics.duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    let response_size = response.body().size_hint().exact().unwrap_or_else(|| response.body().size_hint().lower());
    metrics.response_bytes.get_or_create(&route_labels).observe(response_size as f64);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_labels_follow_the_reference() {
        assert_eq!(route_label(Some("/admission/pod-eviction")), "admission_pod_eviction");
        assert_eq!(route_label(Some("/admission/prepare-downscale")), "admission_prepare_downscale");
        assert_eq!(route_label(Some("/metrics")), "metrics");
        assert_eq!(route_label(Some("/ready")), "ready");
        assert_eq!(route_label(Some("/debug/pprof/")), "debug_pprof");
        assert_eq!(route_label(Some("/Mixed--Case//x")), "mixed_case_x");
        assert_eq!(route_label(Some("/")), "root");
        assert_eq!(route_label(None), "other");
    }
}
