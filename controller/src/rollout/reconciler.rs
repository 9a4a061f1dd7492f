//! The reconcile loop: watch events in, one planning pass per touched rollout group, the plan's writes out.
//!
//! Owns: the cache (fed by the two watches), the per-group work queue (`queue`: events coalesced, under a per-group pass
//! budget; unfinished groups checked again every `-reconcile.interval`, failed passes retried with exponential
//! backoff from it), the expectations of the
//! controller's own writes, and the group metrics. Every decision comes from `rollout-core`; this module only
//! executes plans, with preconditions, and stops at the first failed write.

mod execute;
mod health_gate;

use crate::cluster::zone_tracker::{StoredRecord, ZoneTrackerError, markers_of, read_record};
use crate::cluster::{ApiError, ClusterApi, ZoneTrackerStore};
use crate::election::LeaderGate;
use crate::ops::events::EventRecorder;
use crate::ops::feature_gate::Gate;
use crate::ops::health::ReadyFlag;
use crate::ops::metrics::Metrics;
use crate::pods::client::{NoPodClient, PodHttpClient};
use crate::rollout::cache::ClusterCache;
use crate::rollout::queue::{PassBudget, WorkQueue};
use crate::rollout::report::{DEFAULT_PROGRESS_DEADLINE, Reports};
use crate::rollout::scaling::{ScalingConfig, mirror_group, write_back};
use crate::zpdb::Zpdb;
use crate::zpdb::decide::decide;
use execute::Executed;
use futures::StreamExt;
use jiff::Timestamp;
use rollout_core::downscale::DownscaleInProgress;
use rollout_core::group::GroupSnapshot;
use rollout_core::health_check::HealthGating;
use rollout_core::zpdb::{BudgetHold, BudgetScope, EvictPod, EvictionRequest, EvictionSettings, KnownBudgets};
use rollout_core::{
    Defences, Expectation, ExpectationLifetimes, GroupState, LiveCheck, PassInput, PendingExpectation, Planner,
    RecordNeed, RecordRead, RolloutPlanner, ZoneTracker, expectation_after_expiry, plan_pass_with, record_need,
};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use thiserror::Error;
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct ReconcilerConfig {
    /// `-reconcile.interval`, the reference's poll period: a group that is not done is checked again this often
    /// without events (so time-based conditions such as minReadySeconds and expiring expectations are noticed), and
    /// a failed pass is first retried after it (then with exponential backoff). Below one second it acts as one
    /// second. It never delays a pass that an event asks for.
    pub interval: Duration,
    /// How long to wait after an event for more events of the same group. None by default: the loop applies every
    /// event already delivered before it runs a pass, so events that arrive together are one pass, and the pass
    /// budget holds back a longer storm; any wait here would add to every reaction.
    pub debounce: Duration,
    /// Per-group pass budget, against event storms.
    pub pass_budget: PassBudget,
    /// How long an unobserved write blocks its group before it is given up on.
    pub expectation_ttl: Duration,
    /// The same for a write whose outcome is unknown (the API did not answer): it may or may not have happened, so
    /// it is waited for, but not as long, since it may never show.
    pub unknown_outcome_ttl: Duration,
    /// Largest delay before retrying a failed pass.
    pub max_backoff: Duration,
    /// Every group is reconciled at least this often (the reference's informer resync).
    pub resync: Duration,
    /// How long a claim in the downscale record (a rollout step, a follower's downscale) holds if it is not ended
    /// (the controller died, or a write's outcome is unknown): longer than a request can be in flight (the API
    /// server cuts requests off after 60 s by default).
    pub claim_ttl: Duration,
    /// The defences in depth in force: all of them, but in the harness's tests of each layer alone.
    pub defences: Defences,
}

impl ReconcilerConfig {
    /// The period of re-checks of unfinished groups and the first retry delay: `interval`, at least a second.
    pub fn recheck(&self) -> Duration {
        self.interval.max(Duration::from_secs(1))
    }
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        ReconcilerConfig {
            interval: Duration::from_secs(5),
            debounce: Duration::ZERO,
            pass_budget: PassBudget::default(),
            expectation_ttl: Duration::from_secs(300),
            // Longer than a request can be in flight, so the live check at expiry sees a write that was still on its
            // way.
            unknown_outcome_ttl: REQUEST_BOUND + Duration::from_secs(10),
            max_backoff: Duration::from_secs(60),
            resync: Duration::from_secs(300),
            claim_ttl: Duration::from_secs(90),
            defences: Defences::ALL,
        }
    }
}

