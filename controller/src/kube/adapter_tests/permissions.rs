//! RBAC: the permissions the adapter's requests need are exactly those it declares.

use super::*;
use crate::health_check::feed::HealthCheckSource;

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
    let mut health_checks = forward(cluster.watch_health_checks());
    let (_, respond) = api.next().await;
    respond.json(
        200,
        json!({"kind": "RolloutHealthCheckList", "apiVersion": "rollout-operator.grafana.com/v1",
               "metadata": {"resourceVersion": "1"}, "items": [{"metadata": {"name": "ingester-health"}, "spec": {}}]}),
    );
    let listed = next_budgets(&mut health_checks, 3).await;
    assert_eq!(listed, ["Init", "InitApply(ingester-health@RolloutHealthCheck)", "InitDone"]);
    let _health_check_watch = api.next().await;
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
