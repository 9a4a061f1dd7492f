#![cfg(not(madsim))]
//! The mock pod's HTTP API, driven in memory (no socket): readiness toggles, prepare-downscale with call counts
//! and a configurable failure, delayed-downscale timestamps, and its environment parsing.

use axum::body::Body;
use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use rollout_e2e::mock_pod::{DelayedState, MockPodConfig, PrepareState, router};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use tower::ServiceExt;

fn config(env: &[(&str, &str)]) -> MockPodConfig {
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    MockPodConfig::from_env(|name| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())).expect("config")
}

async fn call(app: &axum::Router, method: Method, path: &str) -> (StatusCode, String) {
    let req = Request::builder().method(method).uri(path).body(Body::empty()).expect("request");
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let status = resp.status();
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn readiness_toggles() {
    let app = router(&config(&[]), Arc::new(|| 0));
    assert_eq!(call(&app, Method::GET, "/ready").await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call(&app, Method::POST, "/ready").await.0, StatusCode::OK);
    assert_eq!(call(&app, Method::GET, "/ready").await.0, StatusCode::OK);
    assert_eq!(call(&app, Method::DELETE, "/ready").await.0, StatusCode::OK);
    assert_eq!(call(&app, Method::GET, "/ready").await.0, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(call(&app, Method::PUT, "/ready").await.0, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(call(&app, Method::GET, "/alive").await.0, StatusCode::OK, "alive from the start");
    let ready = router(&config(&[("READY", "true"), ("VERSION", "7")]), Arc::new(|| 0));
    assert_eq!(call(&ready, Method::GET, "/ready").await.0, StatusCode::OK);
    assert_eq!(call(&ready, Method::GET, "/version").await.1, "7");
}

#[tokio::test]
async fn prepare_downscale_counts_calls_and_can_fail() {
    let app = router(&config(&[]), Arc::new(|| 0));
    let state = |body: String| serde_json::from_str::<PrepareState>(&body).expect("state");
    assert_eq!(state(call(&app, Method::GET, "/prepare-downscale").await.1), PrepareState::default());
    assert_eq!(call(&app, Method::POST, "/prepare-downscale").await.0, StatusCode::OK);
    assert_eq!(
        state(call(&app, Method::GET, "/prepare-downscale").await.1),
        PrepareState { prepared: true, posts: 1, deletes: 0 }
    );
    assert_eq!(call(&app, Method::DELETE, "/prepare-downscale").await.0, StatusCode::OK);
    assert_eq!(call(&app, Method::POST, "/control/prepare-status?code=500").await.0, StatusCode::OK);
    assert_eq!(call(&app, Method::POST, "/prepare-downscale").await.0, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        state(call(&app, Method::GET, "/prepare-downscale").await.1),
        PrepareState { prepared: false, posts: 2, deletes: 1 }
    );
    assert_eq!(call(&app, Method::POST, "/control/prepare-status?code=42").await.0, StatusCode::BAD_REQUEST);
    let failing = router(&config(&[("PREPARE_STATUS", "503")]), Arc::new(|| 0));
    assert_eq!(call(&failing, Method::POST, "/prepare-downscale").await.0, StatusCode::SERVICE_UNAVAILABLE);
}

#[tokio::test]
async fn delayed_downscale_keeps_its_timestamp_until_cancelled() {
    let now = Arc::new(AtomicI64::new(1_000));
    let clock = now.clone();
    let app = router(&config(&[]), Arc::new(move || clock.load(Ordering::SeqCst)));
    let path = "/prepare-delayed-downscale";
    assert_eq!(call(&app, Method::POST, path).await.1, r#"{"timestamp":1000}"#);
    now.store(2_000, Ordering::SeqCst);
    assert_eq!(call(&app, Method::POST, path).await.1, r#"{"timestamp":1000}"#, "same timestamp until a DELETE");
    assert_eq!(call(&app, Method::DELETE, path).await.0, StatusCode::OK);
    let st: DelayedState = serde_json::from_str(&call(&app, Method::GET, path).await.1).expect("state");
    assert_eq!(st, DelayedState { timestamp: None, posts: 2, deletes: 1 });
    assert_eq!(call(&app, Method::POST, path).await.1, r#"{"timestamp":2000}"#);
}

#[test]
fn bad_environment_is_a_clear_error() {
    let get = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    };
    let e = MockPodConfig::from_env(get(&[("READY", "yes")])).expect_err("READY=yes");
    assert_eq!(e.name, "READY");
    let e = MockPodConfig::from_env(get(&[("PORT", "http")])).expect_err("PORT=http");
    assert!(e.to_string().contains("PORT=\"http\""), "{e}");
    assert!(MockPodConfig::from_env(get(&[("PREPARE_STATUS", "700")])).is_err());
    assert!(MockPodConfig::from_env(get(&[("PREPARE_DOWNSCALE_PATH", "x")])).is_err());
    let custom = config(&[("PREPARE_DOWNSCALE_PATH", "/ingester/prepare"), ("CRASH", "true")]);
    assert!(custom.crash);
    assert_eq!(custom.prepare_downscale_path, "/ingester/prepare");
}
