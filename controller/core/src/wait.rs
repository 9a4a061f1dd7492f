//! Why a rollout group waits, as a small closed set of classes: the planner tags every wait it reports with one, so
//! that metrics, Events and stuck detection can tell waits apart without reading the reason text.
//!
//! Owns the classes, their names (stable: they are metric label values and JSON fields) and what each class means
//! for people: whether it needs a person, whether it ends by itself at a known time, whether it is routine between
//! two steps of a healthy rollout. The planner ([`crate::plan`]) decides which class a wait has; this module does
//! not look at snapshots.

use serde::Serialize;

/// The class of a wait. Names are kebab-case label values (`rollout_operator_group_waiting{reason=...}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WaitReason {
    /// The controller's own writes have not shown in its cache yet (expectations).
    OwnWrites,
    /// The prepare-downscale webhook is preparing a downscale of the group (its in-progress marker is live).
    DownscaleInProgress,
    /// The group downscale record cannot be read, so nothing is replaced (the pass failed closed).
    DownscaleRecordUnreadable,
    /// A StatefulSet's status is missing or describes an older generation of its spec.
    StatusNotCurrent,
    /// Pods exist but are not available (not Ready, crash-looping, within minReadySeconds).
    PodsNotReady,
    /// Pods of a StatefulSet do not exist (not created yet, or refused, e.g. by a quota).
    PodsMissing,
    /// Pods are terminating and must go away first.
    PodsTerminating,
    /// A ZoneAwarePodDisruptionBudget holds the replacement of a pod back (its zone or partition has as many pods
    /// unavailable as it allows).
    HeldByBudget,
    /// A RolloutHealthCheck holds the start of the next zone back: a check failed (or has no data) and pauses, the
    /// updated pods have not served long enough to be judged, or the gate has not been evaluated yet.
    HeldByHealthCheck,
    /// More than one StatefulSet of the group has unavailable pods: no zone may be rolled.
    SeveralNotReady,
    /// A paused StatefulSet (`grafana.com/rollout-paused`) holds the group.
    Paused,
    /// A StatefulSet's update strategy is not `OnDelete`: the group is not the operator's to roll.
    UpdateStrategy,
    /// Only replica changes are left, and they wait by design (the min time between zone downscales, a leader's
    /// readiness, delayed downscale, one StatefulSet per pass).
    ScalingScheduled,
}

impl WaitReason {
    pub const ALL: [WaitReason; 13] = [
        WaitReason::OwnWrites,
        WaitReason::DownscaleInProgress,
        WaitReason::DownscaleRecordUnreadable,
        WaitReason::StatusNotCurrent,
        WaitReason::PodsNotReady,
        WaitReason::PodsMissing,
        WaitReason::PodsTerminating,
        WaitReason::HeldByBudget,
        WaitReason::HeldByHealthCheck,
        WaitReason::SeveralNotReady,
        WaitReason::Paused,
        WaitReason::UpdateStrategy,
        WaitReason::ScalingScheduled,
    ];

    /// The class's name, as in JSON and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            WaitReason::OwnWrites => "own-writes",
            WaitReason::DownscaleInProgress => "downscale-in-progress",
            WaitReason::DownscaleRecordUnreadable => "downscale-record-unreadable",
            WaitReason::StatusNotCurrent => "status-not-current",
            WaitReason::PodsNotReady => "pods-not-ready",
            WaitReason::PodsMissing => "pods-missing",
            WaitReason::PodsTerminating => "pods-terminating",
            WaitReason::HeldByBudget => "held-by-budget",
            WaitReason::HeldByHealthCheck => "held-by-health-check",
            WaitReason::SeveralNotReady => "several-not-ready",
            WaitReason::Paused => "paused",
            WaitReason::UpdateStrategy => "update-strategy",
            WaitReason::ScalingScheduled => "scaling-scheduled",
        }
    }

    /// Nothing happens until someone looks: a person paused a zone, the strategy is wrong, two zones are down at once,
    /// or the record the group depends on cannot be read. Reported as warnings.
    pub fn needs_attention(self) -> bool {
        matches!(
            self,
            WaitReason::Paused
                | WaitReason::UpdateStrategy
                | WaitReason::SeveralNotReady
                | WaitReason::DownscaleRecordUnreadable
        )
    }

    /// Whether a group held by this wait for too long counts as stuck. Scheduled replica changes end by themselves at
    /// a time the settings give (a 12 h min time is not a stuck rollout); a group whose strategy is not `OnDelete`
    /// is rolled by Kubernetes, not by the operator. Every other wait means the rollout should be moving.
    pub fn can_be_stuck(self) -> bool {
        !matches!(self, WaitReason::ScalingScheduled | WaitReason::UpdateStrategy)
    }

    /// Routine or momentary (the cache catching up with a deletion, the StatefulSet controller observing a new
    /// spec, a downscale being prepared for a few seconds): not worth telling people about unless it lasts, which
    /// stuck detection reports.
    pub fn is_routine(self) -> bool {
        matches!(self, WaitReason::OwnWrites | WaitReason::StatusNotCurrent | WaitReason::DownscaleInProgress)
    }
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a group waits for: the class, and the StatefulSet the wait is about when it is about one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct Wait {
    pub reason: WaitReason,
    #[serde(rename = "statefulSet", skip_serializing_if = "Option::is_none")]
    pub statefulset: Option<String>,
}

impl Wait {
    pub fn new(reason: WaitReason, statefulset: Option<&str>) -> Self {
        Wait { reason, statefulset: statefulset.map(str::to_string) }
    }

    /// A wait about one StatefulSet.
    pub fn on(reason: WaitReason, statefulset: &str) -> Self {
        Wait::new(reason, Some(statefulset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_kebab_case_and_match_serde() {
        let names: std::collections::BTreeSet<&str> = WaitReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(names.len(), WaitReason::ALL.len());
        for r in WaitReason::ALL {
            assert_eq!(serde_json::to_value(r).ok(), Some(serde_json::Value::String(r.as_str().to_string())));
            assert!(r.as_str().bytes().all(|b| b.is_ascii_lowercase() || b == b'-'), "{r}");
        }
    }

    #[test]
    fn scheduled_and_foreign_waits_are_never_stuck_and_everything_else_can_be() {
        let never: Vec<_> = WaitReason::ALL.into_iter().filter(|r| !r.can_be_stuck()).collect();
        assert_eq!(never, [WaitReason::UpdateStrategy, WaitReason::ScalingScheduled]);
        assert!(WaitReason::Paused.can_be_stuck() && WaitReason::PodsMissing.can_be_stuck());
    }
}
