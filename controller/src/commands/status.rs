//! `rollout-operator status`: a read-only live view of the rollout groups of a namespace. For each group: each
//! zone's progress (pods updated of desired, unavailable, revisions), what the controller would do next and why it
//! waits, the last downscale and how long a downscale of each zone must still wait, the ZoneAwarePodDisruptionBudgets
//! that cover it (mode, budget, evictions in flight); with `--watch`, how long the group has gone without progress
//! and whether that makes it stuck. `-o json` prints the same for scripts.
//!
//! It runs the controller's own pass (`rollout_core::pass::plan_pass`) on a live read (StatefulSets, pods and, with
//! `-use-zone-tracker`, the group downscale record), with the same kube config flags as the controller; `-f` reads
//! dumps instead, through `review`'s in-memory cluster. Owns the read, the per-group summary and its rendering.
//! Writes nothing anywhere but stdout and stderr.

use crate::cluster::zone_tracker::{markers_of, read_record};
use crate::cluster::{ApiError, DisruptionBudgets, LiveReads, ZoneTrackerStore};
use crate::commands::count;
use crate::commands::plan::{input_notes, load_objects, parse_now};
use crate::commands::review::DumpCluster;
use crate::health_check::offline::{HealthChecks, OfflineGates, health_checks};
use crate::ops::metrics::ZpdbMetrics;
use crate::rollout::report::statefulset_report;
use crate::zpdb::budgets::BudgetCache;
use futures::StreamExt;
use jiff::Timestamp;
use rollout_core::downscale::format_timestamp;
use rollout_core::duration::format_go_duration;
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
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
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

/// The widest the StatefulSet column gets: the longest name Kubernetes accepts (a DNS subdomain).
const MAX_NAME_WIDTH: usize = 253;

/// The view for people: one block per group.
pub fn render_text(view: &NamespaceStatus, deadline: Duration, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "namespace {} at {}", view.namespace, view.at)?;
    if view.groups.is_empty() {
        writeln!(out, "no rollout groups (StatefulSets with a rollout-group label)")?;
    }
    for g in &view.groups {
        writeln!(out)?;
        // What holds the group, when it stopped on it (a group that acts waits only after this pass).
        let wait = match (&g.wait, g.state) {
            (Some(w), GroupState::Waiting | GroupState::Blocked) => match &w.statefulset {
                Some(sts) => format!(": {} ({sts})", w.reason),
                None => format!(": {}", w.reason),
            },
            _ => String::new(),
        };
        writeln!(out, "rollout group {}: {}{wait}", g.group, g.state.as_str())?;
        // The column fits the longest name up to the longest a Kubernetes name may be; a longer one (a dump holds
        // anything) overflows its column instead of asking for a width the formatter refuses (over 65535: a panic).
        let name_width =
            g.statefulsets.iter().map(|s| s.name.len()).max().unwrap_or(0).clamp("STATEFULSET".len(), MAX_NAME_WIDTH);
        writeln!(out, "  {:<name_width$}  {:>7}  {:>11}  REVISION", "STATEFULSET", "UPDATED", "UNAVAILABLE")?;
        for s in &g.statefulsets {
            let revision = if s.current_revision == s.update_revision || s.current_revision.is_empty() {
                s.update_revision.clone()
            } else {
                format!("{} -> {}", s.current_revision, s.update_revision)
            };
            let paused = if s.paused { "  (paused)" } else { "" };
            let updated = format!("{}/{}", s.updated, s.replicas);
            writeln!(out, "  {:<name_width$}  {updated:>7}  {:>11}  {revision}{paused}", s.name, s.unavailable)?;
        }
        if g.next.is_empty() {
            writeln!(out, "  next: nothing; {}", g.reason)?;
        } else {
            writeln!(out, "  next: {}", g.reason)?;
            for action in &g.next {
                match action {
                    Action::DeletePod { statefulset, pod, reason, .. } => {
                        writeln!(out, "    delete pod {pod} of {statefulset}: {reason}")?
                    }
                    Action::SetCurrentRevision { statefulset, revision, .. } => {
                        writeln!(out, "    set currentRevision of {statefulset} to {revision}")?
                    }
                    Action::Scale { statefulset, from, to, .. } => {
                        writeln!(out, "    scale {statefulset} from {from} to {}", count(*to, "replica", "replicas"))?
                    }
                }
            }
        }
        if let Some(last) = &g.downscales.last {
            writeln!(out, "  last downscale: {} at {}", last.statefulset, last.at)?;
        }
        for w in &g.downscales.waits {
            let left = format_go_duration(Duration::from_secs(w.seconds_left));
            writeln!(out, "  downscale of {} waits until after {} ({left} left)", w.statefulset, w.after)?;
        }
        if let Some(p) = &g.progress {
            let without = format_go_duration(Duration::from_secs(p.seconds_without_progress));
            let verdict = if p.stuck {
                format!("STUCK (-rollout.progress-deadline={})", format_go_duration(deadline))
            } else if deadline.is_zero() {
                "stuck detection off".to_string()
            } else {
                format!("stuck after {}", format_go_duration(deadline))
            };
            writeln!(out, "  no progress for {without} while watching; {verdict}")?;
        }
        for b in &g.budgets {
            let in_flight = if b.evictions_in_flight.is_empty() {
                String::new()
            } else {
                format!("; evictions in flight: {}", b.evictions_in_flight.join(", "))
            };
            writeln!(out, "  budget {}: {} mode, maxUnavailable {}{in_flight}", b.name, b.mode, b.max_unavailable)?;
        }
        for w in &g.warnings {
            writeln!(out, "  warning: {w}")?;
        }
    }
    if let Some(why) = &view.budgets_unknown {
        writeln!(out)?;
        writeln!(out, "ZoneAwarePodDisruptionBudgets not shown: {why}")?;
    }
    Ok(())
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

