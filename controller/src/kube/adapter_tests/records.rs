//! Config maps (the group downscale record) and leases (leader election).

use super::*;

// ---- config maps (the group downscale record) ----------------------------------------------------------------

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
