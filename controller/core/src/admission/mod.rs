//! Admission decisions: AdmissionReview in, AdmissionReview out, for `/admission/no-downscale` and
//! `/admission/prepare-downscale` (reference section 4).
//!
//! Owns: reading an AdmissionReview (`admission.k8s.io/v1` and `v1beta1`) into a typed [`AdmissionRequest`] with
//! a reason for every way it can be malformed ([`ReviewError`], answered with HTTP 400), reading the old and new
//! objects' replica counts, the verdicts with the reference's exact messages and warnings, and rendering the
//! response review. Every lookup a decision needs (a `/scale` request's parent, the StatefulSets of a group, the
//! downscale record) is named by a step's result and answered by the caller; nothing here does I/O or reads a clock.
//!
//! Must not touch: the cluster, pods, time, randomness. The HTTP shell (`controller/src/webhooks`) and the
//! `review` command drive these functions; the simulator drives the same router.

pub mod no_downscale;
pub mod prepare;
pub mod prepare_flow;

use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use thiserror::Error;

/// The AdmissionReview API version a request came in; the response uses the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReviewVersion {
    V1,
    V1Beta1,
}

impl ReviewVersion {
    pub fn api_version(self) -> &'static str {
        match self {
            ReviewVersion::V1 => "admission.k8s.io/v1",
            ReviewVersion::V1Beta1 => "admission.k8s.io/v1beta1",
        }
    }
}

/// Why a request body is not an AdmissionReview we can answer. Each becomes HTTP 400 with [`ReviewError`]'s text.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReviewError {
    #[error("wrong content type")]
    ContentType,
    #[error("Request could not be decoded: {0}")]
    Decode(String),
    #[error("Unsupported group version kind: {0}")]
    UnsupportedKind(String),
    #[error("Request could not be decoded: the AdmissionReview has no request")]
    NoRequest,
    #[error("Request could not be decoded: request.{field} {problem}")]
    Field { field: &'static str, problem: &'static str },
}

/// The `request` of an AdmissionReview, as far as our webhooks read it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdmissionRequest {
    pub version: ReviewVersion,
    pub uid: String,
    /// `request.kind.kind` (e.g. `StatefulSet`, `Scale`).
    pub kind: String,
    /// `request.resource.resource` (e.g. `statefulsets`, also for `/scale` requests).
    pub resource: String,
    pub sub_resource: String,
    pub name: String,
    pub namespace: String,
    pub operation: String,
    pub username: String,
    /// `request.object` and `request.oldObject`; `Value::Null` when absent.
    pub object: Value,
    pub old_object: Value,
    /// `request.dryRun`; absent means false.
    pub dry_run: bool,
}

/// Checks the Content-Type header: it must be exactly `application/json` (reference 4.1).
pub fn check_content_type(content_type: Option<&str>) -> Result<(), ReviewError> {
    if content_type == Some("application/json") { Ok(()) } else { Err(ReviewError::ContentType) }
}

/// Reads an AdmissionReview body.
pub fn parse_review(body: &[u8]) -> Result<AdmissionRequest, ReviewError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| ReviewError::Decode(e.to_string()))?;
    let Value::Object(review) = value else {
        return Err(ReviewError::Decode("expected a JSON object".to_string()));
    };
    let api_version = review.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or_default();
    let version = match (api_version, kind) {
        ("admission.k8s.io/v1", "AdmissionReview") => ReviewVersion::V1,
        ("admission.k8s.io/v1beta1", "AdmissionReview") => ReviewVersion::V1Beta1,
        _ => return Err(ReviewError::UnsupportedKind(gvk(api_version, kind))),
    };
    let request = match review.get("request") {
        Some(Value::Object(request)) => request,
        Some(Value::Null) | None => return Err(ReviewError::NoRequest),
        Some(_) => return Err(ReviewError::Field { field: "", problem: "is not an object" }),
    };
    let uid = match request.get("uid") {
        Some(Value::String(uid)) => uid.clone(),
        Some(_) => return Err(ReviewError::Field { field: "uid", problem: "is not a string" }),
        None => return Err(ReviewError::Field { field: "uid", problem: "is missing" }),
    };
    Ok(AdmissionRequest {
        version,
        uid,
        kind: nested_str(request, "kind", "kind")?,
        resource: nested_str(request, "resource", "resource")?,
        sub_resource: string_field(request, "subResource")?,
        name: string_field(request, "name")?,
        namespace: string_field(request, "namespace")?,
        operation: string_field(request, "operation")?,
        username: nested_str(request, "userInfo", "username")?,
        object: request.get("object").cloned().unwrap_or(Value::Null),
        old_object: request.get("oldObject").cloned().unwrap_or(Value::Null),
        dry_run: match request.get("dryRun") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ReviewError::Field { field: "dryRun", problem: "is not a boolean" }),
        },
    })
}