/// Why a reconcile of a group failed. The label goes to logs; the group is retried with backoff.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ReconcileError {
    #[error("failed to delete pod {pod}: {source}")]
    DeletePod { pod: String, source: ApiError },
    #[error("failed to update StatefulSet {statefulset}: {source}")]
    UpdateStatus { statefulset: String, source: ApiError },
    #[error("failed to scale StatefulSet {statefulset}: {source}")]
    Scale { statefulset: String, source: ApiError },
    /// A follower's downscale could not be claimed in the group downscale record; nothing was scaled.
    #[error("cannot claim the downscale of StatefulSet {statefulset} in the group downscale record: {source}")]
    DownscaleRecord { statefulset: String, source: ZoneTrackerError },
    /// The group downscale record could not be read, so the pass could not tell whether a downscale is being
    /// prepared; nothing was done.
    #[error("cannot read the group downscale record: {source}")]
    ReadDownscaleRecord { source: ZoneTrackerError },
    /// The core's pass failed closed for another reason; nothing was done.
    #[error("{reason}")]
    FailedClosed { reason: String },
    /// The rollout step could not be claimed in the group downscale record; no pod was deleted.
    #[error("cannot claim the rollout step in the group downscale record: {source}")]
    ClaimRolloutStep { source: ZoneTrackerError },
    /// Leader election is on and this replica's write window has ended: nothing more is written; the controller
    /// stops at the end of its term.
    #[error("not the leader any more: {write} not sent")]
    NotLeader { write: String },
}

impl ReconcileError {
    /// Short, stable label for logs, by what to do about it.
    pub fn kind(&self) -> &'static str {
        match self {
            ReconcileError::DeletePod { source, .. }
            | ReconcileError::UpdateStatus { source, .. }
            | ReconcileError::Scale { source, .. } => source.kind(),
            ReconcileError::DownscaleRecord { source, .. }
            | ReconcileError::ReadDownscaleRecord { source }
            | ReconcileError::ClaimRolloutStep { source } => source.kind(),
            ReconcileError::FailedClosed { .. } => "failed_closed",
            ReconcileError::NotLeader { .. } => "not_leader",
        }
    }

    /// A write of the plan got no answer: it may or may not have been applied.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            ReconcileError::DeletePod { source, .. }
            | ReconcileError::UpdateStatus { source, .. }
            | ReconcileError::Scale { source, .. } => matches!(source, ApiError::Unavailable(_)),
            _ => false,
        }
    }
}

/// The controller: cache, queue, expectations and the planner, driven by [`Controller::run`].
pub struct Controller<C: ClusterApi, P: Planner = RolloutPlanner, H: PodHttpClient = NoPodClient> {
    api: C,
    planner: P,
    config: ReconcilerConfig,
    metrics: Arc<Metrics>,
    cache: ClusterCache,
    queue: WorkQueue,
    expectations: HashMap<String, Vec<PendingExpectation>>,
    failures: HashMap<String, u32>,
    /// What each group's passes tell people (logs when something changes, state metrics, stuck, Events).
    reports: Reports,
    /// Pod calls of delayed downscale.
    pod_client: H,
    /// Replica changes were refused (403), why: due ones are reported as scaling errors instead of blocking the
    /// rollout until their feature gate tries again (the zone tracker's refusal lives in its gate alone).
    scaling_forbidden: Option<String>,
    scaling: ScalingConfig,
    /// ZoneAwarePodDisruptionBudgets honoured before each pod deletion, when given.
    budgets: Option<DeletionBudgets>,
    /// With leader election: asked right before every write; `None` (election off) writes as a single replica.
    leadership: Option<LeaderGate>,
    /// Health-gated zones, when on.
    health_gates: Option<crate::health_check::gates::HealthGates>,
}

