//! Prepare-downscale without the zone tracker (`-use-zone-tracker=false`, the default): the downscale recorded by
//! the mutating response or on the `/scale` request's parent, and a forbidden zone tracker.

use super::*;

fn app_without_tracker(cluster: &FakeCluster, pods: &FakePods) -> axum::Router {
    let now: Timestamp = NOW.parse().unwrap();
    router(Webhooks {
        api: cluster.clone(),
        pods: pods.clone(),
        settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)),
        clock: Arc::new(move || now),
    })
}

fn decoded_patch(response: &Value) -> Value {
    assert_eq!(response["patchType"], "JSONPatch", "{response}");
    let bytes: k8s_openapi::ByteString = serde_json::from_value(response["patch"].clone()).unwrap();
    serde_json::from_slice(&bytes.0).unwrap()
}

/// A StatefulSet UPDATE is recorded by the mutating response itself (JSONPatch adding
/// `grafana.com/last-downscale`, dated at the answer plus the commit margin): no ConfigMap, no write of ours.
#[tokio::test]
async fn without_the_tracker_an_update_gets_its_last_downscale_annotation_through_the_json_patch() {
    let cluster = cluster_with_zones();
    cluster.fail_reads(None);
    let pods = FakePods::default();
    let app = app_without_tracker(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(pods.calls().len(), 2, "the leaving pods are prepared");
    let patch = decoded_patch(&response);
    assert_eq!(
        patch,
        json!([{"op": "add", "path": "/metadata/annotations/grafana.com~1last-downscale", "value": "2026-01-01T12:00:10Z"}])
    );
    assert!(cluster.config_map(CM).is_none());
    assert!(
        cluster.calls().iter().all(|c| !matches!(c, Call::CreateConfigMap { .. } | Call::ReplaceConfigMap { .. })),
        "{:?}",
        cluster.calls()
    );
    // Dry runs: the verdict, no patch, no pod call.
    let before = pods.calls().len();
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", true)).await;
    assert_eq!(response["allowed"], true);
    assert!(response.get("patch").is_none(), "{response}");
    assert_eq!(pods.calls().len(), before);
}

/// Another zone's annotation within its min time denies, as the reference does without the tracker.
#[tokio::test]
async fn without_the_tracker_another_zones_annotation_denies_within_the_min_time() {
    let cluster = cluster_with_zones();
    let mut b = cluster.statefulset("ingester-zone-b").unwrap();
    b.metadata.annotations.get_or_insert_default().insert(keys::LAST_DOWNSCALE.into(), "2026-01-01T11:00:00Z".into());
    cluster.put_statefulset(b);
    let pods = FakePods::default();
    let app = app_without_tracker(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(response["status"]["message"].as_str().unwrap().contains("ingester-zone-b was downscaled at"));
    assert!(pods.calls().is_empty());
}

/// A `/scale` request cannot carry the annotation: the parent is patched, conditional on the resourceVersion read,
/// dated 30 s ahead, and the downscale allowed, whether the request carries a resourceVersion (an HPA's PUT) or not
/// (`kubectl scale`'s PATCH). The write moves the parent's resourceVersion, so the API server runs the request
/// again (re-admits the PATCH; refuses the PUT, which the HPA retries): that admission finds the date ahead, writes
/// nothing and is allowed.
#[tokio::test]
async fn without_the_tracker_a_scale_request_annotates_the_parent_conditionally_and_its_readmission_writes_nothing() {
    for carries_version in [true, false] {
        let cluster = cluster_with_zones();
        let pods = FakePods::default();
        let app = app_without_tracker(&cluster, &pods);
        let rv = cluster.statefulset("ingester-zone-a").unwrap().metadata.resource_version.unwrap();
        let mut object = scale(1);
        if carries_version {
            object["metadata"]["resourceVersion"] = json!(rv);
        }
        let r = review("statefulsets", "ingester-zone-a", scale(3), object, false);
        let response = admit(&app, "/admission/prepare-downscale", &r).await;
        assert_eq!(response["allowed"], true, "carrying a resourceVersion: {carries_version}: {response}");
        assert!(pods.calls().iter().all(|(m, _)| *m == PodMethod::Post), "no cancel: {:?}", pods.calls());
        let written: Vec<_> =
            cluster.calls().into_iter().filter(|c| matches!(c, Call::PatchAnnotations { .. })).collect();
        let expected = BTreeMap::from([(keys::LAST_DOWNSCALE.to_string(), "2026-01-01T12:00:30Z".to_string())]);
        assert_eq!(
            written,
            vec![Call::PatchAnnotations {
                name: "ingester-zone-a".into(),
                resource_version: rv,
                annotations: expected
            }]
        );
        // Admitted again, as the API server re-applies the PATCH to the object just written (or the HPA retries
        // its PUT with the resourceVersion it reads again): allowed, nothing written.
        cluster.take_calls();
        let rv = cluster.statefulset("ingester-zone-a").unwrap().metadata.resource_version.unwrap();
        let mut again = scale(1);
        again["metadata"]["resourceVersion"] = json!(rv);
        let r = review("statefulsets", "ingester-zone-a", scale(3), again, false);
        let response = admit(&app, "/admission/prepare-downscale", &r).await;
        assert_eq!(response["allowed"], true, "{response}");
        assert!(cluster.calls().iter().all(|c| !matches!(c, Call::PatchAnnotations { .. })), "{:?}", cluster.calls());
    }
}

/// The parent's annotation cannot be written (here: the operator may not patch StatefulSets): the downscale is
/// denied, saying which verb to grant, and the prepared pods are told to cancel.
#[tokio::test]
async fn without_the_tracker_a_scale_request_whose_record_fails_is_denied_and_undone() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app_without_tracker(&cluster, &pods);
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(1), false);
    // Reads do not take queued failures: the first write, the annotation patch, gets it.
    cluster.fail_next(ApiError::Forbidden("statefulsets.apps is forbidden".into()));
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.contains("grant the operator `patch` on apps statefulsets"), "{message}");
    let deletes = pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).count();
    assert_eq!(deletes, 2, "{:?}", pods.calls());
}

/// With the zone tracker on but no configmaps permission, prepare-downscale denies (the min time cannot be
/// checked) and says which verbs to grant.
#[tokio::test]
async fn a_forbidden_zone_tracker_denies_and_names_the_missing_verbs() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let forbidden = ApiError::Forbidden("configmaps \"x\" is forbidden".into());
    cluster.fail_config_map_reads(Some(forbidden));
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let warning = response["warnings"].to_string();
    assert!(warning.contains("grant the operator get, update and create on configmaps"), "{response}");
    assert!(pods.calls().is_empty());
}
