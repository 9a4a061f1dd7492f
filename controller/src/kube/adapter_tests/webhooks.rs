//! Webhooks and TLS: live reads, Secrets, webhook configurations; pods read live and patched; budgets.

use super::*;

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