/// What the controller needs to judge its own deletions as evictions (reference 5.5).
#[derive(Clone)]
pub struct DeletionBudgets {
    /// The operator's known budgets and eviction serialisation, shared with the pod-eviction webhook.
    pub zpdb: Zpdb,
    /// `-kubernetes.namespace`.
    pub namespace: String,
    /// How long the decision before one deletion may take.
    pub deadline: Duration,
}

impl DeletionBudgets {
    pub fn new(zpdb: Zpdb, namespace: &str) -> Self {
        DeletionBudgets { zpdb, namespace: namespace.to_string(), deadline: Duration::from_secs(10) }
    }

    /// An intent outlives the rest of the decision and then the deletion request, so the pod counts as going until
    /// its deletion has committed (from then on it is terminating, unavailable by itself).
    fn intent_lifetime(&self) -> Duration {
        self.deadline + REQUEST_BOUND
    }
}

/// Runs the controller until `shutdown` resolves. Sets `ready` once the StatefulSet and pod caches have synced.
pub async fn run<C: ClusterApi>(
    api: C,
    config: ReconcilerConfig,
    metrics: Arc<Metrics>,
    ready: ReadyFlag,
    shutdown: impl Future<Output = ()> + Send,
) {
    Controller::new(api, RolloutPlanner, config, metrics).run(ready, shutdown).await
}

fn wall_clock() -> Timestamp {
    Timestamp::now()
}

/// The longest a request to the API server can be in flight (kube-apiserver's default request timeout).
const REQUEST_BOUND: Duration = Duration::from_secs(60);

impl<C: ClusterApi, P: Planner> Controller<C, P> {
    pub fn new(api: C, planner: P, config: ReconcilerConfig, metrics: Arc<Metrics>) -> Self {
        Controller {
            pod_client: NoPodClient,
            scaling: ScalingConfig::default(),
            reports: Reports::new(metrics.clone(), EventRecorder::disabled(), DEFAULT_PROGRESS_DEADLINE),
            api,
            planner,
            metrics,
            cache: ClusterCache::new(),
            queue: WorkQueue::new(config.pass_budget),
            config,
            expectations: HashMap::new(),
            failures: HashMap::new(),
            scaling_forbidden: None,
            budgets: None,
            leadership: None,
            health_gates: None,
        }
    }
}

impl<C: ClusterApi, P: Planner, H: PodHttpClient> Controller<C, P, H> {
    /// The same controller calling pods through `pod_client` (delayed downscale), with the scaling settings.
    pub fn with_scaling<H2: PodHttpClient>(self, pod_client: H2, scaling: ScalingConfig) -> Controller<C, P, H2> {
        Controller {
            api: self.api,
            planner: self.planner,
            config: self.config,
            metrics: self.metrics,
            cache: self.cache,
            queue: self.queue,
            expectations: self.expectations,
            failures: self.failures,
            reports: self.reports,
            scaling_forbidden: self.scaling_forbidden,
            budgets: self.budgets,
            leadership: self.leadership,
            health_gates: self.health_gates,
            pod_client,
            scaling,
        }
    }

    /// The same controller judging each pod it deletes against the ZoneAwarePodDisruptionBudgets, as an eviction
    /// with its `rollout-max-unavailable` standing in for a budget of 0 (reference 5.5).
    pub fn with_budgets(mut self, budgets: DeletionBudgets) -> Self {
        self.budgets = Some(budgets);
        self
    }

    /// The same controller acting only while `gate` says this replica leads: it asks right before every write
    /// (pod deletion, eviction intent, status and replica writes, downscale record writes, pod calls and mirror
    /// write-backs) and stops the pass when the answer is no.
    pub fn with_leadership(mut self, gate: LeaderGate) -> Self {
        self.leadership = Some(gate);
        self
    }

    /// Whether this replica may write now (always, without leader election); the error names the write not sent.
    fn may_write(&self, write: &dyn Fn() -> String) -> Result<(), ReconcileError> {
        match &self.leadership {
            Some(gate) if !gate.may_write() => Err(ReconcileError::NotLeader { write: write() }),
            _ => Ok(()),
        }
    }

    /// The same controller sending its Events to `events` and reporting groups without progress for `deadline` as
    /// stuck (`-events.enabled`, `-rollout.progress-deadline`).
    pub fn with_reporting(mut self, events: EventRecorder, deadline: Duration) -> Self {
        self.reports = self.reports.with(events, deadline);
        self
    }

