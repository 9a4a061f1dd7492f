//! The adapter against a mock API server: a tower service that hands every request to the test, which asserts
//! it and answers. Every request any test provokes is also checked against [`RBAC_REQUIREMENTS`] and the
//! namespace, and must carry exactly one `X-Cluster` header.

use super::*;
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

// ---- delete_pod -------------------------------------------------------------------------------------------

#[tokio::test]
async fn delete_pod_sends_uid_precondition_and_succeeds() {
    let (cluster, mut api) = mock_cluster();
    let preconditions = Preconditions { uid: Some("uid-1".into()), resource_version: None };
    let call = tokio::spawn(async move { cluster.delete_pod("ingester-zone-a-0", &preconditions).await });

    let (seen, respond) = api.next().await;
    seen.assert(Method::DELETE, "/api/v1/namespaces/default-ns/pods/ingester-zone-a-0", "");
    assert_eq!(seen.header("content-type"), Some("application/json"));
    assert_eq!(seen.json(), json!({"preconditions": {"uid": "uid-1"}}));
    let mut deleted = pod("ingester-zone-a-0", "12");
    deleted["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:00Z");
    respond.json(200, deleted);

    assert_eq!(call.await.expect("no panic"), Ok(()));
}

#[tokio::test]
async fn delete_pod_sends_uid_and_resource_version_preconditions() {
    let (cluster, mut api) = mock_cluster();
    let preconditions = Preconditions { uid: Some("uid-1".into()), resource_version: Some("41".into()) };
    let call = tokio::spawn(async move { cluster.delete_pod("ingester-zone-a-0", &preconditions).await });

    let (seen, respond) = api.next().await;
    assert_eq!(seen.json(), json!({"preconditions": {"uid": "uid-1", "resourceVersion": "41"}}));
    respond.json(200, success_status());

    assert_eq!(call.await.expect("no panic"), Ok(()));
}

#[tokio::test]
async fn delete_pod_without_preconditions_sends_none() {
    let (cluster, mut api) = mock_cluster();
    let call = tokio::spawn(async move { cluster.delete_pod("ingester-zone-a-0", &Preconditions::default()).await });

    let (seen, respond) = api.next().await;
    assert_eq!(seen.json(), json!({}));
    respond.json(200, success_status());

    assert_eq!(call.await.expect("no panic"), Ok(()));
}

#[tokio::test]
async fn delete_pod_failures_are_classified() {
    let object = "delete pod default-ns/ingester-zone-a-0";
    let precondition = "Operation cannot be fulfilled on Pod \"ingester-zone-a-0\": Precondition failed: UID in \
                        precondition: uid-1, UID in object meta: uid-2";
    let cases: Vec<(u16, Vec<u8>, ApiError)> = vec![
        (
            409,
            serde_json::to_vec(&status(409, "Conflict", precondition)).expect("json"),
            ApiError::Conflict(format!("{object}: {precondition}")),
        ),
        (
            404,
            serde_json::to_vec(&status(404, "NotFound", "pods \"ingester-zone-a-0\" not found")).expect("json"),
            ApiError::NotFound(format!("{object}: pods \"ingester-zone-a-0\" not found")),
        ),
        (
            500,
            serde_json::to_vec(&status(500, "InternalError", "etcdserver: request timed out")).expect("json"),
            ApiError::Unavailable(format!("{object}: HTTP 500: etcdserver: request timed out")),
        ),
        (
            503,
            serde_json::to_vec(&status(503, "ServiceUnavailable", "")).expect("json"),
            ApiError::Unavailable(format!("{object}: HTTP 503: ServiceUnavailable")),
        ),
        (
            429,
            serde_json::to_vec(&status(429, "TooManyRequests", "too many requests")).expect("json"),
            ApiError::Unavailable(format!("{object}: HTTP 429: too many requests")),
        ),
        (
            403,
            serde_json::to_vec(&status(403, "Forbidden", "pods \"ingester-zone-a-0\" is forbidden")).expect("json"),
            ApiError::Forbidden(format!("{object}: pods \"ingester-zone-a-0\" is forbidden")),
        ),
        // An admission webhook's denial: 403 by default, with the reason its webhook gave (none here).
        (
            403,
            serde_json::to_vec(&status(403, "", "admission webhook \"x\" denied the request: not now")).expect("json"),
            ApiError::Rejected {
                code: 403,
                message: format!("{object}: admission webhook \"x\" denied the request: not now"),
            },
        ),
        (
            422,
            serde_json::to_vec(&status(422, "Invalid", "invalid preconditions")).expect("json"),
            ApiError::Rejected { code: 422, message: format!("{object}: invalid preconditions") },
        ),
        // A proxy in front of the API answering with plain text.
        (502, b"Bad Gateway\n".to_vec(), ApiError::Unavailable(format!("{object}: HTTP 502: Bad Gateway"))),
        // A proxy answering with JSON that is not a Kubernetes Status.
        (
            403,
            br#"{"error":"denied by proxy"}"#.to_vec(),
            ApiError::Unavailable(format!("{object}: error response that is not a Kubernetes Status")),
        ),
    ];
    for (code, body, expected) in cases {
        let (cluster, mut api) = mock_cluster();
        let preconditions = Preconditions { uid: Some("uid-1".into()), resource_version: None };
        let call = tokio::spawn(async move { cluster.delete_pod("ingester-zone-a-0", &preconditions).await });
        let (_, respond) = api.next().await;
        let content_type = if code == 502 { "text/plain" } else { "application/json" };
        respond.raw(code, content_type, body);
        assert_eq!(call.await.expect("no panic"), Err(expected), "HTTP {code}");
    }
}

