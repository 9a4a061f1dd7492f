//! Going back to the Go operator (docs/switching.md, "Going back to the Go operator"): each thing this operator
//! leaves behind, as it writes it, read under the Go operator's rules (the reference description: the zone tracker's
//! format and save in its section 4.5, the annotations in 1.3, the certificate Secret in 6.3).
//!
//! - the zone tracker's ConfigMap, with our in-progress markers and rollout steps, loads as the Go operator loads it
//!   (every `data` entry a JSON object with an RFC 3339 `lastDownscaled`, matched case-insensitively); the markers
//!   are annotations only; its dates are ahead by no more than the page says; and what the Go operator saves (only
//!   name, namespace and data) reads back here when switching again;
//! - `grafana.com/last-downscale` parses as RFC 3339, at most 10 s ahead (30 s after a `/scale` request);
//! - `grafana.com/ready-time` is written in the Go operator's format, and a stamp it wrote is kept;
//! - eviction intents expire about 20 s after they are written, and this operator ignores them from then on;
//! - the certificate Secret has the `ca`, `cert` and `key` the Go operator reads, a matching ECDSA P-256 PKCS#8 key
//!   and certificate, and the name the Go operator's own certificate would carry.
#![cfg(not(madsim))]

mod support;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use regex::Regex;
use rollout_core::certificate::service_dns_names;
use rollout_core::downscale::Claimant;
use rollout_core::downscale::MarkedClaim;
use rollout_core::fixture::{annotate, statefulset};
use rollout_core::keys;
use rollout_core::zpdb::{BudgetPod, Budgets, ReadyTimeChange, ready_time_change};
use rollout_core::{Defences, GroupSnapshot};
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router, router_with_zpdb};
use rollout_operator::cluster::zone_tracker::{
    claim_downscale_marked, claim_rollout_step, markers_of, read_record, read_rollout_steps,
};
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use rollout_operator::tls::certificate::{SelfSignedSettings, certified_key};
use rollout_operator::tls::secret::ensure_self_signed;
use rollout_operator::zpdb::Zpdb;
use rustls::pki_types::pem::{PemObject, SectionKind};
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use support::{FakeCluster, pod, sts};
use tower::ServiceExt;

const CM: &str = "rollout-operator-zone-tracker";
const NOW: &str = "2026-01-01T12:00:00Z";
const ZONES: [&str; 3] = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

/// Whether Go's `time.Parse(time.RFC3339, value)` accepts `value`: `2006-01-02T15:04:05Z07:00`, with optional
/// fractional seconds, an upper-case `T`, and `Z` or a `±hh:mm` offset, for a real date and time.
fn go_rfc3339(value: &str) -> Option<Timestamp> {
    let layout = Regex::new(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$").unwrap();
    layout.is_match(value).then(|| value.parse::<Timestamp>().ok()).flatten()
}

/// The Go operator's load of the zone tracker (reference 4.5): every `data` entry is JSON-decoded into a struct with
/// one field, `lastDownscaled` (Go's decoder matches field names case-insensitively and ignores unknown ones), which
/// must be an RFC 3339 time; one entry that fails fails the load. Metadata is not read.
fn go_zone_tracker_load(config_map: &ConfigMap) -> Result<BTreeMap<String, Timestamp>, String> {
    let mut zones = BTreeMap::new();
    for (key, value) in config_map.data.iter().flatten() {
        let decoded: Value = serde_json::from_str(value).map_err(|e| format!("{key}: not JSON: {e}"))?;
        let object = decoded.as_object().ok_or_else(|| format!("{key}: {value} is not a JSON object"))?;
        let field = object.iter().find(|(k, _)| k.eq_ignore_ascii_case("lastDownscaled")).map(|(_, v)| v);
        let raw = field.and_then(Value::as_str).ok_or_else(|| format!("{key}: no lastDownscaled string"))?;
        let at = go_rfc3339(raw).ok_or_else(|| format!("{key}: {raw:?} is not RFC 3339"))?;
        zones.insert(key.clone(), at);
    }
    Ok(zones)
}

/// What the Go operator's save writes (reference 4.5): an update of the whole ConfigMap with only its name,
/// namespace and data, so annotations (our markers) go.
fn go_zone_tracker_save(read: &ConfigMap, data: BTreeMap<String, String>) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: read.metadata.name.clone(),
            namespace: read.metadata.namespace.clone(),
            resource_version: read.metadata.resource_version.clone(),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

#[derive(Clone, Default)]
struct ReadyPods;

impl PodHttpClient for ReadyPods {
    async fn call(&self, _request: PodRequest) -> Result<PodResponse, PodCallError> {
        Ok(PodResponse { status: 200, body: Vec::new() })
    }
}

/// Three zones of 3 ready pods that prepare for shutdown and wait 12 h between zone downscales; pods labelled for a
/// budget over the group.
fn cluster() -> FakeCluster {
    let statefulsets = ZONES
        .iter()
        .map(|z| {
            let mut s = sts("ingester", z, 3, "r1", "r1");
            s.metadata.labels.get_or_insert_default().insert(keys::PREPARE_DOWNSCALE.into(), "true".into());
            let annotations = s.metadata.annotations.get_or_insert_default();
            annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PORT.into(), "8080".into());
            annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PATH.into(), "ingester/prepare-shutdown".into());
            annotations.insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
            s
        })
        .collect();
    let pods = ZONES
        .iter()
        .flat_map(|z| {
            (0..3).map(move |i| {
                let mut p = pod(z, i, "r1", true, 1);
                p.metadata.labels.get_or_insert_default().insert(keys::ROLLOUT_GROUP.into(), "ingester".into());
                p
            })
        })
        .collect();
    FakeCluster::new(statefulsets, pods)
}

