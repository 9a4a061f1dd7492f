//! The health checks' Prometheus client against a stand-in for the instant-query API (an axum server on
//! 127.0.0.1): POST with GET when POST is refused, retries of transient failures only, typed errors, per-attempt
//! timeouts; and `plan --prometheus-url` on `examples/gated-by-health-check.yaml` (zone a done, zone b not started):
//! a passing check plans zone b's first deletions, a failing one plans none and names the check and its values.
#![cfg(not(madsim))]

use axum::Router;
use axum::http::{Method, StatusCode, Uri};
use jiff::Timestamp;
use rollout_core::health_check::{QueryKind, QueryRequest, QueryResult};
use rollout_operator::commands::plan::{PlanArgs, execute};
use rollout_operator::health_check::http::HyperTransport;
use rollout_operator::health_check::prometheus::{PrometheusClient, QueryError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gated-by-health-check.yaml");

/// One request as the stand-in saw it: method and decoded parameters (from the query string or the form).
type Seen = Arc<Mutex<Vec<(Method, BTreeMap<String, String>)>>>;

fn decode(text: &str) -> BTreeMap<String, String> {
    let unescape = |s: &str| {
        let bytes = s.replace('+', " ").into_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%' && i + 2 < bytes.len() {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8(out).unwrap()
    };
    text.split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (unescape(k), unescape(v)))
        .collect()
}

/// Serves `answer(method, params)` on 127.0.0.1 from a thread of its own (so that synchronous callers, like
/// `plan`, can run their own runtime); it stops when the test process ends.
fn serve<F>(answer: F) -> (String, Seen)
where
    F: Fn(&Method, &BTreeMap<String, String>, usize) -> (u16, String) + Send + Sync + 'static,
{
    let seen: Seen = Arc::default();
    let answer = Arc::new(answer);
    let record = seen.clone();
    let handler = move |method: Method, uri: Uri, body: String| {
        let answer = answer.clone();
        let record = record.clone();
        async move {
            let params = if method == Method::POST { decode(&body) } else { decode(uri.query().unwrap_or("")) };
            let count = {
                let mut seen = record.lock().unwrap();
                seen.push((method.clone(), params.clone()));
                seen.len()
            };
            let (status, body) = answer(&method, &params, count);
            if status == 0 {
                tokio::time::sleep(Duration::from_secs(30)).await;
            }
            (StatusCode::from_u16(status.max(200)).unwrap(), body)
        }
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let router = Router::new().route("/api/v1/query", axum::routing::any(handler));
            axum::serve(listener, router).await.unwrap();
        });
    });
    (url, seen)
}

fn vector(value: &str) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[1767268800,"{value}"]}}]}}}}"#
    )
}

fn request(retries: u32, timeout: Duration) -> QueryRequest {
    QueryRequest {
        check: "c".into(),
        kind: QueryKind::Current,
        promql: "sum(rate(x{pod=~\"a-0|a-1\"}[5m])) / 2 + 1".into(),
        at: "2026-01-01T12:00:00Z".parse().unwrap(),
        timeout,
        retries,
    }
}

fn client(url: &str) -> PrometheusClient<HyperTransport> {
    PrometheusClient::new(HyperTransport::new().unwrap(), url).unwrap()
}

#[tokio::test]
async fn a_query_is_posted_as_a_form_with_its_time() {
    let (url, seen) = serve(|_, _, _| (200, vector("0.25")));
    let result = client(&url).query(&request(0, Duration::from_secs(5))).await;
    assert_eq!(result, Ok(QueryResult::Vector(vec![0.25])));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, Method::POST);
    assert_eq!(seen[0].1["query"], "sum(rate(x{pod=~\"a-0|a-1\"}[5m])) / 2 + 1");
    assert_eq!(seen[0].1["time"], "2026-01-01T12:00:00Z");
}

#[tokio::test]
async fn a_server_that_refuses_post_is_asked_with_get() {
    let (url, seen) =
        serve(
            |method, _, _| {
                if method == Method::POST { (405, "method not allowed".into()) } else { (200, vector("1")) }
            },
        );
    let result = client(&url).query(&request(0, Duration::from_secs(5))).await;
    assert_eq!(result, Ok(QueryResult::Vector(vec![1.0])));
    let seen = seen.lock().unwrap();
    let methods: Vec<_> = seen.iter().map(|(m, _)| m.clone()).collect();
    assert_eq!(methods, [Method::POST, Method::GET]);
    assert_eq!(seen[1].1["query"], seen[0].1["query"]);
}

