//! Runs one evaluation of a group's gate against Prometheus: the core's step machine
//! ([`rollout_core::health_check::Evaluation`]) driven with the client's answers, each query timed.

use super::prometheus::{PrometheusClient, Transport};
use jiff::Timestamp;
use rollout_core::GroupSnapshot;
use rollout_core::health_check::targets::{baseline_time, candidates_serving_since};
use rollout_core::health_check::{
    Answer, CheckRecord, Evaluation, GateTimes, GateVerdict, HealthCheckConfig, QueryKind, Step, Targets,
};
use std::time::Duration;

/// What one evaluation found.
#[derive(Debug, Clone, PartialEq)]
pub struct GateRun {
    pub verdict: GateVerdict,
    /// Each check evaluated (or skipped), in order.
    pub records: Vec<CheckRecord>,
    /// How long each query took, attempts and retries included.
    pub durations: Vec<(String, QueryKind, Duration)>,
}

/// Evaluates `config`'s checks for `group` (in `namespace`) as of `now`. The baseline time is the group's
/// `started-at` annotations', else `seen_since` (when the caller first saw the rollout, if it knows).
pub async fn evaluate_gate<T: Transport>(
    client: &PrometheusClient<T>,
    config: &HealthCheckConfig,
    group: &GroupSnapshot,
    namespace: &str,
    now: Timestamp,
    seen_since: Option<Timestamp>,
) -> GateRun {
    let baseline = baseline_time(group).or(seen_since);
    let times = GateTimes { now, baseline, candidates_serving_since: candidates_serving_since(group, now) };
    let mut evaluation = Evaluation::start(config, Targets::of(group, namespace), times);
    let mut durations = Vec::new();
    loop {
        match evaluation.next() {
            Step::Done(verdict) => {
                return GateRun { verdict, records: evaluation.records().to_vec(), durations };
            }
            Step::Query(request) => {
                let started = tokio::time::Instant::now();
                let answer = match client.query(&request).await {
                    Ok(result) => result.answer(),
                    Err(error) => Answer::Error(error.to_string()),
                };
                durations.push((request.check.clone(), request.kind, started.elapsed()));
                evaluation.answer(answer);
            }
        }
    }
}