#[tokio::test]
async fn delete_pod_connection_failure_is_unavailable() {
    let (cluster, mut api) = mock_cluster();
    let call = tokio::spawn(async move { cluster.delete_pod("ingester-zone-a-0", &Preconditions::default()).await });
    let (_, respond) = api.next().await;
    drop(respond);

    match call.await.expect("no panic") {
        Err(ApiError::Unavailable(message)) => {
            assert!(message.starts_with("delete pod default-ns/ingester-zone-a-0: "), "{message}");
            assert!(message.contains("connection reset by mock API server"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn delete_pod_with_invalid_name_is_rejected_without_a_request() {
    let (cluster, mut api) = mock_cluster();
    let result = cluster.delete_pod("", &Preconditions::default()).await;
    assert!(matches!(result, Err(ApiError::InvalidRequest(_))), "{result:?}");
    api.expect_no_request().await;
}

// ---- replace_statefulset_status ---------------------------------------------------------------------------

fn sts_object(name: &str, resource_version: &str, current_revision: &str) -> StatefulSet {
    let mut value = sts(name, resource_version);
    value["status"] =
        json!({"replicas": 3, "currentRevision": current_revision, "updateRevision": "ingester-zone-a-2"});
    serde_json::from_value(value).expect("a StatefulSet")
}

/// The status is written with an UPDATE of the status subresource (the verb the reference's deployments grant),
/// carrying the resourceVersion it was planned from.
#[tokio::test]
async fn replace_statefulset_status_puts_the_object_to_the_status_subresource() {
    let (cluster, mut api) = mock_cluster();
    let sent = sts_object("ingester-zone-a", "41", "ingester-zone-a-2");
    let call = tokio::spawn(async move { cluster.replace_statefulset_status(&sent).await });

    let (seen, respond) = api.next().await;
    seen.assert(Method::PUT, "/apis/apps/v1/namespaces/default-ns/statefulsets/ingester-zone-a/status", "");
    assert_eq!(seen.header("content-type"), Some("application/json"));
    let body = seen.json();
    assert_eq!(body["metadata"]["resourceVersion"], "41", "{body}");
    assert_eq!(body["status"]["currentRevision"], "ingester-zone-a-2", "{body}");
    assert_eq!(body["status"]["updateRevision"], "ingester-zone-a-2", "the rest of the status is kept: {body}");
    let mut updated = sts("ingester-zone-a", "42");
    updated["apiVersion"] = json!("apps/v1");
    updated["kind"] = json!("StatefulSet");
    updated["status"] = json!({"replicas": 3, "currentRevision": "ingester-zone-a-2"});
    respond.json(200, updated);

    let updated = call.await.expect("no panic").expect("updated");
    assert_eq!(updated.name_any(), "ingester-zone-a");
    assert_eq!(updated.resource_version().as_deref(), Some("42"));
    assert_eq!(updated.status.and_then(|s| s.current_revision).as_deref(), Some("ingester-zone-a-2"));
}

#[tokio::test]
async fn replace_statefulset_status_on_a_moved_object_is_a_conflict() {
    let (cluster, mut api) = mock_cluster();
    let call =
        tokio::spawn(
            async move { cluster.replace_statefulset_status(&sts_object("ingester-zone-a", "41", "r2")).await },
        );
    let message = "Operation cannot be fulfilled on statefulsets.apps \"ingester-zone-a\": the object has been \
                   modified; please apply your changes to the latest version and try again";
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "Conflict", message));

    assert_eq!(
        call.await.expect("no panic"),
        Err(ApiError::Conflict(format!("update status of statefulset default-ns/ingester-zone-a: {message}")))
    );
}

// ---- config maps (the group downscale record) ----------------------------------------------------------------

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

#[tokio::test]
async fn get_config_map_returns_the_object_or_none_when_missing() {
    let (cluster, mut api) = mock_cluster();
    let getter = cluster.clone();
    let call = tokio::spawn(async move { getter.get_config_map("zone-tracker").await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/api/v1/namespaces/default-ns/configmaps/zone-tracker", "");
    respond.json(200, config_map("zone-tracker", "7", json!({"a": "{\"lastDownscaled\":\"2024-05-01T12:00:00Z\"}"})));
    let found = call.await.expect("no panic").expect("ok").expect("found");
    assert_eq!(found.metadata.resource_version.as_deref(), Some("7"));
    assert!(found.data.expect("data").contains_key("a"));

    let call = tokio::spawn(async move { cluster.get_config_map("zone-tracker").await });
    let (_, respond) = api.next().await;
    respond.json(404, status(404, "NotFound", "configmaps \"zone-tracker\" not found"));
    assert_eq!(call.await.expect("no panic"), Ok(None));
}

#[tokio::test]
async fn create_config_map_posts_and_an_existing_one_is_a_conflict() {
    let (cluster, mut api) = mock_cluster();
    let creator = cluster.clone();
    let call = tokio::spawn(async move {
        creator.create_config_map(&typed_config_map(config_map("zone-tracker", "", json!({})))).await
    });
    let (seen, respond) = api.next().await;
    seen.assert(Method::POST, "/api/v1/namespaces/default-ns/configmaps", "");
    assert_eq!(seen.json()["metadata"]["name"], json!("zone-tracker"));
    respond.json(201, config_map("zone-tracker", "8", json!({})));
    let created = call.await.expect("no panic").expect("created");
    assert_eq!(created.metadata.resource_version.as_deref(), Some("8"));

    let call = tokio::spawn(async move {
        cluster.create_config_map(&typed_config_map(config_map("zone-tracker", "", json!({})))).await
    });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "AlreadyExists", "configmaps \"zone-tracker\" already exists"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::Conflict(_))));
}

#[tokio::test]
async fn replace_config_map_sends_the_resource_version_precondition() {
    let (cluster, mut api) = mock_cluster();
    let replacer = cluster.clone();
    let call = tokio::spawn(async move {
        replacer.replace_config_map(&typed_config_map(config_map("zone-tracker", "41", json!({"a": "x"})))).await
    });
    let (seen, respond) = api.next().await;
    seen.assert(Method::PUT, "/api/v1/namespaces/default-ns/configmaps/zone-tracker", "");
    assert_eq!(seen.json()["metadata"]["resourceVersion"], json!("41"));
    assert_eq!(seen.json()["data"], json!({"a": "x"}));
    respond.json(200, config_map("zone-tracker", "42", json!({"a": "x"})));
    assert_eq!(call.await.expect("no panic").expect("replaced").metadata.resource_version.as_deref(), Some("42"));

    let call = tokio::spawn(async move {
        cluster.replace_config_map(&typed_config_map(config_map("zone-tracker", "41", json!({})))).await
    });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "Conflict", "the object has been modified"));
    assert_eq!(
        call.await.expect("no panic"),
        Err(ApiError::Conflict("replace configmap default-ns/zone-tracker: the object has been modified".to_string()))
    );
}

// ---- leases (leader election) ---------------------------------------------------------------------------------

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