#[tokio::test]
async fn transient_failures_are_retried_as_the_check_says_and_refused_queries_are_not() {
    let unavailable = |_: &Method, _: &BTreeMap<String, String>, n: usize| {
        if n <= 2 {
            (503, "overloaded".into())
        } else {
            (200, r#"{"status":"success","data":{"resultType":"scalar","result":[1,"0.5"]}}"#.into())
        }
    };
    let (url, seen) = serve(unavailable);
    assert_eq!(client(&url).query(&request(2, Duration::from_secs(5))).await, Ok(QueryResult::Scalar(0.5)));
    assert_eq!(seen.lock().unwrap().len(), 3);
    let (url, seen) = serve(unavailable);
    let err = client(&url).query(&request(1, Duration::from_secs(5))).await.unwrap_err();
    assert!(matches!(err, QueryError::Refused { status: 503, .. }), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 2, "the first attempt and one retry");

    let (url, seen) =
        serve(|_, _, _| (400, r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#.into()));
    let err = client(&url).query(&request(3, Duration::from_secs(5))).await.unwrap_err();
    assert_eq!(err.to_string(), format!("{url}/api/v1/query: HTTP 400: bad_data: parse error"));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn each_attempt_is_bounded_by_the_query_timeout() {
    // Status 0: the stand-in never answers in time.
    let (url, seen) = serve(|_, _, _| (0, String::new()));
    let err = client(&url).query(&request(1, Duration::from_millis(200))).await.unwrap_err();
    assert!(matches!(err, QueryError::Timeout { .. }), "{err}");
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn unreachable_and_unreadable_answers_are_typed_errors() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let err = client(&url).query(&request(0, Duration::from_secs(5))).await.unwrap_err();
    assert!(matches!(err, QueryError::Transport { .. }), "{err}");
    let (url, _) = serve(|_, _, _| (200, "<html>".into()));
    let err = client(&url).query(&request(0, Duration::from_secs(5))).await.unwrap_err();
    assert!(matches!(err, QueryError::Unreadable { .. }), "{err}");
    assert!(PrometheusClient::new(HyperTransport::new().unwrap(), "prometheus:9090").is_err());
}

/// `plan --prometheus-url` against a stand-in answering the example's check: the updated pods' error rate
/// `current`, the others' 0.02, and the success query as PromQL would.
fn plan_against(current: f64) -> (String, String) {
    let (url, _) = serve(move |_, params, _| {
        let query = &params["query"];
        let value = if !query.contains("cortex_") {
            // `<current> <= bool 2 * <baseline> + 0.01`
            let current: f64 = query.split_whitespace().next().unwrap().parse().unwrap();
            if current <= 0.05 { 1.0 } else { 0.0 }
        } else if query.contains("mimir-ingester-zone-a-0") {
            current
        } else {
            0.02
        };
        (200, vector(&value.to_string()))
    });
    let args = PlanArgs {
        files: vec![EXAMPLE.into()],
        namespace: None,
        now: Some("2026-01-01T12:00:00Z".to_string()),
        output: "text".to_string(),
        prometheus_url: Some(url),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

#[test]
fn plan_with_a_passing_check_starts_zone_b() {
    let (out, _) = plan_against(0.01);
    assert!(out.starts_with("mimir-ingester: progressing: replacing 2 pods of mimir-ingester-zone-b: mimir-ingester-zone-b-0, mimir-ingester-zone-b-1"), "{out}");
    assert!(out.contains("  delete pod mimir-ingester-zone-b-0 of StatefulSet mimir-ingester-zone-b"), "{out}");
}

#[test]
fn plan_with_a_failing_check_starts_nothing_and_names_the_check_and_its_values() {
    let (out, _) = plan_against(0.4);
    assert_eq!(
        out,
        "mimir-ingester: waiting: StatefulSet mimir-ingester-zone-b does not start rolling: RolloutHealthCheck \
         mimir-ingester-health (evaluated at 2026-01-01T12:00:00Z): check \"request-error-rate\" failed \
         (current=0.4 baseline=0.02)\n"
    );
}

#[test]
fn plan_without_prometheus_says_the_gate_was_not_evaluated() {
    let args = PlanArgs {
        files: vec![EXAMPLE.into()],
        namespace: None,
        now: Some("2026-01-01T12:00:00Z".to_string()),
        output: "text".to_string(),
        prometheus_url: None,
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert_eq!(execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH), 0);
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("not evaluated here; give --prometheus-url URL"), "{out}");
    assert!(!out.contains("delete pod"), "{out}");
}

fn status_against(current: f64, output: &str) -> String {
    let (url, _) = serve(move |_, params, _| {
        let query = &params["query"];
        let value = if !query.contains("cortex_") {
            let current: f64 = query.split_whitespace().next().unwrap().parse().unwrap();
            if current <= 0.05 { 1.0 } else { 0.0 }
        } else if query.contains("mimir-ingester-zone-a-0") {
            current
        } else {
            0.02
        };
        (200, vector(&value.to_string()))
    });
    let argv = ["rollout-operator", "status", "-f", EXAMPLE, "--now", "2026-01-01T12:00:00Z", "-o", output];
    let argv = argv.into_iter().chain(["--prometheus-url", url.as_str()]);
    let args = match rollout_operator::cli::parse(argv) {
        Ok(rollout_operator::cli::Command::Status { args, .. }) => args.options(),
        other => panic!("expected status, got {other:?}"),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = rollout_operator::commands::status::command::execute_on_dumps(
        &args,
        &mut std::io::empty(),
        &mut out,
        &mut err,
        Timestamp::UNIX_EPOCH,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    String::from_utf8(out).unwrap()
}

#[test]
fn status_on_a_dump_shows_the_wait_on_a_failing_check() {
    let out = status_against(0.4, "json");
    let view: serde_json::Value = serde_json::from_str(&out).unwrap();
    let group = &view["groups"][0];
    assert_eq!(group["wait"]["reason"], "held-by-health-check", "{group:#}");
    assert_eq!(group["wait"]["statefulSet"], "mimir-ingester-zone-b", "{group:#}");
    assert!(
        group["reason"].as_str().unwrap().contains("check \"request-error-rate\" failed (current=0.4 baseline=0.02)")
    );
    assert_eq!(group["next"], serde_json::json!([]));
    let passing = status_against(0.01, "json");
    let view: serde_json::Value = serde_json::from_str(&passing).unwrap();
    assert_eq!(view["groups"][0]["next"][0]["pod"], "mimir-ingester-zone-b-0", "{passing}");
}
