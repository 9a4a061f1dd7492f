//! The real prepare-downscale webhook router inside the simulation: two operator replicas, each serving the router
//! (driven with `tower::ServiceExt::oneshot`, as the API server calls it) over its own simulated connection to the API
//! server, receive many simultaneous downscale admissions for different zones of one group, with API latency, slow pods
//! and failing pods. The min time between zone downscales must hold: exactly one zone is admitted (every admission of
//! it may pass), the group downscale record holds that zone only, and no pod of another zone was asked to prepare
//! without being told to cancel. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use axum::body::Body;
use http_body_util::BodyExt;
use jiff::Timestamp;
use madsim::runtime::{Handle, Runtime};
use rollout_core::downscale::DownscaleRecord;
use rollout_core::keys;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router};
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodMethod, PodRequest, PodResponse};
use rollout_sim::environment::apiserver::Knobs;
use rollout_sim::environment::apiserver::ServerEnv;
use rollout_sim::environment::client::SimCluster;
use rollout_sim::environment::objects::NAMESPACE;
use rollout_sim::environment::objects::revision_name;
use rollout_sim::environment::store::SharedStore;
use rollout_sim::environment::store::Store;
use rollout_sim::rng::SimRng;
use rollout_sim::trace::Trace;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt;

const ZONES: [&str; 3] = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];
const RECORD: &str = "rollout-operator-zone-tracker";

/// Pods that take a while to answer; the pods of `failing` refuse to prepare.
#[derive(Clone)]
struct SimPods {
    rng: Arc<Mutex<SimRng>>,
    calls: Arc<Mutex<Vec<(PodMethod, String)>>>,
    failing: Option<String>,
}

impl PodHttpClient for SimPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let delay = self.rng.lock().unwrap().millis(1, 40);
        tokio::time::sleep(delay).await;
        self.calls.lock().unwrap().push((request.method, request.url.clone()));
        if request.method == PodMethod::Post && self.failing.as_ref().is_some_and(|f| request.url.contains(f)) {
            return Ok(PodResponse { status: 500, body: b"not now".to_vec() });
        }
        Ok(PodResponse { status: 200, body: Vec::new() })
    }
}

fn zone_object(name: &str, replicas: i32) -> Value {
    let mut s = rollout_sim::environment::objects::statefulset("ingester", name, 3, 1);
    s.metadata.labels.get_or_insert_default().insert(keys::PREPARE_DOWNSCALE.into(), "true".into());
    let annotations = s.metadata.annotations.get_or_insert_default();
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PORT.into(), "8080".into());
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PATH.into(), "prepare".into());
    annotations.insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
    s.spec.as_mut().unwrap().replicas = Some(replicas);
    let mut v = serde_json::to_value(s).unwrap();
    v["apiVersion"] = json!("apps/v1");
    v["kind"] = json!("StatefulSet");
    v
}

struct Outcome {
    allowed: BTreeSet<String>,
    admissions: Vec<(String, bool)>,
    record: Option<DownscaleRecord>,
    calls: Vec<(PodMethod, String)>,
}

fn run(seed: u64) -> Outcome {
    std::thread::spawn(move || Runtime::with_seed_and_config(seed, madsim::Config::default()).block_on(world(seed)))
        .join()
        .unwrap()
}