/// The webhook settings of a default deployment (`-server-tls.request-timeout=10s`), with or without the tracker.
fn settings(tracker: Option<&str>) -> WebhookSettings {
    WebhookSettings::new("ns", "cluster.local.", tracker, Duration::from_secs(10))
}

fn webhooks(cluster: &FakeCluster, tracker: Option<&str>) -> Webhooks<FakeCluster, ReadyPods> {
    Webhooks { api: cluster.clone(), pods: ReadyPods, settings: settings(tracker), clock: Arc::new(now) }
}

async fn admit(app: &axum::Router, path: &str, review: &Value) -> Value {
    let request = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(serde_json::to_vec(review).unwrap()))
        .unwrap();
    let response = app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice::<Value>(&body).unwrap()["response"].clone()
}

fn review(resource: &str, name: &str, old: Value, new: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("uid-{name}"), "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
        "resource": {"group": "apps", "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "hpa"},
        "object": new, "oldObject": old, "dryRun": false}})
}

fn statefulset_update(cluster: &FakeCluster, name: &str, replicas: i32) -> Value {
    let object = |replicas: i32| {
        let mut s = cluster.statefulset(name).unwrap();
        s.spec.as_mut().unwrap().replicas = Some(replicas);
        let mut v = serde_json::to_value(s).unwrap();
        v["apiVersion"] = json!("apps/v1");
        v["kind"] = json!("StatefulSet");
        v
    };
    review("statefulsets", name, object(3), object(replicas))
}

fn group() -> GroupSnapshot {
    let members = ZONES
        .iter()
        .map(|z| annotate(statefulset("ingester", z, 3, "r1"), keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "12h"))
        .collect();
    GroupSnapshot::assemble("ingester", members, std::iter::empty())
}

/// How far `at` is ahead of now.
fn ahead(at: Timestamp) -> SignedDuration {
    at.duration_since(now())
}

