//! A simulated Prometheus for the health-gated worlds: it scrapes every pod every [`SCRAPE_INTERVAL`] (a Ready pod
//! serves [`REQUESTS_PER_SCRAPE`] requests between scrapes, and fails a share of them that its revision decides:
//! [`GOOD_ERROR_RATIO`], or [`BAD_ERROR_RATIO`] on a bad release), and answers the instant-query API
//! (`/api/v1/query`, POST form or GET) as the operator's Prometheus client asks it, through the product's
//! [`Transport`] port.
//!
//! It understands the queries of the world's RolloutHealthCheck ([`health_check`]) and nothing else: the error
//! ratio over the pods a `pod=~"..."` matcher names, in a `[range]` window ending at `time`, and the success
//! comparison with both scalars substituted. Anything else is a 400 `bad_data`, as a real Prometheus answers a query
//! it cannot parse. With query faults, an answer may be slow (past the check's timeout), refused at the connection
//! (an outage) or empty, drawn from a stream of its own.
//!
//! Must not: read what the operator thinks; it sees only the pods' committed states, as a scrape does.

use crate::environment::objects::{NAMESPACE, is_ready, pod_revision};
use crate::environment::store::SharedStore;
use crate::rng::SimRng;
use jiff::Timestamp;
use rollout_core::health_check::config::{BASELINE, CURRENT, RANGE, TARGET_MATCHERS};
use rollout_core::prom_duration::parse_prom_duration;
use rollout_operator::health_check::prometheus::{HttpRequest, HttpResponse, Transport, TransportError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub const SCRAPE_INTERVAL: Duration = Duration::from_secs(15);
/// How long the world's first pods served before the run, as Prometheus remembers them.
pub const HISTORY: Duration = Duration::from_secs(600);
pub const REQUESTS_PER_SCRAPE: f64 = 150.0;
pub const GOOD_ERROR_RATIO: f64 = 0.01;
pub const BAD_ERROR_RATIO: f64 = 0.3;
/// The world's RolloutHealthCheck, by name (what the StatefulSets' `grafana.com/rollout-health-check` names).
pub const HEALTH_CHECK: &str = "ingester-errors";
pub const PROMETHEUS_URL: &str = "http://prometheus.monitoring:9090";
/// Seeds the query faults.
pub const PROMETHEUS_STREAM: u64 = 0x7072_6f6d_6574_6865;

const ERRORS: &str = "sim_requests_failed_total";
const REQUESTS: &str = "sim_requests_total";

/// The error ratio of one side's pods over a window, as a user would write it.
fn ratio_query() -> String {
    format!(
        "sum(increase({ERRORS}{{{TARGET_MATCHERS}}}[{RANGE}])) / sum(increase({REQUESTS}{{{TARGET_MATCHERS}}}[{RANGE}]))"
    )
}

/// At most twice the baseline's error ratio, plus two percentage points.
fn success_query() -> String {
    format!("{CURRENT} <= bool ({BASELINE} * 2 + 0.02)")
}

/// The world's RolloutHealthCheck: one check of the error ratio, pausing on failure and on no data.
pub fn health_check() -> Value {
    json!({
        "apiVersion": "rollout-operator.grafana.com/v1",
        "kind": "RolloutHealthCheck",
        "metadata": {"name": HEALTH_CHECK, "namespace": NAMESPACE, "generation": 1},
        "spec": {
            "selector": {"matchLabels": {"rollout-group": crate::scenario::GROUP}},
            "prometheusURL": PROMETHEUS_URL,
            "checks": [{
                "name": "error-ratio",
                "query": ratio_query(),
                "successQuery": success_query(),
                "currentRange": "1m",
                "baselineRange": "2m",
                "queryTimeout": "2s",
                "queryRetries": 1,
                "onFailure": "Pause",
                "onNoData": "Pause",
            }],
        },
    })
}

/// Whether a pod of `revision` serves errors: on a bad release, every revision the user pushed (the world starts on
/// revision 0).
pub fn is_bad(revision: &str, bad_release: bool) -> bool {
    bad_release && !revision.ends_with("-r0")
}

/// One scrape's increments of a pod's counters.
#[derive(Debug, Clone, Copy)]
struct Sample {
    at: Timestamp,
    errors: f64,
    requests: f64,
}

#[derive(Debug, Default)]
struct Series {
    /// Per pod name.
    pods: BTreeMap<String, Vec<Sample>>,
}

/// What the simulated Prometheus answered, for the run's report.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueryStats {
    pub answered: u64,
    pub no_data: u64,
    pub refused: u64,
    pub slow: u64,
    pub outages: u64,
}