/// One view of `api` as of `now`, rendered into `out`; `watcher` adds progress (for --watch).
pub async fn show<C: LiveReads + ZoneTrackerStore + DisruptionBudgets>(
    api: &C,
    args: &StatusOptions,
    namespace: &str,
    now: Timestamp,
    watcher: Option<&mut Watcher>,
    out: &mut dyn Write,
) -> Result<(), ShowError> {
    show_with_gates(api, args, namespace, now, watcher, out, None).await
}

/// [`show`], with the groups' health gates as [`read_with_gates`] takes them.
pub async fn show_with_gates<C: LiveReads + ZoneTrackerStore + DisruptionBudgets>(
    api: &C,
    args: &StatusOptions,
    namespace: &str,
    now: Timestamp,
    watcher: Option<&mut Watcher>,
    out: &mut dyn Write,
    gates: Option<(&OfflineGates, &HealthChecks)>,
) -> Result<(), ShowError> {
    let json = check_args(args).map_err(ShowError::Args)?;
    let budgets = read_budgets(api).await;
    // Budgets that could not be listed here are shown as unknown, and judge nothing.
    let known = budgets.as_ref().ok().map(|b| KnownBudgets::Known(b.clone()));
    let scope = known.as_ref().map(|known| (known, namespace));
    let gates = gates.map(|(gates, checks)| (gates, checks, namespace));
    let planned = read_with_gates(api, args.zone_tracker_config_map.as_deref(), scope, gates, now)
        .await
        .map_err(ShowError::Read)?;
    let deadline = args.progress_deadline;
    let mut groups = Vec::new();
    let mut watcher = watcher;
    for planned in &planned {
        let mut status = summarize(planned, now);
        status.budgets = budgets_over(planned, budgets.as_deref().unwrap_or_default());
        if let Some(w) = watcher.as_deref_mut() {
            w.observe(&planned.group, &planned.plan, &mut status, now, deadline);
        }
        groups.push(status);
    }
    let view = NamespaceStatus {
        namespace: namespace.to_string(),
        at: format_timestamp(now),
        groups,
        budgets_unknown: budgets.err().map(|e| e.to_string()),
    };
    let written = if json {
        let text = if args.watch { serde_json::to_string(&view) } else { serde_json::to_string_pretty(&view) };
        text.map_err(std::io::Error::other).and_then(|t| writeln!(out, "{t}"))
    } else {
        render_text(&view, deadline, out)
    };
    written.and_then(|()| out.flush()).map_err(ShowError::Write)
}

