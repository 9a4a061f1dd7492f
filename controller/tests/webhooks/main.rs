//! The admission webhook router over the fake API server and a fake pod client, by topic: HTTP handling and
//! arbitrary input ([`http`]), no-downscale ([`no_downscale`]), prepare-downscale with the zone tracker: the
//! record claim, pod calls and their undo, dry runs, concurrent admissions ([`prepare`]), prepare-downscale without
//! the zone tracker ([`without_tracker`]), and the Events told ([`events`]).
//!
//! Owns the router under test, the fake pods it calls, and the objects and reviews the tests send.

#[path = "../support/mod.rs"]
mod support;

mod events;
mod http;
mod no_downscale;
mod prepare;
mod without_tracker;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use proptest::prelude::*;
use rollout_core::downscale::COMMIT_MARGIN;
use rollout_core::downscale::DownscaleRecord;
use rollout_core::keys;
use rollout_operator::admission::no_downscale::ParentLookups;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router};
use rollout_operator::cluster::ApiError;
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodMethod, PodRequest, PodResponse};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Call, FakeCluster, pod, sts};
use tower::ServiceExt;

const CM: &str = "rollout-operator-zone-tracker";
const NOW: &str = "2026-01-01T12:00:00Z";

/// Pods that answer 200, except the URLs told to fail; records every call.
#[derive(Clone, Default)]
struct FakePods {
    calls: Arc<Mutex<Vec<PodRequest>>>,
    failing: Arc<Mutex<BTreeSet<String>>>,
    /// POSTs to these never answer.
    hanging: Arc<Mutex<BTreeSet<String>>>,
}

impl FakePods {
    fn calls(&self) -> Vec<(PodMethod, String)> {
        self.calls.lock().unwrap().iter().map(|r| (r.method, r.url.clone())).collect()
    }
}

impl PodHttpClient for FakePods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        tokio::task::yield_now().await;
        self.calls.lock().unwrap().push(request.clone());
        let hangs = self.hanging.lock().unwrap().iter().any(|f| request.url.contains(f.as_str()));
        if hangs && request.method == PodMethod::Post {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
        if self.failing.lock().unwrap().iter().any(|f| request.url.contains(f.as_str())) {
            return Err(PodCallError::Connect {
                method: request.method.as_str(),
                url: request.url,
                message: "connection refused".into(),
            });
        }
        Ok(PodResponse { status: 200, body: Vec::new() })
    }
}

fn app(cluster: &FakeCluster, pods: &FakePods) -> axum::Router {
    app_at(cluster, pods, NOW)
}

fn app_at(cluster: &FakeCluster, pods: &FakePods, now: &str) -> axum::Router {
    let now: Timestamp = now.parse().unwrap();
    router(Webhooks {
        api: cluster.clone(),
        pods: pods.clone(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10)),
        clock: Arc::new(move || now),
    })
}

async fn post(app: &axum::Router, path: &str, content_type: Option<&str>, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    let mut request = Request::post(path);
    if let Some(ct) = content_type {
        request = request.header("content-type", ct);
    }
    let response = app.clone().oneshot(request.body(Body::from(body)).unwrap()).await.expect("infallible");
    let status = response.status();
    (status, response.into_body().collect().await.unwrap().to_bytes().to_vec())
}

async fn admit(app: &axum::Router, path: &str, review: &Value) -> Value {
    let (status, body) = post(app, path, Some("application/json"), serde_json::to_vec(review).unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["response"]["uid"], review["request"]["uid"]);
    out["response"].clone()
}

fn review(resource: &str, name: &str, old: Value, new: Value, dry_run: bool) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("uid-{name}"), "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
        "resource": {"group": "apps", "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "hpa"},
        "object": new, "oldObject": old, "dryRun": dry_run,
    }})
}

/// A zone of group `ingester` with prepare-downscale settings and a 12 h min time between zone downscales.
fn zone(name: &str, replicas: i32) -> StatefulSet {
    let mut s = sts("ingester", name, replicas, "r1", "r1");
    let meta = &mut s.metadata;
    meta.labels.get_or_insert_default().insert(keys::PREPARE_DOWNSCALE.into(), "true".into());
    let annotations = meta.annotations.get_or_insert_default();
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PORT.into(), "8080".into());
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PATH.into(), "ingester/prepare-shutdown".into());
    annotations.insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
    s
}

fn with_replicas(mut s: StatefulSet, replicas: i32) -> Value {
    s.spec.as_mut().unwrap().replicas = Some(replicas);
    let mut v = serde_json::to_value(s).unwrap();
    v["apiVersion"] = json!("apps/v1");
    v["kind"] = json!("StatefulSet");
    v
}

fn cluster_with_zones() -> FakeCluster {
    let zones = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];
    let statefulsets = zones.iter().map(|z| zone(z, 3)).collect();
    let pods = zones.iter().flat_map(|z| (0..3).map(move |i| pod(z, i, "r1", true, 1))).collect();
    FakeCluster::new(statefulsets, pods)
}

fn downscale_review(name: &str, dry_run: bool) -> Value {
    review("statefulsets", name, with_replicas(zone(name, 3), 3), with_replicas(zone(name, 1), 1), dry_run)
}

fn record(cluster: &FakeCluster) -> Option<DownscaleRecord> {
    cluster.config_map(CM).map(|cm| DownscaleRecord::from_config_map_data(&cm.data.unwrap_or_default()).unwrap())
}

fn no_downscale_sts(replicas: i32) -> StatefulSet {
    let mut s = sts("ingester", "ingester-zone-a", replicas, "r1", "r1");
    s.metadata.labels.get_or_insert_default().insert(keys::NO_DOWNSCALE.into(), "true".into());
    s
}

fn scale(replicas: i32) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "ingester-zone-a"}, "spec": {"replicas": replicas}})
}
