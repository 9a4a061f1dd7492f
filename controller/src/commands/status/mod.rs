//! `rollout-operator status`: a read-only live view of the rollout groups of a namespace. For each group: each
//! zone's progress (pods updated of desired, unavailable, revisions), what the controller would do next and why it
//! waits, the last downscale and how long a downscale of each zone must still wait, the ZoneAwarePodDisruptionBudgets
//! that cover it (mode, budget, evictions in flight); with `--watch`, how long the group has gone without progress
//! and whether that makes it stuck. `-o json` prints the same for scripts.
//!
//! It runs the controller's own pass (`rollout_core::pass::plan_pass`) on a live read (StatefulSets, pods and, with
//! `-use-zone-tracker`, the group downscale record), with the same kube config flags as the controller; `-f` reads
//! dumps instead, through `review`'s in-memory cluster. Owns the read and the per-group summary; [`render`] shows
//! it to people, [`command`] runs the command. Writes nothing anywhere but stdout and stderr.

pub mod command;
pub mod render;

use crate::cluster::zone_tracker::{markers_of, read_record};
use crate::cluster::{ApiError, DisruptionBudgets, LiveReads, ZoneTrackerStore};
use crate::health_check::offline::{HealthChecks, OfflineGates};
use crate::ops::metrics::ZpdbMetrics;
use crate::rollout::report::statefulset_report;
use crate::zpdb::budgets::BudgetCache;
use futures::StreamExt;
use jiff::Timestamp;
use rollout_core::downscale::format_timestamp;
use rollout_core::health_check::HealthGating;
use rollout_core::progress::{ProgressClock, judge};
use rollout_core::zpdb::{BudgetPod, BudgetScope, KnownBudgets, ZpdbConfig};
use rollout_core::{
    Action, DownscaleRecord, GroupPlan, GroupSnapshot, GroupState, MinTimeVerdict, MirrorFindings, PassInput, PodView,
    RecordNeed, RecordRead, ScalingError, StatefulSetView, Wait, ZoneTracker, build_groups, check_min_time, keys,
    plan_pass, record_need,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
use thiserror::Error;

/// Exit status for bad arguments, unreadable dumps, or a kubeconfig (or context) that cannot be used.
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status when the cluster could not be read or the output not written.
pub const EXIT_FAILED: u8 = 1;

/// What `status` is asked: the view's options, and what it takes from the controller's flags (namespace, kube
/// config, zone tracker, progress deadline). Built from the command line by `cli::StatusOptions::options`.
#[derive(Debug, Clone)]
pub struct StatusOptions {
    /// `--context`: this context of the kubeconfig instead of its current one.
    pub context: Option<String>,
    /// `--watch`: redraw the view until interrupted.
    pub watch: bool,
    /// `--interval`: time between two redraws with `--watch`.
    pub interval: Duration,
    /// `-o`: `text` or `json`.
    pub output: String,
    /// `-f`: dumps to read instead of the cluster (`-` is stdin).
    pub files: Vec<PathBuf>,
    /// `--now`: with `-f`, as of this time (RFC 3339) instead of now.
    pub now: Option<String>,
    /// `--prometheus-url`: the Prometheus the RolloutHealthChecks (the dump's with `-f`, else the namespace's) are
    /// evaluated against.
    pub prometheus_url: Option<String>,
    /// `-kubernetes.namespace` (empty: the kubeconfig context's, or the dump's).
    pub namespace: String,
    /// The zone tracker's ConfigMap when `-use-zone-tracker` is true.
    pub zone_tracker_config_map: Option<String>,
    /// The progress deadline of the controller's stuck detection.
    pub progress_deadline: Duration,
    /// `-kubernetes.config-file`, when given.
    pub config_file: Option<PathBuf>,
    /// `-kubernetes.api-url`, when given.
    pub api_url: Option<String>,
    /// `-kubernetes.client-timeout` (zero: none).
    pub client_timeout: Duration,
    /// `-kubernetes.client-qps` and `-kubernetes.client-burst`.
    pub client_qps: f64,
    pub client_burst: i64,
}

/// Why `status` could not run with these arguments.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StatusArgError {
    #[error("invalid --output value {0:?}: expected text or json")]
    Output(String),
    #[error("--watch reads the cluster again and again; it cannot be used with -f")]
    WatchWithFiles,
    #[error("--now is for dumps (-f); a live view is as of now")]
    NowWithoutFiles,
    #[error("--interval must be positive")]
    ZeroInterval,
    #[error("--context picks a context of a kubeconfig; it cannot be used with -f")]
    ContextWithFiles,
}