/// Why one view failed.
#[derive(Debug, Error)]
pub enum ShowError {
    #[error(transparent)]
    Args(StatusArgError),
    #[error(transparent)]
    Read(StatusError),
    #[error("cannot write the view: {0}")]
    Write(std::io::Error),
}

impl ShowError {
    fn exit_code(&self) -> u8 {
        match self {
            ShowError::Args(_) => EXIT_BAD_INPUT,
            ShowError::Read(_) | ShowError::Write(_) => EXIT_FAILED,
        }
    }
}

/// The whole subcommand over dumps (`-f`): no cluster, no runtime beyond this call.
pub fn execute_on_dumps(
    args: &StatusOptions,
    stdin: &mut dyn std::io::Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
    now: Timestamp,
) -> u8 {
    let report = |err: &mut dyn Write, message: &dyn std::fmt::Display, code: u8| {
        let _ = writeln!(err, "error: {message}");
        code
    };
    if let Err(e) = check_args(args) {
        return report(err, &e, EXIT_BAD_INPUT);
    }
    let now = match args.now.as_deref().map(parse_now).transpose() {
        Ok(at) => at.unwrap_or(now),
        Err(e) => return report(err, &e, EXIT_BAD_INPUT),
    };
    let objects = match load_objects(&args.files, stdin) {
        Ok(objects) => objects,
        Err(e) => return report(err, &e, EXIT_BAD_INPUT),
    };
    // The namespace asked for, or the dump's (its first StatefulSet's), or kubectl's default.
    let namespace = Some(args.namespace.clone())
        .filter(|n| !n.is_empty())
        .or_else(|| objects.statefulsets.iter().find_map(|s| s.metadata.namespace.clone()))
        .unwrap_or_else(|| "default".to_string());
    for note in input_notes(&objects, Some(&namespace)) {
        let _ = writeln!(err, "note: {note}");
    }
    let api = DumpCluster::from_objects(&objects, &namespace);
    let gates = match OfflineGates::new(args.prometheus_url.as_deref()) {
        Ok(gates) => gates,
        Err(e) => return report(err, &e, EXIT_BAD_INPUT),
    };
    let in_namespace = |o: &&serde_json::Value| {
        o.pointer("/metadata/namespace").and_then(serde_json::Value::as_str).is_none_or(|ns| ns == namespace)
    };
    let checks = health_checks(objects.others.iter().filter(in_namespace));
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return report(err, &format_args!("cannot start the async runtime: {e}"), EXIT_FAILED),
    };
    match runtime.block_on(show_with_gates(&api, args, &namespace, now, None, out, Some((&gates, &checks)))) {
        Ok(()) => 0,
        Err(e) => report(err, &e, e.exit_code()),
    }
}

