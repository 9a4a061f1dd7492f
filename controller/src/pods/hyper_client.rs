//! The production pod client: HTTP/1.1 over hyper, https via rustls (ring) with the system's roots, and the
//! https-or-http connector it shares with the Prometheus queries of health checks.
//!
//! Owns the transport of pod calls (timeouts, the cluster-validation header and the metrics of each call). Must
//! not interpret what a pod answers; the port and its types are `pods::client`'s. Not built under `--cfg madsim`.

use crate::pods::client::*;
use bytes::Bytes;
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Empty};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An HTTP/1.1 connector for plain http and https with the system's roots (rustls, ring); where there is no CA
/// bundle (a scratch image) it is said once for `what` and https fails per request while plain http works.
pub fn https_or_http_connector(what: &str) -> Result<HttpsConnector<HttpConnector>, rustls::Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = match hyper_rustls::HttpsConnectorBuilder::new().with_provider_and_native_roots(provider.clone()) {
        Ok(builder) => builder,
        Err(error) => {
            tracing::warn!(%error, "no system CA certificates for https {what}; https requests will fail");
            let config = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(config)
        }
    };
    Ok(builder.https_or_http().enable_http1().build())
}

/// Calls pods over HTTP(S). Cheap to clone (shares the connection pool).
#[derive(Clone)]
pub struct HyperPodClient {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
    timeout: Duration,
    cluster: HeaderValue,
    namespace: String,
    metrics: PodClientMetrics,
}

impl HyperPodClient {
    /// `timeout` bounds each whole call (connect, send, read the body); zero means no timeout, as in Go.
    /// `namespace` is sent as the `X-Cluster` header.
    pub fn new(timeout: Duration, namespace: &str, metrics: PodClientMetrics) -> Result<Self, PodCallError> {
        let cluster = HeaderValue::from_str(namespace).map_err(|e| {
            PodCallError::Setup(format!("namespace {namespace:?} cannot be sent as the X-Cluster header: {e}"))
        })?;
        let connector = https_or_http_connector("pod calls").map_err(|e| PodCallError::Setup(e.to_string()))?;
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HyperPodClient { client, timeout, cluster, namespace: namespace.to_string(), metrics })
    }

    async fn send(&self, request: &PodRequest, uri: Uri) -> Result<(u16, Option<String>, Vec<u8>), PodCallError> {
        let method = request.method.as_str();
        let mut builder = Request::builder()
            .method(match request.method {
                PodMethod::Post => Method::POST,
                PodMethod::Delete => Method::DELETE,
            })
            .uri(uri)
            .header("x-cluster", self.cluster.clone());
        if request.json_content_type {
            builder = builder.header(http::header::CONTENT_TYPE, "application/json");
        }
        let http_request = builder
            .body(Empty::new())
            .map_err(|e| PodCallError::InvalidUrl { url: request.url.clone(), reason: e.to_string() })?;
        let response = self.client.request(http_request).await.map_err(|e| {
            let message = error_chain(&e);
            if e.is_connect() {
                PodCallError::Connect { method, url: request.url.clone(), message }
            } else {
                PodCallError::Transport { method, url: request.url.clone(), message }
            }
        })?;
        let status = response.status().as_u16();
        let content_type =
            response.headers().get(http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = response.into_body().collect().await.map_err(|e| PodCallError::Transport {
            method,
            url: request.url.clone(),
            message: format!("reading the response body: {}", error_chain(&e)),
        })?;
        Ok((status, content_type, body.to_bytes().to_vec()))
    }
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

impl PodHttpClient for HyperPodClient {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let method = request.method.as_str();
        let uri: Uri = request.url.parse().map_err(|e: http::uri::InvalidUri| PodCallError::InvalidUrl {
            url: request.url.clone(),
            reason: e.to_string(),
        })?;
        match uri.scheme_str() {
            Some("http") | Some("https") => {}
            Some(other) => {
                return Err(PodCallError::UnsupportedScheme { url: request.url.clone(), scheme: other.to_string() });
            }
            None => {
                return Err(PodCallError::InvalidUrl {
                    url: request.url.clone(),
                    reason: "not an absolute URL".to_string(),
                });
            }
        }
        let path = uri.path().to_string();
        let started = Instant::now();
        let outcome = if self.timeout.is_zero() {
            self.send(&request, uri).await
        } else {
            match tokio::time::timeout(self.timeout, self.send(&request, uri)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(PodCallError::Timeout { method, url: request.url.clone(), after: self.timeout }),
            }
        };
        let took = started.elapsed();
        match outcome {
            Ok((status, content_type, body)) => {
                self.metrics.observe(&path, request.method, Some(status), took);
                if let Some(message) = cluster_validation_message(status, content_type.as_deref(), &body) {
                    self.metrics
                        .invalid_cluster
                        .get_or_create(&InvalidClusterLabels {
                            method: path.clone(),
                            protocol: "http".to_string(),
                            request_cluster: self.namespace.clone(),
                        })
                        .inc();
                    tracing::warn!(url = %request.url, %message, "pod rejected the call: wrong cluster validation label");
                    return Err(PodCallError::ClusterValidation { method, url: request.url, message });
                }
                Ok(PodResponse { status, body })
            }
            Err(error) => {
                self.metrics.observe(&path, request.method, None, took);
                Err(error)
            }
        }
    }
}