/// Why the view could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum StatusError {
    #[error("cannot list the rollout groups' StatefulSets: {0}")]
    StatefulSets(ApiError),
    #[error("cannot list the pods: {0}")]
    Pods(ApiError),
    #[error("cannot list the RolloutHealthChecks to evaluate them against --prometheus-url: {0}")]
    HealthChecks(ApiError),
}

/// The view of a namespace at one moment.
#[derive(Debug, Clone, Serialize)]
pub struct NamespaceStatus {
    pub namespace: String,
    /// When it was read (RFC 3339).
    pub at: String,
    pub groups: Vec<GroupStatus>,
    /// Why the budgets could not be read, if they could not.
    #[serde(rename = "budgetsUnknown", skip_serializing_if = "Option::is_none")]
    pub budgets_unknown: Option<String>,
}

/// One rollout group: its zones, the pass the controller would run now, and its downscales.
#[derive(Debug, Clone, Serialize)]
pub struct GroupStatus {
    pub group: String,
    pub state: GroupState,
    pub reason: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait: Option<Wait>,
    /// What the controller would do next.
    pub next: Vec<Action>,
    #[serde(rename = "statefulSets")]
    pub statefulsets: Vec<StatefulSetStatus>,
    pub downscales: Downscales,
    /// Only with --watch: how long without progress since the view started watching.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<ProgressStatus>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    #[serde(rename = "scalingErrors", skip_serializing_if = "Vec::is_empty")]
    pub scaling_errors: Vec<ScalingError>,
    /// The ZoneAwarePodDisruptionBudgets that select pods of the group.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub budgets: Vec<BudgetStatus>,
}

/// A ZoneAwarePodDisruptionBudget over a group: what it allows, and the evictions (or controller deletions) it is
/// allowing now (pods with a live eviction intent).
#[derive(Debug, Clone, Serialize)]
pub struct BudgetStatus {
    pub name: String,
    /// `zone` or `partition`.
    pub mode: &'static str,
    /// `maxUnavailable`, or `maxUnavailablePercentage` with a `%`.
    #[serde(rename = "maxUnavailable")]
    pub max_unavailable: String,
    #[serde(rename = "evictionsInFlight", skip_serializing_if = "Vec::is_empty")]
    pub evictions_in_flight: Vec<String>,
}

/// One zone's pods and revisions.
#[derive(Debug, Clone, Serialize)]
pub struct StatefulSetStatus {
    pub name: String,
    /// `spec.replicas`.
    pub replicas: u32,
    /// Pods on the update revision (ordinals below `spec.replicas`).
    pub updated: u32,
    /// Expected pods missing or not available.
    pub unavailable: u32,
    #[serde(rename = "currentRevision")]
    pub current_revision: String,
    #[serde(rename = "updateRevision")]
    pub update_revision: String,
    pub paused: bool,
}

/// The group's downscales: the last one, and which zones must still wait for the min time between zone downscales.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Downscales {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last: Option<LastDownscale>,
    pub waits: Vec<DownscaleWait>,
}

#[derive(Debug, Clone, Serialize)]
pub struct LastDownscale {
    #[serde(rename = "statefulSet")]
    pub statefulset: String,
    pub at: String,
}

