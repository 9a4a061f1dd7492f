//! The validating webhook's verdict on a RolloutHealthCheck: admitted only if it validates as the operator will
//! read it. No lookups, no writes, no dry-run case.

use super::config::parse;
use crate::admission::{AdmissionRequest, Verdict};
use serde_json::Value;

/// The verdict on a CREATE or UPDATE: allowed, or denied (400) with the first problem found.
pub fn validate(request: &AdmissionRequest) -> Verdict {
    let deny = |message: String| Verdict::deny(message).with_code(400);
    match &request.object {
        Value::Object(_) => match parse(&request.object) {
            Ok(_) => Verdict::allow(),
            Err(err) => deny(format!("invalid RolloutHealthCheck: {err}")),
        },
        Value::Null => deny("the request has no object".to_string()),
        _ => deny("the request's object is not a JSON object".to_string()),
    }
}