#[tokio::test]
async fn get_lease_reads_the_named_lease_or_none() {
    let (cluster, mut api) = mock_cluster();
    let getter = cluster.clone();
    let call = tokio::spawn(async move { getter.get_lease("rollout-operator-leader").await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/apis/coordination.k8s.io/v1/namespaces/default-ns/leases/rollout-operator-leader", "");
    respond.json(200, lease("rollout-operator-leader", "5", Some("pod-a")));
    let found = call.await.expect("no panic").expect("ok").expect("found");
    let record = rollout_core::election::LeaseRecord::from_lease(&found);
    assert_eq!((record.holder.as_deref(), record.resource_version.as_str()), (Some("pod-a"), "5"));
    assert_eq!((record.lease_duration_seconds, record.transitions), (Some(15), 2));

    let call = tokio::spawn(async move { cluster.get_lease("rollout-operator-leader").await });
    let (_, respond) = api.next().await;
    respond.json(404, status(404, "NotFound", "leases.coordination.k8s.io \"rollout-operator-leader\" not found"));
    assert_eq!(call.await.expect("no panic"), Ok(None));
}

#[tokio::test]
async fn create_lease_posts_and_an_existing_one_is_a_conflict() {
    let (cluster, mut api) = mock_cluster();
    let creator = cluster.clone();
    let call =
        tokio::spawn(async move { creator.create_lease(&typed_lease(lease("leader", "", Some("pod-a")))).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::POST, "/apis/coordination.k8s.io/v1/namespaces/default-ns/leases", "");
    assert_eq!(seen.json()["metadata"]["name"], json!("leader"));
    assert_eq!(seen.json()["spec"]["holderIdentity"], json!("pod-a"));
    assert_eq!(seen.json()["metadata"].get("resourceVersion"), None);
    respond.json(201, lease("leader", "1", Some("pod-a")));
    assert_eq!(call.await.expect("no panic").expect("created").metadata.resource_version.as_deref(), Some("1"));

    let call =
        tokio::spawn(async move { cluster.create_lease(&typed_lease(lease("leader", "", Some("pod-b")))).await });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "AlreadyExists", "leases.coordination.k8s.io \"leader\" already exists"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::Conflict(_))));
}

#[tokio::test]
async fn replace_lease_sends_the_resource_version_precondition() {
    let (cluster, mut api) = mock_cluster();
    let replacer = cluster.clone();
    let call =
        tokio::spawn(async move { replacer.replace_lease(&typed_lease(lease("leader", "41", Some("pod-b")))).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::PUT, "/apis/coordination.k8s.io/v1/namespaces/default-ns/leases/leader", "");
    assert_eq!(seen.json()["metadata"]["resourceVersion"], json!("41"));
    assert_eq!(seen.json()["spec"]["holderIdentity"], json!("pod-b"));
    respond.json(200, lease("leader", "42", Some("pod-b")));
    assert_eq!(call.await.expect("no panic").expect("replaced").metadata.resource_version.as_deref(), Some("42"));

    let call =
        tokio::spawn(async move { cluster.replace_lease(&typed_lease(lease("leader", "41", Some("pod-c")))).await });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "Conflict", "the object has been modified"));
    assert_eq!(
        call.await.expect("no panic"),
        Err(ApiError::Conflict("replace lease default-ns/leader: the object has been modified".to_string()))
    );
}

// ---- scaling ----------------------------------------------------------------------------------------------

fn replica_template(version: &str) -> ApiResourceRef {
    ApiResourceRef {
        group: "rollout-operator.grafana.com".into(),
        version: version.into(),
        kind: "ReplicaTemplate".into(),
        plural: "replicatemplates".into(),
    }
}

#[tokio::test]
async fn patch_statefulset_replicas_sends_strategic_merge_patch_with_resource_version() {
    let (cluster, mut api) = mock_cluster();
    let call =
        tokio::spawn(
            async move { cluster.patch_statefulset_replicas("ingester-zone-b", 3, "41", &BTreeMap::new()).await },
        );
    let (seen, respond) = api.next().await;
    seen.assert(Method::PATCH, "/apis/apps/v1/namespaces/default-ns/statefulsets/ingester-zone-b", "");
    assert_eq!(seen.header("content-type"), Some("application/strategic-merge-patch+json"));
    assert_eq!(seen.json(), json!({"metadata": {"resourceVersion": "41"}, "spec": {"replicas": 3}}));
    let mut updated = sts("ingester-zone-b", "42");
    updated["apiVersion"] = json!("apps/v1");
    updated["kind"] = json!("StatefulSet");
    updated["spec"]["replicas"] = json!(3);
    respond.json(200, updated);
    let updated = call.await.expect("no panic").expect("patched");
    assert_eq!(updated.spec.and_then(|s| s.replicas), Some(3));
}

#[tokio::test]
async fn patch_statefulset_replicas_without_resource_version_and_on_conflict() {
    let (cluster, mut api) = mock_cluster();
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.patch_statefulset_replicas("a", 0, "", &BTreeMap::new()).await });
    let (seen, respond) = api.next().await;
    assert_eq!(seen.json(), json!({"spec": {"replicas": 0}}), "no precondition when no resourceVersion is known");
    respond.json(409, status(409, "Conflict", "the object has been modified"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::Conflict(_))));
}

#[tokio::test]
async fn discovery_resolves_a_kind_across_every_version_of_its_group() {
    let (cluster, mut api) = mock_cluster();
    let call =
        tokio::spawn(
            async move { cluster.discover_resources("rollout-operator.grafana.com", "ReplicaTemplate").await },
        );
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/apis", "");
    respond.json(
        200,
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": "apps/v1", "version": "v1"}},
            {"name": "rollout-operator.grafana.com", "versions": [
                {"groupVersion": "rollout-operator.grafana.com/v1", "version": "v1"},
                {"groupVersion": "rollout-operator.grafana.com/v1beta1", "version": "v1beta1"}],
             "preferredVersion": {"groupVersion": "rollout-operator.grafana.com/v1", "version": "v1"}},
        ]}),
    );
    let mut versions = Vec::new();
    for _ in 0..2 {
        let (seen, respond) = api.next().await;
        let version = seen.path.rsplit('/').next().unwrap().to_string();
        assert_eq!(seen.path, format!("/apis/rollout-operator.grafana.com/{version}"));
        respond.json(
            200,
            json!({"kind": "APIResourceList", "apiVersion": "v1",
                   "groupVersion": format!("rollout-operator.grafana.com/{version}"), "resources": [
                {"name": "replicatemplates", "singularName": "replicatemplate", "namespaced": true,
                 "kind": "ReplicaTemplate", "verbs": ["get", "list", "patch"]},
                {"name": "replicatemplates/scale", "singularName": "", "namespaced": true,
                 "group": "autoscaling", "version": "v1", "kind": "Scale", "verbs": ["get", "patch"]},
                {"name": "others", "singularName": "other", "namespaced": true, "kind": "Other", "verbs": ["get"]},
            ]}),
        );
        versions.push(version);
    }
    versions.sort();
    assert_eq!(versions, ["v1", "v1beta1"]);
    let mut found = call.await.expect("no panic").expect("discovered");
    found.sort_by(|a, b| a.version.cmp(&b.version));
    assert_eq!(found, [replica_template("v1"), replica_template("v1beta1")]);
}

#[tokio::test]
async fn discovery_of_an_unknown_group_finds_nothing() {
    let (cluster, mut api) = mock_cluster();
    let call = tokio::spawn(async move { cluster.discover_resources("example.com", "Widget").await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/apis", "");
    respond.json(200, json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}));
    assert_eq!(call.await.expect("no panic"), Ok(vec![]));
}