async fn world(seed: u64) -> Outcome {
    let handle = Handle::current();
    let rng = Arc::new(Mutex::new(SimRng::new(seed)));
    let store: SharedStore = Arc::new(Mutex::new(Store::new(Trace::new(false), 400)));
    {
        let mut st = store.lock().unwrap();
        for name in ZONES {
            let sts: k8s_openapi::api::apps::v1::StatefulSet = serde_json::from_value(zone_object(name, 3)).unwrap();
            let mut sts = sts;
            sts.status.get_or_insert_default().observed_generation = Some(1);
            st.put_statefulset(sts);
            for i in 0..3 {
                let pod_name = format!("{name}-{i}");
                let uid = st.new_uid(&pod_name);
                st.put_pod(rollout_sim::environment::objects::pod(
                    name,
                    i,
                    &revision_name(name, 0),
                    uid,
                    true,
                    Timestamp::now(),
                ));
            }
        }
    }
    let (crash_tx, _crash_rx) = tokio::sync::mpsc::unbounded_channel();
    let (pause_tx, _pause_rx) = tokio::sync::mpsc::unbounded_channel();
    let env = ServerEnv {
        store: store.clone(),
        knobs: Arc::new(Mutex::new(Knobs { api_delay_ms: (1, 30), ..Knobs::default() })),
        rng: Arc::new(Mutex::new(SimRng::new(rng.lock().unwrap().next_u64()))),
        lost_answers: Arc::new(Mutex::new(SimRng::new(0))),
        crash_tx,
        pause_tx,
        grants: None,
        eviction_webhooks: Vec::new(),
        eviction_certificates: None,
    };
    handle
        .create_node()
        .name("apiserver")
        .ip(rollout_sim::environment::apiserver::address().ip())
        .init(move || rollout_sim::environment::apiserver::serve(env.clone()))
        .build();
    tokio::time::sleep(Duration::from_millis(10)).await;

    let calls = Arc::new(Mutex::new(Vec::new()));
    // Some seeds: one zone's pods refuse to prepare, so its admissions fail and are undone.
    let failing = seed.is_multiple_of(3).then(|| format!("{}-2.", ZONES[(seed as usize / 3) % 3]));
    let admissions = Arc::new(Mutex::new(Vec::new()));
    let mut replicas = Vec::new();
    for replica in 0..2u64 {
        let node = handle
            .create_node()
            .name(format!("operator-{replica}"))
            .ip(IpAddr::from([10, 0, 1, replica as u8 + 1]))
            .build();
        let pods = SimPods {
            rng: Arc::new(Mutex::new(SimRng::new(rng.lock().unwrap().next_u64()))),
            calls: calls.clone(),
            failing: failing.clone(),
        };
        let order: Vec<(usize, u64)> = {
            let mut r = rng.lock().unwrap();
            (0..6).map(|_| (r.range(0..3) as usize, r.range(0..50))).collect()
        };
        let admissions = admissions.clone();
        replicas.push(node.spawn(async move {
            let api = SimCluster::connect(100 + replica).await.expect("bind");
            let now: Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
            let app = router(Webhooks {
                api,
                pods,
                settings: WebhookSettings::new(NAMESPACE, "cluster.local.", Some(RECORD), Duration::from_secs(10)),
                clock: Arc::new(move || now),
            });
            let mut tasks = Vec::new();
            for (i, (zone, delay_ms)) in order.into_iter().enumerate() {
                let app = app.clone();
                let admissions = admissions.clone();
                tasks.push(tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                    let name = ZONES[zone];
                    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                        "uid": format!("r{replica}-{i}"), "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
                        "name": name, "namespace": NAMESPACE, "operation": "UPDATE",
                        "oldObject": zone_object(name, 3), "object": zone_object(name, 1)}});
                    let request = http::Request::post("/admission/prepare-downscale")
                        .header("content-type", "application/json")
                        .body(Body::from(serde_json::to_vec(&review).unwrap()))
                        .unwrap();
                    let response = app.oneshot(request).await.unwrap();
                    assert_eq!(response.status(), 200);
                    let body: Value = serde_json::from_slice(&response.into_body().collect().await.unwrap().to_bytes()).unwrap();
                    assert_eq!(body["response"]["uid"], review["request"]["uid"]);
                    admissions.lock().unwrap().push((name.to_string(), body["response"]["allowed"] == true));
                }));
            }
            for t in tasks {
                t.await.unwrap();
            }
        }));
    }
    for r in replicas {
        r.await.unwrap();
    }
    let admissions = admissions.lock().unwrap().clone();
    let allowed = admissions.iter().filter(|(_, ok)| *ok).map(|(z, _)| z.clone()).collect();
    let record = store.lock().unwrap().config_maps.get(RECORD).map(|cm| {
        DownscaleRecord::from_config_map_data(&cm.data.clone().unwrap_or_default()).expect("readable record")
    });
    let calls = calls.lock().unwrap().clone();
    Outcome { allowed, admissions, record, calls }
}

#[test]
fn concurrent_admissions_on_two_replicas_admit_one_zone_and_record_only_it() {
    let (mut denied, mut undone) = (0, 0);
    for seed in 0..30 {
        let o = run(seed);
        denied += o.admissions.iter().filter(|(_, ok)| !ok).count();
        undone += o.calls.iter().filter(|(m, _)| *m == PodMethod::Delete).count();
        assert_eq!(o.admissions.len(), 12, "seed {seed}");
        assert!(o.allowed.len() <= 1, "seed {seed}: more than one zone admitted within the min time: {:?}", o.allowed);
        let recorded: BTreeSet<String> =
            o.record.as_ref().map(|r| r.last_downscaled.keys().cloned().collect()).unwrap_or_default();
        assert_eq!(recorded, o.allowed, "seed {seed}: the record holds exactly the admitted zone");
        // Every pod told to prepare belongs to the admitted zone, or was told to cancel afterwards.
        for (method, url) in o.calls.iter().filter(|(m, _)| *m == PodMethod::Post) {
            let host = url.split('/').nth(2).unwrap_or_default();
            let zone_admitted = o.allowed.iter().any(|z| host.starts_with(&format!("{z}-")));
            let cancelled = o.calls.iter().any(|(m, u)| *m == PodMethod::Delete && u == url);
            assert!(zone_admitted || cancelled, "seed {seed}: {method:?} {url} was neither admitted nor cancelled");
        }
        if !seed.is_multiple_of(3) {
            assert_eq!(o.allowed.len(), 1, "seed {seed}: with healthy pods some zone is admitted");
        }
    }
    // The seeds really raced and really failed: admissions were denied and failed prepares were undone.
    assert!(denied > 30, "only {denied} denials over 30 seeds");
    assert!(undone > 0, "no failed prepare was undone");
}

#[test]
fn same_seed_same_outcome() {
    let a = run(7);
    let b = run(7);
    assert_eq!(a.admissions, b.admissions);
    assert_eq!(a.calls, b.calls);
}
