//! The adapter against a mock API server: a tower service that hands every request to the test, which asserts
//! it and answers. Every request any test provokes is also checked against [`RBAC_REQUIREMENTS`] and the
//! namespace, and must carry exactly one `X-Cluster` header.
//!
//! Owns the mock API server and the objects the tests answer with; the tests are by topic: pod deletion and the
//! StatefulSet status ([`writes`]), config maps and leases ([`records`]), scaling, discovery and events
//! ([`scaling`]), webhooks, TLS Secrets, pods and budgets ([`webhooks`]), watches ([`watches`]), the RBAC table
//! ([`permissions`]), and building the client ([`client_config`]).

mod client_config;
mod permissions;
mod records;
mod scaling;
mod watches;
mod webhooks;
mod writes;

use super::*;
use crate::kube::rbac::{MIRROR_TARGET_PERMISSIONS, RBAC_REQUIREMENTS, REPLICA_TEMPLATE_PERMISSIONS};
use http::{Method, Response};
use http_body_util::BodyExt;
use kube::ResourceExt;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::time::Instant;
use tokio::sync::{mpsc, oneshot};

const UNLIMITED: RateLimits = RateLimits { qps: 0.0, burst: 0, max_wait: Duration::ZERO };
const NS: &str = "default-ns";
/// How long the mock waits for the client's next request: longer than the longest back-off a test waits out
/// (about 3.2 s, jittered) on a machine busy with other builds.
const WAIT: Duration = Duration::from_secs(20);

type Exchange = (Request<Body>, oneshot::Sender<Response<Body>>);
type Permission = (String, String, String);

/// A request as the mock API server received it.
#[derive(Debug)]
struct Seen {
    method: Method,
    path: String,
    query: String,
    headers: http::HeaderMap,
    body: Vec<u8>,
}

impl Seen {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }

    fn assert(&self, method: Method, path: &str, query: &str) {
        assert_eq!((&self.method, self.path.as_str(), self.query.as_str()), (&method, path, query), "{self:?}");
    }
}

/// Answers one request.
struct Responder(oneshot::Sender<Response<Body>>);

impl Responder {
    fn json(self, status: u16, body: Value) {
        self.raw(status, "application/json", serde_json::to_vec(&body).expect("serialisable"));
    }

    /// A watch response: one JSON event per line. The body ends after the last line, as when the server's
    /// watch timeout expires.
    fn watch_lines(self, events: &[Value]) {
        let mut body = Vec::new();
        for event in events {
            body.extend(serde_json::to_vec(event).expect("serialisable"));
            body.push(b'\n');
        }
        self.raw(200, "application/json", body);
    }

    fn raw(self, status: u16, content_type: &str, body: Vec<u8>) {
        let response = Response::builder()
            .status(status)
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .expect("valid response");
        // The client may have given up already; that is the test's business, not the mock's.
        let _ = self.0.send(response);
    }
}

struct MockApi {
    rx: mpsc::UnboundedReceiver<Exchange>,
    permissions: BTreeSet<Permission>,
    /// Permissions used on mirror reference resources (covered by MIRROR_TARGET_PERMISSIONS).
    mirror_permissions: BTreeSet<Permission>,
}

/// `/api`, `/api/<v>`, `/apis`, `/apis/<group>`, `/apis/<group>/<version>`: discovery documents.
fn is_discovery(path: &str) -> bool {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    matches!(segments.as_slice(), ["api"] | ["api", _] | ["apis"] | ["apis", _] | ["apis", _, _])
}

/// Whether MIRROR_TARGET_PERMISSIONS covers `permission` (its subresource and verb, any group and plural), for
/// resources that are not the operator's own.
fn mirror_target_allows((group, resource, verb): &Permission) -> bool {
    let own = ["", "apps"].contains(&group.as_str());
    !own && MIRROR_TARGET_PERMISSIONS.iter().any(|p| {
        let (_, sub) = p.resource.split_once('/').unwrap_or(("", p.resource));
        resource.split_once('/').is_some_and(|(_, s)| s == sub) && p.verb == verb
    })
}