#[tokio::test]
async fn get_scale_reads_the_scale_subresource_of_the_reference() {
    let (cluster, mut api) = mock_cluster();
    let call = tokio::spawn(async move { cluster.get_scale(&replica_template("v1"), "ingester").await });
    let (seen, respond) = api.next().await;
    seen.assert(
        Method::GET,
        "/apis/rollout-operator.grafana.com/v1/namespaces/default-ns/replicatemplates/ingester/scale",
        "",
    );
    // A scale with no spec.replicas must come through as such (the core refuses to read it as 1).
    let scale = json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "ingester"},
                       "spec": {}, "status": {"replicas": 4}});
    respond.json(200, scale.clone());
    assert_eq!(call.await.expect("no panic"), Ok(scale));
    assert_eq!(
        api.mirror_permissions,
        BTreeSet::from([(
            "rollout-operator.grafana.com".to_string(),
            "replicatemplates/scale".to_string(),
            "get".to_string()
        )])
    );
}

#[tokio::test]
async fn get_scale_not_found_is_classified() {
    let (cluster, mut api) = mock_cluster();
    let call = tokio::spawn(async move { cluster.get_scale(&replica_template("v1"), "missing").await });
    let (_, respond) = api.next().await;
    respond.json(404, status(404, "NotFound", "replicatemplates \"missing\" not found"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::NotFound(_))));
}

#[tokio::test]
async fn write_back_is_a_json_merge_patch_of_the_status_subresource() {
    let (cluster, mut api) = mock_cluster();
    let patch = json!({"status": {"replicas": 3}});
    let sent = patch.clone();
    let call =
        tokio::spawn(async move { cluster.patch_resource_status(&replica_template("v1"), "ingester", &sent).await });
    let (seen, respond) = api.next().await;
    seen.assert(
        Method::PATCH,
        "/apis/rollout-operator.grafana.com/v1/namespaces/default-ns/replicatemplates/ingester/status",
        "",
    );
    assert_eq!(seen.header("content-type"), Some("application/merge-patch+json"));
    assert_eq!(seen.json(), patch);
    respond.json(200, json!({"kind": "ReplicaTemplate", "metadata": {"name": "ingester"}, "status": {"replicas": 3}}));
    assert_eq!(call.await.expect("no panic"), Ok(()));
    // Covered by the wildcard mirror-target permissions, and granted for the shipped CRD.
    for p in &api.mirror_permissions {
        assert!(mirror_target_allows(p));
        assert!(
            REPLICA_TEMPLATE_PERMISSIONS
                .iter()
                .any(|r| (r.group, r.resource, r.verb) == (&p.0[..], &p.1[..], &p.2[..]))
        );
    }
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

#[tokio::test]
async fn events_are_created_in_the_namespace_and_their_series_merge_patched() {
    let (cluster, mut api) = mock_cluster();
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.create_event(&event_object("ingester-zone-a.1")).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::POST, "/apis/events.k8s.io/v1/namespaces/default-ns/events", "");
    assert_eq!(seen.json()["reason"], "RolloutWaiting");
    assert_eq!(seen.json()["reportingController"], "grafana.com/rollout-operator");
    respond.json(201, serde_json::to_value(event_object("ingester-zone-a.1")).expect("serializable"));
    assert_eq!(call.await.expect("no panic"), Ok(()));

    let patch = json!({"series": {"count": 2, "lastObservedTime": "2026-01-01T00:00:00.000000Z"}});
    let sent = patch.clone();
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.patch_event("ingester-zone-a.1", &sent).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::PATCH, "/apis/events.k8s.io/v1/namespaces/default-ns/events/ingester-zone-a.1", "");
    assert_eq!(seen.header("content-type"), Some("application/merge-patch+json"));
    assert_eq!(seen.json(), patch);
    respond.json(404, status(404, "NotFound", "events.events.k8s.io \"ingester-zone-a.1\" not found"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::NotFound(_))));

    let call = tokio::spawn(async move { cluster.create_event(&event_object("x.2")).await });
    let (_, respond) = api.next().await;
    respond.json(403, status(403, "Forbidden", "events.events.k8s.io is forbidden"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::Forbidden(_))));
}

#[test]
fn mirror_target_permissions_cover_only_foreign_scale_and_status() {
    let p = |g: &str, r: &str, v: &str| (g.to_string(), r.to_string(), v.to_string());
    assert!(mirror_target_allows(&p("example.com", "widgets/scale", "get")));
    assert!(mirror_target_allows(&p("example.com", "widgets/status", "patch")));
    assert!(!mirror_target_allows(&p("example.com", "widgets", "get")));
    assert!(!mirror_target_allows(&p("example.com", "widgets/scale", "patch")));
    assert!(!mirror_target_allows(&p("apps", "statefulsets/scale", "get")), "own resources go in RBAC_REQUIREMENTS");
}

// ---- webhooks and TLS: live reads, Secrets, webhook configurations -------------------------------------------

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

#[tokio::test]
async fn secret_get_create_and_conditional_replace() {
    let (cluster, mut api) = mock_cluster();
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.get_secret("cert").await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/api/v1/namespaces/default-ns/secrets/cert", "");
    respond.json(404, status(404, "NotFound", "secrets \"cert\" not found"));
    assert_eq!(call.await.expect("no panic"), Ok(None));

    let c = cluster.clone();
    let call = tokio::spawn(async move { c.create_secret(&secret_object("cert", None)).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::POST, "/api/v1/namespaces/default-ns/secrets", "");
    assert_eq!(seen.json()["data"]["ca"], json!("Y2E="));
    respond.json(201, serde_json::to_value(secret_object("cert", Some("5"))).unwrap());
    assert_eq!(call.await.expect("no panic").unwrap().metadata.resource_version.as_deref(), Some("5"));

    let call = tokio::spawn(async move { cluster.replace_secret(&secret_object("cert", Some("5"))).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::PUT, "/api/v1/namespaces/default-ns/secrets/cert", "");
    assert_eq!(seen.json()["metadata"]["resourceVersion"], json!("5"));
    respond.json(409, status(409, "Conflict", "the object has been modified"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::Conflict(_))));
}

#[tokio::test]
async fn webhook_configurations_are_watched_by_label_and_patched_conditionally() {
    let (cluster, mut api) = mock_cluster();
    let selector = "grafana.com/inject-rollout-operator-ca=true,grafana.com/namespace=default-ns";
    let mut configs = forward(cluster.watch_webhook_configurations(WebhookKind::Mutating, selector));
    let path = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
    let (seen, respond) = api.next().await;
    assert_eq!(seen.path, path);
    assert!(
        seen.query.contains(
            "labelSelector=grafana.com%2Finject-rollout-operator-ca%3Dtrue%2Cgrafana.com%2Fnamespace%3Ddefault-ns"
        ),
        "{}",
        seen.query
    );
    respond.json(
        200,
        webhook_list(
            WebhookKind::Mutating,
            "10",
            vec![webhook_config(WebhookKind::Mutating, "prepare-downscale-default-ns", "9", None)],
        ),
    );
    assert_eq!(
        next_webhook_items(&mut configs, 3).await,
        ["Init", "InitApply(prepare-downscale-default-ns@9)", "InitDone"]
    );
    let (seen, respond) = api.next().await;
    assert!(seen.query.contains("watch=true"), "{}", seen.query);
    respond.watch_lines(&[event("ADDED", webhook_config(WebhookKind::Mutating, "late", "11", None))]);
    assert_eq!(next_webhook_items(&mut configs, 1).await, ["Apply(late@11)"]);

    let patch = json!({"metadata": {"resourceVersion": "11"}, "webhooks": [{"name": "w.grafana.com", "clientConfig": {"caBundle": "Q0E="}}]});
    let sent = patch.clone();
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.patch_webhook_configuration(WebhookKind::Mutating, "late", &sent).await });
    let (seen, respond) = api.next().await;
    // The watch resumed meanwhile; skip to the patch.
    let (seen, respond) = if seen.method == Method::GET { api.next().await } else { (seen, respond) };
    seen.assert(Method::PATCH, &format!("{path}/late"), "");
    assert_eq!(seen.header("content-type"), Some("application/merge-patch+json"));
    assert_eq!(seen.json(), patch);
    respond.json(200, webhook_config(WebhookKind::Mutating, "late", "12", Some("Q0E=")));
    let patched = call.await.expect("no panic").expect("patched");
    assert_eq!(patched.ca_bundles(), [("w.grafana.com".to_string(), Some(b"CA".to_vec()))]);
}

