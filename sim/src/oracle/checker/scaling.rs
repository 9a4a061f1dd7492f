//! The scaling guarantees: the min time between zone downscales, no downscale during a rollout and no rollout step
//! while one is prepared, followers and force replicas.

use crate::oracle::checker::{
    Checker, FOLLOWER_WITHOUT_MIN_TIME, Knowledge, Known, LEADER_READY_UPSCALE, MIN_TIME, NO_DOWNSCALE_DURING_ROLLOUT,
    OwnWrite, as_of, slot_problem,
};
use std::time::Duration;

/// The writer of a replica change no prepare-downscale webhook admitted: a user's, applied as asked.
pub const UNADMITTED: &str = "user";

/// One committed decrease of a StatefulSet's `spec.replicas`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Downscale {
    /// The resourceVersion it committed at.
    pub commit_rv: u64,
    /// Where the history stood when its writer decided it (the review's arrival, the controller's watch position),
    /// when known.
    pub basis_rv: Option<u64>,
    /// Commit time (simulated time since the run started).
    pub at: Duration,
    pub sts: String,
    pub group: String,
    pub from: u32,
    pub to: u32,
    /// Who wrote it (`controller#N`, `webhook`, ...).
    pub by: String,
    /// `grafana.com/min-time-between-zones-downscale` of the StatefulSet, as the world meant what it wrote (never read
    /// back through the operator's parser).
    pub min_time: Option<Duration>,
    /// The StatefulSet's entry in the group downscale record when it committed (simulated time; information for
    /// the trace only: the checker judges by commit times).
    pub recorded_at: Option<Duration>,
    /// A follower or mirror carrying `grafana.com/rollout-force-replicas`: exempt from the min time by design.
    pub exempt: bool,
    /// A follower (`grafana.com/rollout-downscale-leader`).
    pub follower: bool,
}

impl Downscale {
    pub fn describe(&self) -> String {
        let claim = match self.recorded_at {
            Some(c) => format!("recorded at {:.0}s", c.as_secs_f64()),
            None => "not recorded".to_string(),
        };
        format!(
            "{} {} -> {} by {} committed at {:.3}s ({claim})",
            self.sts,
            self.from,
            self.to,
            self.by,
            self.at.as_secs_f64()
        )
    }
}

impl Checker {
    /// Judges a committed decrease of a StatefulSet's replicas against every earlier one of another StatefulSet of its
    /// group (the min time between zone downscales): the later must commit at least the min time (the larger of both
    /// StatefulSets') after the earlier. Force-replicas decreases are exempt, as is a pair where neither side has a min
    /// time.
    pub fn record_downscale(&mut self, d: Downscale) {
        // A follower the world wrote without a min time, scaled down by the controller after another zone's
        // downscale was recorded (committed before the controller's basis).
        if d.follower && !d.exempt && d.min_time.is_none() && d.by.starts_with("controller") {
            let recorded = self.downscales.iter().find(|p| {
                p.group == d.group
                    && p.sts != d.sts
                    && p.recorded_at.is_some()
                    && d.basis_rv.is_some_and(|basis| p.commit_rv <= basis)
            });
            if let Some(prev) = recorded {
                let detail = format!("{}; earlier, recorded: {}", d.describe(), prev.describe());
                self.violate(d.at, FOLLOWER_WITHOUT_MIN_TIME, detail);
            }
        }
        // A downscale nothing admitted (a user's, where no webhook serves the StatefulSet) is promised no min time,
        // before or after it.
        let unadmitted = |d: &Downscale| d.by == UNADMITTED;
        if !d.exempt && !unadmitted(&d) {
            let mut found = Vec::new();
            let judged = self.downscales.iter().filter(|p| p.group == d.group && p.sts != d.sts && !p.exempt);
            for prev in judged.filter(|p| !unadmitted(p)) {
                let Some(min) = prev.min_time.max(d.min_time) else { continue };
                if self.concurrent_downscales_excused && d.basis_rv.is_some_and(|basis| basis < prev.commit_rv) {
                    self.concurrent_pairs_not_judged += 1;
                    continue;
                }
                let gap = d.at.saturating_sub(prev.at);
                self.min_commit_gap = Some(self.min_commit_gap.map_or(gap, |g| g.min(gap)));
                if gap < min + Duration::from_secs(1) {
                    match d.by.starts_with("controller") {
                        true => self.near_min_time.0 += 1,
                        false => self.near_min_time.1 += 1,
                    }
                }
                if gap < min {
                    found.push(format!(
                        "{} committed only {:.3}s after {} (min time {}s): {}; earlier: {}",
                        d.sts,
                        gap.as_secs_f64(),
                        prev.sts,
                        min.as_secs(),
                        d.describe(),
                        prev.describe()
                    ));
                }
            }
            for detail in found {
                self.violate(d.at, MIN_TIME, detail);
            }
        }
        self.downscales.push(d);
    }

