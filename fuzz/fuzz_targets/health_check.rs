//! A RolloutHealthCheck from fuzzer-chosen fields, parsed as the operator and its validating webhook read it, then,
//! when valid, one gate evaluation over fuzzer-chosen pods and times, answered by values, no data, errors or raw
//! Prometheus responses through the shell's reader. Beyond "no crash": the evaluation ends within three queries per
//! check; each query is the check's template with the pods' matchers inserted verbatim (a pod or namespace name is
//! never read as a placeholder) and the side's own range and time; a verdict that pauses names a check whose
//! result pauses, one that passes has none; a soaking gate asks nothing; the substituted scalars read back as the
//! answers given.

#![no_main]

use arbitrary::Arbitrary;
use jiff::Timestamp;
use libfuzzer_sys::fuzz_target;
use rollout_core::health_check::config::{Policy, RANGE, TARGET_MATCHERS, parse};
use rollout_core::health_check::decision::{
    Answer, Evaluation, GateTimes, GateVerdict, QueryKind, QueryRequest, Step, shown,
};
use rollout_core::health_check::targets::{Side, Targets, promql_number};
use rollout_fuzz::health_check::HealthCheckInput;
use rollout_fuzz::text::Text;
use rollout_operator::health_check::prometheus::{HttpResponse, read_answer};

#[derive(Arbitrary, Debug)]
enum AnswerInput {
    Value(f64),
    NoData,
    Error(String),
    /// A response of `/api/v1/query` as Prometheus (or whatever listens at the URL) sent it.
    Response {
        status: u16,
        body: Vec<u8>,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    check: HealthCheckInput,
    namespace: Option<Text>,
    candidate: Vec<Text>,
    stable: Vec<Text>,
    /// Seconds from a fixed moment.
    now: i32,
    baseline: Option<i32>,
    candidates_serving_since: Option<i32>,
    answers: Vec<AnswerInput>,
}

const BASE: i64 = 1_767_268_800; // 2026-01-01T12:00:00Z

fn at(offset: i32) -> Timestamp {
    Timestamp::from_second(BASE + i64::from(offset)).expect("within jiff's range")
}

/// What the substituted query must be: the matchers inserted as they are, `${range}` replaced only in the template.
fn expected_query(template: &str, matchers: &str, range: &str) -> String {
    template.split(TARGET_MATCHERS).map(|part| part.replace(RANGE, range)).collect::<Vec<_>>().join(matchers)
}

fn answer_of(input: &AnswerInput) -> Answer {
    match input {
        AnswerInput::Value(v) => Answer::Value(*v),
        AnswerInput::NoData => Answer::NoData,
        AnswerInput::Error(message) => Answer::Error(message.clone()),
        AnswerInput::Response { status, body } => {
            let response = HttpResponse { status: *status, body: body.clone() };
            match read_answer("http://prometheus:9090/api/v1/query", &response) {
                Ok(result) => result.answer(),
                Err(error) => Answer::Error(error.to_string()),
            }
        }
    }
}

fuzz_target!(|input: Input| {
    let object = input.check.object();
    let Ok(config) = parse(&object) else { return };
    assert!(!config.checks.is_empty(), "a valid check has checks: {object}");
    let targets = Targets {
        namespace: input.namespace.as_ref().map_or_else(|| "ns".to_string(), Text::get),
        candidate: input.candidate.iter().map(Text::get).collect(),
        stable: input.stable.iter().map(Text::get).collect(),
    };
    let times = GateTimes {
        now: at(input.now),
        baseline: input.baseline.map(at),
        candidates_serving_since: input.candidates_serving_since.map(at),
    };
    let mut evaluation = Evaluation::start(&config, targets.clone(), times);
    let mut answers = input.answers.iter().map(answer_of);
    let mut asked: Vec<QueryRequest> = Vec::new();
    let verdict = loop {
        match evaluation.next() {
            Step::Done(verdict) => break verdict,
            Step::Query(request) => {
                assert!(asked.len() < 3 * config.checks.len(), "more than three queries per check: {asked:?}");
                let check = config.checks.iter().find(|c| c.name == request.check).expect("a query of a known check");
                assert!(check.is_active(), "an inactive check was queried: {request:?}");
                match request.kind {
                    QueryKind::Current => {
                        let want =
                            expected_query(&check.query, &targets.matchers(Side::Candidate), &check.current_range);
                        assert_eq!(request.promql, want, "candidate query of {}", check.name);
                        assert_eq!(request.at, times.now);
                    }
                    QueryKind::Baseline => {
                        let want = expected_query(&check.query, &targets.matchers(Side::Stable), &check.baseline_range);
                        assert_eq!(request.promql, want, "baseline query of {}", check.name);
                        assert_eq!(request.at, times.baseline.unwrap_or(times.now));
                    }
                    QueryKind::Success => assert_eq!(request.at, times.now),
                }
                let answer = answers.next().unwrap_or(Answer::NoData);
                asked.push(request);
                evaluation.answer(answer);
            }
        }
    };
    let records = evaluation.records();
    assert!(records.len() <= config.checks.len());
    let pausing = |name: &str| {
        records.iter().any(|r| {
            r.check == name && config.checks.iter().any(|c| c.name == name && r.result.policy(c) == Some(Policy::Pause))
        })
    };
    match &verdict {
        GateVerdict::Pass { .. } => {
            assert!(records.iter().all(|r| !pausing(&r.check)), "passed over a pausing result: {records:?}")
        }
        GateVerdict::Pause { check, .. } => assert!(pausing(check), "paused on {check} without cause: {records:?}"),
        GateVerdict::Soaking { since, until } => {
            assert!(asked.is_empty() && since <= until && times.now < *until, "{verdict:?} after {asked:?}")
        }
        GateVerdict::NoBaselineTime => assert!(asked.is_empty() && times.baseline.is_none() && config.can_pause()),
    }
    assert_eq!(verdict.hold_reason().is_none(), verdict.passes());
    for value in input.answers.iter().filter_map(|a| if let AnswerInput::Value(v) = a { Some(*v) } else { None }) {
        let _ = shown(value);
        let literal = promql_number(value);
        let inner = literal.trim_start_matches('(').trim_end_matches(')');
        let back: f64 = match inner {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            other => other.parse().expect("a PromQL number reads back"),
        };
        assert!(back == value || (back.is_nan() && value.is_nan()), "{value} spelled {literal}");
    }
});