/// The ConfigMap our operator leaves after an admitted downscale and a rollout step of the controller loads under
/// the Go operator's rules, with dates at most 10 s ahead; our markers are annotations only, which the Go operator's
/// save drops; and what it saves reads back here.
#[tokio::test]
async fn the_zone_tracker_we_leave_loads_under_the_go_operators_rules_and_what_it_saves_reads_back() {
    let cluster = cluster();
    let app = router(webhooks(&cluster, Some(CM)));
    let answer = admit(&app, "/admission/prepare-downscale", &statefulset_update(&cluster, "ingester-zone-a", 2)).await;
    assert_eq!(answer["allowed"], true, "{answer}");
    // The controller then replaces pods of the group: its rollout step is recorded with the record.
    let stored = read_record(&cluster, CM).await.unwrap().expect("the record");
    let until = now() + SignedDuration::from_secs(70);
    let step = claim_rollout_step(&cluster, CM, Some(&stored), &group(), now(), until).await.unwrap();
    assert!(matches!(step, rollout_core::execution::StepClaimed::Claimed { .. }), "{step:?}");

    let left = cluster.config_map(CM).expect("the zone tracker");
    let annotations = left.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key(keys::ROLLOUT_STEPS_IN_PROGRESS), "{annotations:?}");
    let loaded = go_zone_tracker_load(&left).expect("the Go operator loads it");
    assert_eq!(loaded.keys().collect::<Vec<_>>(), ["ingester-zone-a"], "one entry per StatefulSet, nothing else");
    let dated = ahead(loaded["ingester-zone-a"]);
    assert!(dated > SignedDuration::ZERO && dated <= SignedDuration::from_secs(10), "{dated:?} ahead");

    // The Go operator records a downscale of zone c (its timestamps may carry fractions of a second) and saves.
    let mut data = left.data.clone().unwrap_or_default();
    data.insert("ingester-zone-c".into(), json!({"lastDownscaled": "2026-01-01T13:00:00.250Z"}).to_string());
    cluster.put_config_map(go_zone_tracker_save(&left, data));
    assert!(go_zone_tracker_load(&cluster.config_map(CM).unwrap()).is_ok());
    // Switching to this operator again: the record reads, without markers or steps.
    let stored = read_record(&cluster, CM).await.expect("readable").expect("present");
    assert!(markers_of(&stored, CM).unwrap().is_empty());
    assert!(read_rollout_steps(&stored).unwrap().is_empty());
    assert_eq!(stored.record.last_downscaled["ingester-zone-a"], loaded["ingester-zone-a"]);
    assert_eq!(stored.record.last_downscaled["ingester-zone-c"], "2026-01-01T13:00:00.25Z".parse().unwrap());
}

/// An operator stopped between a downscale's claim and its answer leaves the claim's in-progress marker and the
/// entry dated at the latest the change could commit: still loadable by the Go operator, at most the webhook's
/// deadline and undo deadline ahead (19 s with the default 10 s request timeout).
#[tokio::test]
async fn an_interrupted_claim_leaves_a_loadable_entry_at_most_19_seconds_ahead() {
    let cluster = cluster();
    let webhook = settings(Some(CM));
    let until = now() + SignedDuration::try_from(webhook.handler_deadline + webhook.undo_deadline).unwrap();
    let claim = claim_downscale_marked(
        &cluster,
        CM,
        &group(),
        "ingester-zone-b",
        Claimant::Admission,
        now(),
        until,
        Defences::ALL,
    )
    .await
    .unwrap();
    assert!(matches!(claim, MarkedClaim::Claimed { .. }), "{claim:?}");
    let left = cluster.config_map(CM).unwrap();
    assert!(left.metadata.annotations.unwrap_or_default().contains_key(keys::DOWNSCALES_IN_PROGRESS));
    let loaded = go_zone_tracker_load(&cluster.config_map(CM).unwrap()).expect("the Go operator loads it");
    let dated = ahead(loaded["ingester-zone-b"]);
    assert!(dated <= SignedDuration::from_secs(19), "{dated:?} ahead");
    assert!(dated > SignedDuration::from_secs(10), "dated at the latest commit: {dated:?}");
}

