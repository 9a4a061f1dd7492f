//! The controller's health gates, off the reconcile path: the pass asks [`HealthGates::gate`], which never waits.
//! An evaluation that is due runs in a task of its own (its queries bounded by each check's timeout and retries),
//! and the pass uses the last verdict for the same group, RolloutHealthCheck generation, update revisions and
//! candidate pods until the next one replaces it. A slow or unreachable Prometheus therefore delays no pass, no other
//! group and no webhook: the gated group waits on `held-by-health-check` meanwhile.
//!
//! Cadence: an evaluation is due when there is none for the group's key, when the last one is older than
//! [`CADENCE`], or when the soak it reported has ended. A group the gate holds back is unfinished, so the controller
//! passes it again every `-reconcile.interval`; each such pass picks up a verdict that has arrived and starts the
//! evaluation that has become due.

use super::evaluate::{GateRun, evaluate_gate};
use super::metrics::HealthCheckMetrics;
use super::offline::HealthChecks;
use super::prometheus::{PrometheusClient, Transport};
use crate::ops::events::{EventRecord, EventRecorder, EventType, ObjectRef};
use futures::future::BoxFuture;
use jiff::Timestamp;
use rollout_core::downscale::time_after;
use rollout_core::health_check::{
    GateState, GateTarget, GateVerdict, GroupGates, HealthCheckConfig, HealthGate, clearance_key, gate_target, resolve,
    revision_key, started_at_writes,
};
use rollout_core::{GroupSnapshot, keys};
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How often a gate is evaluated again while it holds a group back (or passes, until the zone starts).
pub const CADENCE: Duration = Duration::from_secs(30);

/// Runs one evaluation: the group, its RolloutHealthCheck, the namespace, the time it is for and when the rollout
/// was first seen.
type Evaluator = Arc<
    dyn Fn(GroupSnapshot, HealthCheckConfig, String, Timestamp, Option<Timestamp>) -> BoxFuture<'static, GateRun>
        + Send
        + Sync,
>;

#[derive(Debug, Clone)]
struct Evaluated {
    at: Timestamp,
    verdict: GateVerdict,
}

#[derive(Debug, Default)]
struct Entry {
    key: String,
    last: Option<Evaluated>,
    running: bool,
}

/// What the process knows of its RolloutHealthChecks.
#[derive(Debug, Default)]
enum Known {
    /// The feed has not said yet: a gated zone start waits as not evaluated, since a process that has just started
    /// cannot tell a gate it has not read from none.
    #[default]
    NotYet,
    /// They cannot be listed (RBAC): the gates are off, as if the feature were.
    Refused,
    Listed(HealthChecks),
}

/// The StatefulSets of a group a passing evaluation let roll, for the group's update revisions (`key`).
#[derive(Debug, Default)]
struct Cleared {
    key: String,
    statefulsets: BTreeSet<String>,
}

#[derive(Debug, Default)]
struct Shared {
    checks: Known,
    /// Per group.
    entries: HashMap<String, Entry>,
    /// Per group. Kept in memory only: a process that restarts while a later zone rolls has that zone evaluated
    /// again before it goes on.
    cleared: HashMap<String, Cleared>,
    /// Per group: when this process first saw its rollout need the update revisions (the clearance key), the
    /// baseline time while no `started-at` annotation gives one (not written yet, or refused).
    first_seen: HashMap<String, (String, Timestamp)>,
    /// Per group: the finding last told in an Event.
    told: HashMap<String, String>,
}

/// The gates of one namespace's groups. Cheap to clone (shared state).
#[derive(Clone)]
pub struct HealthGates {
    shared: Arc<Mutex<Shared>>,
    evaluate: Evaluator,
    namespace: String,
    cadence: Duration,
    metrics: HealthCheckMetrics,
    events: EventRecorder,
}

impl HealthGates {
    /// Gates that query Prometheus through `transport` (each RolloutHealthCheck's own `prometheusURL`).
    pub fn new<T: Transport>(transport: T, namespace: &str) -> Self {
        let evaluate: Evaluator =
            Arc::new(move |group: GroupSnapshot, config: HealthCheckConfig, namespace: String, now, seen_since| {
                let transport = transport.clone();
                Box::pin(async move {
                    match PrometheusClient::new(transport, &config.prometheus_url) {
                        Ok(client) => evaluate_gate(&client, &config, &group, &namespace, now, seen_since).await,
                        // Validation refuses such a URL; a resource admitted without the webhook still gets an answer.
                        Err(error) => GateRun {
                            verdict: GateVerdict::Pause {
                                check: "prometheusURL".to_string(),
                                detail: error.to_string(),
                                warnings: Vec::new(),
                            },
                            records: Vec::new(),
                            durations: Vec::new(),
                        },
                    }
                })
            });
        HealthGates {
            shared: Arc::default(),
            evaluate,
            namespace: namespace.to_string(),
            cadence: CADENCE,
            metrics: HealthCheckMetrics::default(),
            events: EventRecorder::disabled(),
        }
    }

