//! The world's own record: what the actors meant by the annotations they wrote, and what the pods said when asked
//! to prepare for shutdown. The oracle judges by it rather than by the API server's objects read back through the
//! operator's parsers: a parser that lost a min time or a mirror would otherwise hide it from the judge too.
//!
//! Written by the actors and the harness that populates the world; read by the oracle. The API server never
//! reads it.

use jiff::Timestamp;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// A call to a pod's prepare-shutdown endpoint that got an answer (a call the webhook abandoned has none).
#[derive(Debug, Clone)]
pub struct PodCall {
    pub pod: String,
    /// POST (prepare); otherwise DELETE (cancel).
    pub post: bool,
    /// A 2xx answer.
    pub ok: bool,
    pub at: Instant,
}

#[derive(Debug, Default)]
pub struct WorldRecord {
    /// `grafana.com/min-time-between-zones-downscale` of each StatefulSet, as the world meant the text it wrote.
    pub min_times: BTreeMap<String, Duration>,
    /// `grafana.com/rollout-delayed-downscale` of each StatefulSet, as the world meant the text it wrote.
    pub delayed_downscale_delays: BTreeMap<String, Duration>,
    /// StatefulSets whose delayed-downscale annotations are malformed as the world wrote them (until a user corrects
    /// them): the reference scales such a StatefulSet in neither direction.
    pub delayed_downscale_malformed: BTreeSet<String>,
    /// The StatefulSets the world made mirrors of its reference resource, by the annotations it wrote.
    pub mirrors: BTreeSet<String>,
    /// StatefulSets the world gave `grafana.com/rollout-force-replicas` while neither follower nor mirror
    /// (`--force-plain`), with the replicas they had then: the annotation is ignored there, as in the reference, so
    /// the controller never changes their replicas ([`crate::oracle::checker::FORCE_IGNORED`]).
    pub force_ignored: BTreeMap<String, i32>,
    /// Mirror worlds: every value the reference resource's `spec.replicas` took, from when.
    pub reference_history: Vec<(Duration, u32)>,
    /// The health-gated worlds' release is bad: a second zone must never be started on it
    /// ([`crate::oracle::checker::HEALTH_GATE`]).
    pub bad_release: bool,
    /// Delayed downscale: per pod, when it says it started preparing (whole seconds, as it answers), since its last
    /// cancel. A pod that goes away forgets it.
    pub prepared: BTreeMap<String, Timestamp>,
    /// The webhook worlds' calls to the pods' prepare-shutdown endpoints that got an answer, in answer order.
    pub pod_calls: Vec<PodCall>,
}

impl WorldRecord {
    /// The pods' POSTs answered with success since `since` (each told to prepare for shutdown then).
    fn prepared_calls_since(&self, since: Instant) -> impl Iterator<Item = &PodCall> {
        self.pod_calls.iter().filter(move |c| c.post && c.ok && c.at >= since)
    }

    /// Whether `pod` answered a POST with success since `since`.
    pub fn prepared_since(&self, pod: &str, since: Instant) -> bool {
        self.prepared_calls_since(since).any(|c| c.pod == pod)
    }

    /// The pods of `sts` (`<sts>-<ordinal>`) that answered a POST with success since `since`, with when.
    pub fn prepared_pods_of(&self, sts: &str, since: Instant) -> Vec<(String, Instant)> {
        let prefix = format!("{sts}-");
        self.prepared_calls_since(since)
            .filter(|c| c.pod.strip_prefix(&prefix).is_some_and(|o| o.parse::<u32>().is_ok()))
            .map(|c| (c.pod.clone(), c.at))
            .collect()
    }
}