    pub async fn run(mut self, ready: ReadyFlag, shutdown: impl Future<Output = ()> + Send) {
        let mut sts_events = self.api.watch_statefulsets();
        let mut pod_events = self.api.watch_pods();
        let mut resync = tokio::time::interval(self.config.resync);
        tokio::pin!(shutdown);
        tracing::info!("rollout controller started, waiting for caches to sync");
        loop {
            let next_due = self.queue.next_due();
            let synced = self.cache.is_synced();
            tokio::select! {
                biased;
                _ = &mut shutdown => {
                    tracing::info!("rollout controller stopping");
                    return;
                }
                event = sts_events.next() => match event {
                    Some(Ok(event)) => {
                        let touched = self.cache.apply_statefulset_event(event);
                        self.after_event(touched, &ready);
                    }
                    Some(Err(err)) => tracing::warn!(error = %err, "StatefulSet watch error; the watch resumes"),
                    None => {
                        tracing::error!("StatefulSet watch ended unexpectedly; restarting it");
                        sts_events = self.api.watch_statefulsets();
                    }
                },
                event = pod_events.next() => match event {
                    Some(Ok(event)) => {
                        let touched = self.cache.apply_pod_event(event);
                        self.after_event(touched, &ready);
                    }
                    Some(Err(err)) => tracing::warn!(error = %err, "pod watch error; the watch resumes"),
                    None => {
                        tracing::error!("pod watch ended unexpectedly; restarting it");
                        pod_events = self.api.watch_pods();
                    }
                },
                _ = resync.tick(), if synced => {
                    let now = Instant::now();
                    for group in self.cache.group_names() {
                        self.queue.schedule(&group, now);
                    }
                }
                _ = sleep_until_opt(next_due), if synced && next_due.is_some() => {
                    while let Some(group) = self.queue.pop_due(Instant::now()) {
                        self.reconcile_group(&group).await;
                    }
                }
            }
        }
    }

    fn after_event(&mut self, touched: crate::rollout::cache::TouchedGroups, ready: &ReadyFlag) {
        if !self.cache.is_synced() {
            return;
        }
        if !ready.is_ready() {
            tracing::info!(groups = self.cache.group_names().len(), "caches synced");
            ready.set_ready();
        }
        let at = Instant::now() + self.config.debounce;
        for group in touched {
            self.queue.schedule(&group, at);
        }
    }