#[tokio::test]
async fn list_pods_follows_pages_and_passes_the_selector() {
    let (cluster, mut api) = mock_cluster();
    let call = tokio::spawn(async move { cluster.list_pods("name=a").await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/api/v1/namespaces/default-ns/pods", "&labelSelector=name%3Da&limit=500");
    respond.json(200, list("PodList", "7", Some("next"), vec![pod("a-0", "5")]));
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/api/v1/namespaces/default-ns/pods", "&labelSelector=name%3Da&limit=500&continue=next");
    respond.json(200, list("PodList", "7", None, vec![pod("a-1", "6")]));
    let pods = call.await.expect("no panic").expect("listed");
    assert_eq!(pods.iter().map(|p| p.name_any()).collect::<Vec<_>>(), ["a-0", "a-1"]);
}

#[tokio::test]
async fn get_pod_reads_one_pod_or_none() {
    let (cluster, mut api) = mock_cluster();
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.get_pod("a-0").await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, "/api/v1/namespaces/default-ns/pods/a-0", "");
    respond.json(200, pod("a-0", "5"));
    assert_eq!(call.await.expect("no panic").expect("read").map(|p| p.name_any()).as_deref(), Some("a-0"));
    let call = tokio::spawn(async move { cluster.get_pod("gone").await });
    let (_, respond) = api.next().await;
    respond.json(404, status(404, "NotFound", "pods \"gone\" not found"));
    assert_eq!(call.await.expect("no panic"), Ok(None));
}

#[tokio::test]
async fn pod_annotations_are_a_merge_patch_conditional_on_the_uid() {
    let (cluster, mut api) = mock_cluster();
    let changes = BTreeMap::from([
        ("grafana.com/eviction-intent".to_string(), Some("2026-01-01T00:00:30Z".to_string())),
        ("grafana.com/ready-time".to_string(), None),
    ]);
    let c = cluster.clone();
    let sent = changes.clone();
    let call = tokio::spawn(async move { c.patch_pod_annotations("a-0", "uid-a-0", &sent).await });
    let (seen, respond) = api.next().await;
    seen.assert(Method::PATCH, "/api/v1/namespaces/default-ns/pods/a-0", "");
    assert_eq!(seen.header("content-type"), Some("application/merge-patch+json"));
    assert_eq!(
        seen.json(),
        json!({"metadata": {"uid": "uid-a-0", "annotations": {
            "grafana.com/eviction-intent": "2026-01-01T00:00:30Z", "grafana.com/ready-time": null}}})
    );
    respond.json(200, pod("a-0", "6"));
    assert!(call.await.expect("no panic").is_ok());
    // Another pod of that name: the API answers 409, a conflict.
    let call = tokio::spawn(async move { cluster.patch_pod_annotations("a-0", "uid-old", &changes).await });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "Conflict", "Precondition failed: UID in precondition: uid-old"));
    assert!(matches!(call.await.expect("no panic"), Err(ApiError::Conflict(_))));
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

#[tokio::test]
async fn budgets_are_listed_then_watched_as_generic_objects_with_their_kind() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_disruption_budgets());
    let path = "/apis/rollout-operator.grafana.com/v1/namespaces/default-ns/zoneawarepoddisruptionbudgets";
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, path, "&limit=500");
    respond.json(
        200,
        json!({"kind": "ZoneAwarePodDisruptionBudgetList", "apiVersion": "rollout-operator.grafana.com/v1",
               "metadata": {"resourceVersion": "7"}, "items": [budget("ingester-rollout", "5")]}),
    );
    assert_eq!(
        next_budgets(&mut events, 3).await,
        ["Init", "InitApply(ingester-rollout@ZoneAwarePodDisruptionBudget)", "InitDone"]
    );
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, path, "&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=7");
    let mut deleted = budget("ingester-rollout", "9");
    deleted["kind"] = json!("ZoneAwarePodDisruptionBudget");
    deleted["apiVersion"] = json!("rollout-operator.grafana.com/v1");
    respond.watch_lines(&[event("DELETED", deleted)]);
    assert_eq!(next_budgets(&mut events, 1).await, ["Delete(ingester-rollout@ZoneAwarePodDisruptionBudget)"]);
}

#[tokio::test]
async fn a_missing_budget_crd_is_not_found() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_disruption_budgets());
    let (_, respond) = api.next().await;
    respond.json(404, status(404, "NotFound", "the server could not find the requested resource"));
    // The relist the watcher announced yielded nothing: its Init is not passed on.
    assert_eq!(next_budgets(&mut events, 1).await, ["Err(not_found)"]);
}

// ---- watches ----------------------------------------------------------------------------------------------

#[tokio::test]
async fn watch_statefulsets_lists_then_watches_by_label() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_statefulsets());

    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, STS_LIST_QUERY);
    respond.json(200, list("StatefulSetList", "100", None, vec![sts("a", "90"), sts("b", "95")]));
    assert_eq!(next_items(&mut events, 4).await, ["Init", "InitApply(a@90)", "InitApply(b@95)", "InitDone"]);

    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, &sts_watch_query("100"));
    respond.watch_lines(&[
        event("ADDED", sts("c", "101")),
        event("MODIFIED", sts("a", "102")),
        event("DELETED", sts("b", "104")),
        bookmark("110"),
    ]);
    assert_eq!(next_items(&mut events, 3).await, ["Apply(c@101)", "Apply(a@102)", "Delete(b@104)"]);

    // The watch ended (server timeout): resumed from the bookmark's resourceVersion, without a relist.
    let (seen, _respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, &sts_watch_query("110"));
    assert!(events.try_recv().is_err(), "no events without a response");
}

