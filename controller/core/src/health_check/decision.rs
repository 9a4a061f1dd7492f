//! One evaluation of a RolloutHealthCheck, as a step machine the shell drives with Prometheus' answers: it asks
//! for one instant query at a time ([`Step::Query`]) and ends in a [`GateVerdict`].
//!
//! Per check, in order: `current` (the query over the candidate pods, `${range}` = `currentRange`, at `now`), then
//! `baseline` (over the stable pods, `baselineRange`, at the baseline time), then the success query with both
//! scalars substituted, which must answer 1 (pass) or 0 (fail; anything else fails too). No data on any of the three
//! is the check's `onNoData`; a failure or an error (unreachable, wrong shape) is its `onFailure`. The first check
//! whose policy is `Pause` pauses the gate (later checks are not evaluated); `Warn` records a warning and goes on.
//!
//! Soak: the gate judges nothing before the candidate side has served for the longest `currentRange` of the checks
//! that can pause, counted from the latest Ready transition of a candidate pod (the moment the previous zone was
//! complete). Until then it pauses with [`GateVerdict::Soaking`], so a window never reaches back before the zone
//! served, and a bad zone has had the time the user gave the check to show it. Without a known transition time the
//! soak counts from the baseline time. No baseline time at all pauses ([`GateVerdict::NoBaselineTime`]) unless no check
//! can pause.

use super::config::{Check, HealthCheckConfig, Policy};
use super::targets::{Side, Targets, promql_number, substitute_query, substitute_success};
use crate::downscale::{format_timestamp, time_after};
use jiff::Timestamp;
use std::time::Duration;

/// Which of a check's three queries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum QueryKind {
    Current,
    Baseline,
    Success,
}

impl QueryKind {
    /// The `query_type` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            QueryKind::Current => "current",
            QueryKind::Baseline => "baseline",
            QueryKind::Success => "success",
        }
    }
}

/// An instant query the shell must run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryRequest {
    pub check: String,
    pub kind: QueryKind,
    pub promql: String,
    /// The evaluation time (`time=`).
    pub at: Timestamp,
    /// Per attempt.
    pub timeout: Duration,
    /// Attempts after the first one.
    pub retries: u32,
}

/// The result of an instant query, reduced to its shape.
#[derive(Debug, Clone, PartialEq)]
pub enum QueryResult {
    Scalar(f64),
    /// The samples' values.
    Vector(Vec<f64>),
    /// Any other result type (`matrix`, `string`), by name.
    Other(String),
}

/// One query's answer as the gate reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Value(f64),
    NoData,
    /// Unreachable, timed out, refused, or a result of the wrong shape.
    Error(String),
}

impl QueryResult {
    /// One scalar, or a one-sample vector, is a value; an empty vector or `NaN` (a ratio of nothing to nothing) is no
    /// data; several samples or another type is an error.
    pub fn answer(&self) -> Answer {
        let value = |v: f64| if v.is_nan() { Answer::NoData } else { Answer::Value(v) };
        match self {
            QueryResult::Scalar(v) => value(*v),
            QueryResult::Vector(samples) => match samples.as_slice() {
                [] => Answer::NoData,
                [v] => value(*v),
                more => Answer::Error(format!("expected one sample, got {}", more.len())),
            },
            QueryResult::Other(kind) => Answer::Error(format!("expected a scalar or a vector, got a {kind}")),
        }
    }
}

/// What one check found.
#[derive(Debug, Clone, PartialEq)]
pub enum CheckResult {
    Pass {
        current: f64,
        baseline: f64,
    },
    Fail {
        current: f64,
        baseline: f64,
        success: f64,
    },
    NoData {
        kind: QueryKind,
    },
    Error {
        kind: QueryKind,
        message: String,
    },
    /// `disabled: true`, or every outcome ignored.
    Skipped,
}

