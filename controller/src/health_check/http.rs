//! The real transport to Prometheus: HTTP/1.1 over hyper, https via rustls (ring) with the system's roots, as the
//! pod client. Timeouts are the client's ([`super::prometheus::PrometheusClient`]), per attempt.

use super::prometheus::{HttpRequest, HttpResponse, Transport, TransportError};
use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Cheap to clone (shares the connection pool).
#[derive(Clone)]
pub struct HyperTransport {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl HyperTransport {
    pub fn new() -> Result<Self, TransportError> {
        let connector = crate::pods::hyper_client::https_or_http_connector("queries to Prometheus")
            .map_err(|e| TransportError::Other(e.to_string()))?;
        Ok(HyperTransport { client: Client::builder(TokioExecutor::new()).build(connector) })
    }
}

impl Transport for HyperTransport {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let method = if request.method == "POST" { Method::POST } else { Method::GET };
        let mut builder = Request::builder().method(method).uri(&request.url).header("accept", "application/json");
        if request.form.is_some() {
            builder = builder.header(http::header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        }
        let body = Full::new(Bytes::from(request.form.unwrap_or_default()));
        let http_request = builder.body(body).map_err(|e| TransportError::Other(format!("invalid request: {e}")))?;
        let response = self.client.request(http_request).await.map_err(|e| {
            let message = error_chain(&e);
            if e.is_connect() { TransportError::Connect(message) } else { TransportError::Other(message) }
        })?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| TransportError::Other(format!("reading the answer: {}", error_chain(&e))))?;
        Ok(HttpResponse { status, body: body.to_bytes().to_vec() })
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