fn gvk(api_version: &str, kind: &str) -> String {
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    format!("{group}/{version}, Kind={kind}")
}

fn string_field(object: &Map<String, Value>, field: &'static str) -> Result<String, ReviewError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(ReviewError::Field { field, problem: "is not a string" }),
    }
}

fn nested_str(object: &Map<String, Value>, outer: &'static str, inner: &'static str) -> Result<String, ReviewError> {
    match object.get(outer) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::Object(o)) => string_field(o, inner)
            .map_err(|_| ReviewError::Field { field: outer, problem: "has a field that is not a string" }),
        Some(_) => Err(ReviewError::Field { field: outer, problem: "is not an object" }),
    }
}

/// The answer to an admission request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub allowed: bool,
    /// `response.status.message`.
    pub message: Option<String>,
    pub warnings: Vec<String>,
    /// JSONPatch operations on the admitted object (mutating webhooks only); sent base64-encoded with
    /// `patchType: JSONPatch`.
    pub patch: Option<Value>,
    /// `response.status.code`: the HTTP status the API server answers a denied request's client with (the
    /// eviction webhook's 429 is what makes `kubectl drain` retry). `None`: the API server's default.
    pub code: Option<u16>,
}

impl Verdict {
    pub fn allow() -> Self {
        Verdict { allowed: true, message: None, warnings: Vec::new(), patch: None, code: None }
    }

    pub fn allow_with_warning(warning: impl Into<String>) -> Self {
        Verdict { allowed: true, message: None, warnings: vec![warning.into()], patch: None, code: None }
    }

    pub fn allow_with_message(message: impl Into<String>) -> Self {
        Verdict { allowed: true, message: Some(message.into()), warnings: Vec::new(), patch: None, code: None }
    }

    pub fn deny(message: impl Into<String>) -> Self {
        Verdict { allowed: false, message: Some(message.into()), warnings: Vec::new(), patch: None, code: None }
    }

    /// The same verdict, changing the admitted object by the JSONPatch `operations`.
    pub fn with_json_patch(mut self, operations: Value) -> Self {
        self.patch = Some(operations);
        self
    }