/// Without the zone tracker, `grafana.com/last-downscale` is an RFC 3339 time at most 10 s ahead; after a `/scale`
/// request (an HPA's, which carries a resourceVersion, or `kubectl scale`'s), 30 s ahead.
#[tokio::test]
async fn the_last_downscale_we_write_parses_as_rfc3339_at_most_30_seconds_ahead() {
    let updated = cluster();
    let app = router(webhooks(&updated, None));
    let answer = admit(&app, "/admission/prepare-downscale", &statefulset_update(&updated, "ingester-zone-a", 2)).await;
    assert_eq!(answer["allowed"], true, "{answer}");
    let patch: k8s_openapi::ByteString = serde_json::from_value(answer["patch"].clone()).unwrap();
    let patch: Value = serde_json::from_slice(&patch.0).unwrap();
    let value = patch[0]["value"].as_str().expect("the annotation's value");
    let at = go_rfc3339(value).unwrap_or_else(|| panic!("{value:?} is not RFC 3339"));
    assert_eq!(ahead(at), SignedDuration::from_secs(10));

    for with_resource_version in [true, false] {
        let scaled = cluster();
        let app = router(webhooks(&scaled, None));
        let rv = scaled.statefulset("ingester-zone-b").unwrap().metadata.resource_version.unwrap();
        let scale = |replicas: i32| {
            let mut scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                "metadata": {"name": "ingester-zone-b", "namespace": "ns"}, "spec": {"replicas": replicas}});
            if with_resource_version {
                scale["metadata"]["resourceVersion"] = json!(rv);
            }
            scale
        };
        admit(&app, "/admission/prepare-downscale", &review("statefulsets", "ingester-zone-b", scale(3), scale(2)))
            .await;
        let annotations = scaled.statefulset("ingester-zone-b").unwrap().metadata.annotations.unwrap();
        let value = &annotations[keys::LAST_DOWNSCALE];
        let at = go_rfc3339(value).unwrap_or_else(|| panic!("{value:?} is not RFC 3339"));
        assert_eq!(ahead(at), SignedDuration::from_secs(30), "with a resourceVersion: {with_resource_version}");
    }
}

/// The page says what these tests show, in the same figures.
#[test]
fn the_switching_page_states_these_figures() {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/switching.md")).unwrap();
    let page = page.replace('\n', " ");
    for claim in [
        "dated up to 10 s ahead (30 s after a `/scale` request)",
        "Its own format (`{\"lastDownscaled\":...}` per StatefulSet), dated up to 10 s ahead (up to 19 s",
        "annotations of that ConfigMap | Ignored; its first write of the ConfigMap (an update of the whole object) \
         drops them.",
        "about 20 s for an eviction's",
        "(`ca`, `cert`, `key`; an ECDSA P-256 key in PKCS#8)",
        "(`-server-tls.self-signed-cert.dns-name`, else `rollout-operator.<namespace>.svc`)",
    ] {
        assert!(page.contains(claim), "docs/switching.md no longer says: {claim}");
    }
}

/// `grafana.com/ready-time` is the Go operator's format (RFC 3339, UTC, whole seconds), and a stamp it wrote is kept.
#[test]
fn the_ready_time_is_the_go_operators_format_and_its_stamps_are_kept() {
    let mut p = pod("ingester-zone-a", 0, "r1", true, 1);
    let view = BudgetPod::from_k8s(&p).unwrap();
    let later = now() + SignedDuration::from_millis(1_500);
    let Some(ReadyTimeChange::Set(value)) = ready_time_change(&view, later) else { panic!("a ready pod is stamped") };
    assert_eq!(value, "2026-01-01T12:00:01Z");
    assert!(go_rfc3339(&value).is_some());
    // A stamp of the Go operator's (fractions of a second included) is read and left as it is.
    p.metadata.annotations.get_or_insert_default().insert(keys::READY_TIME.into(), "2026-01-01T11:00:00.5Z".into());
    let view = BudgetPod::from_k8s(&p).unwrap();
    assert_eq!(ready_time_change(&view, later), None);
}

