//! Server-side cluster validation (`-server.cluster-validation.http.*`, the reference's dskit middleware): a request
//! must carry exactly one `X-Cluster` header equal to the managed namespace, unless its path or user agent is
//! exempt. A request that fails gets HTTP 511 with `{"cluster_validation_error_message", "route"}` (or, with soft
//! validation, only a log line), and is counted in
//! `rollout_operator_server_invalid_cluster_validation_label_requests_total`.
//!
//! Owns the check and its layer; whether it is on is decided from the flags by the caller.

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use regex::Regex;
use std::sync::Arc;

/// Paths the API server calls (it sends no `X-Cluster`): exempt whatever the flags say. The reference exempts only
/// the first two by default, so hard validation rejected every eviction (its bug M); we exempt every one.
pub const API_SERVER_PATHS: [&str; 5] = [
    "admission/no-downscale",
    "admission/prepare-downscale",
    "admission/pod-eviction",
    "admission/zpdb-validation",
    "admission/rollouthealthcheck-validation",
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct InvalidLabelLabels {
    pub protocol: String,
    /// The route label of the request.
    pub method: String,
    pub cluster_validation_label: String,
    pub request_cluster_validation_label: String,
}

/// The counter of rejected (or, softly, reported) requests.
#[derive(Clone, Default)]
pub struct ClusterValidationMetrics {
    invalid: Family<InvalidLabelLabels, Counter>,
}

impl ClusterValidationMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = ClusterValidationMetrics::default();
        registry.register(
            "server_invalid_cluster_validation_label_requests",
            "Requests received with a missing or wrong cluster validation label.",
            metrics.invalid.clone(),
        );
        metrics
    }
}

/// The validation settings, from the flags.
#[derive(Clone)]
pub struct ClusterValidation {
    namespace: String,
    soft: bool,
    exempt_paths: Regex,
    exempt_user_agents: Option<Regex>,
    metrics: ClusterValidationMetrics,
}

