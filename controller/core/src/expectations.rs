//! Expectations: the controller's own writes that its cache has not shown yet.
//!
//! After a write succeeds, the cache lags until the watch delivers the change. Planning on that stale view could
//! delete the same pod twice or spend the unavailability budget twice, so the planner does not decide for a group
//! while any of its expectations is unobserved. Every expectation expires (a lost watch event must not stall a group
//! forever); expiry is judged against the `now` the caller passes in.

use crate::group::GroupSnapshot;
use jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Expectation {
    /// We deleted this pod: expect it gone or terminating.
    PodDeleted { statefulset: String, pod: String, uid: String },
    /// We wrote this StatefulSet when it was at `previous_resource_version`: expect any other version.
    StatefulSetWritten { statefulset: String, previous_resource_version: String },
}

impl Expectation {
    /// Whether the snapshot already reflects the write.
    pub fn is_observed(&self, group: &GroupSnapshot) -> bool {
        match self {
            Expectation::PodDeleted { statefulset, uid, .. } => {
                group.member(statefulset).is_none_or(|m| !m.pods.iter().any(|p| &p.uid == uid && !p.is_terminating()))
            }
            Expectation::StatefulSetWritten { statefulset, previous_resource_version } => {
                group.member(statefulset).is_none_or(|m| &m.sts.resource_version != previous_resource_version)
            }
        }
    }

    /// The StatefulSet the write was about (a deleted pod's owner).
    pub fn statefulset(&self) -> &str {
        match self {
            Expectation::PodDeleted { statefulset, .. } | Expectation::StatefulSetWritten { statefulset, .. } => {
                statefulset
            }
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Expectation::PodDeleted { pod, .. } => format!("deletion of pod {pod}"),
            Expectation::StatefulSetWritten { statefulset, .. } => {
                format!("update of StatefulSet {statefulset}")
            }
        }
    }
}

/// An expectation with the time after which it is given up on.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PendingExpectation {
    pub expectation: Expectation,
    pub expires_at: Timestamp,
}

impl PendingExpectation {
    /// Still blocking the group: not observed and not expired.
    pub fn is_pending(&self, group: &GroupSnapshot, now: Timestamp) -> bool {
        now < self.expires_at && !self.expectation.is_observed(group)
    }
}