impl MockApi {
    async fn next(&mut self) -> (Seen, Responder) {
        let (request, respond) = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .expect("the client sent no request in time")
            .expect("the client is gone");
        let (parts, body) = request.into_parts();
        let body = body.collect().await.expect("readable request body").to_bytes().to_vec();
        let seen = Seen {
            method: parts.method,
            path: parts.uri.path().to_string(),
            query: parts.uri.query().unwrap_or_default().to_string(),
            headers: parts.headers,
            body,
        };
        let cluster: Vec<_> = seen.headers.get_all(CLUSTER_HEADER).iter().collect();
        assert_eq!(cluster, [NS], "every request carries exactly one X-Cluster header: {seen:?}");
        if seen.method == Method::GET && is_discovery(&seen.path) {
            // Discovery documents are non-resource URLs every authenticated user may read.
            return (seen, Responder(respond));
        }
        let permission = permission_for(&seen.method, &seen.path, &seen.query)
            .unwrap_or_else(|| panic!("request outside namespace {NS} or not a resource request: {seen:?}"));
        if mirror_target_allows(&permission) {
            self.mirror_permissions.insert(permission);
            return (seen, Responder(respond));
        }
        assert!(declared().contains(&permission), "{permission:?} is used but not in RBAC_REQUIREMENTS");
        assert_addressed_as_declared(&permission, &seen.path);
        self.permissions.insert(permission);
        (seen, Responder(respond))
    }

    async fn expect_no_request(&mut self) {
        let next = tokio::time::timeout(Duration::from_millis(200), self.rx.recv()).await;
        assert!(next.is_err(), "unexpected request: {:?}", next.map(|exchange| exchange.map(|(r, _)| r)));
    }
}

fn mock_cluster() -> (KubeCluster, MockApi) {
    let (tx, rx) = mpsc::unbounded_channel::<Exchange>();
    let service = tower::service_fn(move |request: Request<Body>| {
        let tx = tx.clone();
        async move {
            let (respond, response) = oneshot::channel();
            tx.send((request, respond)).map_err(|_| tower::BoxError::from("mock API server stopped"))?;
            // A responder dropped without an answer is a broken connection.
            response.await.map_err(|_| tower::BoxError::from("connection reset by mock API server"))
        }
    });
    let client = client_with_layers(service, NS).expect("valid namespace");
    (KubeCluster::new(client, NS), MockApi { rx, permissions: BTreeSet::new(), mirror_permissions: BTreeSet::new() })
}

/// Maps a request to the RBAC permission it needs, or `None` if it is outside the namespace or not a
/// namespaced resource request.
fn permission_for(method: &Method, path: &str, query: &str) -> Option<Permission> {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match segments.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let (resource, named) = match rest {
        // Cluster-scoped resources the adapter may touch (webhook configurations, for CA injection).
        [resource] if CLUSTER_SCOPED.contains(resource) => (resource.to_string(), false),
        [resource, _name] if CLUSTER_SCOPED.contains(resource) => (resource.to_string(), true),
        ["namespaces", ns, resource] if *ns == NS => (resource.to_string(), false),
        ["namespaces", ns, resource, _name] if *ns == NS => (resource.to_string(), true),
        ["namespaces", ns, resource, _name, sub] if *ns == NS => (format!("{resource}/{sub}"), true),
        _ => return None,
    };
    let watch = query.split('&').any(|pair| pair == "watch=true");
    let verb = match (method.as_str(), named, watch) {
        ("GET", _, true) => "watch",
        ("GET", false, false) => "list",
        ("GET", true, false) => "get",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, _) => "deletecollection",
        ("PATCH", ..) => "patch",
        ("PUT", ..) => "update",
        ("POST", ..) => "create",
        _ => return None,
    };
    Some((group.to_string(), resource, verb.to_string()))
}

const CLUSTER_SCOPED: &[&str] = &["validatingwebhookconfigurations", "mutatingwebhookconfigurations"];

fn declared() -> BTreeSet<Permission> {
    RBAC_REQUIREMENTS.iter().map(|p| (p.group.to_string(), p.resource.to_string(), p.verb.to_string())).collect()
}

/// The table's row for a declared permission must match how the request addresses it: a namespaced row a
/// request in the namespace, a cluster-scoped row a cluster-scoped request, and a row restricted by name
/// (`resourceNames`) a request for one named object (a list, watch or create would be refused by such a grant).
fn assert_addressed_as_declared((group, resource, verb): &Permission, path: &str) {
    let row = RBAC_REQUIREMENTS
        .iter()
        .find(|p| (p.group, p.resource, p.verb) == (group.as_str(), resource.as_str(), verb.as_str()))
        .expect("declared");
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let in_namespace = segments.contains(&"namespaces");
    let expected_scope =
        if in_namespace { crate::kube::rbac::Scope::Namespaced } else { crate::kube::rbac::Scope::Cluster };
    assert_eq!(row.scope, expected_scope, "{row:?}: the table's scope does not match the request {path}");
    let collection_len = if segments.first() == Some(&"api") { 3 } else { 4 } + if in_namespace { 2 } else { 0 };
    let named = segments.len() > collection_len;
    assert!(
        row.resource_name.is_none() || named,
        "{row:?} is granted by name only, but {path} is not a request for one named object"
    );
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code,
    })
}