    pub fn with_warning(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// The same verdict with `response.status.code` set.
    pub fn with_code(mut self, code: u16) -> Self {
        self.code = Some(code);
        self
    }
}

/// The response AdmissionReview for `request`: same apiVersion and kind, `response.uid` = `request.uid`.
pub fn render_response(request: &AdmissionRequest, verdict: &Verdict) -> Value {
    render(request.version, &request.uid, verdict)
}

pub fn render(version: ReviewVersion, uid: &str, verdict: &Verdict) -> Value {
    let mut response = json!({ "uid": uid, "allowed": verdict.allowed });
    if let Some(message) = &verdict.message {
        response["status"] = json!({ "message": message });
    }
    if let Some(code) = verdict.code {
        response["status"]["code"] = json!(code);
    }
    if !verdict.warnings.is_empty() {
        response["warnings"] = json!(verdict.warnings);
    }
    if let Some(patch) = &verdict.patch {
        // base64 of the JSON, as `ByteString` serialises.
        let bytes = k8s_openapi::ByteString(serde_json::to_vec(patch).unwrap_or_default());
        response["patchType"] = json!("JSONPatch");
        response["patch"] = serde_json::to_value(bytes).unwrap_or_default();
    }
    json!({ "apiVersion": version.api_version(), "kind": "AdmissionReview", "response": response })
}

/// An object of an admission request, as far as the downscale webhooks read it: its kind, `spec.replicas` and
/// labels. Only these are decoded (a request is judged on them; decoding whole objects dominated the cost of an
/// admission); prepare-downscale decodes the whole StatefulSet only when it is labelled for it.
#[derive(Debug, Clone, PartialEq)]
pub enum AdmittedObject {
    StatefulSet(ObjectSummary),
    Deployment(ObjectSummary),
    ReplicaSet(ObjectSummary),
    Scale(ObjectSummary),
    /// Decoded, but of a type the webhooks do not handle.
    Other {
        api_version: String,
        kind: String,
    },
}

/// What the webhooks read of an object.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct ObjectSummary {
    #[serde(default)]
    pub metadata: SummaryMeta,
    #[serde(default)]
    pub spec: Option<SummarySpec>,
}

#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct SummaryMeta {
    #[serde(default)]
    pub labels: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
pub struct SummarySpec {
    #[serde(default)]
    pub replicas: Option<i32>,
}

/// Why an object of an admission request cannot be read (the webhooks then allow the change, with a warning). The
/// texts are the reference's.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ObjectError {
    /// No `kind`; `object` is the object as JSON, shortened.
    #[error("Object 'Kind' is missing in '{object}'")]
    NoKind { object: String },
    /// No `apiVersion`; `object` is the object as JSON, shortened.
    #[error("Object 'apiVersion' is missing in '{object}'")]
    NoApiVersion { object: String },
    /// A handled kind whose metadata or spec does not decode.
    #[error("{reason}")]
    Malformed { kind: String, reason: String },
    /// Decoded, but of a type that has no replicas the webhooks read.
    #[error("unsupported type {api_version}, Kind={kind}")]
    Unsupported { api_version: String, kind: String },
}

impl AdmittedObject {
    /// Decodes `request.object` / `request.oldObject` by its apiVersion and kind.
    pub fn decode(raw: &Value) -> Result<Self, ObjectError> {
        let api_version = raw.get("apiVersion").and_then(Value::as_str).unwrap_or_default();
        let kind = raw.get("kind").and_then(Value::as_str).unwrap_or_default();
        if kind.is_empty() {
            return Err(ObjectError::NoKind { object: compact(raw) });
        }
        if api_version.is_empty() {
            return Err(ObjectError::NoApiVersion { object: compact(raw) });
        }
        let summary = || {
            ObjectSummary::deserialize(raw)
                .map_err(|e| ObjectError::Malformed { kind: kind.to_string(), reason: e.to_string() })
        };
        Ok(match (api_version, kind) {
            ("apps/v1", "StatefulSet") => AdmittedObject::StatefulSet(summary()?),
            ("apps/v1", "Deployment") => AdmittedObject::Deployment(summary()?),
            ("apps/v1", "ReplicaSet") => AdmittedObject::ReplicaSet(summary()?),
            ("autoscaling/v1", "Scale") => AdmittedObject::Scale(summary()?),
            _ => AdmittedObject::Other { api_version: api_version.to_string(), kind: kind.to_string() },
        })
    }

    /// `spec.replicas` (possibly null); [`ObjectError::Unsupported`] for [`AdmittedObject::Other`].
    pub fn replicas(&self) -> Result<Option<i32>, ObjectError> {
        match self {
            AdmittedObject::StatefulSet(o)
            | AdmittedObject::Deployment(o)
            | AdmittedObject::ReplicaSet(o)
            | AdmittedObject::Scale(o) => Ok(o.spec.as_ref().and_then(|s| s.replicas)),
            AdmittedObject::Other { api_version, kind } => {
                Err(ObjectError::Unsupported { api_version: api_version.clone(), kind: kind.clone() })
            }
        }
    }

