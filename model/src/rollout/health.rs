//! The health gate in the rollout model (`health_check`: the revision rolled out is good or bad): the shell's side of
//! health-gated zone progression, a Prometheus that answers the gate's queries from the truth, and what the gate's
//! property reads.
//!
//! Every StatefulSet of the group names one RolloutHealthCheck (a real resource, parsed and validated by the core):
//! one check, the error ratio of a pod set (`${targetMatchers}`), passing when the candidate side's ratio is at most
//! twice the baseline's. The shell is modelled as the controller's `HealthGates` does it: the gate target the pass
//! meets on the controller's cache (`gate_target`), the resource resolved for it (`resolve`), the last verdict kept
//! for the group's `revision_key` (dropped when the key changes, the target goes or the controller restarts), and the
//! pass handed gates on (`HealthGating::On`) with `NotEvaluated` until a verdict for that key exists (no gate at all
//! when no target is in sight: the pass holds a zone start then too). An evaluation is one step: the shell starts it on
//! its cache and the core's step machine (`evaluate`) runs to its verdict against the model's Prometheus.
//!
//! Abstracted, and why it is sound for the gate:
//! - Time is two instants per key: an evaluation before the candidate side has served the soak (the core answers
//!   `Soaking` without a query) and any later one (`now` past the soak). The model's pods carry no Ready transition
//!   time, so the soak counts from the baseline time, the rollout's start: the `started-at` annotation is on every
//!   StatefulSet from the first state (the rollout's first pass writes it, with that pass's time, once its writes
//!   are done; a failed write only holds the gate on `NoBaselineTime` until a later pass lands it).
//! - A pod's error ratio is its revision's: the initial revision and a good one serve at the baseline ratio, a bad
//!   one above twice it. A query's value is the mean over the pods it names that serve (exist and are Ready); none
//!   serving is no data. The current query reads the truth at the evaluation; the baseline query is at the baseline
//!   time, when every pod of the group served the initial revision. The success query is evaluated on the numbers
//!   the core substituted.
//! - Answers are faithful except for `query_faults` faulty evaluations: the candidate pods' series not ingested yet
//!   (the current query has no data) or Prometheus unreachable (every query errors). Re-evaluation is always due (the
//!   cadence passes), so faults end and answers are eventually faithful.
//! - The verdict kept is dropped as soon as the cache stops showing its key, not at the next pass (a held group is
//!   passed again every reconcile interval); after a restart an evaluation may again fall within the soak.
//! - One revision is rolled out (`revisions` is 1): a second one would move the baseline time into the rollout.
//!
//! The shell also keeps the zones the pass reported cleared (a passing evaluation let them roll), dropped at a
//! restart, and hands them to the pass with the gate.
//!
//! The gate's property is judged on the truth when a controller deletion commits: with a bad revision, the
//! controller's deletions reach one zone only (a ghost field remembers which zones they reached). A zone someone else
//! started (an evicted pod recreated at the update revision) is not the controller's to finish.
//!
//! The gate's seams a known bug replaces ([`GateShell`]): which gate the pass meets, how one evaluation runs, and
//! which zones the shell hands as cleared.

use super::*;
use jiff::Timestamp;
use rollout_core::health_check::targets::{baseline_time, candidates_serving_since, started_at_value};
use rollout_core::health_check::{
    Answer, ConfigError, GateState, GateTarget, GateTimes, GateVerdict, GroupGates, HealthCheckConfig, HealthGate,
    QueryKind, QueryRequest, Targets, evaluate, gate_target, resolve, revision_key,
};
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};

/// The RolloutHealthCheck every StatefulSet of the group names.
pub const HEALTH_CHECK: &str = "ingester-errors";
const NAMESPACE: &str = "default";
/// The error ratio of the initial revision and of a good one.
const BASE_RATIO: f64 = 0.01;
/// The error ratio of a bad revision's pods.
const BAD_RATIO: f64 = 0.3;
/// The check's `successQuery` shape, which the model's Prometheus evaluates.
const SUCCESS: (&str, &str) = (" <= bool ", " * 2");

/// The revision rolled out, as its error ratio shows once its pods serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum Health {
    Good,
    Bad,
}

