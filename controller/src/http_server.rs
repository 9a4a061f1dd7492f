//! The plain HTTP server on `-server.port`: `/ready` and `/metrics`, as in the reference.
//!
//! `/metrics` is served as OpenMetrics 1.0 text: that is the format prometheus-client's encoder writes (counter
//! families declared without their `_total` suffix, a final `# EOF`), so the content type says exactly that.
//! Labelling it Prometheus text 0.0.4 would make a strict 0.0.4 parser see counter samples whose names do not match
//! their `# TYPE` line. Prometheus negotiates OpenMetrics by default, and the sample names
//! (`rollout_operator_group_reconciles_total`, ...) are the reference's either way.
//!
//! Like the reference's router, both paths answer every method and match exactly; anything else is 404.

use crate::health::ReadyFlag;
use crate::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use std::sync::Arc;

pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    ready: ReadyFlag,
}

/// Routes of the plain HTTP server.
pub fn router(metrics: Arc<Metrics>, ready: ReadyFlag) -> Router {
    Router::new()
        .route("/ready", any(ready_handler))
        .route("/metrics", any(metrics_handler))
        .with_state(AppState { metrics, ready })
}

/// 200 once the controller's caches have synced, 500 before; empty body either way (as the reference).
async fn ready_handler(State(state): State<AppState>) -> StatusCode {
    if state.ready.is_ready() { StatusCode::OK } else { StatusCode::INTERNAL_SERVER_ERROR }
}

async fn metrics_handler(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)], state.metrics.encode()).into_response()
}

/// Serves `router` on `listener` until `shutdown` resolves, then stops accepting and lets in-flight requests
/// finish. Real sockets only: inside the simulator the router is driven directly with `tower::ServiceExt`.
#[cfg(not(madsim))]
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router).with_graceful_shutdown(shutdown).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn call(router: Router, method: &str, path: &str) -> (StatusCode, Option<String>, String) {
        let request = Request::builder().method(method).uri(path).body(Body::empty()).expect("valid request");
        let response = router.oneshot(request).await.expect("the router is infallible");
        let status = response.status();
        let content_type =
            response.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).map(str::to_string);
        let body = response.into_body().collect().await.expect("body").to_bytes();
        (status, content_type, String::from_utf8(body.to_vec()).expect("utf-8 body"))
    }

    #[tokio::test]
    async fn ready_is_500_until_the_flag_is_set_then_200() {
        let ready = ReadyFlag::new();
        let app = router(Arc::new(Metrics::new()), ready.clone());
        let (status, _, body) = call(app.clone(), "GET", "/ready").await;
        assert_eq!((status, body.as_str()), (StatusCode::INTERNAL_SERVER_ERROR, ""));
        ready.set_ready();
        let (status, _, body) = call(app, "GET", "/ready").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, ""));
    }

    #[tokio::test]
    async fn metrics_serves_the_registry_as_openmetrics() {
        let metrics = Arc::new(Metrics::new());
        metrics.group_reconcile_started("ingester");
        let (status, content_type, body) = call(router(metrics, ReadyFlag::new()), "GET", "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type.as_deref(), Some(METRICS_CONTENT_TYPE));
        assert!(body.contains("rollout_operator_group_reconciles_total{rollout_group=\"ingester\"} 1"), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }

    #[tokio::test]
    async fn unknown_and_non_exact_paths_are_404() {
        let app = router(Arc::new(Metrics::new()), ReadyFlag::new());
        for path in ["/", "/nope", "/ready/", "/metrics/x", "/debug/pprof/"] {
            let (status, _, _) = call(app.clone(), "GET", path).await;
            assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[tokio::test]
    async fn endpoints_answer_any_method_like_the_reference() {
        let ready = ReadyFlag::new();
        ready.set_ready();
        let app = router(Arc::new(Metrics::new()), ready);
        assert_eq!(call(app.clone(), "POST", "/metrics").await.0, StatusCode::OK);
        assert_eq!(call(app.clone(), "HEAD", "/ready").await.0, StatusCode::OK);
    }

    /// A real socket on localhost: the server answers, then stops when told to.
    #[cfg(not(madsim))]
    #[tokio::test]
    async fn serves_on_a_real_socket_and_shuts_down() {
        use std::time::Duration;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let ready = ReadyFlag::new();
        ready.set_ready();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind localhost");
        let addr = listener.local_addr().expect("local address");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, router(Arc::new(Metrics::new()), ready), async {
            let _ = stopped.await;
        }));

        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(addr).await?;
            stream.write_all(b"GET /ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").await?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await?;
            Ok::<_, std::io::Error>(String::from_utf8_lossy(&response).into_owned())
        };
        let response = tokio::time::timeout(Duration::from_secs(10), exchange)
            .await
            .expect("the server answers in time")
            .expect("the exchange succeeds");
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");

        let _ = stop.send(());
        let result = tokio::time::timeout(Duration::from_secs(10), server).await.expect("the server stops in time");
        assert!(matches!(result, Ok(Ok(()))), "{result:?}");
    }
}
