//! Prometheus' instant-query API (`/api/v1/query`) for the health checks: the transport port ([`Transport`]), the
//! client that builds requests, retries and reads answers ([`PrometheusClient`]), and its typed errors.
//!
//! Requests are POSTed as a form (no URL length limit); a server that refuses POST (405, 501: some proxies in front
//! of a query frontend) is asked again with GET at once. Each attempt is bounded by the check's `queryTimeout`;
//! transport failures, timeouts, 429 and 5xx are retried `queryRetries` times, a refused query (400, 422) is not
//! (it would fail the same way). The transport is a port so that the simulation can answer from its own world; the
//! real one ([`super::http::HyperTransport`]) is left out of the `--cfg madsim` build.

use jiff::Timestamp;
use rollout_core::health_check::{QueryRequest, QueryResult};
use serde_json::Value;
use std::future::Future;
use std::time::Duration;
use thiserror::Error;

/// Pause between two attempts of one query.
const RETRY_PAUSE: Duration = Duration::from_millis(250);

/// One HTTP request to Prometheus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpRequest {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// Absolute URL, with the query string for a GET.
    pub url: String,
    /// The form body of a POST (`application/x-www-form-urlencoded`).
    pub form: Option<String>,
}

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why a request got no response.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TransportError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("{0}")]
    Other(String),
}

/// The way to Prometheus.
pub trait Transport: Clone + Send + Sync + 'static {
    fn send(&self, request: HttpRequest) -> impl Future<Output = Result<HttpResponse, TransportError>> + Send;
}

/// Why a query has no usable answer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QueryError {
    #[error("invalid Prometheus URL {url:?}: expected http:// or https://")]
    InvalidUrl { url: String },
    #[error("{url}: no answer within {after:?}")]
    Timeout { url: String, after: Duration },
    #[error("{url}: {source}")]
    Transport {
        url: String,
        #[source]
        source: TransportError,
    },
    /// Prometheus refused the query (`errorType` and `error` of its answer, when it gave them).
    #[error("{url}: HTTP {status}: {message}")]
    Refused { url: String, status: u16, message: String },
    #[error("{url}: unreadable answer: {message}")]
    Unreadable { url: String, message: String },
}

impl QueryError {
    /// Whether another attempt may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            QueryError::Timeout { .. } | QueryError::Transport { .. } => true,
            QueryError::Refused { status, .. } => *status == 429 || *status >= 500,
            QueryError::InvalidUrl { .. } | QueryError::Unreadable { .. } => false,
        }
    }
}

/// A client of one Prometheus (the RolloutHealthCheck's `prometheusURL`, or `--prometheus-url`).
#[derive(Debug, Clone)]
pub struct PrometheusClient<T> {
    transport: T,
    /// `<base>/api/v1/query`.
    endpoint: String,
}

impl<T: Transport> PrometheusClient<T> {
    /// `base_url` is the API's base (`http://prometheus:9090`, `http://mimir/prometheus`).
    pub fn new(transport: T, base_url: &str) -> Result<Self, QueryError> {
        let base = base_url.trim().trim_end_matches('/');
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(QueryError::InvalidUrl { url: base_url.to_string() });
        }
        Ok(PrometheusClient { transport, endpoint: format!("{base}/api/v1/query") })
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The query of `request`, with its timeout and retries.
    pub async fn query(&self, request: &QueryRequest) -> Result<QueryResult, QueryError> {
        let mut attempt = 0;
        loop {
            match self.attempt(&request.promql, request.at, request.timeout).await {
                Err(error) if error.is_transient() && attempt < request.retries => {
                    attempt += 1;
                    tracing::debug!(check = %request.check, query = request.kind.as_str(), %error, attempt, "retrying");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
                outcome => return outcome,
            }
        }
    }

    /// One attempt: POST, then GET if POST is refused, within `timeout`.
    pub async fn attempt(&self, promql: &str, at: Timestamp, timeout: Duration) -> Result<QueryResult, QueryError> {
        let form =
            format!("query={}&time={}&timeout={}ms", encode(promql), encode(&at.to_string()), timeout.as_millis());
        let within = async {
            let post = HttpRequest { method: "POST", url: self.endpoint.clone(), form: Some(form.clone()) };
            let response = self.send(post).await?;
            if matches!(response.status, 405 | 501) {
                let get = HttpRequest { method: "GET", url: format!("{}?{form}", self.endpoint), form: None };
                return self.send(get).await;
            }
            Ok(response)
        };
        let response = match tokio::time::timeout(timeout, within).await {
            Ok(response) => response?,
            Err(_) => return Err(QueryError::Timeout { url: self.endpoint.clone(), after: timeout }),
        };
        read_answer(&self.endpoint, &response)
    }

    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, QueryError> {
        self.transport
            .send(request)
            .await
            .map_err(|source| QueryError::Transport { url: self.endpoint.clone(), source })
    }
}

/// Reads an answer of `/api/v1/query`.
pub fn read_answer(url: &str, response: &HttpResponse) -> Result<QueryResult, QueryError> {
    let unreadable = |message: String| QueryError::Unreadable { url: url.to_string(), message };
    let body: Result<Value, _> = serde_json::from_slice(&response.body);
    if !(200..300).contains(&response.status) {
        let message = match &body {
            Ok(v) => match (v.get("errorType").and_then(Value::as_str), v.get("error").and_then(Value::as_str)) {
                (Some(kind), Some(error)) => format!("{kind}: {error}"),
                (None, Some(error)) => error.to_string(),
                _ => truncated(&response.body),
            },
            Err(_) => truncated(&response.body),
        };
        return Err(QueryError::Refused { url: url.to_string(), status: response.status, message });
    }
    let body = body.map_err(|e| unreadable(format!("not JSON: {e}")))?;
    if body.get("status").and_then(Value::as_str) != Some("success") {
        let error = body.get("error").and_then(Value::as_str).unwrap_or("status is not success");
        return Err(unreadable(error.to_string()));
    }
    let data = body.get("data").ok_or_else(|| unreadable("no data".to_string()))?;
    let result = data.get("result").ok_or_else(|| unreadable("no data.result".to_string()))?;
    match data.get("resultType").and_then(Value::as_str) {
        Some("scalar") => sample_value(result).map(QueryResult::Scalar).map_err(unreadable),
        Some("vector") => {
            let samples = result.as_array().ok_or_else(|| unreadable("a vector that is not an array".to_string()))?;
            let values = samples
                .iter()
                .map(|s| s.get("value").ok_or_else(|| "a sample without value".to_string()).and_then(sample_value))
                .collect::<Result<Vec<f64>, String>>()
                .map_err(unreadable)?;
            Ok(QueryResult::Vector(values))
        }
        Some(other) => Ok(QueryResult::Other(other.to_string())),
        None => Err(unreadable("no data.resultType".to_string())),
    }
}

/// `[<unix time>, "<value>"]`; Prometheus spells the special values `NaN`, `+Inf`, `-Inf`.
fn sample_value(pair: &Value) -> Result<f64, String> {
    let text = pair.get(1).and_then(Value::as_str).ok_or_else(|| format!("not a [time, \"value\"] pair: {pair}"))?;
    match text {
        "NaN" => Ok(f64::NAN),
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => text.parse().map_err(|_| format!("not a number: {text:?}")),
    }
}

fn truncated(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match text.char_indices().nth(300) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// `application/x-www-form-urlencoded` encoding of one value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len() * 3 / 2);
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
