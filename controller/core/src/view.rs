//! Lean typed views of the Kubernetes objects the planner reads, converted from k8s-openapi objects.
//!
//! Conversion is the edge: everything the planner needs is extracted and typed here once, so the planner never
//! touches raw objects, raw annotations or JSON.

use crate::keys;
use crate::settings::{DownscaleSettings, RolloutSettings, ScalingSettings};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ViewError {
    #[error("{kind} has no metadata.name")]
    MissingName { kind: &'static str },
}

/// The controller reference of a pod (`ownerReferences[]` with `controller: true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The pod `Ready` condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadyCondition {
    pub ready: bool,
    /// When the condition last changed; `None` if the API did not say.
    pub since: Option<Timestamp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub owner: Option<OwnerRef>,
    /// `status.phase`; empty if unknown.
    pub phase: String,
    /// Set once the pod is being deleted.
    pub deletion_timestamp: Option<Timestamp>,
    pub ready_condition: Option<ReadyCondition>,
    /// Number of container statuses reported, and whether all of them are ready and running.
    pub container_count: usize,
    pub containers_ready_and_running: bool,
}

impl PodView {
    /// The revision the pod was created from (`controller-revision-hash`), if labelled.
    pub fn revision(&self) -> Option<&str> {
        self.labels.get(keys::CONTROLLER_REVISION_HASH).map(String::as_str)
    }

    pub fn is_terminating(&self) -> bool {
        self.deletion_timestamp.is_some()
    }

    /// Available: running, not terminating, Ready condition true, every container ready and running (a pod with no
    /// container statuses is not available), and Ready for at least `min_ready_seconds` at `now`.
    pub fn is_available(&self, min_ready_seconds: u32, now: Timestamp) -> bool {
        if self.phase != "Running" || self.is_terminating() {
            return false;
        }
        if self.container_count == 0 || !self.containers_ready_and_running {
            return false;
        }
        let Some(cond) = self.ready_condition else {
            return false;
        };
        if !cond.ready {
            return false;
        }
        if min_ready_seconds == 0 {
            return true;
        }
        match cond.since {
            Some(since) => now.as_second().saturating_sub(since.as_second()) >= i64::from(min_ready_seconds),
            None => false,
        }
    }

    pub fn from_k8s(pod: &Pod) -> Result<Self, ViewError> {
        let meta = &pod.metadata;
        let name = meta.name.clone().ok_or(ViewError::MissingName { kind: "Pod" })?;
        let owner = meta.owner_references.as_ref().and_then(|refs| {
            refs.iter().find(|r| r.controller == Some(true)).map(|r| OwnerRef {
                kind: r.kind.clone(),
                name: r.name.clone(),
                uid: r.uid.clone(),
            })
        });
        let status = pod.status.as_ref();
        let ready_condition = status.and_then(|s| s.conditions.as_ref()).and_then(|conds| {
            conds.iter().find(|c| c.type_ == "Ready").map(|c| ReadyCondition {
                ready: c.status == "True",
                since: c.last_transition_time.as_ref().map(|t| t.0),
            })
        });
        let containers = status.and_then(|s| s.container_statuses.as_deref()).unwrap_or(&[]);
        Ok(PodView {
            name,
            uid: meta.uid.clone().unwrap_or_default(),
            labels: meta.labels.clone().unwrap_or_default(),
            owner,
            phase: status.and_then(|s| s.phase.clone()).unwrap_or_default(),
            deletion_timestamp: meta.deletion_timestamp.as_ref().map(|t| t.0),
            ready_condition,
            container_count: containers.len(),
            containers_ready_and_running: containers
                .iter()
                .all(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some())),
        })
    }
}

/// A label selector reduced to what matching needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub match_labels: BTreeMap<String, String>,
    pub match_expressions: Vec<SelectorRequirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorRequirement {
    pub key: String,
    pub operator: String,
    pub values: Vec<String>,
}