/// A zone that may not be downscaled before `after`.
#[derive(Debug, Clone, Serialize)]
pub struct DownscaleWait {
    #[serde(rename = "statefulSet")]
    pub statefulset: String,
    pub after: String,
    #[serde(rename = "secondsLeft")]
    pub seconds_left: u64,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProgressStatus {
    #[serde(rename = "secondsWithoutProgress")]
    pub seconds_without_progress: u64,
    pub stuck: bool,
}

/// One group as read, with the pass the controller would run on it and the downscale record it read (if any).
#[derive(Debug, Clone)]
pub struct Planned {
    pub group: GroupSnapshot,
    pub plan: GroupPlan,
    pub record: Option<DownscaleRecord>,
    /// The group's pods with a live eviction intent, by name.
    pub intents: Vec<String>,
}

/// Reads the namespace through `api` and runs the controller's pass on every rollout group, as of `now`.
/// `zone_tracker_config_map`: the zone tracker's ConfigMap (`-use-zone-tracker`), read as the controller reads it;
/// `budgets`: the ZoneAwarePodDisruptionBudgets as the operator knows them (`None`: not known here), which judge the
/// pass's deletions as the controller's budgets judge them.
pub async fn read<C: LiveReads + ZoneTrackerStore>(
    api: &C,
    zone_tracker_config_map: Option<&str>,
    budgets: Option<(&KnownBudgets, &str)>,
    now: Timestamp,
) -> Result<Vec<Planned>, StatusError> {
    read_with_gates(api, zone_tracker_config_map, budgets, None, now).await
}

/// [`read`], with the groups' health gates resolved (and evaluated) by `gates` from the RolloutHealthChecks given.
pub async fn read_with_gates<C: LiveReads + ZoneTrackerStore>(
    api: &C,
    zone_tracker_config_map: Option<&str>,
    budgets: Option<(&KnownBudgets, &str)>,
    gates: Option<(&OfflineGates, &HealthChecks, &str)>,
    now: Timestamp,
) -> Result<Vec<Planned>, StatusError> {
    let statefulsets = api.list_statefulsets(keys::ROLLOUT_GROUP).await.map_err(StatusError::StatefulSets)?;
    let pods = api.list_pods("").await.map_err(StatusError::Pods)?;
    let budget_pods: Vec<BudgetPod> = pods.iter().filter_map(|p| BudgetPod::from_k8s(p).ok()).collect();
    let intents: BTreeMap<String, Timestamp> = budget_pods
        .iter()
        .filter(|p| p.has_live_intent(now))
        .filter_map(|p| p.intent_until.map(|until| (p.name().to_string(), until)))
        .collect();
    let views: Vec<StatefulSetView> = statefulsets.iter().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect();
    let pods: Vec<PodView> = budget_pods.iter().map(|p| p.pod.clone()).collect();
    let groups = build_groups(views.clone(), &pods);
    let scope =
        budgets.map(|(known, namespace)| BudgetScope { known, namespace, statefulsets: &views, pods: &budget_pods });
    let zone_tracker = if zone_tracker_config_map.is_some() { ZoneTracker::On } else { ZoneTracker::Off };
    let wanted = groups.iter().any(|g| record_need(g, zone_tracker) != RecordNeed::NotNeeded);
    // One record serves the namespace: read it once, as of this view.
    let stored = match (zone_tracker_config_map, wanted) {
        (Some(name), true) => Some(read_record(api, name).await.and_then(|stored| match stored {
            Some(stored) => markers_of(&stored, name).map(|markers| Some((stored, markers))),
            None => Ok(None),
        })),
        _ => None,
    };
    let error = match &stored {
        Some(Err(e)) => Some(e.to_string()),
        _ => None,
    };
    let mut out = Vec::new();
    for group in groups {
        let record = match (&stored, record_need(&group, zone_tracker)) {
            (_, RecordNeed::NotNeeded) | (None, _) => RecordRead::NotRead,
            (Some(Ok(None)), _) => RecordRead::Absent,
            (Some(Ok(Some((stored, markers)))), _) => RecordRead::Read { record: &stored.record, markers },
            (Some(Err(e)), _) if e.is_forbidden() => RecordRead::Forbidden,
            (Some(Err(_)), _) => RecordRead::Unreadable { error: error.as_deref().unwrap_or_default() },
        };
        let gate = match gates {
            Some((gates, checks, namespace)) => Some(gates.gate(namespace, &group, checks, now).await),
            None => None,
        };
        let input = PassInput {
            zone_tracker,
            record,
            budgets: scope,
            health_gate: HealthGating::from_shell(&gate),
            ..PassInput::new(now, &[])
        };
        let mut pass = plan_pass(&group, &input);
        if pass.mirror_due {
            pass = pass.with_mirror(MirrorFindings { waits: mirror_waits(&group), ..Default::default() });
        }
        let mut plan = pass.plan;
        if let Some(why) = pass.failed_closed {
            plan.warnings.push(why);
        }
        crate::rollout::report::add_setting_warnings(&mut plan, &group);
        let record = match &record {
            RecordRead::Read { record, .. } => Some((*record).clone()),
            _ => None,
        };
        let intents = group
            .members
            .iter()
            .flat_map(|m| &m.pods)
            .filter(|p| intents.contains_key(&p.name))
            .map(|p| p.name.clone())
            .collect();
        out.push(Planned { group, plan, record, intents });
    }
    Ok(out)
}

/// Mirror scaling reads the reference resource's `scale` and calls pods: the view does neither.
fn mirror_waits(group: &GroupSnapshot) -> Vec<String> {
    group
        .members
        .iter()
        .filter_map(|m| match &m.sts.scaling.mirror {
            Some(Ok(mirror)) => Some(format!(
                "{}: mirrors replicas from {}/{} (the controller reads its scale subresource; not shown here)",
                m.sts.name, mirror.kind, mirror.name
            )),
            _ => None,
        })
        .collect()
}

/// The summary of one group as planned at `now`.
pub fn summarize(planned: &Planned, now: Timestamp) -> GroupStatus {
    let Planned { group, plan, record, .. } = planned;
    let statefulsets = group
        .members
        .iter()
        .map(|m| {
            let report = statefulset_report(m, now);
            let status = m.sts.status.as_ref();
            StatefulSetStatus {
                name: report.name,
                replicas: report.desired,
                updated: report.updated,
                unavailable: report.unavailable,
                current_revision: status.map(|s| s.current_revision.clone()).unwrap_or_default(),
                update_revision: status.map(|s| s.update_revision.clone()).unwrap_or_default(),
                paused: m.sts.settings.paused,
            }
        })
        .collect();
    GroupStatus {
        group: plan.group.clone(),
        state: plan.state,
        reason: plan.reason.clone(),
        wait: plan.wait.clone(),
        next: plan.actions.clone(),
        statefulsets,
        downscales: downscales(group, record.as_ref(), now),
        progress: None,
        warnings: plan.warnings.clone(),
        scaling_errors: plan.scaling_errors.clone(),
        budgets: Vec::new(),
    }
}

/// How long `status` waits for the budgets' first list.
const BUDGETS_LIST_WAIT: Duration = Duration::from_secs(10);

/// Why `status` shows no budgets.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BudgetsUnknown {
    /// The watch did not list them within `waited`; `why` is the cache's last word on it.
    #[error("not listed within {}s ({why})", waited.as_secs())]
    NotListed { waited: Duration, why: String },
    /// They cannot be read (a refusal: the cache's words say what to grant).
    #[error("{0}")]
    Unreadable(String),
}

