//! `/admission/no-downscale` (reference 4.2): deny a clear downscale of an object labelled
//! `grafana.com/no-downscale=true`; allow, with a warning, whenever the answer is unclear (fail open). No dry-run
//! special case: a dry-run downscale is judged like any other (it has no side effects anyway).

use super::{AdmissionRequest, ReplicaChange, Verdict, downscale_subject, replica_change};
use crate::failure::Failure;
use crate::keys;
use std::collections::BTreeMap;

/// What the webhook needs next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Decided(Verdict),
    /// A `/scale` request: the labels live on the parent object `resource`/`name`; look it up and call
    /// [`decide_with_parent`].
    LookupParent {
        resource: ParentResource,
        name: String,
        old: i32,
        new: i32,
    },
}

/// The parent kinds a `/scale` request can be about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ParentResource {
    StatefulSets,
    Deployments,
    ReplicaSets,
}

impl ParentResource {
    pub fn from_resource(resource: &str) -> Option<Self> {
        match resource {
            "statefulsets" => Some(ParentResource::StatefulSets),
            "deployments" => Some(ParentResource::Deployments),
            "replicasets" => Some(ParentResource::ReplicaSets),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ParentResource::StatefulSets => "statefulsets",
            ParentResource::Deployments => "deployments",
            ParentResource::ReplicaSets => "replicasets",
        }
    }
}

pub fn evaluate(request: &AdmissionRequest) -> Step {
    let (old, new, old_object) = match replica_change(request) {
        ReplicaChange::Decided(verdict) => return Step::Decided(verdict),
        ReplicaChange::Downscale { old, new, old_object } => (old, new, old_object),
    };
    if let Some(labels) = old_object.labels() {
        return Step::Decided(decide(request, old, new, &labels));
    }
    // A Scale: its own labels are not the object's. Kubernetes does not apply objectSelector to /scale requests,
    // hence the lookup.
    match ParentResource::from_resource(&request.resource) {
        Some(resource) => Step::LookupParent { resource, name: request.name.clone(), old, new },
        None => Step::Decided(lookup_failed(request, &format!("unsupported resource {}", request.resource))),
    }
}

/// Decides a `/scale` downscale once the parent's labels are known (or its lookup failed).
pub fn decide_with_parent(
    request: &AdmissionRequest,
    old: i32,
    new: i32,
    parent_labels: Result<&BTreeMap<String, String>, &Failure>,
) -> Verdict {
    match parent_labels {
        Ok(labels) => decide(request, old, new, labels),
        // Policy: allow with a warning, whatever the failure (as the reference does).
        Err(err) => lookup_failed(request, err.message()),
    }
}

fn lookup_failed(request: &AdmissionRequest, err: &str) -> Verdict {
    Verdict::allow_with_warning(format!(
        "can't get {}/{} in namespace {}, allowing the change: {err}",
        request.resource, request.name, request.namespace
    ))
}

fn decide(request: &AdmissionRequest, old: i32, new: i32, labels: &BTreeMap<String, String>) -> Verdict {
    if labels.get(keys::NO_DOWNSCALE).map(String::as_str) != Some("true") {
        return Verdict::allow();
    }
    Verdict::deny(format!(
        "{} is not allowed because it has the label '{}=true'",
        downscale_subject(request, old, new),
        keys::NO_DOWNSCALE
    ))
}