/// A pattern given in `-server.cluster-validation.http.excluded-user-agents` is not a regular expression.
#[derive(Debug, thiserror::Error)]
#[error("-server.cluster-validation.http.excluded-user-agents: {0}")]
pub struct BadPattern(#[from] regex::Error);

impl ClusterValidation {
    /// `excluded_paths` are paths (regex-quoted, as the reference does); `excluded_user_agents` are regular
    /// expressions, any of which exempts a request whose User-Agent it matches.
    pub fn new(
        namespace: &str,
        soft: bool,
        excluded_paths: &[String],
        excluded_user_agents: &[String],
        metrics: ClusterValidationMetrics,
    ) -> Result<Self, BadPattern> {
        let mut paths: Vec<String> = ["metrics", "debug/pprof.*", "ready"].iter().map(|p| p.to_string()).collect();
        for path in excluded_paths.iter().map(String::as_str).chain(API_SERVER_PATHS) {
            paths.push(regex::escape(path.trim_start_matches('/')));
        }
        let exempt_paths = Regex::new(&format!("^.*/({})", paths.join("|")))?;
        let agents: Vec<&str> = excluded_user_agents.iter().map(String::as_str).filter(|a| !a.is_empty()).collect();
        let exempt_user_agents =
            if agents.is_empty() { None } else { Some(Regex::new(&format!("({})", agents.join("|")))?) };
        Ok(ClusterValidation { namespace: namespace.to_string(), soft, exempt_paths, exempt_user_agents, metrics })
    }

    /// Why the request with `path` and `headers` fails validation (`None`: it passes or is exempt), and the label it
    /// carried.
    pub fn check(&self, path: &str, headers: &HeaderMap) -> Option<(String, String)> {
        if self.exempt_paths.is_match(path) {
            return None;
        }
        let agent = headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default();
        if self.exempt_user_agents.as_ref().is_some_and(|r| r.is_match(agent)) {
            return None;
        }
        let values: Vec<&str> =
            headers.get_all("x-cluster").iter().map(|v| v.to_str().unwrap_or("<not UTF-8>")).collect();
        let ns = &self.namespace;
        match values.as_slice() {
            [one] if *one == ns => None,
            [] | [""] => Some((
                format!("rejected request with empty cluster validation label - it should be one of [{ns}]"),
                String::new(),
            )),
            [one] => Some((
                format!("rejected request with wrong cluster validation label \"{one}\" - it should be one of [{ns}]"),
                one.to_string(),
            )),
            many => Some((
                format!("rejected request: {} cluster validation labels, expected exactly one", many.len()),
                many.join(","),
            )),
        }
    }
}

/// Adds the validation to every route of `router` (and its 404 fallback).
pub fn validate(router: Router, validation: Arc<ClusterValidation>) -> Router {
    router.layer(axum::middleware::from_fn_with_state(validation, enforce))
}

async fn enforce(State(v): State<Arc<ClusterValidation>>, request: Request, next: Next) -> Response {
    let Some((message, label)) = v.check(request.uri().path(), request.headers()) else {
        return next.run(request).await;
    };
    let route = match request.extensions().get::<MatchedPath>() {
        Some(m) => crate::ops::http_metrics::route_label(Some(m.as_str())),
        None => "<unknown-route>".to_string(),
    };
    let labels = InvalidLabelLabels {
        protocol: "http".to_string(),
        method: route.clone(),
        cluster_validation_label: v.namespace.clone(),
        request_cluster_validation_label: label,
    };
    v.metrics.invalid.get_or_create(&labels).inc();
    if v.soft {
        tracing::warn!(%route, %message, "request with an invalid cluster validation label (soft validation: served)");
        return next.run(request).await;
    }
    tracing::warn!(%route, %message, "request rejected: invalid cluster validation label");
    let body = serde_json::json!({ "cluster_validation_error_message": message, "route": route });
    (StatusCode::NETWORK_AUTHENTICATION_REQUIRED, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::routing::any;
    use tower::ServiceExt;

    fn validation(soft: bool, agents: &[&str]) -> Arc<ClusterValidation> {
        let agents: Vec<String> = agents.iter().map(|a| a.to_string()).collect();
        Arc::new(ClusterValidation::new("mimir", soft, &[], &agents, ClusterValidationMetrics::default()).unwrap())
    }

    async fn call(v: Arc<ClusterValidation>, path: &str, headers: &[(&str, &str)]) -> (StatusCode, String) {
        let router = Router::new()
            .route("/admission/no-downscale", any(|| async { "ok" }))
            .route("/metrics", any(|| async { "ok" }))
            .route("/other", any(|| async { "ok" }));
        let app = validate(router, v);
        let mut request = Request::get(path);
        for (k, val) in headers {
            request = request.header(*k, *val);
        }
        let response = app.oneshot(request.body(Body::empty()).unwrap()).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 16).await.unwrap();
        (status, String::from_utf8_lossy(&body).to_string())
    }

    #[tokio::test]
    async fn the_label_must_be_the_namespace_exactly_once() {
        let v = validation(false, &[]);
        assert_eq!(call(v.clone(), "/other", &[("x-cluster", "mimir")]).await.0, StatusCode::OK);
        let (status, body) = call(v.clone(), "/other", &[("x-cluster", "loki")]).await;
        assert_eq!(status, StatusCode::NETWORK_AUTHENTICATION_REQUIRED);
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body["cluster_validation_error_message"],
            "rejected request with wrong cluster validation label \"loki\" - it should be one of [mimir]"
        );
        assert_eq!(body["route"], "other");
        let (status, body) = call(v.clone(), "/other", &[]).await;
        assert_eq!(status, StatusCode::NETWORK_AUTHENTICATION_REQUIRED);
        assert!(body.contains("empty cluster validation label"), "{body}");
        let (status, _) = call(v.clone(), "/other", &[("x-cluster", "mimir"), ("x-cluster", "mimir")]).await;
        assert_eq!(status, StatusCode::NETWORK_AUTHENTICATION_REQUIRED);
        let (status, body) = call(v, "/nope", &[]).await;
        assert_eq!(status, StatusCode::NETWORK_AUTHENTICATION_REQUIRED);
        assert!(body.contains("<unknown-route>"), "{body}");
    }

    #[tokio::test]
    async fn metrics_ready_and_every_api_server_path_are_exempt() {
        let v = validation(false, &[]);
        assert_eq!(call(v.clone(), "/metrics", &[]).await.0, StatusCode::OK);
        assert_eq!(call(v.clone(), "/admission/no-downscale", &[]).await.0, StatusCode::OK);
        for path in ["/admission/pod-eviction", "/admission/zpdb-validation", "/ready"] {
            assert!(v.check(path, &HeaderMap::new()).is_none(), "{path}");
        }
    }

    #[tokio::test]
    async fn excluded_user_agents_and_soft_validation() {
        let v = validation(false, &["^kube-probe/", "prometheus"]);
        let probe = [("user-agent", "kube-probe/1.30")];
        assert_eq!(call(v.clone(), "/other", &probe).await.0, StatusCode::OK);
        assert_eq!(call(v, "/other", &[("user-agent", "curl/8")]).await.0, StatusCode::NETWORK_AUTHENTICATION_REQUIRED);
        let soft = validation(true, &[]);
        assert_eq!(call(soft.clone(), "/other", &[]).await.0, StatusCode::OK);
        let counted = soft.metrics.invalid.get_or_create(&InvalidLabelLabels {
            protocol: "http".into(),
            method: "other".into(),
            cluster_validation_label: "mimir".into(),
            request_cluster_validation_label: String::new(),
        });
        assert_eq!(counted.get(), 1);
    }

    #[test]
    fn a_bad_user_agent_pattern_is_a_clear_error() {
        let err = ClusterValidation::new("ns", false, &[], &["(".into()], ClusterValidationMetrics::default())
            .err()
            .expect("invalid");
        assert!(err.to_string().starts_with("-server.cluster-validation.http.excluded-user-agents:"), "{err}");
    }
}