fn success_status() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
}

/// A StatefulSet as list items carry it (no apiVersion/kind).
fn sts(name: &str, resource_version: &str) -> Value {
    json!({
        "metadata": {
            "name": name, "namespace": NS, "uid": format!("uid-{name}"), "resourceVersion": resource_version,
            "labels": {"rollout-group": "ingester"},
        },
        "spec": {"selector": {"matchLabels": {"name": name}}, "template": {"metadata": {"labels": {"name": name}}}},
    })
}

fn pod(name: &str, resource_version: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": NS, "uid": format!("uid-{name}"), "resourceVersion": resource_version}})
}

fn list(kind: &str, resource_version: &str, continue_token: Option<&str>, items: Vec<Value>) -> Value {
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({"kind": kind, "apiVersion": if kind == "PodList" { "v1" } else { "apps/v1" }, "metadata": metadata, "items": items})
}

fn event(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

fn bookmark(resource_version: &str) -> Value {
    event(
        "BOOKMARK",
        json!({"kind": "StatefulSet", "apiVersion": "apps/v1", "metadata": {"resourceVersion": resource_version}}),
    )
}

/// Polls a watch stream on its own task (it only sends requests while polled) and forwards what it yields.
fn forward<T: Send + 'static>(mut stream: BoxStream<'static, T>) -> mpsc::UnboundedReceiver<T> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(item) = stream.next().await {
            if tx.send(item).is_err() {
                break;
            }
        }
    });
    rx
}

fn describe<K: kube::Resource>(item: &Result<WatchEvent<K>, ApiError>) -> String {
    let object = |o: &K| format!("{}@{}", o.name_any(), o.resource_version().unwrap_or_default());
    match item {
        Ok(WatchEvent::Init) => "Init".to_string(),
        Ok(WatchEvent::InitApply(o)) => format!("InitApply({})", object(o)),
        Ok(WatchEvent::InitDone) => "InitDone".to_string(),
        Ok(WatchEvent::Apply(o)) => format!("Apply({})", object(o)),
        Ok(WatchEvent::Delete(o)) => format!("Delete({})", object(o)),
        Err(err) => format!("Err({})", err.kind()),
    }
}

async fn next_items<K: kube::Resource>(
    rx: &mut mpsc::UnboundedReceiver<Result<WatchEvent<K>, ApiError>>,
    count: usize,
) -> Vec<String> {
    let mut items = Vec::new();
    for _ in 0..count {
        let item = tokio::time::timeout(WAIT, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("watch yielded only {items:?}"))
            .expect("the watch stream never ends");
        items.push(describe(&item));
    }
    items
}

async fn next_error<K: kube::Resource>(rx: &mut mpsc::UnboundedReceiver<Result<WatchEvent<K>, ApiError>>) -> ApiError {
    match tokio::time::timeout(WAIT, rx.recv()).await {
        Ok(Some(Err(err))) => err,
        other => panic!("expected a watch error, got {:?}", other.map(|item| item.map(|i| describe(&i)))),
    }
}

const STS_PATH: &str = "/apis/apps/v1/namespaces/default-ns/statefulsets";
// kube's query builder starts every query with '&' (an empty first pair, which the API server ignores); these are
// the exact bytes it sends.
const STS_LIST_QUERY: &str = "&labelSelector=rollout-group&limit=500";

fn sts_watch_query(resource_version: &str) -> String {
    format!(
        "&watch=true&timeoutSeconds=290&labelSelector=rollout-group&allowWatchBookmarks=true&resourceVersion={resource_version}"
    )
}

// ---- objects the mock answers with ------------------------------------------------------------------------

fn sts_object(name: &str, resource_version: &str, current_revision: &str) -> StatefulSet {
    let mut value = sts(name, resource_version);
    value["status"] =
        json!({"replicas": 3, "currentRevision": current_revision, "updateRevision": "ingester-zone-a-2"});
    serde_json::from_value(value).expect("a StatefulSet")
}

fn config_map(name: &str, resource_version: &str, data: Value) -> Value {
    json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NS, "resourceVersion": resource_version},
        "data": data,
    })
}

fn typed_config_map(value: Value) -> ConfigMap {
    serde_json::from_value(value).expect("valid ConfigMap")
}

