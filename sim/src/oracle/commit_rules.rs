//! The oracle's hook on every commit: the API server's storage tells it of each committed write ([`Commit`]: what
//! changed, who wrote it, with a read-only view of the objects after it), and the rules run here: the controller's
//! deletions and replica changes judged, downscales noted for the min-time rule, step claims, the record's markers,
//! the mirror's scale writes, the Lease's truth, and the checker's history of every object.
//!
//! Must not write to the API server's objects: the view is read-only, and the world's record is read, not changed.

use crate::Kind;
use crate::actors::world_record::WorldRecord;
use crate::environment::objects::{PodSum, StsSum};
use crate::oracle::Oracle;
use crate::oracle::checker::Knowledge;
use crate::oracle::checker::budgets::BudgetRule;
use crate::trace::Trace;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Who a write comes from, as the API server knows it while serving the request.
#[derive(Debug, Clone)]
pub struct Writer {
    /// The trace's name of the writer (`cluster` for the cluster's own components).
    pub name: String,
    /// The rollout controller's knowledge, when the write is one of its deletions, status updates or replica
    /// changes (the writes the rollout and scaling rules judge).
    pub controller: Option<Knowledge>,
    /// Where the history stood when the writer of a replica change decided it (its review's arrival, or the
    /// controller's watch position).
    pub basis: Option<u64>,
    /// The admission (webhook client incarnation) whose request is being served, around its record and annotation
    /// writes.
    pub admission: Option<u64>,
    /// The annotation patch of the request being served (`None` removes a key), around annotation writes: what the
    /// writer asked to change, which the commit's before and after alone cannot tell (a value written again).
    pub annotation_patch: Option<BTreeMap<String, Option<String>>>,
}

impl Writer {
    /// The cluster's own components (StatefulSet controller, kubelet): no rule judges them as a client.
    pub fn cluster() -> Self {
        Writer { name: "cluster".to_string(), controller: None, basis: None, admission: None, annotation_patch: None }
    }
}

/// What a commit changed.
#[derive(Debug, Clone, Copy)]
pub enum Change<'a> {
    /// A pod written, made terminating, or (`removed`) gone; `before` is the version it replaced.
    Pod {
        before: Option<&'a Pod>,
        after: &'a Pod,
        removed: bool,
    },
    StatefulSet {
        before: Option<&'a StatefulSet>,
        after: &'a StatefulSet,
    },
    Budget {
        object: &'a serde_json::Value,
        deleted: bool,
    },
    WebhookConfiguration,
    ConfigMap(&'a ConfigMap),
    Lease(&'a Lease),
}

/// One committed write, as the oracle is told of it.
#[derive(Debug, Clone, Copy)]
pub struct Commit<'a> {
    /// The resourceVersion it committed at.
    pub rv: u64,
    /// Simulated time since the run started.
    pub at: Duration,
    pub by: &'a Writer,
    pub change: Change<'a>,
}

/// The API server's objects right after the commit, read-only.
#[derive(Debug, Clone, Copy)]
pub struct Objects<'a> {
    pub statefulsets: &'a BTreeMap<String, StatefulSet>,
    pub pods: &'a BTreeMap<String, Pod>,
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    /// The group downscale record's ConfigMap name.
    pub record: &'a str,
}

impl Objects<'_> {
    /// The rollout group of `sts`, if it has one.
    pub fn group_of_statefulset(&self, sts: &str) -> Option<String> {
        let labels = self.statefulsets.get(sts)?.metadata.labels.as_ref()?;
        labels.get(rollout_core::keys::ROLLOUT_GROUP).cloned()
    }

    /// The rollout group of the StatefulSet that owns `pod`.
    pub fn group_of_pod(&self, pod: &Pod) -> Option<String> {
        let owners = pod.metadata.owner_references.as_ref()?;
        let owner = owners.iter().find(|o| o.kind == "StatefulSet")?;
        self.group_of_statefulset(&owner.name)
    }

    fn record_map(&self) -> Option<&ConfigMap> {
        self.config_maps.get(self.record)
    }

    /// Whether the production planner, run on the committed truth of `group` at `now`, has a pod to delete or
    /// replicas to change (for the reaction measurement).
    pub fn has_work(&self, group: &str, now: Timestamp) -> bool {
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
        rollout_core::build_groups(members, &pods).iter().any(|g| {
            let plan = rollout_core::plan_group(g, &rollout_core::PlanContext::new(now, &[]));
            plan.actions
                .iter()
                .any(|a| matches!(a, rollout_core::Action::DeletePod { .. } | rollout_core::Action::Scale { .. }))
        })
    }

    /// `sts` is being rolled: a pod not on its update revision or its template's, or currentRevision behind.
    pub fn being_rolled(&self, sts: &str) -> bool {
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
}