impl Selector {
    pub fn from_k8s(sel: &LabelSelector) -> Self {
        Selector {
            match_labels: sel.match_labels.clone().unwrap_or_default(),
            match_expressions: sel
                .match_expressions
                .iter()
                .flatten()
                .map(|e| SelectorRequirement {
                    key: e.key.clone(),
                    operator: e.operator.clone(),
                    values: e.values.clone().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// Kubernetes label-selector semantics. An unknown operator matches nothing (fail closed: the pod is not
    /// counted as the StatefulSet's, so the StatefulSet looks unready rather than wrongly ready).
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.match_expressions.iter().all(|r| {
                let value = labels.get(&r.key);
                match r.operator.as_str() {
                    "In" => value.is_some_and(|v| r.values.contains(v)),
                    "NotIn" => value.is_none_or(|v| !r.values.contains(v)),
                    "Exists" => value.is_some(),
                    "DoesNotExist" => value.is_none(),
                    _ => false,
                }
            })
    }
}

/// What the StatefulSet controller last reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatefulSetStatusView {
    pub replicas: u32,
    pub ready_replicas: u32,
    pub current_revision: String,
    pub update_revision: String,
    pub observed_generation: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatefulSetView {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub generation: Option<i64>,
    /// Value of the `rollout-group` label; `None` when the StatefulSet is not managed.
    pub group: Option<String>,
    /// `spec.replicas`; the API server defaults a missing value to 1.
    pub replicas: u32,
    /// `spec.updateStrategy.type`; Kubernetes defaults it to `RollingUpdate`.
    pub update_strategy: String,
    pub selector: Selector,
    pub min_ready_seconds: u32,
    pub service_name: String,
    pub status: Option<StatefulSetStatusView>,
    pub settings: RolloutSettings,
    /// Min time between zone downscales and last downscale, parsed.
    pub downscale: DownscaleSettings,
    /// Leader, mirror, delayed downscale and force replicas, parsed.
    pub scaling: ScalingSettings,
    /// Raw metadata, for settings parsed by later stages (scaling, admission).
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

fn non_negative(v: Option<i32>) -> u32 {
    v.map_or(0, |n| n.max(0) as u32)
}

impl StatefulSetView {
    pub fn from_k8s(sts: &StatefulSet) -> Result<Self, ViewError> {
        let meta = &sts.metadata;
        let name = meta.name.clone().ok_or(ViewError::MissingName { kind: "StatefulSet" })?;
        let spec = sts.spec.as_ref();
        let annotations = meta.annotations.clone().unwrap_or_default();
        let labels = meta.labels.clone().unwrap_or_default();
        let settings = RolloutSettings::from_annotations(&name, &annotations);
        let downscale = DownscaleSettings::from_metadata(&name, &labels, &annotations);
        let scaling = ScalingSettings::from_annotations(&name, &annotations);
        Ok(StatefulSetView {
            uid: meta.uid.clone().unwrap_or_default(),
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            generation: meta.generation,
            group: labels.get(keys::ROLLOUT_GROUP).cloned(),
            replicas: spec.and_then(|s| s.replicas).map_or(1, |r| r.max(0) as u32),
            update_strategy: spec
                .and_then(|s| s.update_strategy.as_ref())
                .and_then(|u| u.type_.clone())
                .unwrap_or_else(|| "RollingUpdate".to_string()),
            selector: spec.map(|s| Selector::from_k8s(&s.selector)).unwrap_or_default(),
            min_ready_seconds: non_negative(spec.and_then(|s| s.min_ready_seconds)),
            service_name: spec.and_then(|s| s.service_name.clone()).unwrap_or_default(),
            status: sts.status.as_ref().map(|s| StatefulSetStatusView {
                replicas: s.replicas.max(0) as u32,
                ready_replicas: non_negative(s.ready_replicas),
                current_revision: s.current_revision.clone().unwrap_or_default(),
                update_revision: s.update_revision.clone().unwrap_or_default(),
                observed_generation: s.observed_generation,
            }),
            settings,
            downscale,
            scaling,
            labels,
            annotations,
            name,
        })
    }

    /// Whether `pod` is this StatefulSet's: its controller reference names this StatefulSet (by uid when both
    /// sides have one) and the StatefulSet's selector matches the pod's labels.
    pub fn owns(&self, pod: &PodView) -> bool {
        let Some(owner) = &pod.owner else {
            return false;
        };
        // The name first: it tells most pods of other StatefulSets apart at once.
        owner.name == self.name
            && owner.kind == "StatefulSet"
            && (owner.uid.is_empty() || self.uid.is_empty() || owner.uid == self.uid)
            && self.selector.matches(&pod.labels)
    }
}