    /// The same gates telling their findings in Events (`-events.enabled`).
    pub fn with_events(mut self, events: EventRecorder) -> Self {
        self.events = events;
        self
    }

    /// The same gates recording into `metrics`.
    pub fn with_metrics(mut self, metrics: HealthCheckMetrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn metrics(&self) -> &HealthCheckMetrics {
        &self.metrics
    }

    /// The same gates re-evaluated every `cadence`.
    pub fn with_cadence(mut self, cadence: Duration) -> Self {
        self.cadence = cadence;
        self
    }

    /// The RolloutHealthChecks of the namespace as the feed now knows them (`None`: they cannot be listed, e.g. refused).
    pub fn set_checks(&self, checks: Option<HealthChecks>) {
        self.lock().checks = checks.map_or(Known::Refused, Known::Listed);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        // A panic while holding the lock leaves plain data behind; carry on with it.
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The gates of `group` for a pass at `now`, without waiting; starts an evaluation when one is due. `None` when
    /// gates are off (the RolloutHealthChecks cannot be listed); without a gate when none sits before the group's
    /// next deletions (none to evaluate: a gated deletion the pass plans anyway is held as not evaluated yet).
    pub fn gate(&self, group: &GroupSnapshot, now: Timestamp) -> Option<GroupGates> {
        let (gates, target) = self.current(group, now)?;
        self.tell(group, gates.gate.as_ref().zip(target.as_ref()));
        Some(gates)
    }

    /// What the pass did with the gates: `held` when it held a gated zone back (`held-by-health-check`), the
    /// gauges' source (a gate evaluated ahead, while a zone is still rolling, holds nothing yet).
    pub fn passed(&self, group: &GroupSnapshot, gates: Option<&GroupGates>, held: bool) {
        let gate = gates.and_then(|g| g.gate.as_ref());
        let misconfigured = matches!(gate.map(|g| &g.state), Some(GateState::Misconfigured(_)));
        self.metrics.gate_state(&group.name, held, misconfigured);
    }

    /// The StatefulSets a passing evaluation let roll, once the pass's deletions are made: kept cleared for the
    /// group's current update revisions.
    pub fn cleared(&self, group: &GroupSnapshot, cleared: &[String]) {
        if !cleared.is_empty() {
            let key = clearance_key(group);
            let mut shared = self.lock();
            let entry = shared.cleared.entry(group.name.clone()).or_default();
            if entry.key != key {
                *entry = Cleared { key, statefulsets: BTreeSet::new() };
            }
            entry.statefulsets.extend(cleared.iter().cloned());
        }
    }

    /// Drops what this process remembers of a rollout group that no longer exists, and its gauges.
    pub fn forget_group(&self, group: &str) {
        let mut shared = self.lock();
        shared.entries.remove(group);
        shared.cleared.remove(group);
        shared.first_seen.remove(group);
        shared.told.remove(group);
        drop(shared);
        self.metrics.forget_group(group);
    }

    /// The Event of the gate's finding, once per finding and group: a failed check, a `Warn` check's finding, a
    /// misconfiguration.
    fn tell(&self, group: &GroupSnapshot, current: Option<(&HealthGate, &GateTarget)>) {
        let finding = current.and_then(|(gate, target)| {
            let name = &gate.health_check;
            let statefulset = &target.statefulset;
            let (type_, reason, note) = match &gate.state {
                GateState::Misconfigured(why) => (
                    EventType::Warning,
                    "RolloutHealthCheckMisconfigured",
                    format!("{why}; StatefulSet {statefulset} rolls without its health check"),
                ),
                GateState::Evaluated { verdict: GateVerdict::Pause { detail, .. }, .. } => (
                    EventType::Warning,
                    "RolloutBlockedByHealthCheck",
                    format!("RolloutHealthCheck {name}: {detail}; StatefulSet {statefulset} {}", target.held()),
                ),
                GateState::Evaluated { verdict: GateVerdict::Pass { warnings }, .. } if !warnings.is_empty() => (
                    EventType::Warning,
                    "RolloutHealthCheckWarn",
                    format!("RolloutHealthCheck {name}: {}", warnings.join("; ")),
                ),
                _ => return None,
            };
            Some((statefulset.clone(), type_, reason, note))
        });
        let mut shared = self.lock();
        let said = finding.as_ref().map(|(_, _, _, note)| note.clone());
        if shared.told.get(&group.name) == said.as_ref() {
            return;
        }
        match said {
            Some(note) => shared.told.insert(group.name.clone(), note),
            None => shared.told.remove(&group.name),
        };
        drop(shared);
        if let Some((statefulset, type_, reason, note)) = finding {
            let uid = group.member(&statefulset).map(|m| m.sts.uid.as_str());
            let regarding = ObjectRef::statefulset(&statefulset, uid);
            self.events.record(EventRecord { regarding, related: None, type_, reason, action: "CheckHealth", note });
        }
    }

    /// `None`: gates off. Else the group's gates and the target their gate is for.
    fn current(&self, group: &GroupSnapshot, now: Timestamp) -> Option<(GroupGates, Option<GateTarget>)> {
        let mut shared = self.lock();
        if let Known::Refused = shared.checks {
            return None;
        }
        let key = clearance_key(group);
        let seen_since = match shared.first_seen.get(&group.name) {
            Some((seen, at)) if *seen == key => Some(*at),
            _ if !started_at_due(group, now).is_empty() => {
                shared.first_seen.insert(group.name.clone(), (key.clone(), now));
                Some(now)
            }
            _ => None,
        };
        let cleared = match shared.cleared.get(&group.name) {
            Some(cleared) if cleared.key == key => cleared.statefulsets.clone(),
            _ => {
                shared.cleared.remove(&group.name);
                BTreeSet::new()
            }
        };
        let Some(target) = gate_target(group, now, &cleared) else {
            shared.entries.remove(&group.name);
            return Some((GroupGates { gate: None, cleared }, None));
        };
        let name = target.health_check.clone();
        let gated = |state| {
            Some((
                GroupGates { gate: Some(HealthGate { health_check: name.clone(), state }), cleared },
                Some(target.clone()),
            ))
        };
        let Known::Listed(checks) = &shared.checks else {
            return gated(GateState::NotEvaluated("the RolloutHealthChecks are not listed yet".to_string()));
        };
        let found = checks.get(&name).cloned();
        let config = match resolve(group, &target.statefulset, &name, found.as_ref()) {
            Ok(config) => config.clone(),
            Err(why) => return gated(GateState::Misconfigured(why)),
        };
        let key = revision_key(group, &name, config.generation);
        let entry = shared.entries.entry(group.name.clone()).or_default();
        if entry.key != key {
            *entry = Entry { key: key.clone(), last: None, running: false };
        }
        if !entry.running && self.due(entry.last.as_ref(), now) {
            entry.running = true;
            self.spawn(group.clone(), config.clone(), key, now, seen_since);
        }
        let state = match &entry.last {
            Some(last) => GateState::Evaluated { at: last.at, verdict: last.verdict.clone() },
            None => GateState::NotEvaluated(format!("being evaluated against {}", config.prometheus_url)),
        };
        gated(state)
    }

    fn due(&self, last: Option<&Evaluated>, now: Timestamp) -> bool {
        match last {
            None => true,
            Some(Evaluated { verdict: GateVerdict::Soaking { until, .. }, .. }) if now >= *until => true,
            Some(last) => now >= time_after(last.at, self.cadence),
        }
    }

    fn spawn(
        &self,
        group: GroupSnapshot,
        config: HealthCheckConfig,
        key: String,
        now: Timestamp,
        seen_since: Option<Timestamp>,
    ) {
        let shared = self.shared.clone();
        let evaluation = (self.evaluate)(group.clone(), config.clone(), self.namespace.clone(), now, seen_since);
        let metrics = self.metrics.clone();
        tokio::spawn(async move {
            let run = evaluation.await;
            metrics.evaluated(&group.name, &run);
            let verdict = run.verdict;
            tracing::info!(rollout_group = %group.name, health_check = %config.name, ?verdict, "health gate evaluated");
            let mut shared = shared.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(entry) = shared.entries.get_mut(&group.name).filter(|e| e.key == key) {
                entry.last = Some(Evaluated { at: now, verdict });
                entry.running = false;
            }
        });
    }
}

/// The `grafana.com/rollout-health-check-started-at` annotations a pass writes: in groups where a StatefulSet names
/// a RolloutHealthCheck, on each StatefulSet whose pods need its update revision and whose annotation does not name
/// it yet (see `rollout_core::health_check::targets::started_at_writes`).
pub fn started_at_due(group: &GroupSnapshot, now: Timestamp) -> Vec<(String, String)> {
    let gated = group.members.iter().any(|m| m.sts.annotations.contains_key(keys::ROLLOUT_HEALTH_CHECK));
    if gated { started_at_writes(group, now) } else { Vec::new() }
}