#[tokio::test]
async fn watch_statefulsets_follows_list_pages() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_statefulsets());

    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, STS_LIST_QUERY);
    respond.json(200, list("StatefulSetList", "100", Some("page-2"), vec![sts("a", "90")]));
    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, "&labelSelector=rollout-group&limit=500&continue=page-2");
    respond.json(200, list("StatefulSetList", "100", None, vec![sts("b", "95")]));

    assert_eq!(next_items(&mut events, 4).await, ["Init", "InitApply(a@90)", "InitApply(b@95)", "InitDone"]);
    let (seen, _respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, &sts_watch_query("100"));
}

#[tokio::test]
async fn watch_pods_lists_and_watches_all_pods_of_the_namespace() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_pods());
    let path = "/api/v1/namespaces/default-ns/pods";

    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, path, "&limit=500");
    respond.json(200, list("PodList", "7", None, vec![pod("a-0", "5")]));
    assert_eq!(next_items(&mut events, 3).await, ["Init", "InitApply(a-0@5)", "InitDone"]);

    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, path, "&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=7");
    respond.watch_lines(&[event("MODIFIED", pod("a-0", "8")), event("DELETED", pod("a-0", "9"))]);
    assert_eq!(next_items(&mut events, 2).await, ["Apply(a-0@8)", "Delete(a-0@9)"]);
}

#[tokio::test]
async fn watch_list_failure_is_yielded_then_retried_after_a_backoff() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_statefulsets());

    let (_, respond) = api.next().await;
    respond.json(500, status(500, "InternalError", "etcdserver: request timed out"));
    let err = next_error(&mut events).await;
    assert_eq!(
        err,
        ApiError::Unavailable(
            "watch statefulsets with label rollout-group in namespace default-ns: HTTP 500: etcdserver: request \
             timed out"
                .into()
        )
    );
    let failed_at = Instant::now();

    let (seen, respond) = api.next().await;
    // kube's default backoff starts at 800 ms: a failing API is not hammered.
    assert!(failed_at.elapsed() >= Duration::from_millis(700), "retried after {:?}", failed_at.elapsed());
    seen.assert(Method::GET, STS_PATH, STS_LIST_QUERY);
    respond.json(200, list("StatefulSetList", "100", None, vec![sts("a", "90")]));
    // The relist is announced once it yields something, so the failed one left consumers nothing to undo.
    assert_eq!(next_items(&mut events, 3).await, ["Init", "InitApply(a@90)", "InitDone"]);
}

/// A list that fails at every attempt is retried after growing pauses (the watcher's relist announcement does not
/// count as a success that would start the back-off again), and the same error is passed on once, not once per
/// attempt.
#[tokio::test]
async fn a_list_that_keeps_failing_is_retried_after_growing_pauses_and_its_error_passed_on_once() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_statefulsets());
    let mut sent_at = Vec::new();
    for _ in 0..4 {
        let (seen, respond) = api.next().await;
        sent_at.push(Instant::now());
        seen.assert(Method::GET, STS_PATH, STS_LIST_QUERY);
        respond.json(503, status(503, "ServiceUnavailable", "the server is shutting down"));
    }
    let pauses: Vec<Duration> = sent_at.windows(2).map(|w| w[1] - w[0]).collect();
    // 800 ms, 1.6 s, 3.2 s, each plus up to 800 ms of jitter.
    assert!(pauses[0] >= Duration::from_millis(700), "{pauses:?}");
    assert!(pauses[1] >= Duration::from_millis(1500), "{pauses:?}");
    assert!(pauses[2] >= Duration::from_millis(3000), "{pauses:?}");
    let err = next_error(&mut events).await;
    assert!(err.to_string().contains("the server is shutting down"), "{err}");
    assert!(events.try_recv().is_err(), "the repeats of the same error are folded");
}

#[tokio::test]
async fn watch_forbidden_is_rejected() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_pods());
    let message = "pods is forbidden: User \"system:serviceaccount:default-ns:rollout-operator\" cannot list \
                   resource \"pods\" in API group \"\" in the namespace \"default-ns\"";

    let (_, respond) = api.next().await;
    respond.json(403, status(403, "Forbidden", message));
    assert_eq!(
        next_error(&mut events).await,
        ApiError::Forbidden(format!("watch pods in namespace default-ns: {message}"))
    );
}

#[tokio::test]
async fn watch_expiry_is_yielded_then_relisted() {
    let (cluster, mut api) = mock_cluster();
    let mut events = forward(cluster.watch_statefulsets());

    let (_, respond) = api.next().await;
    respond.json(200, list("StatefulSetList", "100", None, vec![]));
    assert_eq!(next_items(&mut events, 2).await, ["Init", "InitDone"]);

    let (_, respond) = api.next().await;
    respond.watch_lines(&[event("ERROR", status(410, "Expired", "too old resource version: 100 (200)"))]);
    match next_error(&mut events).await {
        ApiError::Unavailable(message) => assert!(message.contains("too old resource version"), "{message}"),
        other => panic!("expected Unavailable, got {other:?}"),
    }

    let (seen, respond) = api.next().await;
    seen.assert(Method::GET, STS_PATH, STS_LIST_QUERY);
    respond.json(200, list("StatefulSetList", "200", None, vec![sts("a", "150")]));
    assert_eq!(next_items(&mut events, 3).await, ["Init", "InitApply(a@150)", "InitDone"]);
}

// ---- RBAC -------------------------------------------------------------------------------------------------