fn lease(name: &str, resource_version: &str, holder: Option<&str>) -> Value {
    let mut metadata = json!({"name": name, "namespace": NS});
    if !resource_version.is_empty() {
        metadata["resourceVersion"] = json!(resource_version);
    }
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 2,
                 "renewTime": "2026-03-01T12:00:00.000000Z"},
    })
}

fn typed_lease(value: Value) -> k8s_openapi::api::coordination::v1::Lease {
    serde_json::from_value(value).expect("valid Lease")
}

fn event_object(name: &str) -> k8s_openapi::api::events::v1::Event {
    k8s_openapi::api::events::v1::Event {
        metadata: kube::api::ObjectMeta { name: Some(name.to_string()), ..Default::default() },
        reason: Some("RolloutWaiting".into()),
        action: Some("Wait".into()),
        note: Some("waiting".into()),
        type_: Some("Normal".into()),
        reporting_controller: Some("grafana.com/rollout-operator".into()),
        reporting_instance: Some("rollout-operator-0".into()),
        ..Default::default()
    }
}

fn secret_object(name: &str, resource_version: Option<&str>) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "resourceVersion": resource_version},
        "data": {"ca": "Y2E=", "cert": "Y2VydA==", "key": "a2V5"},
    }))
    .expect("valid Secret")
}

fn webhook_list(kind: WebhookKind, resource_version: &str, items: Vec<Value>) -> Value {
    json!({"kind": format!("{}List", kind.as_str()), "apiVersion": "admissionregistration.k8s.io/v1",
           "metadata": {"resourceVersion": resource_version}, "items": items})
}

fn webhook_config(kind: WebhookKind, name: &str, resource_version: &str, ca: Option<&str>) -> Value {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind.as_str(),
        "metadata": {"name": name, "resourceVersion": resource_version,
                     "labels": {"grafana.com/inject-rollout-operator-ca": "true", "grafana.com/namespace": NS}},
        "webhooks": [{"name": "w.grafana.com", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                      "clientConfig": {"service": {"name": "rollout-operator", "namespace": NS}, "caBundle": ca}}],
    })
}

async fn next_webhook_items(
    rx: &mut mpsc::UnboundedReceiver<Result<WatchEvent<WebhookConfiguration>, ApiError>>,
    count: usize,
) -> Vec<String> {
    let mut items = Vec::new();
    for _ in 0..count {
        let item = tokio::time::timeout(WAIT, rx.recv()).await.expect("in time").expect("open");
        let describe = |c: &WebhookConfiguration| {
            format!(
                "{}@{}",
                c.metadata().name.clone().unwrap_or_default(),
                c.metadata().resource_version.clone().unwrap_or_default()
            )
        };
        items.push(match item {
            Ok(WatchEvent::Init) => "Init".to_string(),
            Ok(WatchEvent::InitApply(c)) => format!("InitApply({})", describe(&c)),
            Ok(WatchEvent::InitDone) => "InitDone".to_string(),
            Ok(WatchEvent::Apply(c)) => format!("Apply({})", describe(&c)),
            Ok(WatchEvent::Delete(c)) => format!("Delete({})", describe(&c)),
            Err(err) => format!("Err({})", err.kind()),
        });
    }
    items
}

fn budget(name: &str, resource_version: &str) -> Value {
    json!({"metadata": {"name": name, "namespace": NS, "resourceVersion": resource_version, "generation": 1},
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"rollout-group": "ingester"}}}})
}

/// Waits for `count` items of a generic-object watch, described as `Kind(name@kind)`.
async fn next_budgets(
    rx: &mut mpsc::UnboundedReceiver<Result<WatchEvent<Value>, ApiError>>,
    count: usize,
) -> Vec<String> {
    let mut items = Vec::new();
    for _ in 0..count {
        let item = tokio::time::timeout(WAIT, rx.recv()).await.expect("in time").expect("the watch never ends");
        let object = |o: &Value| {
            format!("{}@{}", o["metadata"]["name"].as_str().unwrap_or("?"), o["kind"].as_str().unwrap_or("?"))
        };
        items.push(match item {
            Ok(WatchEvent::Init) => "Init".to_string(),
            Ok(WatchEvent::InitApply(o)) => format!("InitApply({})", object(&o)),
            Ok(WatchEvent::InitDone) => "InitDone".to_string(),
            Ok(WatchEvent::Apply(o)) => format!("Apply({})", object(&o)),
            Ok(WatchEvent::Delete(o)) => format!("Delete({})", object(&o)),
            Err(err) => format!("Err({})", err.kind()),
        });
    }
    items
}
