//! Scaling: replica patches, discovery, the scale subresource, the mirror's write-back and events.

use super::*;

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