/// Entry point of `rollout-operator status`.
pub fn run(args: StatusOptions) -> ExitCode {
    use std::io::IsTerminal;
    let stdout = std::io::stdout();
    // Screen control codes only for a person watching: a file or a pipe gets the frames one after the other.
    let terminal = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = std::io::stderr().lock();
    if !args.files.is_empty() {
        let code = execute_on_dumps(&args, &mut std::io::stdin().lock(), &mut out, &mut err, Timestamp::now());
        return ExitCode::from(code);
    }
    if let Err(e) = check_args(&args) {
        let _ = writeln!(err, "error: {e}");
        return ExitCode::from(EXIT_BAD_INPUT);
    }
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = writeln!(err, "error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    ExitCode::from(runtime.block_on(live(&args, terminal, &mut out, &mut err)))
}

/// The exit status of a client that could not be built: the user's kubeconfig, context or URL is wrong (2), or no
/// configuration could be found or used (1).
fn client_error_code(e: &crate::kube::adapter::AdapterError) -> u8 {
    use crate::kube::adapter::AdapterError;
    match e {
        AdapterError::Kubeconfig { .. } | AdapterError::Context { .. } | AdapterError::ApiUrl { .. } => EXIT_BAD_INPUT,
        _ => EXIT_FAILED,
    }
}

/// The namespace to show: the one given (`-n`, `-kubernetes.namespace`), else the kubeconfig context's (`default`
/// when the context names none), as kubectl picks it.
pub fn namespace_to_show(given: &str, context_namespace: &str) -> String {
    if given.is_empty() { context_namespace.to_string() } else { given.to_string() }
}

/// What `--watch` writes before each view: with text output, a header naming the interval and the namespace; on a
/// terminal, after the codes that clear the screen and home the cursor (as `watch` does); elsewhere (a file, a
/// pipe) after a blank line that separates it from the view before, with no control codes.
pub fn watch_header(text: bool, terminal: bool, first: bool, interval: Duration, namespace: &str) -> String {
    if !text {
        return String::new();
    }
    let clear = match (terminal, first) {
        (true, _) => "\x1b[2J\x1b[H",
        (false, true) => "",
        (false, false) => "\n",
    };
    format!("{clear}every {}: rollout-operator status, namespace {namespace}\n\n", format_go_duration(interval))
}

/// One live view as of now; with `gates` (`--prometheus-url`), the namespace's RolloutHealthChecks are listed and the
/// groups' gates evaluated against that Prometheus.
async fn show_live(
    api: &crate::kube::adapter::KubeCluster,
    args: &StatusOptions,
    namespace: &str,
    watcher: Option<&mut Watcher>,
    out: &mut dyn Write,
    gates: Option<&OfflineGates>,
) -> Result<(), ShowError> {
    let Some(gates) = gates else { return show(api, args, namespace, Timestamp::now(), watcher, out).await };
    let checks =
        crate::health_check::feed::list_once(api).await.map_err(|e| ShowError::Read(StatusError::HealthChecks(e)))?;
    show_with_gates(api, args, namespace, Timestamp::now(), watcher, out, Some((gates, &checks))).await
}

async fn live(args: &StatusOptions, terminal: bool, out: &mut dyn Write, err: &mut dyn Write) -> u8 {
    let limits = crate::kube::layers::RateLimits {
        qps: args.client_qps,
        burst: args.client_burst,
        max_wait: if args.client_timeout.is_zero() { Duration::from_secs(60) } else { args.client_timeout },
    };
    let config = match crate::kube::adapter::cli_config(
        args.config_file.as_deref(),
        args.api_url.as_deref(),
        args.client_timeout,
        args.context.as_deref(),
    )
    .await
    {
        Ok(config) => config,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return client_error_code(&e);
        }
    };
    let namespace = namespace_to_show(&args.namespace, &config.default_namespace);
    let client = match crate::kube::adapter::cli_client(
        config,
        &namespace,
        limits,
        crate::ops::metrics::KubeClientMetrics::default(),
    ) {
        Ok(client) => client,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return client_error_code(&e);
        }
    };
    let api = crate::kube::adapter::KubeCluster::new(client, &namespace);
    let gates = match args.prometheus_url.as_deref().map(|url| OfflineGates::new(Some(url))).transpose() {
        Ok(gates) => gates,
        Err(e) => {
            let _ = writeln!(err, "error: {e}");
            return EXIT_BAD_INPUT;
        }
    };
    if !args.watch {
        return match show_live(&api, args, &namespace, None, out, gates.as_ref()).await {
            Ok(()) => 0,
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                e.exit_code()
            }
        };
    }
    let mut watcher = Watcher::default();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let mut first = true;
    loop {
        let mut frame = watch_header(args.output == "text", terminal, first, args.interval, &namespace).into_bytes();
        first = false;
        match show_live(&api, args, &namespace, Some(&mut watcher), &mut frame, gates.as_ref()).await {
            Ok(()) => {}
            // A failed read is shown and the next one tried: the view keeps watching. JSON lines stay JSON.
            Err(ShowError::Read(e)) if args.output == "text" => {
                let _ = writeln!(frame, "error: {e}");
            }
            Err(ShowError::Read(e)) => {
                let _ = writeln!(err, "error: {e}");
            }
            Err(e) => {
                let _ = writeln!(err, "error: {e}");
                return e.exit_code();
            }
        }
        if out.write_all(&frame).and_then(|()| out.flush()).is_err() {
            // Nobody is reading any more (a closed pipe): stop quietly.
            return 0;
        }
        tokio::select! {
            biased;
            _ = tokio::time::sleep(args.interval) => {}
            _ = &mut interrupted => return 0,
        }
    }
}
