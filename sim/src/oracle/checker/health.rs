//! Health-gated zones: a release the world made bad never has a second zone started by the controller.
//!
//! Judged on the committed cluster at each controller deletion in a StatefulSet that names a RolloutHealthCheck: the
//! deleted pod's StatefulSet, its rollout group and
//! its update revision as stored. A revision is told by its number (`-rN`: the same push on every StatefulSet), so
//! the zones of a group started on one push are counted together. Deletions by anything else (a drain, a crash, a
//! user) start nothing.

use crate::oracle::checker::{Checker, HEALTH_GATE};
use std::time::Duration;

impl Checker {
    /// A controller deletion of `pod` of `statefulset`, whose update revision (as committed) is `revision` and
    /// serves errors.
    pub fn judge_bad_release_deletion(
        &mut self,
        at: Duration,
        pod: &str,
        statefulset: &str,
        group: &str,
        revision: &str,
    ) {
        let push = revision.rsplit_once("-r").map_or(revision, |(_, n)| n);
        let started = self.bad_release_zones.entry(format!("{group} r{push}")).or_default();
        if started.insert(statefulset.to_string()) && started.len() > 1 {
            let others: Vec<&String> = started.iter().filter(|s| *s != statefulset).collect();
            let detail = format!(
                "deleted {pod} of {statefulset} to roll bad revision {revision} while {others:?} already run it"
            );
            self.violate(at, HEALTH_GATE, detail);
        }
    }

    /// The most StatefulSets of one group the controller started on one bad push.
    pub fn bad_release_zones(&self) -> usize {
        self.bad_release_zones.values().map(|zones| zones.len()).max().unwrap_or(0)
    }
}