/// Drives every port operation once and checks that the permissions its requests need are exactly
/// [`RBAC_REQUIREMENTS`]: a new request kind fails here (and in [`MockApi::next`]) until it is declared, and a
/// declared permission nothing uses fails here too.
#[tokio::test]
async fn rbac_requirements_equal_the_requests_the_adapter_sends() {
    let (cluster, mut api) = mock_cluster();

    let mut statefulsets = forward(cluster.watch_statefulsets());
    let (_, respond) = api.next().await;
    respond.json(200, list("StatefulSetList", "1", None, vec![]));
    next_items(&mut statefulsets, 2).await;
    let _sts_watch = api.next().await;

    let mut pods = forward(cluster.watch_pods());
    let (_, respond) = api.next().await;
    respond.json(200, list("PodList", "1", None, vec![]));
    next_items(&mut pods, 2).await;
    let _pod_watch = api.next().await;

    let deleter = cluster.clone();
    let call = tokio::spawn(async move { deleter.delete_pod("a-0", &Preconditions::default()).await });
    let (_, respond) = api.next().await;
    respond.json(200, success_status());
    assert_eq!(call.await.expect("no panic"), Ok(()));

    let c = cluster.clone();
    let call = tokio::spawn(async move { c.get_config_map("z").await });
    let (_, respond) = api.next().await;
    respond.json(404, status(404, "NotFound", "not found"));
    assert_eq!(call.await.expect("no panic"), Ok(None));
    let c = cluster.clone();
    let cm = typed_config_map(config_map("z", "1", json!({})));
    let sent = cm.clone();
    let call = tokio::spawn(async move { c.create_config_map(&sent).await });
    let (_, respond) = api.next().await;
    respond.json(201, config_map("z", "2", json!({})));
    assert!(call.await.expect("no panic").is_ok());
    let c = cluster.clone();
    let call = tokio::spawn(async move { c.replace_config_map(&cm).await });
    let (_, respond) = api.next().await;
    respond.json(200, config_map("z", "3", json!({})));
    assert!(call.await.expect("no panic").is_ok());

    // Webhook and TLS reads and writes.
    macro_rules! once {
        ($call:expr, $status:expr, $body:expr) => {{
            let c = cluster.clone();
            let call = tokio::spawn(async move {
                let c = c;
                $call(c).await.is_ok()
            });
            let (_, respond) = api.next().await;
            respond.json($status, $body);
            call.await.expect("no panic")
        }};
    }
    let not_found = status(404, "NotFound", "not found");
    let empty = |kind: &str| list(kind, "1", None, vec![]);
    once!(|c: KubeCluster| async move { c.get_statefulset("a").await }, 404, not_found.clone());
    once!(|c: KubeCluster| async move { c.get_deployment("a").await }, 404, not_found.clone());
    once!(|c: KubeCluster| async move { c.get_replicaset("a").await }, 404, not_found.clone());
    assert!(once!(
        |c: KubeCluster| async move { c.list_statefulsets("rollout-group=g").await },
        200,
        empty("StatefulSetList")
    ));
    assert!(once!(|c: KubeCluster| async move { c.list_pods("").await }, 200, empty("PodList")));
    once!(|c: KubeCluster| async move { c.get_pod("a-0").await }, 404, not_found.clone());
    once!(
        |c: KubeCluster| async move {
            c.patch_pod_annotations("a-0", "u", &BTreeMap::from([("k".to_string(), None)])).await
        },
        404,
        not_found.clone()
    );
    let mut budgets = forward(cluster.watch_disruption_budgets());
    let (_, respond) = api.next().await;
    respond.json(
        200,
        json!({"kind": "ZoneAwarePodDisruptionBudgetList", "apiVersion": "rollout-operator.grafana.com/v1",
               "metadata": {"resourceVersion": "1"}, "items": []}),
    );
    assert_eq!(next_budgets(&mut budgets, 2).await, ["Init", "InitDone"]);
    let _budget_watch = api.next().await;
    once!(|c: KubeCluster| async move { c.get_secret("s").await }, 404, not_found.clone());
    once!(
        |c: KubeCluster| async move { c.create_secret(&secret_object("s", None)).await },
        409,
        status(409, "AlreadyExists", "exists")
    );
    once!(
        |c: KubeCluster| async move { c.replace_secret(&secret_object("s", Some("1"))).await },
        409,
        status(409, "Conflict", "moved")
    );
    for kind in [WebhookKind::Validating, WebhookKind::Mutating] {
        let mut configs = forward(cluster.watch_webhook_configurations(kind, "a=b"));
        let (_, respond) = api.next().await;
        respond.json(200, webhook_list(kind, "1", vec![]));
        assert_eq!(next_webhook_items(&mut configs, 2).await, ["Init", "InitDone"]);
        let _watch = api.next().await;
        once!(
            move |c: KubeCluster| async move { c.patch_webhook_configuration(kind, "w", &json!({})).await },
            409,
            status(409, "Conflict", "moved")
        );
    }

    let updater = cluster.clone();
    let call = tokio::spawn(async move { updater.replace_statefulset_status(&sts_object("a", "7", "r1")).await });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "Conflict", "moved on"));
    assert!(call.await.expect("no panic").is_err());

    once!(|c: KubeCluster| async move { c.create_event(&event_object("e")).await }, 201, json!({}));
    once!(|c: KubeCluster| async move { c.patch_event("e", &json!({})).await }, 200, json!({}));

    once!(|c: KubeCluster| async move { c.get_lease("leader").await }, 404, not_found.clone());
    once!(
        |c: KubeCluster| async move { c.create_lease(&typed_lease(lease("leader", "", Some("pod-a")))).await },
        201,
        lease("leader", "1", Some("pod-a"))
    );
    once!(
        |c: KubeCluster| async move { c.replace_lease(&typed_lease(lease("leader", "1", Some("pod-a")))).await },
        200,
        lease("leader", "2", Some("pod-a"))
    );

    let call = tokio::spawn(async move { cluster.patch_statefulset_replicas("a", 2, "7", &BTreeMap::new()).await });
    let (_, respond) = api.next().await;
    respond.json(409, status(409, "Conflict", "moved on"));
    assert!(call.await.expect("no panic").is_err());

    assert_eq!(api.permissions, declared());
    assert_eq!(declared().len(), RBAC_REQUIREMENTS.len(), "RBAC_REQUIREMENTS has duplicates");
}

#[test]
fn permission_mapping_follows_kubernetes_rbac() {
    let cases = [
        (Method::GET, "/api/v1/namespaces/default-ns/pods", "limit=500", Some(("", "pods", "list"))),
        (Method::GET, "/api/v1/namespaces/default-ns/pods", "watch=true&x=1", Some(("", "pods", "watch"))),
        (Method::GET, "/api/v1/namespaces/default-ns/pods/a", "", Some(("", "pods", "get"))),
        (Method::DELETE, "/api/v1/namespaces/default-ns/pods/a", "", Some(("", "pods", "delete"))),
        (
            Method::PATCH,
            "/apis/apps/v1/namespaces/default-ns/statefulsets/a/status",
            "",
            Some(("apps", "statefulsets/status", "patch")),
        ),
        (
            Method::PUT,
            "/apis/apps/v1/namespaces/default-ns/statefulsets/a/status",
            "",
            Some(("apps", "statefulsets/status", "update")),
        ),
        (
            Method::PUT,
            "/apis/apps/v1/namespaces/default-ns/statefulsets/a",
            "",
            Some(("apps", "statefulsets", "update")),
        ),
        (Method::GET, "/api/v1/namespaces/other-ns/pods", "", None),
        (Method::GET, "/version", "", None),
    ];
    for (method, path, query, expected) in cases {
        let expected = expected.map(|(g, r, v)| (g.to_string(), r.to_string(), v.to_string()));
        assert_eq!(permission_for(&method, path, query), expected, "{method} {path}?{query}");
    }
}