    /// One pass over one group: plan on the cache, execute the plan, record expectations, schedule the next pass.
    pub async fn reconcile_group(&mut self, group: &str) {
        let Some(snapshot) = self.cache.group_snapshot(group) else {
            tracing::info!(rollout_group = group, "rollout group no longer exists");
            self.metrics.forget_group(group);
            if let Some(gates) = &self.health_gates {
                gates.forget_group(group);
            }
            self.queue.forget(group);
            self.expectations.remove(group);
            self.failures.remove(group);
            self.reports.forget(group);
            return;
        };
        let started = Instant::now();
        self.metrics.group_reconcile_started(group);
        let now = wall_clock();
        let pending = self.expectations.entry(group.to_string()).or_default();
        let mut expired = Vec::new();
        pending.retain(|e| {
            if e.expectation.is_observed(&snapshot) {
                return false;
            }
            if now >= e.expires_at {
                expired.push(e.clone());
                return false;
            }
            true
        });
        // An expectation that expired unobserved is checked against the live object (see
        // `expectation_after_expiry`).
        for e in expired {
            let check = match self.write_happened(&e.expectation).await {
                Ok(false) => LiveCheck::NotHappened,
                Ok(true) => LiveCheck::Happened,
                Err(error) => {
                    tracing::warn!(rollout_group = group, expectation = %e.expectation.describe(), %error,
                        "cannot tell whether our own write happened; still waiting for the watch");
                    LiveCheck::Unknown
                }
            };
            let description = e.expectation.describe();
            match expectation_after_expiry(e.expectation, check, now, &self.lifetimes()) {
                Some(kept) => {
                    if check == LiveCheck::Happened {
                        tracing::warn!(rollout_group = group, expectation = %description,
                            "our own write happened but the cache has not shown it yet; still waiting for the watch");
                    }
                    self.expectations.entry(group.to_string()).or_default().push(kept);
                }
                None => tracing::warn!(rollout_group = group, expectation = %description,
                    "gave up waiting to observe our own write: the live object shows it did not happen"),
            }
        }
        let gates = self.metrics.gates().clone();
        if self.scaling_forbidden.is_some() && gates.may_try(Gate::Scaling) {
            self.scaling_forbidden = None;
        }
        let zone_tracker = match &self.scaling.zone_tracker_config_map {
            None => ZoneTracker::Off,
            Some(_) if gates.may_try(Gate::ZoneTracker) => ZoneTracker::On,
            Some(_) => ZoneTracker::Forbidden,
        };
        // The record as read, which a rollout step's claim is conditional on.
        let need = record_need(&snapshot, zone_tracker);
        let read = match (need, &self.scaling.zone_tracker_config_map) {
            (RecordNeed::NotNeeded, _) | (_, None) => Ok(None),
            (_, Some(config_map)) => read_record_and_markers(&self.api, config_map).await,
        };
        let read_error = read.as_ref().err().map(ToString::to_string);
        let record = match &read {
            Ok(None) if need == RecordNeed::NotNeeded => RecordRead::NotRead,
            Ok(None) => RecordRead::Absent,
            Ok(Some((stored, markers))) => RecordRead::Read { record: &stored.record, markers },
            Err(error) if error.is_forbidden() => RecordRead::Forbidden,
            Err(_) => RecordRead::Unreadable { error: read_error.as_deref().unwrap_or_default() },
        };
        match &read {
            Err(error) if error.is_forbidden() => self.zone_tracker_refused(error),
            Ok(Some(_)) => gates.granted(Gate::ZoneTracker),
            _ => {}
        }
        // The budgets judge the pass's deletions as they will judge them live (none known: nothing to judge).
        let known = self.budgets.as_ref().map(|b| b.zpdb.budgets.snapshot());
        let budget_view = match &known {
            Some(KnownBudgets::Known(budgets)) if budgets.is_empty() => None,
            Some(_) => Some(self.cache.budget_view()),
            None => None,
        };
        let budgets = match (&known, &budget_view, &self.budgets) {
            (Some(known), Some((statefulsets, pods)), Some(b)) => {
                Some(BudgetScope { known, namespace: &b.namespace, statefulsets, pods })
            }
            _ => None,
        };
        let gate = self.health_gate(&snapshot, now);
        let pending = self.expectations.entry(group.to_string()).or_default();
        let input = PassInput {
            now,
            expectations: pending,
            zone_tracker,
            record,
            scaling_forbidden: self.scaling_forbidden.as_deref(),
            defences: self.config.defences,
            budgets,
            health_gate: HealthGating::from_shell(&gate),
        };
        let mut pass = plan_pass_with(&self.planner, &snapshot, &input);
        self.health_gate_passed(&snapshot, &gate, &pass);
        if let Some(reason) = pass.failed_closed.take() {
            self.reports.planned(&snapshot, &pass.plan, now);
            let err = match read {
                Err(source) => ReconcileError::ReadDownscaleRecord { source },
                Ok(_) => ReconcileError::FailedClosed { reason },
            };
            self.pass_finished(group, started, false, now);
            self.retry_with_backoff(group, &err);
            return;
        }
        let mut write_back_after = None;
        if pass.mirror_due {
            // Mirroring may call pods (delayed downscale): a write like the others.
            if let Err(err) = self.may_write(&|| "the mirror pass's pod calls".to_string()) {
                self.pass_finished(group, started, false, now);
                self.retry_with_backoff(group, &err);
                return;
            }
            let mirror = mirror_group(&self.api, &self.pod_client, &self.scaling, &snapshot, now).await;
            if let Some(scale) = &mirror.findings.scale {
                write_back_after = mirror.write_back.map(|(resource, name)| (resource, name, scale.to));
            }
            pass = pass.with_mirror(mirror.findings);
        }
        let cleared = std::mem::take(&mut pass.cleared_by_health_check);
        let mut plan = pass.plan;
        for error in &plan.scaling_errors {
            self.metrics.scaling_error(group, &error.statefulset);
        }
        self.reports.planned(&snapshot, &plan, now);
        // A step that replaces pods of a group the prepare-downscale webhook serves is first claimed in the record,
        // conditional on the version this pass read (see `RolloutStepInProgress`).
        let stored = read.as_ref().ok().and_then(|r| r.as_ref()).map(|(stored, _)| stored);
        let executed = self.execute(group, &plan, &snapshot, stored, pass.claims_rollout_step).await;
        self.reports.executed(&snapshot);
        let result = match executed {
            Executed::Replan => {
                tracing::info!(
                    rollout_group = group,
                    "the group downscale record changed since this pass read it; planning again before replacing pods"
                );
                self.pass_finished(group, started, true, now);
                self.queue.schedule(group, Instant::now());
                return;
            }
            Executed::Ended { held, result } => {
                // Held back live although the pass's judgement allowed it (the budgets' pods changed meanwhile):
                // said as the pass would have said it.
                if let Some(hold) = &held {
                    plan.held_by_budget(hold);
                    self.reports.planned(&snapshot, &plan, now);
                } else if result.is_ok() {
                    self.health_gate_cleared(&snapshot, &cleared);
                }
                result
            }
        };
        if let (Ok(()), Some((resource, name, value))) = (&result, write_back_after)
            && self.may_write(&|| format!("the mirror write-back to {name}")).is_ok()
        {
            write_back(&self.api, &resource, &name, value).await;
        }
        if result.is_ok() {
            self.mark_rollout_started(&snapshot, now).await;
        }
        self.pass_finished(group, started, result.is_ok(), now);
        match result {
            Ok(()) => {
                self.failures.remove(group);
                if plan.state != GroupState::Done {
                    self.queue.schedule(group, Instant::now() + self.config.recheck());
                }
            }
            Err(err) => self.retry_with_backoff(group, &err),
        }
    }

