//! The health gate against a real Prometheus server (Debian's `prometheus` package, which `scripts/tools.sh`
//! installs): the test runs a small exporter on 127.0.0.1 serving each pod's request counters, starts
//! `/usr/bin/prometheus` on 127.0.0.1 scraping it every second (temporary config and data directory), waits for
//! data, and evaluates the example's check end to end with the shell's client, directly and through
//! `plan --prometheus-url`: in namespace `good` every pod fails 1% of its requests and zone b starts; in `bad` the
//! updated zone a fails 40% against the others' 2%, and zone b does not. The server is killed and its directory
//! removed when the test ends, whatever happens.
#![cfg(not(madsim))]

use axum::Router;
use jiff::Timestamp;
use rollout_core::health_check::{CheckResult, GateVerdict, QueryKind, QueryRequest, QueryResult};
use rollout_operator::commands::plan::{Objects, PlanArgs, execute};
use rollout_operator::health_check::evaluate::evaluate_gate;
use rollout_operator::health_check::http::HyperTransport;
use rollout_operator::health_check::offline::health_checks;
use rollout_operator::health_check::prometheus::PrometheusClient;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/gated-by-health-check.yaml");
const PROMETHEUS: &str = "/usr/bin/prometheus";
/// Requests per second of every pod.
const RATE: f64 = 100.0;

/// The failed share of a pod's requests: namespace `bad` has a bad zone a.
fn error_ratio(namespace: &str, pod: &str) -> f64 {
    match (namespace, pod.contains("-zone-a-")) {
        ("bad", true) => 0.4,
        ("bad", false) => 0.02,
        _ => 0.01,
    }
}

/// Counters that grow at the pods' rates since the exporter started (so every scrape sees exact rates).
fn exposition(started: Instant) -> String {
    let seconds = started.elapsed().as_secs_f64() + 1.0;
    let mut text = String::new();
    for namespace in ["good", "bad"] {
        for zone in ["a", "b", "c"] {
            for i in 0..3 {
                let pod = format!("mimir-ingester-zone-{zone}-{i}");
                let ratio = error_ratio(namespace, &pod);
                for (status, share) in [("success", 1.0 - ratio), ("error", ratio)] {
                    text.push_str(&format!(
                        "cortex_request_duration_seconds_count{{namespace=\"{namespace}\",pod=\"{pod}\",status_code=\"{status}\"}} {}\n",
                        RATE * share * seconds
                    ));
                }
            }
        }
    }
    text
}

/// Serves `/metrics` on 127.0.0.1 from a thread of its own; it stops with the test process.
fn start_exporter() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let started = Instant::now();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let router =
                Router::new().route("/metrics", axum::routing::get(move || async move { exposition(started) }));
            axum::serve(listener, router).await.unwrap();
        });
    });
    port
}

/// A Prometheus server, killed and its directory removed on drop.
struct Server {
    child: Child,
    dir: PathBuf,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    fn start(exporter: u16) -> Server {
        assert!(
            Path::new(PROMETHEUS).exists(),
            "{PROMETHEUS} is needed by this test; run scripts/tools.sh to install Debian's prometheus package"
        );
        let dir = std::env::temp_dir().join(format!("rollout-health-check-prometheus-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: pods\n    \
                 static_configs:\n      - targets: ['127.0.0.1:{exporter}']\n"
            ),
        )
        .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(PROMETHEUS)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {PROMETHEUS}: {e}"));
        Server { child, dir, url: format!("http://127.0.0.1:{port}") }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }
}

fn query(promql: &str, at: Timestamp) -> QueryRequest {
    QueryRequest {
        check: "setup".into(),
        kind: QueryKind::Current,
        promql: promql.into(),
        at,
        timeout: Duration::from_secs(5),
        retries: 0,
    }
}

