//! `/admission/rollouthealthcheck-validation`: a RolloutHealthCheck is admitted only if the operator can use it
//! (`rollout_core::health_check::validation`), so a mistake shows when it is applied rather than when a zone is
//! about to start. No lookups, no writes.

use super::router::respond;
use axum::body::Bytes;
use axum::http::HeaderMap;
use axum::response::Response;
use rollout_core::health_check::validation;

pub const HEALTH_CHECK_VALIDATION_PATH: &str = "/admission/rollouthealthcheck-validation";

pub(super) async fn validation_handler(headers: HeaderMap, body: Bytes) -> Response {
    respond(&headers, &body, |request| async move { validation::validate(&request) }).await
}
