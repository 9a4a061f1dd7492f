//! What the rollout planner works on and produces, besides the snapshot: its context (time, expectations, the
//! downscale record as read, what the API refuses) and its actions (the writes, each with its preconditions and
//! reason). A leaf of the planning modules: the planner ([`crate::plan`]) and scaling ([`crate::scaling`]) both use
//! it, neither is used by it.

use crate::downscale::{DownscaleInProgress, DownscaleRecord};
use crate::expectations::{Expectation, PendingExpectation};
use jiff::Timestamp;
use serde::Serialize;

/// One write the controller should make. Preconditions (`uid`, `resource_version`) are carried so that a decision
/// taken on stale data fails with a conflict instead of acting on the wrong object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
pub enum Action {
    DeletePod {
        #[serde(rename = "statefulSet")]
        statefulset: String,
        pod: String,
        #[serde(skip)]
        uid: String,
        reason: String,
    },
    SetCurrentRevision {
        #[serde(rename = "statefulSet")]
        statefulset: String,
        revision: String,
        #[serde(skip)]
        resource_version: String,
        reason: String,
    },
    /// Set `spec.replicas` of a StatefulSet (`{"spec":{"replicas":to}}`, conditional on `resource_version`).
    Scale {
        #[serde(rename = "statefulSet")]
        statefulset: String,
        from: u32,
        to: u32,
        reason: String,
        #[serde(skip)]
        resource_version: String,
        /// A leader/follower downscale: the shell must claim it in the group downscale record (compare-and-swap)
        /// before patching, so no other actor downscales another zone within the min time.
        #[serde(skip)]
        coordinated_downscale: bool,
    },
}

impl Action {
    pub fn statefulset(&self) -> &str {
        match self {
            Action::DeletePod { statefulset, .. }
            | Action::SetCurrentRevision { statefulset, .. }
            | Action::Scale { statefulset, .. } => statefulset,
        }
    }

    pub fn reason(&self) -> &str {
        match self {
            Action::DeletePod { reason, .. }
            | Action::SetCurrentRevision { reason, .. }
            | Action::Scale { reason, .. } => reason,
        }
    }

    /// What the cache must show once this action has succeeded.
    pub fn expectation(&self) -> Expectation {
        match self {
            Action::DeletePod { statefulset, pod, uid, .. } => {
                Expectation::PodDeleted { statefulset: statefulset.clone(), pod: pod.clone(), uid: uid.clone() }
            }
            Action::SetCurrentRevision { statefulset, resource_version, .. }
            | Action::Scale { statefulset, resource_version, .. } => Expectation::StatefulSetWritten {
                statefulset: statefulset.clone(),
                previous_resource_version: resource_version.clone(),
            },
        }
    }
}

/// Inputs besides the snapshot.
#[derive(Debug, Clone, Copy)]
pub struct PlanContext<'a> {
    pub now: Timestamp,
    pub expectations: &'a [PendingExpectation],
    /// The group downscale record, as last read by the shell (None: none exists or not read). Leader/follower
    /// downscales are checked against it as well as against the `last-downscale` annotations.
    pub downscale_record: Option<&'a DownscaleRecord>,
    /// Downscales being prepared by the prepare-downscale webhook, from the group downscale record: no pod of a
    /// group is replaced while one of its markers is live (no rollout step while a downscale is prepared).
    pub downscales_in_progress: &'a [DownscaleInProgress],
    /// Replica changes are refused by the API (403): why, as the shell found out. Due replica changes are then
    /// scaling errors of their StatefulSets instead of the pass's action, so the rollout goes on.
    pub scaling_forbidden: Option<&'a str>,
    /// Downscales that must be claimed in the zone tracker's record cannot be (its ConfigMap is refused): why. They
    /// are scaling errors of their StatefulSets instead of the pass's action.
    pub coordinated_downscales_forbidden: Option<&'a str>,
}

impl<'a> PlanContext<'a> {
    pub fn new(now: Timestamp, expectations: &'a [PendingExpectation]) -> Self {
        PlanContext {
            now,
            expectations,
            downscale_record: None,
            downscales_in_progress: &[],
            scaling_forbidden: None,
            coordinated_downscales_forbidden: None,
        }
    }

    pub fn with_coordinated_downscales_forbidden(mut self, why: Option<&'a str>) -> Self {
        self.coordinated_downscales_forbidden = why;
        self
    }

    pub fn with_scaling_forbidden(mut self, why: Option<&'a str>) -> Self {
        self.scaling_forbidden = why;
        self
    }

    pub fn with_downscale_record(mut self, record: Option<&'a DownscaleRecord>) -> Self {
        self.downscale_record = record;
        self
    }

    pub fn with_downscales_in_progress(mut self, markers: &'a [DownscaleInProgress]) -> Self {
        self.downscales_in_progress = markers;
        self
    }
}