    /// Invariant 5, webhook side: a downscale of `sts` (group `group`) admitted by the prepare-downscale webhook
    /// committed at `commit_rv`; its AdmissionReview was sent at `arrival_rv`. Judged on the committed history, not
    /// on what the webhook read: every pod slot (ordinal below `spec.replicas`) of every other StatefulSet of the
    /// group that is missing, terminating, unready or not on its update revision at the commit is a violation if it
    /// was so throughout the admission (from `arrival_rv` on: any correct read had to see it), or if a controller
    /// deletion during the admission made it so (the rollout step and the downscale overlapped). A slot that turned
    /// bad during the admission for reasons no actor of ours controls (a pod crash, a user's template push) is not
    /// held against the webhook.
    pub fn judge_admitted(&mut self, at: Duration, arrival_rv: u64, commit_rv: u64, sts: &str, group: &str) {
        let committed =
            Known { sts: as_of(&self.sts, commit_rv), pods: as_of(&self.pods, commit_rv), now: jiff::Timestamp::now() };
        let mut found = Vec::new();
        for other in committed.sts.values().filter(|o| o.group == group && o.name != sts) {
            let mut bad = Vec::new();
            for ordinal in 0..other.replicas {
                let pod_name = format!("{}-{ordinal}", other.name);
                let Some(why) = slot_problem(&committed, &other.name, ordinal) else { continue };
                let deleted_by_controller = self.own.iter().any(|w| {
                    matches!(w, OwnWrite::Deleted { rv, pod, .. } if *pod == pod_name && *rv > arrival_rv && *rv <= commit_rv)
                });
                // Every committed version of the slot's StatefulSet and pod within the admission.
                let mut versions: Vec<u64> = vec![arrival_rv];
                let in_window = |v: &u64| *v > arrival_rv && *v <= commit_rv;
                let sts_versions = self.sts.get(&other.name).into_iter().flatten().map(|(v, _)| *v);
                let pod_versions = self.pods.get(&pod_name).into_iter().flatten().map(|(v, _)| *v);
                versions.extend(sts_versions.chain(pod_versions).filter(in_window));
                let throughout = versions.iter().all(|v| {
                    let state =
                        Known { sts: as_of(&self.sts, *v), pods: as_of(&self.pods, *v), now: jiff::Timestamp::now() };
                    slot_problem(&state, &other.name, ordinal).is_some()
                });
                // Without the zone tracker nothing serialises the controller's steps with an admission (no marker,
                // no step claim): that mode promises only what the webhook can see, conditions that held throughout.
                let judged_deletion = deleted_by_controller && !self.concurrent_downscales_excused;
                if throughout || judged_deletion {
                    let how = if deleted_by_controller {
                        "deleted by the controller during the admission"
                    } else {
                        "since before the admission"
                    };
                    bad.push(format!("{why} ({how})"));
                }
            }
            if !bad.is_empty() {
                found.push(format!(
                    "admitted a downscale of {sts} while {}: {} (committed at rv {commit_rv}, review sent at rv {arrival_rv})",
                    other.name,
                    bad.join(", ")
                ));
            }
        }
        for detail in found {
            self.violate(at, NO_DOWNSCALE_DURING_ROLLOUT, detail);
        }
    }

    /// Invariant 5, controller side: a controller's decrease of `sts`'s replicas (a follower following its leader),
    /// about to commit, judged on what the controller knew: every other StatefulSet of the group must have each pod
    /// slot below its `spec.replicas` present, Ready, not terminating and on its update revision.
    pub fn judge_controller_downscale(&mut self, at: Duration, k: Knowledge, sts: &str, group: &str) {
        let known = self.known(k);
        let mut found = Vec::new();
        for other in known.sts.values().filter(|o| o.group == group && o.name != sts) {
            let bad: Vec<String> = (0..other.replicas).filter_map(|i| slot_problem(&known, &other.name, i)).collect();
            if !bad.is_empty() {
                found.push(format!(
                    "scaled {sts} down while {}: {} (known: sts rv {}, pod rv {}, process #{})",
                    other.name,
                    bad.join(", "),
                    k.sts_rv,
                    k.pod_rv,
                    k.incarnation
                ));
            }
        }
        for detail in found {
            self.violate(at, NO_DOWNSCALE_DURING_ROLLOUT, detail);
        }
    }

    /// A controller's increase of `sts`'s replicas, about to commit, judged on what the controller knew: a follower
    /// that waits for its leader's readiness is scaled up only while the leader reports every replica ready.
    pub fn judge_controller_upscale(&mut self, at: Duration, k: Knowledge, sts: &str) {
        let known = self.known(k);
        let Some(s) = known.sts.get(sts) else { return };
        if !s.upscale_only_when_leader_ready {
            return;
        }
        let Some(leader) = s.leader.as_ref().and_then(|l| known.sts.get(l)) else { return };
        if leader.ready_replicas != leader.replicas {
            let detail = format!(
                "scaled {sts} up while its leader {} had {}/{} replicas ready (known: sts rv {}, process #{})",
                leader.name, leader.ready_replicas, leader.replicas, k.sts_rv, k.incarnation
            );
            self.violate(at, LEADER_READY_UPSCALE, detail);
        }
    }

    /// Invariant 5, controller side: a controller deletion of `pod` committed while a downscale of `preparing` (a
    /// StatefulSet of the same group) was being prepared: from the commit of the record write carrying its
    /// in-progress marker until the downscale committed (or was denied).
    pub fn judge_delete_while_preparing(&mut self, at: Duration, k: Knowledge, pod: &str, preparing: &str) {
        let detail = format!(
            "deleted {pod} while a downscale of {preparing} was being prepared (process #{}, known: sts rv {}, pod rv {})",
            k.incarnation, k.sts_rv, k.pod_rv
        );
        self.violate(at, NO_DOWNSCALE_DURING_ROLLOUT, detail);
    }
}