    /// Labels, for the object types that carry the webhook's labels themselves (not `Scale`).
    pub fn labels(&self) -> Option<BTreeMap<String, String>> {
        match self {
            AdmittedObject::StatefulSet(o) | AdmittedObject::Deployment(o) | AdmittedObject::ReplicaSet(o) => {
                Some(o.metadata.labels.clone().unwrap_or_default())
            }
            AdmittedObject::Scale(_) | AdmittedObject::Other { .. } => None,
        }
    }
}

fn compact(raw: &Value) -> String {
    if raw.is_null() {
        return String::new();
    }
    let text = raw.to_string();
    // Keep messages bounded: a whole object in a warning helps nobody.
    if text.len() <= 200 {
        return text;
    }
    let mut end = 200;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// The replica change an UPDATE makes, or the verdict when there is nothing to judge (reference 4.2 steps 1-4,
/// shared by both webhooks).
#[derive(Debug, Clone, PartialEq)]
pub enum ReplicaChange {
    /// Not a downscale, or undecidable: answer this.
    Decided(Verdict),
    /// A downscale from `old` to `new` replicas; `old_object` is the decoded old object.
    Downscale { old: i32, new: i32, old_object: AdmittedObject },
}

pub fn replica_change(request: &AdmissionRequest) -> ReplicaChange {
    let old_object = match AdmittedObject::decode(&request.old_object) {
        Ok(o) => o,
        Err(err) => {
            return ReplicaChange::Decided(Verdict::allow_with_warning(format!(
                "can't decode old object, allowing the change, err: {err}"
            )));
        }
    };
    let old = match old_object.replicas() {
        Ok(r) => r,
        Err(err) => {
            return ReplicaChange::Decided(Verdict::allow_with_warning(format!(
                "can't get old replicas, allowing the change, err: {err}"
            )));
        }
    };
    let new_object = match AdmittedObject::decode(&request.object) {
        Ok(o) => o,
        Err(err) => {
            return ReplicaChange::Decided(Verdict::allow_with_warning(format!(
                "can't decode new object, allowing the change, err: {err}"
            )));
        }
    };
    let new = match new_object.replicas() {
        Ok(r) => r,
        Err(err) => {
            return ReplicaChange::Decided(Verdict::allow_with_warning(format!(
                "can't get new replicas, allowing the change, err: {err}"
            )));
        }
    };
    match (old, new) {
        (None, None) => ReplicaChange::Decided(Verdict::allow()),
        (None, Some(_)) | (Some(_), None) => {
            ReplicaChange::Decided(Verdict::allow_with_warning("old/new replicas is nil, allowing the change"))
        }
        (Some(old), Some(new)) if old <= new => ReplicaChange::Decided(Verdict::allow()),
        (Some(old), Some(new)) => ReplicaChange::Downscale { old, new, old_object },
    }
}

/// `downscale of <resource>/<name> in <namespace> from <old> to <new> replicas`: the start of every downscale
/// message.
pub fn downscale_subject(request: &AdmissionRequest, old: i32, new: i32) -> String {
    format!("downscale of {}/{} in {} from {old} to {new} replicas", request.resource, request.name, request.namespace)
}

/// Formats a time as Go's `time.Time.String()` does for UTC times: `2024-05-01 12:00:00 +0000 UTC`.
pub fn go_time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S +0000 UTC").to_string()
}

/// A request for an object outside the namespace this operator manages. Policy: allow, with a warning naming both
/// namespaces. The operator can read nothing there (its RBAC is namespaced), and deciding on the object of the same
/// name in its own namespace would be deciding about the wrong object; only a webhook configuration without the
/// shipped `namespaceSelector` sends such requests.
pub fn foreign_namespace(request: &AdmissionRequest, managed_namespace: &str) -> Option<Verdict> {
    (request.namespace != managed_namespace).then(|| {
        Verdict::allow_with_warning(format!(
            "namespace {:?} is not managed by this rollout-operator (it manages {managed_namespace:?}); allowing the \
             change without checks",
            request.namespace
        ))
    })
}