/// An allowed eviction leaves an intent under `grafana.com/eviction-intent.` on the pod, a valid annotation that
/// expires about 20 s later; from then on this operator does not count it either.
#[tokio::test]
async fn eviction_intents_expire_about_20_seconds_after_and_are_ignored_from_then_on() {
    let cluster = cluster();
    let budget = json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "ingester-rollout", "namespace": "ns", "uid": "uid-budget", "generation": 1},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"rollout-group": "ingester"}}}});
    let (budgets, invalid) = Budgets::from_objects([&budget]);
    assert!(invalid.is_empty());
    let app = router_with_zpdb(webhooks(&cluster, None), Zpdb::with_budgets(budgets));
    let eviction = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "0d4c7f21-6a3e-4f0b-8d1c-5b2a9e8f7c02", "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
        "name": "ingester-zone-a-0", "namespace": "ns", "operation": "CREATE", "userInfo": {"username": "kubectl"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "ingester-zone-a-0"}}}});
    let answer = admit(&app, "/admission/pod-eviction", &eviction).await;
    assert_eq!(answer["allowed"], true, "{answer}");

    let evicted = cluster.pod("ingester-zone-a-0").unwrap();
    let annotations = evicted.metadata.annotations.clone().unwrap_or_default();
    let intents: Vec<(&String, &String)> = annotations.iter().filter(|(k, _)| keys::is_eviction_intent(k)).collect();
    assert_eq!(intents.len(), 1, "{annotations:?}");
    let (key, value) = intents[0];
    let name = key.strip_prefix("grafana.com/").expect("prefixed");
    assert!(name.starts_with("eviction-intent."), "{key}");
    let qualified = Regex::new(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$").unwrap();
    assert!(name.len() <= 63 && qualified.is_match(name), "a valid annotation name: {key}");
    let until = go_rfc3339(value).unwrap_or_else(|| panic!("{value:?}"));
    let lifetime = ahead(until);
    assert!(lifetime > SignedDuration::ZERO && lifetime <= SignedDuration::from_secs(20), "{lifetime:?}");
    let view = BudgetPod::from_k8s(&evicted).unwrap();
    assert!(view.has_live_intent(now()));
    assert!(!view.has_live_intent(until + SignedDuration::from_secs(1)), "ignored once expired");
}

/// The certificate Secret holds what the Go operator reads (`ca`, `cert`, `key`, PEM), a key Go's TLS stack loads
/// (PKCS#8, ECDSA P-256) that matches the certificate, valid now, for the name the Go operator's certificate would
/// carry (`-server-tls.self-signed-cert.dns-name`, else `rollout-operator.<namespace>.svc`).
#[tokio::test]
async fn the_certificate_secret_is_a_pair_the_go_operator_reuses() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for (dns_name_flag, go_name) in
        [("", "rollout-operator.mimir.svc"), ("mimir-rollout-operator.mimir.svc", "mimir-rollout-operator.mimir.svc")]
    {
        let cluster = FakeCluster::default();
        let settings = SelfSignedSettings {
            organization: "Grafana Labs".into(),
            dns_names: service_dns_names("rollout-operator", "mimir", "cluster.local.", dns_name_flag),
            required_dns_names: vec![go_name.into()],
            validity: Duration::from_secs(365 * 24 * 3600),
        };
        let bundle = ensure_self_signed(&cluster, "certificate", "mimir", &settings, now()).await.expect("created");
        let secret = cluster.secret("certificate").expect("stored");
        assert!(secret.type_.as_deref().is_none_or(|t| t == "Opaque"), "{:?}", secret.type_);
        let data = secret.data.expect("data");
        assert_eq!(data.keys().map(String::as_str).collect::<BTreeSet<_>>(), BTreeSet::from(["ca", "cert", "key"]));
        let pem_sections = |key: &str| -> Vec<(SectionKind, Vec<u8>)> {
            <(SectionKind, Vec<u8>)>::pem_slice_iter(&data[key].0).collect::<Result<_, _>>().expect("PEM")
        };
        for key in ["ca", "cert"] {
            let sections = pem_sections(key);
            assert!(
                !sections.is_empty() && sections.iter().all(|(kind, _)| *kind == SectionKind::Certificate),
                "{key}"
            );
        }
        let key = pem_sections("key");
        assert_eq!(key.len(), 1);
        assert_eq!(
            key[0].0,
            SectionKind::PrivateKey,
            "PKCS#8 (`PRIVATE KEY`), which Go's x509.ParsePKCS8PrivateKey reads"
        );
        let contains = |der: &[u8], oid: &[u8]| der.windows(oid.len()).any(|w| w == oid);
        assert!(contains(&key[0].1, &[0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01]), "id-ecPublicKey");
        assert!(contains(&key[0].1, &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07]), "P-256");
        let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
        certified_key(&text("cert"), &text("key")).expect("the certificate and the key are a pair");
        let leaf = &bundle.facts[0];
        assert!(leaf.dns_names.iter().any(|n| n == go_name), "{go_name} in {:?}", leaf.dns_names);
        assert!(bundle.facts.iter().all(|f| f.not_before <= now() && now() < f.not_after), "valid now");
    }
}