/// One evaluation of the gate: when it runs, and what Prometheus answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Answers {
    /// Before the candidate side has served the soak (only while no verdict is kept for the key).
    WhileSoaking,
    /// After the soak, every query answered from the truth.
    Faithful,
    /// After the soak, the candidate pods' series not ingested yet: the current query has no data (a fault).
    Lagging,
    /// Prometheus cannot be reached: every query errors (a fault).
    Unreachable,
}

/// Which gate the next pass meets, given the zones cleared (production: `rollout_core::health_check::gate_target`).
pub type GateTargeting = fn(&GroupSnapshot, Timestamp, &BTreeSet<String>) -> Option<GateTarget>;
/// The zones the shell hands the pass as cleared, from those a passing evaluation let roll (production: those).
pub type Clearing = fn(&GroupSnapshot, BTreeSet<String>) -> BTreeSet<String>;
/// One evaluation of a gate, asking each query of `ask` (production: `rollout_core::health_check::evaluate`).
pub type GateEvaluator =
    fn(&HealthCheckConfig, Targets, GateTimes, &mut dyn FnMut(&QueryRequest) -> Answer) -> GateVerdict;

/// The shell's seams of the gate.
#[derive(Debug, Clone, Copy)]
pub struct GateShell {
    pub target: GateTargeting,
    pub evaluate: GateEvaluator,
    pub cleared: Clearing,
}

impl GateShell {
    pub const PRODUCTION: GateShell =
        GateShell { target: gate_target, evaluate: production_evaluation, cleared: remembered };
}

fn remembered(_: &GroupSnapshot, cleared: BTreeSet<String>) -> BTreeSet<String> {
    cleared
}

fn production_evaluation(
    config: &HealthCheckConfig,
    targets: Targets,
    times: GateTimes,
    ask: &mut dyn FnMut(&QueryRequest) -> Answer,
) -> GateVerdict {
    evaluate(config, targets, times, ask).0
}

/// A verdict as state: the model's values are never `NaN`, so equality is an equivalence, and the hash follows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict(pub GateVerdict);

impl Eq for Verdict {}

impl Hash for Verdict {
    fn hash<H: Hasher>(&self, state: &mut H) {
        format!("{:?}", self.0).hash(state);
    }
}

/// The shell's last evaluation of the gate the controller's cache shows, for that gate's key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct GateMemo {
    pub key: String,
    pub at: Timestamp,
    pub verdict: Verdict,
}

/// The gate's target on a view and its key (`None`: no gate before the next zone).
pub(super) type ViewGate = Option<(GateTarget, String)>;

/// The RolloutHealthCheck as the shell's watch would parse it.
pub(super) fn health_check_resource() -> Result<HealthCheckConfig, ConfigError> {
    let matchers = "{${targetMatchers}}[${range}]";
    rollout_core::health_check::parse(&serde_json::json!({
        "apiVersion": "rollout-operator.grafana.com/v1",
        "kind": "RolloutHealthCheck",
        "metadata": { "name": HEALTH_CHECK, "namespace": NAMESPACE, "generation": 1 },
        "spec": {
            "selector": { "matchLabels": { keys::ROLLOUT_GROUP: GROUP } },
            "prometheusURL": "http://prometheus:9090",
            "checks": [{
                "name": "error-ratio",
                "query": format!("sum(rate(errors{matchers})) / sum(rate(requests{matchers}))"),
                "successQuery": format!("${{current}}{}${{baseline}}{}", SUCCESS.0, SUCCESS.1),
                "currentRange": "5m",
                "baselineRange": "10m",
            }],
        },
    }))
}

/// The evaluation time of `answers`: within the soak (5 minutes from the baseline time), or past it.
fn evaluation_time(answers: Answers) -> Timestamp {
    let minutes = if answers == Answers::WhileSoaking { 1 } else { 10 };
    BASELINE_TIME + jiff::SignedDuration::from_secs(60 * minutes)
}

/// The rollout's start, the time every `started-at` annotation names.
const BASELINE_TIME: Timestamp = Timestamp::UNIX_EPOCH;