/// The budgets as the operator would know them: the first list of their watch, through the operator's own cache
/// (so a missing CRD means none, and a refusal says what to grant). `Err` says why they are not shown.
pub async fn read_budgets<C: DisruptionBudgets>(api: &C) -> Result<Vec<ZpdbConfig>, BudgetsUnknown> {
    let cache = BudgetCache::loading();
    let metrics = ZpdbMetrics::default();
    let mut events = api.watch_disruption_budgets();
    let listed = async {
        while let Some(item) = events.next().await {
            match item {
                Ok(event) => cache.apply(event, &metrics),
                Err(err) => cache.failed(&err, &metrics),
            }
            if !matches!(cache.snapshot(), KnownBudgets::NotLoaded(_)) {
                return;
            }
        }
    };
    let _ = tokio::time::timeout(BUDGETS_LIST_WAIT, listed).await;
    match cache.snapshot() {
        KnownBudgets::Known(budgets) => Ok(budgets),
        KnownBudgets::NotLoaded(why) => Err(BudgetsUnknown::NotListed { waited: BUDGETS_LIST_WAIT, why }),
        KnownBudgets::Unreadable(why) => Err(BudgetsUnknown::Unreadable(why)),
    }
}

/// The budgets that select a pod of `planned`'s group (or one of its StatefulSets).
pub fn budgets_over(planned: &Planned, budgets: &[ZpdbConfig]) -> Vec<BudgetStatus> {
    let group = &planned.group;
    budgets
        .iter()
        .filter(|b| {
            group.members.iter().any(|m| b.selects(&m.sts.labels) || m.pods.iter().any(|p| b.selects(&p.labels)))
        })
        .map(|b| BudgetStatus {
            name: b.name.clone(),
            mode: if b.partition.is_some() { "partition" } else { "zone" },
            max_unavailable: if b.max_unavailable > 0 || b.max_unavailable_percentage <= 0 {
                b.max_unavailable.to_string()
            } else {
                format!("{}%", b.max_unavailable_percentage)
            },
            evictions_in_flight: planned
                .intents
                .iter()
                .filter(|pod| {
                    group.members.iter().flat_map(|m| &m.pods).any(|p| &p.name == *pod && b.selects(&p.labels))
                })
                .cloned()
                .collect(),
        })
        .collect()
}