impl CheckResult {
    /// The `result` label value.
    pub fn label(&self) -> &'static str {
        match self {
            CheckResult::Pass { .. } => "pass",
            CheckResult::Fail { .. } => "fail",
            CheckResult::NoData { .. } => "no_data",
            CheckResult::Error { .. } => "error",
            CheckResult::Skipped => "skipped",
        }
    }

    /// For people: `check "x" failed (current=0.4 baseline=0.02)`.
    pub fn describe(&self, check: &str) -> String {
        match self {
            CheckResult::Pass { current, baseline } => {
                format!("check {check:?} passed (current={} baseline={})", shown(*current), shown(*baseline))
            }
            CheckResult::Fail { current, baseline, success } => {
                let answered = if *success == 0.0 {
                    String::new()
                } else {
                    format!("; the success query answered {}, not 0 or 1", shown(*success))
                };
                format!("check {check:?} failed (current={} baseline={}{answered})", shown(*current), shown(*baseline))
            }
            CheckResult::NoData { kind } => format!("check {check:?} has no data (its {} query)", kind.as_str()),
            CheckResult::Error { kind, message } => {
                format!("check {check:?} could not be evaluated (its {} query: {message})", kind.as_str())
            }
            CheckResult::Skipped => format!("check {check:?} is disabled"),
        }
    }

    /// What the check's policies make of it: `None` goes on as a pass.
    pub fn policy(&self, check: &Check) -> Option<Policy> {
        match self {
            CheckResult::Pass { .. } | CheckResult::Skipped => None,
            CheckResult::Fail { .. } | CheckResult::Error { .. } => Some(check.on_failure),
            CheckResult::NoData { .. } => Some(check.on_no_data),
        }
        .filter(|p| *p != Policy::Disabled)
    }
}

/// A value for people: six significant digits, so that `0.39999999999999997` reads `0.4`.
pub fn shown(value: f64) -> String {
    if !value.is_finite() || value == 0.0 {
        return promql_number(value);
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = (5 - magnitude).clamp(0, 15) as usize;
    let text = format!("{value:.decimals$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.') } else { &text };
    text.to_string()
}

/// One check evaluated, and the duration of each query it ran as the shell measured it.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRecord {
    pub check: String,
    pub result: CheckResult,
}

/// The gate's decision.
#[derive(Debug, Clone, PartialEq)]
pub enum GateVerdict {
    /// The next zone may start; `warnings` are the `Warn` checks' findings.
    Pass { warnings: Vec<String> },
    /// The next zone waits: the first check whose outcome is `Pause`, and what it found.
    Pause { check: String, detail: String, warnings: Vec<String> },
    /// The candidate side has not served long enough to be judged.
    Soaking { since: Timestamp, until: Timestamp },
    /// No StatefulSet of the group has a `grafana.com/rollout-health-check-started-at` for its update revision.
    NoBaselineTime,
}

impl GateVerdict {
    pub fn passes(&self) -> bool {
        matches!(self, GateVerdict::Pass { .. })
    }

    /// Why the gate holds, for people; `None` when it passes.
    pub fn hold_reason(&self) -> Option<String> {
        match self {
            GateVerdict::Pass { .. } => None,
            GateVerdict::Pause { detail, .. } => Some(detail.clone()),
            GateVerdict::Soaking { since, until } => Some(format!(
                "the updated pods have served since {}; they are judged from {} on",
                format_timestamp(*since),
                format_timestamp(*until)
            )),
            GateVerdict::NoBaselineTime => Some(format!(
                "no baseline time: no StatefulSet of the group has {} for its update revision",
                crate::keys::ROLLOUT_HEALTH_CHECK_STARTED_AT
            )),
        }
    }

    pub fn warnings(&self) -> &[String] {
        match self {
            GateVerdict::Pass { warnings } | GateVerdict::Pause { warnings, .. } => warnings,
            _ => &[],
        }
    }
}

/// The times an evaluation depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateTimes {
    pub now: Timestamp,
    /// The baseline time (the group's earliest `started-at` for its update revisions).
    pub baseline: Option<Timestamp>,
    /// Since when the candidate side has been complete and Ready.
    pub candidates_serving_since: Option<Timestamp>,
}

/// What the machine asks next.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Query(QueryRequest),
    Done(GateVerdict),
}

#[derive(Debug, Clone, PartialEq)]
enum Stage {
    Current,
    Baseline { current: f64 },
    Success { current: f64, baseline: f64 },
}

/// One evaluation in progress.
#[derive(Debug, Clone)]
pub struct Evaluation {
    config: HealthCheckConfig,
    targets: Targets,
    now: Timestamp,
    baseline_at: Timestamp,
    /// Index of the check being evaluated.
    index: usize,
    stage: Stage,
    records: Vec<CheckRecord>,
    warnings: Vec<String>,
    done: Option<GateVerdict>,
}

