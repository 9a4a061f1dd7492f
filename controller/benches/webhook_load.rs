//! Load benchmark of the admission webhook over real HTTPS on loopback: `/admission/no-downscale` with 64
//! keep-alive connections for 10 seconds (override with WEBHOOK_BENCH_SECONDS / WEBHOOK_BENCH_CONNECTIONS).
//! Prints requests per second, p50/p90/p99/max latency and the error count. Goal on a 2-core machine: p99 under
//! 2 ms and no errors. Run with `cargo bench -p rollout-operator --bench webhook_load`.

#[cfg(not(madsim))]
mod load {
    use http_body_util::{BodyExt, Full};
    use hyper::body::Bytes;
    use jiff::Timestamp;
    use rollout_operator::admission::router::{WebhookSettings, Webhooks, router, system_clock};
    use rollout_operator::commands::plan::Objects;
    use rollout_operator::commands::review::{DumpCluster, RecordingPods};
    use rollout_operator::tls::certificate::{SelfSignedSettings, generate};
    use rollout_operator::tls::listener::{SwappableCert, serve, server_config};
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use serde_json::json;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    fn env_or(name: &str, default: u64) -> u64 {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    fn review_body() -> Bytes {
        // A downscale of a StatefulSet labelled grafana.com/no-downscale=true: decoded, judged and denied.
        let sts = |replicas: i32| {
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "ingester-zone-a", "namespace": "ns",
                         "labels": {"rollout-group": "ingester", "grafana.com/no-downscale": "true"}},
            "spec": {"replicas": replicas, "serviceName": "ingester", "selector": {"matchLabels": {"name": "a"}},
                     "template": {"metadata": {"labels": {"name": "a"}}}}})
        };
        let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "bench", "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
        "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
        "name": "ingester-zone-a", "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "hpa"},
        "object": sts(2), "oldObject": sts(3)}});
        Bytes::from(serde_json::to_vec(&review).unwrap())
    }

    pub fn main() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let seconds = env_or("WEBHOOK_BENCH_SECONDS", 10);
        let connections = env_or("WEBHOOK_BENCH_CONNECTIONS", 64) as usize;
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        runtime.block_on(async move {
            let settings = SelfSignedSettings {
                organization: "bench".into(),
                dns_names: vec!["rollout-operator.ns.svc".into()],
                required_dns_names: vec!["rollout-operator.ns.svc".into()],
                validity: Duration::from_secs(3600),
            };
            let bundle = generate(&settings, Timestamp::now()).unwrap();
            let cert = SwappableCert::new(&bundle).unwrap();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let app = router(Webhooks {
                api: DumpCluster::from_objects(&Objects::default(), "ns"),
                pods: RecordingPods::default(),
                settings: WebhookSettings::new("ns", "cluster.local.", Some("zone-tracker"), Duration::from_secs(10)),
                clock: system_clock(),
            });
            // The router alone, without sockets or TLS: the server-side cost of one admission.
            {
                use tower::ServiceExt;
                let n = 20_000;
                let body = review_body();
                let started = Instant::now();
                for _ in 0..n {
                    let request = http::Request::post("/admission/no-downscale")
                        .header("content-type", "application/json")
                        .body(axum::body::Body::from(body.clone()))
                        .unwrap();
                    let response = app.clone().oneshot(request).await.unwrap();
                    assert_eq!(response.status(), 200);
                    let _ = response.into_body().collect().await.unwrap();
                }
                println!("router only (no socket, no TLS): {:?} per admission", started.elapsed() / n);
            }
            let server = tokio::spawn(serve(listener, server_config(cert).unwrap(), app, Duration::from_secs(10)));

            let mut roots = rustls::RootCertStore::empty();
            for der in CertificateDer::pem_slice_iter(bundle.ca_pem.as_bytes()) {
                roots.add(der.unwrap()).unwrap();
            }
            let client_config = Arc::new(
                rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                    .with_safe_default_protocol_versions()
                    .unwrap()
                    .with_root_certificates(roots)
                    .with_no_client_auth(),
            );
            let body = review_body();
            let start = Instant::now();
            let end = start + Duration::from_secs(seconds);
            let mut workers = Vec::new();
            for _ in 0..connections {
                let client_config = client_config.clone();
                let body = body.clone();
                workers.push(tokio::spawn(async move {
                    let mut latencies = Vec::new();
                    let mut errors = 0u64;
                    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
                    tcp.set_nodelay(true).unwrap();
                    let tls = tokio_rustls::TlsConnector::from(client_config)
                        .connect(ServerName::try_from("rollout-operator.ns.svc").unwrap(), tcp)
                        .await
                        .unwrap();
                    let (mut sender, connection) =
                        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls)).await.unwrap();
                    tokio::spawn(connection);
                    while Instant::now() < end {
                        let request = http::Request::post("/admission/no-downscale")
                            .header("content-type", "application/json")
                            .header("host", "rollout-operator.ns.svc")
                            .body(Full::new(body.clone()))
                            .unwrap();
                        let sent = Instant::now();
                        match sender.send_request(request).await {
                            Ok(response) => {
                                let ok = response.status() == 200;
                                let read = response.into_body().collect().await;
                                if ok && read.is_ok() {
                                    latencies.push(sent.elapsed());
                                } else {
                                    errors += 1;
                                }
                            }
                            Err(_) => {
                                errors += 1;
                                break;
                            }
                        }
                    }
                    (latencies, errors)
                }));
            }
            let mut latencies = Vec::new();
            let mut errors = 0;
            for worker in workers {
                let (l, e) = worker.await.unwrap();
                latencies.extend(l);
                errors += e;
            }
            let took = start.elapsed();
            server.abort();
            latencies.sort();
            let pct = |p: f64| {
                latencies
                    .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                    .copied()
                    .unwrap_or_default()
            };
            println!(
                "webhook_load /admission/no-downscale over HTTPS: {connections} keep-alive connections, {:.1} s",
                took.as_secs_f64()
            );
            println!(
                "requests {} ({:.0}/s), errors {errors}, p50 {:?}, p90 {:?}, p99 {:?}, max {:?}",
                latencies.len(),
                latencies.len() as f64 / took.as_secs_f64(),
                pct(0.50),
                pct(0.90),
                pct(0.99),
                latencies.last().copied().unwrap_or_default()
            );
        });
    }
}

#[cfg(not(madsim))]
fn main() {
    load::main();
}

/// The benchmark needs real sockets and rustls; a `--cfg madsim` build has neither.
#[cfg(madsim)]
fn main() {}