    /// Records a pass of `group` that started at `started`, for the reference's group metrics.
    fn pass_finished(&self, group: &str, started: Instant, succeeded: bool, now: Timestamp) {
        self.metrics.group_reconcile_finished(group, started.elapsed(), succeeded, now.as_millisecond() as f64 / 1e3);
    }

    /// A failed pass: retry the group with exponential backoff.
    fn retry_with_backoff(&mut self, group: &str, err: &ReconcileError) {
        let failures = self.failures.entry(group.to_string()).or_insert(0);
        *failures = failures.saturating_add(1);
        let backoff = self
            .config
            .recheck()
            .saturating_mul(1u32 << (*failures - 1).min(16))
            .min(self.config.max_backoff.max(self.config.recheck()));
        tracing::warn!(rollout_group = group, error = %err, kind = err.kind(),
            retry_in = ?backoff, "reconcile failed");
        self.queue.schedule(group, Instant::now() + backoff);
    }

    /// Judges the deletion of `pod` as an eviction under the budgets (when the controller honours them): `Some` with
    /// the reason when it must wait. An allowed deletion leaves its intent on the pod, which goes with the pod.
    async fn budget_denies(&self, snapshot: &GroupSnapshot, statefulset: &str, pod: &str) -> Option<BudgetHold> {
        let budgets = self.budgets.as_ref()?;
        let member = snapshot.member(statefulset)?;
        let sts = &member.sts;
        let rollout_max_unavailable = sts.settings.max_unavailable.resolve(sts.replicas);
        let request = EvictionRequest::for_rollout(pod, &budgets.namespace, rollout_max_unavailable);
        let settings = EvictionSettings {
            namespace: budgets.namespace.clone(),
            serialisation: budgets.zpdb.serialisation_mode(),
            intent_lifetime: budgets.intent_lifetime(),
        };
        let deadline = Instant::now() + budgets.deadline;
        let clock = wall_clock;
        let answer =
            decide(&self.api, &budgets.zpdb, EvictPod::new(request, settings), &clock, deadline, budgets.deadline)
                .await;
        if answer.allowed()
            && let Some(warning) = answer.verdict.warnings.first()
        {
            tracing::debug!(pod = %pod, %warning, "deletion allowed by the budgets");
        }
        (!answer.allowed()).then(|| BudgetHold::from_denial(statefulset, pod, &answer))
    }