// ---- client construction ----------------------------------------------------------------------------------

fn write_kubeconfig(test: &str, server: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("kube-adapter-{test}-{}.yaml", std::process::id()));
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: test\n\
         clusters:\n- name: test\n  cluster:\n    server: {server}\n\
         contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\n    namespace: other-ns\n\
         users:\n- name: test\n  user:\n    token: test-token\n"
    );
    std::fs::write(&path, kubeconfig).expect("temp dir is writable");
    path
}

#[tokio::test]
async fn build_client_uses_kubeconfig_api_url_override_and_sends_cluster_header() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (tx, mut rx) = mpsc::unbounded_channel::<(Method, String, http::HeaderMap)>();
    let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
        let tx = tx.clone();
        async move {
            let _ = tx.send((request.method().clone(), request.uri().to_string(), request.headers().clone()));
            axum::Json(success_status())
        }
    });
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    // The kubeconfig's own server is unreachable: only the override can make the request succeed.
    let kubeconfig = write_kubeconfig("override", "https://kubeconfig-server.invalid:6443");

    let client = build_client(
        Some(&kubeconfig),
        Some(&format!("http://{address}")),
        Duration::from_secs(5),
        NS,
        UNLIMITED,
        KubeClientMetrics::default(),
    )
    .await
    .expect("client");
    let result = KubeCluster::new(client, NS).delete_pod("a-0", &Preconditions::default()).await;
    let _ = std::fs::remove_file(&kubeconfig);
    server.abort();

    assert_eq!(result, Ok(()));
    let (method, uri, headers) = rx.try_recv().expect("the fake API server saw the request");
    assert_eq!((method, uri.as_str()), (Method::DELETE, "/api/v1/namespaces/default-ns/pods/a-0?"));
    let cluster: Vec<_> = headers.get_all(CLUSTER_HEADER).iter().collect();
    assert_eq!(cluster, [NS]);
    assert_eq!(headers.get("authorization").and_then(|v| v.to_str().ok()), Some("Bearer test-token"));
}

#[tokio::test]
async fn load_config_applies_api_url_and_client_timeout() {
    let kubeconfig = write_kubeconfig("timeout", "https://kubeconfig-server.example:6443");
    let with_override = load_config(Some(&kubeconfig), Some("https://10.0.0.1:6443"), Duration::from_secs(7)).await;
    let without_override = load_config(Some(&kubeconfig), None, Duration::from_secs(7)).await;
    let _ = std::fs::remove_file(&kubeconfig);

    let config = with_override.expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://10.0.0.1:6443/");
    assert_eq!(config.read_timeout, Some(Duration::from_secs(7)));
    assert_eq!(config.write_timeout, Some(Duration::from_secs(7)));
    assert!(config.reset_reader_on_write);
    assert!(!config.default_retry, "writes are not retried behind the caller's back");
    let config = without_override.expect("config");
    assert_eq!(config.cluster_url.to_string(), "https://kubeconfig-server.example:6443/");
}

#[test]
fn zero_client_timeout_means_no_timeout() {
    let mut config = Config::new("https://example.invalid".parse().unwrap());
    let before = (config.read_timeout, config.write_timeout);
    apply_client_timeout(&mut config, Duration::ZERO);
    assert_eq!((config.read_timeout, config.write_timeout), before);
}

#[test]
fn client_timeout_keeps_an_explicit_read_timeout() {
    let mut config = Config::new(http::Uri::from_static("https://10.0.0.1:6443"));
    config.read_timeout = Some(Duration::from_secs(1));
    apply_client_timeout(&mut config, Duration::from_secs(300));
    assert_eq!(config.read_timeout, Some(Duration::from_secs(1)));
    assert_eq!(config.write_timeout, Some(Duration::from_secs(300)));
}

fn expect_adapter_error(result: Result<Client, AdapterError>) -> AdapterError {
    match result {
        Ok(_) => panic!("expected an AdapterError, got a client"),
        Err(err) => err,
    }
}

#[tokio::test]
async fn unreadable_kubeconfig_names_the_file_and_the_flag() {
    let path = Path::new("/nonexistent/rollout-operator/kubeconfig");
    let err = expect_adapter_error(
        build_client(Some(path), None, Duration::from_secs(5), NS, UNLIMITED, KubeClientMetrics::default()).await,
    );
    let message = err.to_string();
    assert!(matches!(err, AdapterError::Kubeconfig { .. }), "{err:?}");
    assert!(message.contains("/nonexistent/rollout-operator/kubeconfig"), "{message}");
    assert!(message.contains("-kubernetes.config-file"), "{message}");
}

#[tokio::test]
async fn invalid_api_url_is_reported_with_the_flag() {
    let kubeconfig = write_kubeconfig("bad-url", "https://kubeconfig-server.example:6443");
    let result = build_client(
        Some(&kubeconfig),
        Some("http://bad host"),
        Duration::from_secs(5),
        NS,
        UNLIMITED,
        KubeClientMetrics::default(),
    )
    .await;
    let _ = std::fs::remove_file(&kubeconfig);
    let err = expect_adapter_error(result);
    assert!(matches!(err, AdapterError::ApiUrl { .. }), "{err:?}");
    assert!(err.to_string().contains("-kubernetes.api-url \"http://bad host\""), "{err}");
}

#[tokio::test]
async fn in_cluster_config_outside_a_cluster_says_what_to_do() {
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        eprintln!("skipped: running inside a Kubernetes pod, in-cluster config may load");
        return;
    }
    let err = expect_adapter_error(
        build_client(None, None, Duration::from_secs(5), NS, UNLIMITED, KubeClientMetrics::default()).await,
    );
    assert!(matches!(err, AdapterError::InCluster { .. }), "{err:?}");
    assert!(err.to_string().contains("set -kubernetes.config-file"), "{err}");
}

#[tokio::test]
async fn cluster_header_layer_sends_exactly_one_value() {
    use tower::ServiceExt;
    let inner = tower::service_fn(|request: Request<()>| async move {
        let values: Vec<String> = request
            .headers()
            .get_all(CLUSTER_HEADER)
            .iter()
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .collect();
        Ok::<_, std::convert::Infallible>(values)
    });
    let service = ClusterHeaderLayer::new(NS).expect("valid namespace").layer(inner);
    let request = Request::builder().header(CLUSTER_HEADER, "stale").body(()).expect("request");
    let values = service.oneshot(request).await.expect("infallible");
    assert_eq!(values, [NS]);
}

#[test]
fn namespace_that_cannot_be_a_header_value_is_rejected() {
    let err = ClusterHeaderLayer::new("bad\nnamespace").expect_err("newline is not allowed in a header");
    assert!(matches!(err, AdapterError::ClusterHeader { .. }), "{err:?}");
}