impl RolloutModel {
    /// The StatefulSet as a gated group shows it: naming the RolloutHealthCheck, started at the baseline time.
    pub(super) fn gate_statefulset(&self, s: &mut StatefulSetView, update: u8) {
        if self.config.health_check.is_some() {
            s.annotations.insert(keys::ROLLOUT_HEALTH_CHECK.to_string(), HEALTH_CHECK.to_string());
            let started = started_at_value(REVISIONS[update as usize], BASELINE_TIME);
            s.annotations.insert(keys::ROLLOUT_HEALTH_CHECK_STARTED_AT.to_string(), started);
        }
    }

    /// The zones the shell hands the pass as cleared, from the bits it keeps.
    fn cleared_zones(&self, snapshot: &GroupSnapshot, cleared: u8) -> BTreeSet<String> {
        let kept = (0..ZONES.len()).filter(|z| cleared & (1 << z) != 0).map(|z| ZONES[z].to_string()).collect();
        (self.gate.cleared)(snapshot, kept)
    }

    /// The gate the controller's cache shows with the zones the shell keeps cleared (memoised: many states share a
    /// view).
    pub(super) fn view_gate(&self, view: &World, cleared: u8) -> ViewGate {
        let health = self.health.as_ref()?;
        let memo = (view.clone(), cleared);
        if let Some(hit) = self.gate_targets.lock().ok().and_then(|m| m.get(&memo).cloned()) {
            return hit;
        }
        let snapshot = self.snapshot(view);
        let generation = health.as_ref().map_or(0, |c| c.generation);
        let zones = self.cleared_zones(&snapshot, cleared);
        let gate = (self.gate.target)(&snapshot, Timestamp::UNIX_EPOCH, &zones).map(|target| {
            let key = revision_key(&snapshot, &target.health_check, generation);
            (target, key)
        });
        if let Ok(mut m) = self.gate_targets.lock() {
            m.insert(memo, gate.clone());
        }
        gate
    }

    /// What the shell hands the pass for `snapshot` (whose gate is `view_gate`), with the verdict and clearances
    /// kept.
    pub(super) fn handed_gates(
        &self,
        snapshot: &GroupSnapshot,
        view_gate: &ViewGate,
        memo: Option<&GateMemo>,
        cleared: u8,
    ) -> GroupGates {
        GroupGates { gate: self.handed_gate(snapshot, view_gate, memo), cleared: self.cleared_zones(snapshot, cleared) }
    }

    fn handed_gate(
        &self,
        snapshot: &GroupSnapshot,
        view_gate: &ViewGate,
        memo: Option<&GateMemo>,
    ) -> Option<HealthGate> {
        let (target, key) = view_gate.as_ref()?;
        let name = target.health_check.clone();
        let found = self.health.as_ref().filter(|_| name == HEALTH_CHECK);
        let state = match resolve(snapshot, &target.statefulset, &name, found) {
            Err(why) => GateState::Misconfigured(why),
            Ok(_) => match memo.filter(|m| m.key == *key) {
                Some(memo) => GateState::Evaluated { at: memo.at, verdict: memo.verdict.0.clone() },
                None => GateState::NotEvaluated("being evaluated against http://prometheus:9090".to_string()),
            },
        };
        Some(HealthGate { health_check: name, state })
    }

    /// The evaluations the shell may run now: one is always due while a gate is in sight (the cadence passes).
    pub(super) fn gate_steps(&self, s: &State, steps: &mut Vec<Step>) {
        if self.view_gate(&s.view, s.cleared).is_none() {
            return;
        }
        if s.gate.is_none() {
            steps.push(Step::GateEvaluated(Answers::WhileSoaking));
        }
        steps.push(Step::GateEvaluated(Answers::Faithful));
        if s.query_faults_left > 0 {
            steps.push(Step::GateEvaluated(Answers::Lagging));
            steps.push(Step::GateEvaluated(Answers::Unreachable));
        }
    }

    /// One evaluation, started on the controller's cache and answered from the truth; its verdict is kept.
    pub(super) fn evaluate_gate(&self, s: &mut State, answers: Answers) {
        let (Some((_, key)), Some(Ok(config))) = (self.view_gate(&s.view, s.cleared), self.health.as_ref()) else {
            return;
        };
        if matches!(answers, Answers::Lagging | Answers::Unreachable) {
            s.query_faults_left -= 1;
        }
        let snapshot = self.snapshot(&s.view);
        let now = evaluation_time(answers);
        let times = GateTimes {
            now,
            baseline: baseline_time(&snapshot),
            candidates_serving_since: candidates_serving_since(&snapshot, now),
        };
        let truth = &s.truth;
        let mut ask = |request: &QueryRequest| self.prometheus(truth, answers, request);
        let verdict = (self.gate.evaluate)(config, Targets::of(&snapshot, NAMESPACE), times, &mut ask);
        s.gate = Some(GateMemo { key, at: now, verdict: Verdict(verdict) });
    }

