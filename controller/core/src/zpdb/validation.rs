//! `/admission/zpdb-validation` (reference 5.2): a ZoneAwarePodDisruptionBudget is admitted only if it parses and
//! validates as the operator will read it. No lookups, no writes, no dry-run case.

use super::config::ZpdbConfig;
use crate::admission::{AdmissionRequest, Verdict};
use serde_json::Value;

/// The verdict on a CREATE or UPDATE of a budget: allowed, or denied with the first failing check's message and
/// `status.code` 400.
pub fn validate(request: &AdmissionRequest) -> Verdict {
    let deny = |message: String| Verdict::deny(message).with_code(400);
    match &request.object {
        // What Go's JSON decoder says of an empty `object.raw`.
        Value::Null => deny("unexpected end of JSON input".to_string()),
        Value::Object(_) => match ZpdbConfig::parse(&request.object) {
            Ok(_) => Verdict::allow(),
            Err(err) => deny(err.to_string()),
        },
        other => {
            let json_type = match other {
                Value::Bool(_) => "bool",
                Value::Number(_) => "number",
                Value::String(_) => "string",
                _ => "array",
            };
            deny(format!("json: cannot unmarshal {json_type} into Go value of type map[string]interface {{}}"))
        }
    }
}