/// The simulated Prometheus: its scraped series and its query faults. Cheap to clone (shared).
#[derive(Clone)]
pub struct SimPrometheus {
    series: Arc<Mutex<Series>>,
    faults: Option<Arc<Mutex<SimRng>>>,
    /// Set when the fault phase ends: every answer is prompt and whole from then on.
    healed: Arc<std::sync::atomic::AtomicBool>,
    stats: Arc<Mutex<QueryStats>>,
}

impl SimPrometheus {
    /// `query_faults`: answers may be slow, refused or empty, drawn from a stream seeded by `seed`.
    pub fn new(seed: u64, query_faults: bool) -> Self {
        SimPrometheus {
            series: Arc::default(),
            faults: query_faults.then(|| Arc::new(Mutex::new(SimRng::new(seed ^ PROMETHEUS_STREAM)))),
            healed: Arc::default(),
            stats: Arc::default(),
        }
    }

    /// The end of the fault phase: no more query faults.
    pub fn heal(&self) {
        self.healed.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn stats(&self) -> QueryStats {
        *self.stats.lock().unwrap()
    }

    /// Scrapes the store's pods every [`SCRAPE_INTERVAL`], for ever. The pods the world starts with served for
    /// [`HISTORY`] before it (Prometheus has their past, as in a cluster that ran before the rollout).
    pub async fn scrape(self, store: SharedStore) {
        let start = Timestamp::now();
        let scrapes = (HISTORY.as_secs() / SCRAPE_INTERVAL.as_secs()) as i64;
        for k in (1..=scrapes).rev() {
            let at = start - jiff::SignedDuration::from_secs(k * SCRAPE_INTERVAL.as_secs() as i64);
            self.sample(&store, at);
        }
        loop {
            tokio::time::sleep(SCRAPE_INTERVAL).await;
            self.sample(&store, Timestamp::now());
        }
    }

    /// One scrape of every Ready pod, stamped `at`.
    fn sample(&self, store: &SharedStore, at: Timestamp) {
        let st = store.lock().unwrap();
        let mut series = self.series.lock().unwrap();
        for (name, pod) in &st.pods {
            if !is_ready(pod) || pod.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let ratio =
                if is_bad(&pod_revision(pod), st.world.bad_release) { BAD_ERROR_RATIO } else { GOOD_ERROR_RATIO };
            let sample = Sample { at, errors: REQUESTS_PER_SCRAPE * ratio, requests: REQUESTS_PER_SCRAPE };
            series.pods.entry(name.clone()).or_default().push(sample);
        }
    }

    /// The answer to `query` at `at`, as Prometheus' JSON.
    fn evaluate(&self, query: &str, at: Timestamp) -> (u16, Value) {
        if let Some(value) = success_value(query) {
            let result = json!([at.as_second(), number(value)]);
            return (200, json!({"status": "success", "data": {"resultType": "scalar", "result": result}}));
        }
        let Some((pods, range)) = ratio_arguments(query) else {
            let error = format!("1:1: parse error: unexpected query {query:?}");
            return (400, json!({"status": "error", "errorType": "bad_data", "error": error}));
        };
        let from = at - jiff::SignedDuration::try_from(range).unwrap_or_default();
        let (mut errors, mut requests) = (0.0, 0.0);
        let series = self.series.lock().unwrap();
        for pod in &pods {
            for sample in series.pods.get(pod).into_iter().flatten().filter(|s| s.at > from && s.at <= at) {
                errors += sample.errors;
                requests += sample.requests;
            }
        }
        // `sum` over no series is an empty vector; a ratio of nothing to nothing too.
        let result = if requests > 0.0 {
            json!([{"metric": {}, "value": [at.as_second(), number(errors / requests)]}])
        } else {
            json!([])
        };
        (200, json!({"status": "success", "data": {"resultType": "vector", "result": result}}))
    }
}

fn number(value: f64) -> String {
    if value.is_nan() { "NaN".to_string() } else { format!("{value}") }
}

/// The pods of the query's `pod=~"..."` matcher (regex-escaped names joined by `|`; `^$` for none) and its range.
fn ratio_arguments(query: &str) -> Option<(Vec<String>, Duration)> {
    let prefix = format!("sum(increase({ERRORS}{{");
    let rest = query.strip_prefix(&prefix)?;
    let pods = rest.split("pod=~\"").nth(1)?.split('"').next()?;
    let range = rest.split('[').nth(1)?.split(']').next()?;
    let pods = if pods == "^$" { Vec::new() } else { pods.split('|').map(|p| p.replace('\\', "")).collect() };
    Some((pods, parse_prom_duration(range).ok()?))
}

/// The success query's value: `<current> <= bool (<baseline> * 2 + 0.02)`, as 1 or 0.
fn success_value(query: &str) -> Option<f64> {
    let (current, rest) = query.split_once(" <= bool (")?;
    let baseline = rest.strip_suffix(" * 2 + 0.02)")?;
    let read = |text: &str| -> Option<f64> {
        match text.trim_start_matches('(').trim_end_matches(')') {
            "NaN" => Some(f64::NAN),
            "+Inf" => Some(f64::INFINITY),
            "-Inf" => Some(f64::NEG_INFINITY),
            other => other.parse().ok(),
        }
    };
    let (current, baseline) = (read(current)?, read(baseline)?);
    Some(if current <= baseline * 2.0 + 0.02 { 1.0 } else { 0.0 })
}

/// The `query` and `time` of a request (a POST's form, or a GET's query string).
fn arguments(request: &HttpRequest) -> Option<(String, Timestamp)> {
    let form = match &request.form {
        Some(form) => form.as_str(),
        None => request.url.split_once('?')?.1,
    };
    let mut query = None;
    let mut time = None;
    for (key, value) in form_urlencoded::parse(form.as_bytes()) {
        match key.as_ref() {
            "query" => query = Some(value.into_owned()),
            "time" => time = value.parse::<Timestamp>().ok(),
            _ => {}
        }
    }
    Some((query?, time.unwrap_or_else(Timestamp::now)))
}

impl Transport for SimPrometheus {
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, TransportError> {
        let healed = self.healed.load(std::sync::atomic::Ordering::Relaxed);
        let fault = self.faults.as_ref().filter(|_| !healed).map(|rng| {
            let mut r = rng.lock().unwrap();
            (r.range(0..100), r.millis(5, 300))
        });
        let (draw, latency) = fault.unwrap_or((99, Duration::from_millis(20)));
        match draw {
            0..5 => {
                self.stats.lock().unwrap().outages += 1;
                return Err(TransportError::Connect(format!("{PROMETHEUS_URL}: connection refused")));
            }
            5..10 => {
                self.stats.lock().unwrap().slow += 1;
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            _ => tokio::time::sleep(latency).await,
        }
        let Some((query, at)) = arguments(&request) else {
            let body = json!({"status": "error", "errorType": "bad_data", "error": "no query"});
            return Ok(HttpResponse { status: 400, body: body.to_string().into_bytes() });
        };
        let (status, mut body) = self.evaluate(&query, at);
        let mut stats = self.stats.lock().unwrap();
        if status != 200 {
            stats.refused += 1;
        } else if (10..15).contains(&draw) {
            // An answer with no series (a scrape gap, a recording rule not evaluated yet).
            body["data"] = json!({"resultType": "vector", "result": []});
            stats.no_data += 1;
        } else {
            stats.answered += 1;
        }
        Ok(HttpResponse { status, body: body.to_string().into_bytes() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_world_check_is_valid_and_its_queries_are_understood() {
        let config = rollout_core::health_check::parse(&health_check()).expect("a valid RolloutHealthCheck");
        let check = &config.checks[0];
        let matchers = "namespace=\"sim\",pod=~\"ingester-zone-a-0|ingester-zone-a-1\"";
        let query = rollout_core::health_check::targets::substitute_query(&check.query, matchers, "1m");
        let (pods, range) = ratio_arguments(&query).expect("understood");
        assert_eq!(pods, ["ingester-zone-a-0", "ingester-zone-a-1"]);
        assert_eq!(range, Duration::from_secs(60));
        let none = rollout_core::health_check::targets::substitute_query(&check.query, "pod=~\"^$\"", "2m");
        assert_eq!(ratio_arguments(&none).map(|(p, _)| p), Some(Vec::new()));
        let success = rollout_core::health_check::targets::substitute_success(&check.success_query, 0.3, 0.01);
        assert_eq!(success_value(&success), Some(0.0));
        let success = rollout_core::health_check::targets::substitute_success(&check.success_query, 0.01, 0.01);
        assert_eq!(success_value(&success), Some(1.0));
        assert_eq!(success_value("up"), None);
    }
}
