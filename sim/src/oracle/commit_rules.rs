//! The rules the oracle runs as a write commits: downscales noted for the min-time rule, step claims, the record's
//! markers, the mirror's scale writes and the Lease's truth.

use crate::environment::store::Store;
use crate::oracle::checker::Knowledge;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};

use std::time::Duration;
use tokio::time::Instant;

/// A downscale marker as the checker reads it.
pub(crate) struct Marker {
    statefulset: String,
    group: String,
    until: Timestamp,
}

/// The in-progress markers of the record's annotation, read by the checker itself (a JSON object of
/// `{"<statefulset>": {"group": "<group>", "until": "<RFC 3339>"}}`), not by the operator's parser: a
/// parser that lost markers would otherwise hide them from the operator and the checker alike (`until` is read by
/// jiff's timestamp parser, a little broader than RFC 3339). The entries it cannot read come second (the whole
/// annotation, when it is not such an object), for `RECORD_MARKERS_READABLE`.
pub(crate) fn markers_in(raw: Option<&str>) -> (Vec<Marker>, Vec<String>) {
    let Some(raw) = raw else { return (Vec::new(), Vec::new()) };
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str(raw) else {
        return (Vec::new(), vec![format!("the annotation {raw:?}")]);
    };
    let mut unreadable = Vec::new();
    let markers = map
        .into_iter()
        .filter_map(|(statefulset, marker)| {
            let read = || {
                let group = marker.get("group")?.as_str()?.to_string();
                let until = marker.get("until")?.as_str()?.parse::<Timestamp>().ok()?;
                Some((group, until))
            };
            match read() {
                Some((group, until)) => Some(Marker { statefulset, group, until }),
                None => {
                    unreadable.push(format!("{statefulset}: {marker}"));
                    None
                }
            }
        })
        .collect();
    (markers, unreadable)
}