impl Evaluation {
    /// Starts an evaluation: it may be decided before any query (no baseline time, still soaking, no active check).
    pub fn start(config: &HealthCheckConfig, targets: Targets, times: GateTimes) -> Evaluation {
        let mut evaluation = Evaluation {
            config: config.clone(),
            targets,
            now: times.now,
            baseline_at: times.baseline.unwrap_or(times.now),
            index: 0,
            stage: Stage::Current,
            records: Vec::new(),
            warnings: Vec::new(),
            done: None,
        };
        // A gate that can only warn never holds the rollout back, not even for want of a baseline time.
        let baseline = match times.baseline {
            Some(baseline) => baseline,
            None if config.can_pause() => {
                evaluation.done = Some(GateVerdict::NoBaselineTime);
                return evaluation;
            }
            None => times.now,
        };
        let soak = config.soak();
        let since = times.candidates_serving_since.unwrap_or(baseline);
        let until = time_after(since, soak);
        if !soak.is_zero() && times.now < until {
            evaluation.done = Some(GateVerdict::Soaking { since, until });
            return evaluation;
        }
        evaluation.skip_inactive();
        evaluation
    }

    /// The checks evaluated so far, in order (the metrics' `evaluations_total`).
    pub fn records(&self) -> &[CheckRecord] {
        &self.records
    }

    /// What to do next.
    pub fn next(&self) -> Step {
        if let Some(verdict) = &self.done {
            return Step::Done(verdict.clone());
        }
        let check = &self.config.checks[self.index];
        let (kind, promql, at) = match &self.stage {
            Stage::Current => (
                QueryKind::Current,
                substitute_query(&check.query, &self.targets.matchers(Side::Candidate), &check.current_range),
                self.now,
            ),
            Stage::Baseline { .. } => (
                QueryKind::Baseline,
                substitute_query(&check.query, &self.targets.matchers(Side::Stable), &check.baseline_range),
                self.baseline_at,
            ),
            Stage::Success { current, baseline } => {
                (QueryKind::Success, substitute_success(&check.success_query, *current, *baseline), self.now)
            }
        };
        Step::Query(QueryRequest {
            check: check.name.clone(),
            kind,
            promql,
            at,
            timeout: check.query_timeout,
            retries: check.query_retries,
        })
    }

    /// Feeds the answer to the query [`Evaluation::next`] asked for. Ignored once the evaluation is done.
    pub fn answer(&mut self, answer: Answer) {
        if self.done.is_some() {
            return;
        }
        let kind = match self.stage {
            Stage::Current => QueryKind::Current,
            Stage::Baseline { .. } => QueryKind::Baseline,
            Stage::Success { .. } => QueryKind::Success,
        };
        let value = match answer {
            Answer::Value(v) => v,
            Answer::NoData => return self.finish_check(CheckResult::NoData { kind }),
            Answer::Error(message) => return self.finish_check(CheckResult::Error { kind, message }),
        };
        match self.stage.clone() {
            Stage::Current => self.stage = Stage::Baseline { current: value },
            Stage::Baseline { current } => self.stage = Stage::Success { current, baseline: value },
            Stage::Success { current, baseline } => {
                let result = if value == 1.0 {
                    CheckResult::Pass { current, baseline }
                } else {
                    CheckResult::Fail { current, baseline, success: value }
                };
                self.finish_check(result);
            }
        }
    }

    fn finish_check(&mut self, result: CheckResult) {
        let check = &self.config.checks[self.index];
        let name = check.name.clone();
        let detail = result.describe(&name);
        let policy = result.policy(check);
        self.records.push(CheckRecord { check: name.clone(), result });
        match policy {
            Some(Policy::Pause) => {
                let warnings = std::mem::take(&mut self.warnings);
                self.done = Some(GateVerdict::Pause { check: name, detail, warnings });
                return;
            }
            Some(Policy::Warn) => self.warnings.push(detail),
            Some(Policy::Disabled) | None => {}
        }
        self.index += 1;
        self.stage = Stage::Current;
        self.skip_inactive();
    }

    /// Records the inactive checks from the current one on as skipped, and ends when none is left.
    fn skip_inactive(&mut self) {
        while let Some(check) = self.config.checks.get(self.index) {
            if check.is_active() {
                return;
            }
            self.records.push(CheckRecord { check: check.name.clone(), result: CheckResult::Skipped });
            self.index += 1;
        }
        self.done = Some(GateVerdict::Pass { warnings: std::mem::take(&mut self.warnings) });
    }
}

/// Runs a whole evaluation against `ask`, a function answering each query (tests, the model, the simulation).
pub fn evaluate(
    config: &HealthCheckConfig,
    targets: Targets,
    times: GateTimes,
    mut ask: impl FnMut(&QueryRequest) -> Answer,
) -> (GateVerdict, Vec<CheckRecord>) {
    let mut evaluation = Evaluation::start(config, targets, times);
    loop {
        match evaluation.next() {
            Step::Done(verdict) => return (verdict, evaluation.records().to_vec()),
            Step::Query(request) => evaluation.answer(ask(&request)),
        }
    }
}