    /// Drops the verdict kept when the cache no longer shows its gate (another key, or no gate in sight).
    pub(super) fn forget_stale_gate(&self, s: &mut State) {
        let shown = self.view_gate(&s.view, s.cleared).map(|(_, key)| key);
        if s.gate.is_some() && shown != s.gate.as_ref().map(|g| g.key.clone()) {
            s.gate = None;
        }
    }

    /// The model's Prometheus answering one query of an evaluation.
    fn prometheus(&self, truth: &World, answers: Answers, request: &QueryRequest) -> Answer {
        if answers == Answers::Unreachable {
            return Answer::Error("connection refused".to_string());
        }
        match request.kind {
            QueryKind::Current if answers == Answers::Lagging => Answer::NoData,
            QueryKind::Current => {
                let bad = self.config.health_check == Some(Health::Bad);
                let ratios: Vec<f64> = pods_named(&request.promql)
                    .filter_map(|(zone, pod)| truth.zones.get(zone as usize)?.pods.get(pod as usize))
                    .filter(|p| p.exists && p.ready)
                    .map(|p| if bad && p.revision > 0 { BAD_RATIO } else { BASE_RATIO })
                    .collect();
                mean(&ratios)
            }
            // At the baseline time every pod of the group served the initial revision.
            QueryKind::Baseline => {
                let served = pods_named(&request.promql)
                    .filter(|(zone, pod)| (*zone as usize) < truth.zones.len() && *pod < self.config.pods);
                mean(&served.map(|_| BASE_RATIO).collect::<Vec<_>>())
            }
            QueryKind::Success => success(&request.promql),
        }
    }

    /// The deletion committing now, with a bad revision: the controller's deletions may reach one zone only.
    pub(super) fn judge_bad_release_deletion(&self, s: &mut State, zone: u8) {
        if self.config.health_check != Some(Health::Bad) {
            return;
        }
        s.rolled_bad |= 1 << zone;
        if s.rolled_bad.count_ones() > 1 {
            s.violations |= violation::BAD_REVISION_STARTS_A_SECOND_ZONE;
        }
    }

    /// The pass on the controller's cache holds a zone back on the gate.
    pub fn held_by_the_gate(&self, s: &State) -> bool {
        self.config.health_check.is_some()
            && self.decide(&s.view, &s.expectations, s.exec.is_none(), s.record, s.gate.as_ref(), s.cleared).3
    }
}

/// The pods a query's `pod=~"..."` matcher names, as (zone, ordinal).
fn pods_named(promql: &str) -> impl Iterator<Item = (u8, u8)> + '_ {
    let regex = promql.split_once("pod=~\"").and_then(|(_, rest)| rest.split_once('"')).map_or("", |(r, _)| r);
    regex.split('|').filter(|name| *name != "^$").filter_map(|name| {
        let (statefulset, ordinal) = name.rsplit_once('-')?;
        Some((zone_index(statefulset)?, ordinal.parse().ok()?))
    })
}

fn mean(ratios: &[f64]) -> Answer {
    if ratios.is_empty() { Answer::NoData } else { Answer::Value(ratios.iter().sum::<f64>() / ratios.len() as f64) }
}

/// `<current> <= bool <baseline> * 2`, as the core substituted it.
fn success(promql: &str) -> Answer {
    let parsed = promql.split_once(SUCCESS.0).and_then(|(current, rest)| {
        let baseline = rest.strip_suffix(SUCCESS.1)?;
        Some((current.trim().parse::<f64>().ok()?, baseline.trim().parse::<f64>().ok()?))
    });
    match parsed {
        Some((current, baseline)) => Answer::Value(if current <= baseline * 2.0 { 1.0 } else { 0.0 }),
        None => Answer::Error(format!("cannot evaluate {promql:?}")),
    }
}