impl Store {
    /// Hands a decrease of `sts`'s replicas (about to commit) to the checker, with the record's entry for it (for the
    /// trace).
    pub(crate) fn note_downscale(&mut self, sts: &StatefulSet, from: u32, to: u32) {
        let name = sts.metadata.name.clone().unwrap_or_default();
        // The min time the world wrote, as it meant it: the operator's parser must not judge itself.
        let min_time = self.min_times.get(&name).copied();
        let group = sts
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned())
            .unwrap_or_default();
        let follower = sts
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
        // Force replicas is read on followers and mirrors only (elsewhere it is ignored, and so not exempt).
        let exempt = (follower || self.mirrors.contains(&name))
            && sts
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        let entry = self
            .config_maps
            .get(&self.zone_tracker_config_map)
            .and_then(|cm| {
                rollout_core::DownscaleRecord::from_config_map_data(&cm.data.clone().unwrap_or_default()).ok()
            })
            .and_then(|r| r.last_downscaled.get(&name).copied());
        let recorded_at = entry.map(|e| {
            let since = e.duration_since(self.start_wall);
            Duration::try_from(since).unwrap_or(Duration::ZERO)
        });
        let d = crate::oracle::checker::scaling::Downscale {
            commit_rv: self.rv + 1,
            basis_rv: self.writer_basis,
            at: self.elapsed(),
            sts: name,
            group,
            from,
            to,
            by: self.writer.clone(),
            min_time,
            recorded_at,
            exempt,
            follower,
        };
        self.trace("scaling", format!("downscale {}", d.describe()));
        self.activity.downscales.push(d.clone());
        self.checker.record_downscale(d);
    }

    /// Whether the production planner, run on the committed truth of `group`, has a pod to delete or replicas to
    /// change (for the reaction measurement).
    pub(crate) fn has_work(&self, group: &str) -> bool {
        let members: Vec<_> = self
            .statefulsets
            .values()
            .filter(|s| {
                s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP)).map(String::as_str)
                    == Some(group)
            })
            .filter_map(|s| rollout_core::StatefulSetView::from_k8s(s).ok())
            .collect();
        let pods: Vec<_> = self.pods.values().filter_map(|p| rollout_core::PodView::from_k8s(p).ok()).collect();
        let now = self.start_wall + jiff::SignedDuration::try_from(self.elapsed()).unwrap_or_default();
        rollout_core::build_groups(members, &pods).iter().any(|g| {
            let plan = rollout_core::plan_group(g, &rollout_core::PlanContext::new(now, &[]));
            plan.actions
                .iter()
                .any(|a| matches!(a, rollout_core::Action::DeletePod { .. } | rollout_core::Action::Scale { .. }))
        })
    }

    /// [`ROLLOUT_STEP_CLAIMED`]: the record's `{"<group>":{"until":"<RFC 3339>"}}`, read here as documented.
    pub(crate) fn judge_step_claimed(&mut self, at: Duration, pod: &Pod, k: Knowledge) {
        let Some(group) = self.group_of_pod(pod) else { return };
        let now = Timestamp::now();
        let steps = self.config_maps.get(&self.zone_tracker_config_map).and_then(|cm| {
            cm.metadata.annotations.as_ref()?.get(rollout_core::keys::ROLLOUT_STEPS_IN_PROGRESS).cloned()
        });
        let until = steps
            .as_deref()
            .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw).ok())
            .and_then(|v| v.pointer(&format!("/{group}/until"))?.as_str()?.parse::<Timestamp>().ok());
        if until.is_none_or(|until| until <= now) {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let claim = until.map_or("none".to_string(), |u| format!("expired at {u}"));
            let detail = format!(
                "controller#{} deleted {name} of group {group} at {now}; its step claim: {claim}",
                k.incarnation
            );
            self.checker.violate(at, crate::oracle::checker::ROLLOUT_STEP_CLAIMED, detail);
        }
    }

    /// `sts` is being scaled: its replicas differ from its leader's, a pod above `spec.replicas` is still there, or
    /// its `spec.replicas` changed less than 30 s ago (new pods may still be on their way).
    pub(crate) fn being_scaled(&self, sts: &str) -> bool {
        let Some(s) = self.statefulsets.get(sts) else { return false };
        let replicas = |s: &StatefulSet| s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0);
        let leader = s.metadata.annotations.as_ref().and_then(|a| a.get(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
        let unlike_leader = leader.and_then(|l| self.statefulsets.get(l)).is_some_and(|l| replicas(l) != replicas(s));
        let prefix = format!("{sts}-");
        let condemned =
            self.pods.keys().filter_map(|n| n.strip_prefix(&prefix)?.parse::<i32>().ok()).any(|o| o >= replicas(s));
        let recent = self.replicas_changed.get(sts).is_some_and(|at| Instant::now() < *at + Duration::from_secs(30));
        unlike_leader || condemned || recent
    }

    /// `sts` is being rolled: a pod not on its update revision or its template's, or currentRevision behind.
    pub(crate) fn being_rolled(&self, sts: &str) -> bool {
        let Some(s) = self.statefulsets.get(sts) else { return false };
        let status = s.status.clone().unwrap_or_default();
        let update = status.update_revision.clone().unwrap_or_default();
        let template = crate::environment::objects::template_revision(s);
        status.current_revision != status.update_revision
            || update != template
            || self.pods.values().any(|p| {
                crate::environment::objects::owner_of(p) == sts
                    && crate::environment::objects::pod_revision(p) != template
            })
    }

    /// A committed record write: every StatefulSet with an in-progress marker in it is being prepared from now on.
    /// Every marker it carries must be readable, whoever wrote it (only the operator writes markers).
    pub(crate) fn note_markers(&mut self, cm: &ConfigMap) {
        if cm.metadata.name.as_deref() != Some(self.zone_tracker_config_map.as_str()) {
            return;
        }
        let raw = cm.metadata.annotations.as_ref().and_then(|a| a.get(rollout_core::keys::DOWNSCALES_IN_PROGRESS));
        let (markers, unreadable) = markers_in(raw.map(String::as_str));
        if !unreadable.is_empty() {
            let at = self.elapsed();
            let record = self.zone_tracker_config_map.clone();
            self.checker.judge_record_markers(at, &record, &unreadable);
        }
        let Some(admission) = self.admission_writing else { return };
        let now = Timestamp::now();
        let mut live_groups: Vec<&str> = markers.iter().filter(|m| now < m.until).map(|m| m.group.as_str()).collect();
        live_groups.sort_unstable();
        live_groups.dedup();
        if live_groups.len() > 1 {
            let line = format!("the record holds live downscale markers of {} groups", live_groups.len());
            self.trace("checker", line);
        }
        // This admission's own write without its marker (an undo), or with it re-dated (the downscale dated).
        let own: Vec<String> =
            self.preparing.iter().filter(|(_, (_, a, _))| *a == admission).map(|(s, _)| s.clone()).collect();
        for sts in own {
            match markers.iter().find(|m| m.statefulset == sts) {
                Some(m) => {
                    if let Some(entry) = self.preparing.get_mut(&sts) {
                        entry.2 = m.until;
                    }
                }
                None => {
                    self.trace("checker", format!("downscale of {sts} given up (its marker removed by its admission)"));
                    self.preparing.remove(&sts);
                }
            }
        }
        for m in markers {
            // A marker counts once, when first written: a later record write that merely carries it along (or a
            // marker whose clear failed, left to expire) does not start a new preparation.
            if self.markers_seen.insert(m.statefulset.clone(), m.until) == Some(m.until) {
                continue;
            }
            if self.answered.contains(&admission) {
                let line = format!("marker of {} committed after its admission was answered", m.statefulset);
                self.trace("checker", line);
            } else if !self.preparing.contains_key(&m.statefulset) {
                self.trace("checker", format!("downscale of {} being prepared (marker committed)", m.statefulset));
                let prepared =
                    crate::oracle::activity::WorldEvent::DownscalePrepared { statefulset: m.statefulset.clone() };
                self.activity.world.push(prepared);
                self.preparing.insert(m.statefulset, (m.group, admission, m.until));
            }
        }
    }

    /// A controller's replica change of `sts` to `to`, about to commit: a mirror StatefulSet goes only to values its
    /// reference held over the last 30 s (longer than a pass can take from its read to its write), and a delayed
    /// downscale removes only pods that have been preparing for the delay.
    pub(crate) fn judge_mirror_scale(&mut self, sts: &StatefulSet, to: u32, k: Knowledge) {
        // By the world's own record, before any parsing: a StatefulSet whose annotations it wrote malformed.
        let name = sts.metadata.name.clone().unwrap_or_default();
        if self.delayed_downscale_malformed.contains(&name) {
            let from = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let detail = format!(
                "scaled {name} {from} -> {to} while its delayed-downscale annotations are malformed (process #{})",
                k.incarnation
            );
            let at = self.elapsed();
            self.checker.record_delayed_violation(at, detail);
        }
        if !self.mirrors.contains(&name) {
            return;
        }
        // An unset `spec.replicas` is Kubernetes' default of 1, as `StsSum` reads it.
        let from = sts.spec.as_ref().and_then(|s| s.replicas).map_or(1, |r| r.max(0) as u32);
        let at = self.elapsed();
        let since = at.saturating_sub(Duration::from_secs(30));
        let held_before = self.reference_history.iter().rev().find(|(t, _)| *t <= since).map(|(_, n)| *n);
        let recent: Vec<u32> = held_before
            .into_iter()
            .chain(self.reference_history.iter().filter(|(t, _)| *t > since).map(|(_, n)| *n))
            .collect();
        // A delayed downscale may stop short of the reference (only the tail of pods prepared long enough goes);
        // any other change goes exactly to a value the reference held.
        // The delay as the world meant what it wrote, not as the operator's parser reads it.
        let delay = self.delayed_downscale_delays.get(&name).copied();
        let partial = to < from && delay.is_some();
        let followed = match partial {
            true => recent.iter().any(|low| *low <= to),
            false => recent.contains(&to),
        };
        if !followed {
            let detail = format!(
                "scaled mirror {name} {from} -> {to}; its reference's spec.replicas over the last 30 s: {recent:?} (process #{})",
                k.incarnation
            );
            self.checker.record_mirror_violation(at, detail);
        }
        let Some(delay) = delay else { return };
        let now = Timestamp::now();
        let delay = jiff::SignedDuration::try_from(delay).unwrap_or_default();
        // When the last of the removed pods had been preparing for the delay, and whether every one was preparing.
        let (mut due, mut all_preparing) = (None::<Timestamp>, true);
        for ordinal in to..from {
            let pod = format!("{name}-{ordinal}");
            // A pod already gone or on its way out loses nothing to the downscale.
            if self.pods.get(&pod).is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                continue;
            }
            let prepared = self.prepared.get(&pod).copied();
            match prepared {
                Some(since) => due = due.max(Some(since + delay)),
                None => all_preparing = false,
            }
            let long_enough = prepared.is_some_and(|since| now.duration_since(since) >= delay);
            if !long_enough {
                let how = match prepared {
                    Some(since) => format!("preparing only since {:.1}s ago", now.duration_since(since).as_secs_f64()),
                    None => "not preparing".to_string(),
                };
                let detail = format!(
                    "scaled {name} {from} -> {to} while {pod} was {how} (delay {}s, process #{})",
                    delay.as_secs(),
                    k.incarnation
                );
                self.checker.record_delayed_violation(at, detail);
            }
        }
        if let (Some(due), true) = (due, all_preparing)
            && now > due
        {
            let late = Duration::try_from(now.duration_since(due)).unwrap_or_default();
            self.checker.delayed_downscale_lateness.push(late);
        }
    }

    /// The Lease's truth moves on with each committed write, on the API server's clock.
    pub(crate) fn lease_committed(&mut self, lease: &k8s_openapi::api::coordination::v1::Lease) {
        let at = self.elapsed();
        if let Some(line) = self.ha.lease_committed(at, lease) {
            self.trace("apiserver", line);
        }
    }
}