/// Waits (at most a minute) until every series has at least three samples.
fn wait_for_data(runtime: &tokio::runtime::Runtime, client: &PrometheusClient<HyperTransport>, server: &Server) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let promql = "min(count_over_time(cortex_request_duration_seconds_count[1m])) >= 3 and count(cortex_request_duration_seconds_count) == 36";
    loop {
        let answer = runtime.block_on(client.query(&query(promql, Timestamp::now())));
        if matches!(answer, Ok(QueryResult::Vector(ref v)) if !v.is_empty()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no data from Prometheus within a minute ({answer:?}); its log:\n{}",
            server.log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// The example dump in `namespace`, its rollout started at `started_at` and zone a Ready for ten minutes.
fn dump(namespace: &str, started_at: Timestamp, now: Timestamp) -> String {
    let ready = now - jiff::SignedDuration::from_secs(600);
    std::fs::read_to_string(EXAMPLE)
        .unwrap()
        .replace("namespace: mimir", &format!("namespace: {namespace}"))
        .replace("2026-01-01T11:40:00Z", &started_at.to_string())
        .replace("2026-01-01T11:50:00Z", &ready.to_string())
}

fn plan(dump: &str, prometheus: &str, now: Timestamp) -> String {
    let file = std::env::temp_dir().join(format!("rollout-health-check-dump-{}-{}.yaml", std::process::id(), now));
    std::fs::write(&file, dump).unwrap();
    let args = PlanArgs {
        files: vec![file.clone()],
        namespace: None,
        now: Some(now.to_string()),
        output: "text".to_string(),
        prometheus_url: Some(prometheus.to_string()),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
    let _ = std::fs::remove_file(&file);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    String::from_utf8(out).unwrap()
}

#[test]
fn a_real_prometheus_lets_a_good_release_on_and_stops_a_bad_one_after_zone_a() {
    let server = Server::start(start_exporter());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = PrometheusClient::new(HyperTransport::new().unwrap(), &server.url).unwrap();
    wait_for_data(&runtime, &client, &server);
    // The rollout "started" now (whole seconds, as the annotation is written), with data before it.
    let started_at = Timestamp::from_second(Timestamp::now().as_second()).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    let now = Timestamp::now();

    // The client, through the core's evaluation, on the bad namespace.
    let mut objects = Objects::default();
    objects.parse("dump", &dump("bad", started_at, now)).unwrap();
    let checks = health_checks(objects.others.iter());
    let config = checks["mimir-ingester-health"].as_ref().expect("the example's check is valid");
    let views: Vec<_> =
        objects.statefulsets.iter().map(|s| rollout_core::StatefulSetView::from_k8s(s).unwrap()).collect();
    let pods: Vec<_> = objects.pods.iter().map(|p| rollout_core::PodView::from_k8s(p).unwrap()).collect();
    let group = rollout_core::build_groups(views, &pods).remove(0);
    let run = runtime.block_on(evaluate_gate(&client, config, &group, "bad", now, None));
    let CheckResult::Fail { current, baseline, success } = run.records[0].result else {
        panic!("{run:?}\nPrometheus log:\n{}", server.log())
    };
    assert!((current - 0.4).abs() < 1e-6 && (baseline - 0.02).abs() < 1e-6, "{current} {baseline}");
    assert_eq!(success, 0.0);
    assert!(matches!(run.verdict, GateVerdict::Pause { ref check, .. } if check == "request-error-rate"));
    let kinds: Vec<_> = run.durations.iter().map(|(_, kind, _)| *kind).collect();
    assert_eq!(kinds, [QueryKind::Current, QueryKind::Baseline, QueryKind::Success]);

    // `plan --prometheus-url` on both namespaces.
    let good = plan(&dump("good", started_at, now), &server.url, now);
    println!("{good}");
    assert!(good.starts_with("mimir-ingester: progressing: replacing 2 pods of mimir-ingester-zone-b"), "{good}");
    let bad = plan(&dump("bad", started_at, now), &server.url, now);
    println!("{bad}");
    assert!(
        bad.starts_with("mimir-ingester: waiting: StatefulSet mimir-ingester-zone-b does not start rolling"),
        "{bad}"
    );
    assert!(bad.contains("check \"request-error-rate\" failed (current=0.4 baseline=0.02)"), "{bad}");
    assert!(!bad.contains("delete pod"), "{bad}");
}