fn replicas_of(s: &StatefulSet) -> u32 {
    s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32
}

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

impl Oracle {
    /// The hook the API server's storage calls on every commit, before the commit reaches any watch: the rules of
    /// the writes that must be judged as they happen, then the checker's history and the reaction figures.
    pub(crate) fn committed(&mut self, c: &Commit, objects: &Objects, world: &WorldRecord, trace: &mut Trace) {
        match c.change {
            Change::Pod { before, after, removed } => {
                let made_terminating = !removed
                    && after.metadata.deletion_timestamp.is_some()
                    && before.is_some_and(|b| b.metadata.deletion_timestamp.is_none());
                if let (Some(k), Some(before), true) = (c.by.controller, before, made_terminating) {
                    self.judge_controller_deletion(c, k, before, objects, world);
                }
                let name = after.metadata.name.as_deref().unwrap_or_default();
                self.checker.record_pod(c.rv, name, (!removed).then(|| PodSum::of(after)));
                if !removed
                    && after.metadata.deletion_timestamp.is_none()
                    && crate::environment::objects::is_ready(after)
                {
                    let revision = crate::environment::objects::pod_revision(after);
                    self.reactions.pod_ready(name, &revision, c.at);
                }
                if let Some(patch) = &c.by.annotation_patch {
                    self.checker.record_intents_written(patch);
                    if patch.contains_key(rollout_core::keys::READY_TIME) {
                        let group = crate::environment::objects::budget_group_of(after);
                        self.checker.judge_ready_time_write(c.at, name, group.as_deref());
                    }
                }
                if let Some(group) = objects.group_of_pod(after) {
                    self.group_committed(c, &group, Kind::Pods, objects);
                }
            }
            Change::StatefulSet { before, after } => {
                let name = after.metadata.name.clone().unwrap_or_default();
                let revision =
                    |s: &StatefulSet| s.status.as_ref().and_then(|s| s.current_revision.clone()).unwrap_or_default();
                if let (Some(k), Some(before)) = (c.by.controller, before)
                    && revision(before) != revision(after)
                {
                    self.checker.judge_revision(c.at, k, c.rv, &name, &revision(after));
                }
                if let Some(before) = before.filter(|b| replicas_of(b) != replicas_of(after)) {
                    if let Some(k) = c.by.controller {
                        self.judge_controller_replicas(c, k, before, after, objects, world);
                    }
                    self.replicas_changed.insert(name.clone(), Instant::now());
                    if replicas_of(after) < replicas_of(before) {
                        self.note_downscale(c, after, replicas_of(before), objects, world, trace);
                    }
                }
                if let Some(patch) = &c.by.annotation_patch {
                    self.statefulset_annotations_patched(c, before, after, patch);
                }
                self.checker.record_sts(c.rv, &name, Some(StsSum::of(after)));
                let labels = after.metadata.labels.as_ref();
                if let Some(group) = labels.and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP)) {
                    self.group_committed(c, group, Kind::StatefulSets, objects);
                }
            }
            Change::Budget { object, deleted } => {
                let name = object.pointer("/metadata/name").and_then(serde_json::Value::as_str).unwrap_or_default();
                self.checker.record_budget(c.rv, c.at, name, if deleted { None } else { BudgetRule::read(object) });
            }
            // The controller does not react to webhook configurations; the certificate rule judges TLS checks.
            Change::WebhookConfiguration => {}
            Change::ConfigMap(cm) => self.note_markers(c, cm, objects, trace),
            Change::Lease(lease) => {
                if let Some(line) = self.ha.lease_committed(c.at, lease) {
                    trace.record(c.at, "apiserver", line);
                }
            }
        }
    }

    /// An annotation patch of a StatefulSet committed: eviction intents kept there (written and removed as
    /// documented), and an admission's record of its downscale in `grafana.com/last-downscale`.
    fn statefulset_annotations_patched(
        &mut self,
        c: &Commit,
        before: Option<&StatefulSet>,
        after: &StatefulSet,
        patch: &BTreeMap<String, Option<String>>,
    ) {
        let name = after.metadata.name.as_deref().unwrap_or_default();
        let annotations = |s: &StatefulSet| s.metadata.annotations.clone().unwrap_or_default();
        self.checker.record_intents_written(patch);
        let (was, now) = (before.map(annotations).unwrap_or_default(), annotations(after));
        self.checker.judge_statefulset_intent_write(c.at, name, &was, patch, &now, Timestamp::now());
        if let Some(admission) = c.by.admission.filter(|_| patch.contains_key(rollout_core::keys::LAST_DOWNSCALE)) {
            self.recorded_by_admission.insert(admission);
        }
    }

    /// A commit touching `group`: whether the controller has work now starts or ends a wait for its reaction.
    fn group_committed(&mut self, c: &Commit, group: &str, kind: Kind, objects: &Objects) {
        let now = self.start_wall + jiff::SignedDuration::try_from(c.at).unwrap_or_default();
        let actionable = objects.has_work(group, now);
        let commit = crate::oracle::reaction::Wait { since: c.at, kind, rv: c.rv };
        self.reactions.group_committed(group, actionable, commit);
    }

    /// The controller made `pod` terminating: what it knew, its step claim, the budgets, a rollout step amid a
    /// downscale, a bad release and a downscale being prepared.
    fn judge_controller_deletion(
        &mut self,
        c: &Commit,
        k: Knowledge,
        pod: &Pod,
        objects: &Objects,
        world: &WorldRecord,
    ) {
        let (at, name) = (c.at, pod.metadata.name.as_deref().unwrap_or_default());
        self.checker.judge_delete(at, k, c.rv, &PodSum::of(pod));
        if self.step_claims_required {
            self.judge_step_claimed(at, pod, k, objects);
        }
        if !self.checker.budgets.is_empty() {
            let by = format!("controller#{} deletion", k.incarnation);
            self.checker.judge_disruption(at, k.pod_rv.min(k.sts_rv), c.rv - 1, &PodSum::of(pod), &by);
        }
        let owner = crate::environment::objects::owner_of(pod);
        if self.being_scaled(&owner, objects) {
            self.checker.rolled_while_scaling += 1;
        }
        // Only the StatefulSets the world gated (a group without the annotation rolls a bad release by design).
        let gated = objects.statefulsets.get(&owner).filter(|s| {
            s.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_HEALTH_CHECK))
        });
        let update = gated.and_then(|s| s.status.as_ref()?.update_revision.clone());
        let group = objects.group_of_statefulset(&owner);
        if let Some(update) = update.filter(|u| crate::environment::prometheus::is_bad(u, world.bad_release)) {
            self.checker.judge_bad_release_deletion(at, name, &owner, group.as_deref().unwrap_or_default(), &update);
        }
        let now = Timestamp::now();
        let preparing: Vec<String> = self
            .preparing
            .iter()
            .filter(|(_, (g, _, until))| Some(g) == group.as_ref() && now < *until)
            .map(|(s, _)| s.clone())
            .collect();
        for sts in preparing {
            self.checker.judge_delete_while_preparing(at, k, name, &sts);
        }
    }

    /// The controller changed `before`'s replicas to `after`'s: force replicas ignored, a change amid a rollout,
    /// the mirror and delayed-downscale rules, and the scaling rules of up- and downscales.
    fn judge_controller_replicas(
        &mut self,
        c: &Commit,
        k: Knowledge,
        before: &StatefulSet,
        after: &StatefulSet,
        objects: &Objects,
        world: &WorldRecord,
    ) {
        let name = after.metadata.name.clone().unwrap_or_default();
        let (from, to) = (replicas_of(before), replicas_of(after));
        self.controller_replica_changes += 1;
        if let Some(had) = world.force_ignored.get(&name) {
            let detail = format!(
                "scaled {name} {from} -> {to}; it had {had} when given an ignored {} (process #{})",
                rollout_core::keys::ROLLOUT_FORCE_REPLICAS,
                k.incarnation
            );
            self.checker.violate(c.at, crate::oracle::checker::FORCE_IGNORED, detail);
        }
        if objects.being_rolled(&name) {
            self.checker.scaled_while_rolling += 1;
            self.checker.downscaled_while_rolling += u64::from(to < from);
        }
        self.judge_mirror_scale(c.at, before, to, k, objects, world);
        if to > from {
            self.checker.judge_controller_upscale(c.at, k, &name);
        } else {
            self.checker.judge_controller_downscale(c.at, k, &name, &StsSum::of(after).group);
        }
    }

    /// Hands a decrease of `sts`'s replicas from `from` to the checker, with the record's entry for it (for the
    /// trace).
    fn note_downscale(
        &mut self,
        c: &Commit,
        sts: &StatefulSet,
        from: u32,
        objects: &Objects,
        world: &WorldRecord,
        trace: &mut Trace,
    ) {
        let name = sts.metadata.name.clone().unwrap_or_default();
        // The min time the world wrote, as it meant it: the operator's parser must not judge itself.
        let min_time = world.min_times.get(&name).copied();
        let group = sts
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned())
            .unwrap_or_default();
        let annotations = sts.metadata.annotations.as_ref();
        let follower = annotations.is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
        // Force replicas is read on followers and mirrors only (elsewhere it is ignored, and so not exempt).
        let exempt = (follower || world.mirrors.contains(&name))
            && annotations.is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        let entry = objects
            .record_map()
            .and_then(|cm| {
                rollout_core::DownscaleRecord::from_config_map_data(&cm.data.clone().unwrap_or_default()).ok()
            })
            .and_then(|r| r.last_downscaled.get(&name).copied());
        let recorded_at = entry.map(|e| {
            let since = e.duration_since(self.start_wall);
            Duration::try_from(since).unwrap_or(Duration::ZERO)
        });
        let d = crate::oracle::checker::scaling::Downscale {
            commit_rv: c.rv,
            basis_rv: c.by.basis,
            at: c.at,
            sts: name,
            group,
            from,
            to: replicas_of(sts),
            by: c.by.name.clone(),
            min_time,
            recorded_at,
            exempt,
            follower,
        };
        trace.record(c.at, "scaling", format!("downscale {}", d.describe()));
        self.activity.downscales.push(d.clone());
        self.checker.record_downscale(d);
    }

    /// [`ROLLOUT_STEP_CLAIMED`]: the record's `{"<group>":{"until":"<RFC 3339>"}}`, read here as documented.
    ///
    /// [`ROLLOUT_STEP_CLAIMED`]: crate::oracle::checker::ROLLOUT_STEP_CLAIMED
    fn judge_step_claimed(&mut self, at: Duration, pod: &Pod, k: Knowledge, objects: &Objects) {
        let Some(group) = objects.group_of_pod(pod) else { return };
        let now = Timestamp::now();
        let steps = objects.record_map().and_then(|cm| {
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
    fn being_scaled(&self, sts: &str, objects: &Objects) -> bool {
        let Some(s) = objects.statefulsets.get(sts) else { return false };
        let leader = s.metadata.annotations.as_ref().and_then(|a| a.get(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
        let unlike_leader =
            leader.and_then(|l| objects.statefulsets.get(l)).is_some_and(|l| replicas_of(l) != replicas_of(s));
        let prefix = format!("{sts}-");
        let condemned = objects
            .pods
            .keys()
            .filter_map(|n| n.strip_prefix(&prefix)?.parse::<u32>().ok())
            .any(|o| o >= replicas_of(s));
        let recent = self.replicas_changed.get(sts).is_some_and(|at| Instant::now() < *at + Duration::from_secs(30));
        unlike_leader || condemned || recent
    }

    /// A committed record write: every StatefulSet with an in-progress marker in it is being prepared from now on.
    /// Every marker it carries must be readable, whoever wrote it (only the operator writes markers).
    fn note_markers(&mut self, c: &Commit, cm: &ConfigMap, objects: &Objects, trace: &mut Trace) {
        if cm.metadata.name.as_deref() != Some(objects.record) {
            return;
        }
        let raw = cm.metadata.annotations.as_ref().and_then(|a| a.get(rollout_core::keys::DOWNSCALES_IN_PROGRESS));
        let (markers, unreadable) = markers_in(raw.map(String::as_str));
        if !unreadable.is_empty() {
            self.checker.judge_record_markers(c.at, objects.record, &unreadable);
        }
        let Some(admission) = c.by.admission else { return };
        let now = Timestamp::now();
        let mut live_groups: Vec<&str> = markers.iter().filter(|m| now < m.until).map(|m| m.group.as_str()).collect();
        live_groups.sort_unstable();
        live_groups.dedup();
        if live_groups.len() > 1 {
            let line = format!("the record holds live downscale markers of {} groups", live_groups.len());
            trace.record(c.at, "checker", line);
            self.activity.record_writes_shared_by_groups += 1;
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
                    let line = format!("downscale of {sts} given up (its marker removed by its admission)");
                    trace.record(c.at, "checker", line);
                    let given_up = crate::oracle::activity::WorldEvent::DownscaleGivenUp { statefulset: sts.clone() };
                    self.activity.happened(given_up);
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
                trace.record(c.at, "checker", line);
            } else if !self.preparing.contains_key(&m.statefulset) {
                let line = format!("downscale of {} being prepared (marker committed)", m.statefulset);
                trace.record(c.at, "checker", line);
                let prepared =
                    crate::oracle::activity::WorldEvent::DownscalePrepared { statefulset: m.statefulset.clone() };
                self.activity.happened(prepared);
                self.preparing.insert(m.statefulset, (m.group, admission, m.until));
            }
        }
    }

    /// A controller's replica change of `sts` (as it was) to `to`: a mirror StatefulSet goes only to values its
    /// reference held over the last 30 s (longer than a pass can take from its read to its write), and a delayed
    /// downscale removes only pods that have been preparing for the delay.
    fn judge_mirror_scale(
        &mut self,
        at: Duration,
        sts: &StatefulSet,
        to: u32,
        k: Knowledge,
        objects: &Objects,
        world: &WorldRecord,
    ) {
        // By the world's own record, before any parsing: a StatefulSet whose annotations it wrote malformed.
        let name = sts.metadata.name.clone().unwrap_or_default();
        if world.delayed_downscale_malformed.contains(&name) {
            let from = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0);
            let detail = format!(
                "scaled {name} {from} -> {to} while its delayed-downscale annotations are malformed (process #{})",
                k.incarnation
            );
            self.checker.record_delayed_violation(at, detail);
        }
        if !world.mirrors.contains(&name) {
            return;
        }
        // An unset `spec.replicas` is Kubernetes' default of 1, as `StsSum` reads it.
        let from = replicas_of(sts);
        let since = at.saturating_sub(Duration::from_secs(30));
        let history = &world.reference_history;
        let held_before = history.iter().rev().find(|(t, _)| *t <= since).map(|(_, n)| *n);
        let recent: Vec<u32> =
            held_before.into_iter().chain(history.iter().filter(|(t, _)| *t > since).map(|(_, n)| *n)).collect();
        // A delayed downscale may stop short of the reference (only the tail of pods prepared long enough goes);
        // any other change goes exactly to a value the reference held.
        // The delay as the world meant what it wrote, not as the operator's parser reads it.
        let delay = world.delayed_downscale_delays.get(&name).copied();
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
            if objects.pods.get(&pod).is_none_or(|p| p.metadata.deletion_timestamp.is_some()) {
                continue;
            }
            let prepared = world.prepared.get(&pod).copied();
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
}
