//! Readiness of a StatefulSet, judged from its pods rather than trusted from its status counts.
//!
//! A StatefulSet is ready only when its status is current (`observedGeneration >= generation`), each of its expected
//! ordinals `0 .. max(spec.replicas, status.replicas)` has a pod, and every one of its pods is available (running,
//! Ready for `minReadySeconds`, not terminating). Missing pods are not ready pods.
//!
//! Pods are matched to ordinals, not counted: during a scale-down a pod above the replica count can still be Ready
//! while a kept pod is missing, and counting would let the extra pod stand in for the missing one (found by the
//! simulation, seeds 62 and 112). Pods beyond the expected ordinals never count as available; if they are not
//! available they still make the StatefulSet not ready.

use crate::group::MemberSnapshot;
use crate::natural::pod_ordinal;
use jiff::Timestamp;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// `max(spec.replicas, status.replicas)`.
    pub expected: u32,
    /// Pods at expected ordinals that are available now.
    pub available: u32,
    /// Expected pods that do not exist.
    pub missing: u32,
    /// Names of existing pods that are not available, in natural order.
    pub unavailable_pods: Vec<String>,
    /// The status describes an older generation of the spec (or there is no status).
    pub status_stale: bool,
}

impl Readiness {
    pub fn of(member: &MemberSnapshot, now: Timestamp) -> Self {
        let sts = &member.sts;
        let status_replicas = sts.status.as_ref().map_or(0, |s| s.replicas);
        let expected = sts.replicas.max(status_replicas);
        let mut available = 0u32;
        let mut unavailable_pods = Vec::new();
        // A set, not a vector indexed by ordinal: spec.replicas can be as large as the user writes.
        let mut present = std::collections::BTreeSet::new();
        for pod in &member.pods {
            let expected_ordinal = pod_ordinal(&sts.name, &pod.name).filter(|&o| o < expected);
            if let Some(o) = expected_ordinal {
                present.insert(o);
            }
            if !pod.is_available(sts.min_ready_seconds, now) {
                unavailable_pods.push(pod.name.clone());
            } else if expected_ordinal.is_some() {
                available += 1;
            }
        }
        let status_stale = match (&sts.status, sts.generation) {
            (None, _) => true,
            (Some(s), Some(generation)) => s.observed_generation.is_none_or(|o| o < generation),
            (Some(_), None) => false,
        };
        Readiness { expected, available, missing: expected - present.len() as u32, unavailable_pods, status_stale }
    }

    pub fn is_ready(&self) -> bool {
        !self.status_stale && self.missing == 0 && self.unavailable_pods.is_empty() && self.available >= self.expected
    }

    /// Expected pods that are not available: the unavailability already spent against `rollout-max-unavailable`.
    pub fn unavailable(&self) -> u32 {
        self.expected.saturating_sub(self.available)
    }

    /// Why the StatefulSet is not ready, for people.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.status_stale {
            parts.push("its status does not reflect the latest spec yet".to_string());
        }
        if self.missing > 0 {
            parts.push(format!("{} of {} pods missing", self.missing, self.expected));
        }
        if !self.unavailable_pods.is_empty() {
            const SHOWN: usize = 5;
            let mut names = self.unavailable_pods.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
            if self.unavailable_pods.len() > SHOWN {
                names.push_str(&format!(" and {} more", self.unavailable_pods.len() - SHOWN));
            }
            parts.push(format!("pods not ready: {names}"));
        }
        if parts.is_empty() { "ready".to_string() } else { parts.join("; ") }
    }
}