/// The last downscale of the group (the later of each StatefulSet's `grafana.com/last-downscale` and its entry in
/// the record), and every zone the min time between zone downscales still holds, as the controller and the webhook
/// judge it.
fn downscales(group: &GroupSnapshot, record: Option<&DownscaleRecord>, now: Timestamp) -> Downscales {
    let last = group
        .members
        .iter()
        .filter_map(|m| {
            let annotated = match &m.sts.downscale.last_downscale {
                Some(Ok(at)) => Some(*at),
                _ => None,
            };
            let recorded = record.and_then(|r| r.last_downscaled.get(&m.sts.name).copied());
            annotated.max(recorded).map(|at| (at, m.sts.name.clone()))
        })
        .max()
        .map(|(at, statefulset)| LastDownscale { statefulset, at: format_timestamp(at) });
    let waits = group
        .members
        .iter()
        .filter_map(|m| match check_min_time(group, record, &m.sts.name, now) {
            verdict @ MinTimeVerdict::Wait { until, .. } => Some(DownscaleWait {
                statefulset: m.sts.name.clone(),
                after: format_timestamp(until),
                seconds_left: Duration::try_from(until.duration_since(now)).map(|d| d.as_secs()).unwrap_or(0),
                reason: verdict.describe(),
            }),
            _ => None,
        })
        .collect();
    Downscales { last, waits }
}

/// Keeps each group's progress clock between redraws (`--watch`), as the controller does between passes.
#[derive(Default)]
pub struct Watcher {
    clocks: HashMap<String, ProgressClock>,
}

impl Watcher {
    /// Fills in `status.progress` from the clock of its group, advanced by this view.
    pub fn observe(
        &mut self,
        group: &GroupSnapshot,
        plan: &GroupPlan,
        status: &mut GroupStatus,
        now: Timestamp,
        deadline: Duration,
    ) {
        let clock = ProgressClock::observe(self.clocks.get(&plan.group), group, plan.state, now);
        let without = if plan.state == GroupState::Done { Duration::ZERO } else { clock.without_progress(now) };
        status.progress = Some(ProgressStatus {
            seconds_without_progress: without.as_secs(),
            stuck: judge(&clock, plan, now, deadline).is_some(),
        });
        self.clocks.insert(plan.group.clone(), clock);
    }
}

/// Checks the arguments; the kube config flags are checked by the client.
pub fn check_args(args: &StatusOptions) -> Result<bool, StatusArgError> {
    let json = match args.output.as_str() {
        "text" => false,
        "json" => true,
        other => return Err(StatusArgError::Output(other.to_string())),
    };
    if args.watch && !args.files.is_empty() {
        return Err(StatusArgError::WatchWithFiles);
    }
    if args.now.is_some() && args.files.is_empty() {
        return Err(StatusArgError::NowWithoutFiles);
    }
    if args.watch && args.interval.is_zero() {
        return Err(StatusArgError::ZeroInterval);
    }
    if args.context.is_some() && !args.files.is_empty() {
        return Err(StatusArgError::ContextWithFiles);
    }
    Ok(json)
}
