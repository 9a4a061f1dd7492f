//! Pod deletion (preconditions, failures classified) and the StatefulSet status written back.

use super::*;

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