    fn lifetimes(&self) -> ExpectationLifetimes {
        ExpectationLifetimes { applied: self.config.expectation_ttl, unknown: self.config.unknown_outcome_ttl }
    }

    /// The zone tracker's ConfigMap was refused: its feature gate says so once; rollouts go on without it.
    fn zone_tracker_refused(&mut self, error: &ZoneTrackerError) {
        self.metrics.gates().refused(Gate::ZoneTracker, error);
    }

    /// Sets `status.currentRevision` of `statefulset` with an UPDATE of its status subresource (what the real
    /// deployments grant), conditional on the resourceVersion the plan was made from, so a StatefulSet that moved on
    /// since the plan is a conflict (re-plan), never overwritten. The rest of the status is the object's at that
    /// resourceVersion: the one the watch delivered when the cache still holds it (no read, one round trip less on
    /// every rollout step that ends a zone), else the live object, read first.
    async fn update_current_revision(
        &self,
        statefulset: &str,
        revision: &str,
        planned_from: &str,
        watched: Option<k8s_openapi::api::apps::v1::StatefulSet>,
    ) -> Result<k8s_openapi::api::apps::v1::StatefulSet, ReconcileError> {
        let failed = |source| ReconcileError::UpdateStatus { statefulset: statefulset.to_string(), source };
        let mut object = match watched {
            Some(watched) => watched,
            None => {
                let Some(live) = self.api.get_statefulset(statefulset).await.map_err(failed)? else {
                    return Err(failed(ApiError::NotFound(format!("statefulsets.apps \"{statefulset}\" not found"))));
                };
                live
            }
        };
        if object.metadata.resource_version.as_deref() != Some(planned_from) {
            return Err(failed(ApiError::Conflict(format!(
                "statefulset {statefulset} moved on since the plan (resourceVersion {planned_from} -> {})",
                object.metadata.resource_version.as_deref().unwrap_or("none")
            ))));
        }
        object.status.get_or_insert_with(Default::default).current_revision = Some(revision.to_string());
        // Asked right before the write (after the live read, when there is one).
        self.may_write(&|| format!("the status write of statefulset {statefulset}"))?;
        self.api.replace_statefulset_status(&object).await.map_err(failed)
    }

    /// Whether a write of ours happened, by the live object: a deleted pod is gone, replaced (another uid) or
    /// terminating; a written StatefulSet is gone or at another resourceVersion.
    async fn write_happened(&self, expectation: &Expectation) -> Result<bool, ApiError> {
        match expectation {
            Expectation::PodDeleted { pod, uid, .. } => {
                let pods = self.api.list_pods("").await?;
                let live = pods.iter().find(|p| p.metadata.name.as_deref() == Some(pod.as_str()));
                Ok(live.is_none_or(|p| {
                    p.metadata.uid.as_deref() != Some(uid.as_str()) || p.metadata.deletion_timestamp.is_some()
                }))
            }
            Expectation::StatefulSetWritten { statefulset, previous_resource_version } => {
                let live = self.api.get_statefulset(statefulset).await?;
                Ok(live
                    .is_none_or(|s| s.metadata.resource_version.as_deref() != Some(previous_resource_version.as_str())))
            }
        }
    }

    /// The cache, for tests that feed it events by hand.
    pub fn cache_mut(&mut self) -> &mut ClusterCache {
        &mut self.cache
    }

    pub fn pending_expectations(&self, group: &str) -> &[PendingExpectation] {
        self.expectations.get(group).map_or(&[], Vec::as_slice)
    }

    pub fn is_queued(&self, group: &str) -> bool {
        self.queue.is_queued(group)
    }
}

/// Reads the group downscale record and its in-progress markers (`None`: no record exists yet).
async fn read_record_and_markers<C: ZoneTrackerStore>(
    api: &C,
    config_map: &str,
) -> Result<Option<(StoredRecord, Vec<DownscaleInProgress>)>, ZoneTrackerError> {
    let Some(stored) = read_record(api, config_map).await? else { return Ok(None) };
    let markers = markers_of(&stored, config_map)?;
    Ok(Some((stored, markers)))
}

async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
