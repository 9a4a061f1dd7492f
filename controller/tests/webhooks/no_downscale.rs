//! No-downscale: a labelled StatefulSet and its `/scale` denied, failing open when the parent cannot be read, and
//! a refused parent kind said once.

use super::*;

#[tokio::test]
async fn no_downscale_denies_a_labelled_statefulset_and_its_scale_subresource() {
    let cluster = FakeCluster::new(vec![no_downscale_sts(3)], vec![]);
    let app = app(&cluster, &FakePods::default());
    let message = "downscale of statefulsets/ingester-zone-a in ns from 3 to 2 replicas is not allowed because it has \
                   the label 'grafana.com/no-downscale=true'";
    let r = review(
        "statefulsets",
        "ingester-zone-a",
        with_replicas(no_downscale_sts(3), 3),
        with_replicas(no_downscale_sts(2), 2),
        false,
    );
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], message);
    // The /scale subresource: labels come from the live parent.
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(2), false);
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], message);
    // Upscale through /scale: allowed without a lookup.
    let response =
        admit(&app, "/admission/no-downscale", &review("statefulsets", "ingester-zone-a", scale(2), scale(3), false))
            .await;
    assert_eq!(response["allowed"], true);
}

#[tokio::test]
async fn no_downscale_fails_open_when_the_parent_cannot_be_read() {
    let cluster = FakeCluster::default();
    let app = app(&cluster, &FakePods::default());
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(2), false);
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], true);
    assert_eq!(
        response["warnings"][0],
        "can't get statefulsets/ingester-zone-a in namespace ns, allowing the change: statefulsets.apps \"ingester-zone-a\" not found"
    );
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let response = admit(&app, "/admission/no-downscale", &r).await;
    assert_eq!(response["allowed"], true);
    assert!(
        response["warnings"][0].as_str().unwrap().ends_with("allowing the change: API unavailable: connection refused")
    );
}

/// The log lines written while the guard lives, for tests of what is said (on this thread).
#[derive(Clone, Default)]
struct CapturedLog(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLog {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLog {
    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap()).lines().filter(|l| l.contains(needle)).count()
    }
}

/// None of the reference's deployments grants `get` on Deployments: every `/scale` of one reads its parent, is
/// refused and let through with the reference's warning, but the refusal is said once (one error, the metric) and
/// not at every request; a read answered after a grant decides at once and clears the metric, and a refusal after
/// that is said again.
#[tokio::test]
async fn a_refused_parent_kind_is_said_once_and_read_at_every_request() {
    let log = CapturedLog::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let cluster = FakeCluster::new(vec![no_downscale_sts(3)], vec![]);
    let mut deployment = k8s_openapi::api::apps::v1::Deployment::default();
    deployment.metadata.name = Some("ingester-zone-a".into());
    deployment.metadata.labels = Some([(keys::NO_DOWNSCALE.to_string(), "true".to_string())].into());
    cluster.put_deployment(deployment);
    let metrics = Arc::new(rollout_operator::ops::metrics::Metrics::new());
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: FakePods::default(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10))
            .with_parent_lookups(ParentLookups::reporting_to(metrics.clone())),
        clock: Arc::new(|| NOW.parse().unwrap()),
    });
    let deployment_scale = review("deployments", "ingester-zone-a", scale(3), scale(2), false);
    let forbidden = "deployments.apps \"ingester-zone-a\" is forbidden: cannot get resource \"deployments\"";
    let said = "the no-downscale webhook may not read apps deployments: /scale downscales";
    cluster.fail_reads(Some(ApiError::Forbidden(forbidden.into())));
    for _ in 0..3 {
        let response = admit(&app, "/admission/no-downscale", &deployment_scale).await;
        assert_eq!(response["allowed"], true);
        assert!(response["warnings"][0].as_str().unwrap().ends_with(forbidden), "{response}");
    }
    assert_eq!(log.count(said), 1);
    assert!(metrics.is_feature_disabled("no-downscale-parent-lookups", "deployments get"));
    // Granted: the next request reads the labelled Deployment and is denied.
    cluster.fail_reads(None);
    let response = admit(&app, "/admission/no-downscale", &deployment_scale).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert!(!metrics.is_feature_disabled("no-downscale-parent-lookups", "deployments get"));
    // Refused again (the grant taken back): said again.
    cluster.fail_reads(Some(ApiError::Forbidden(forbidden.into())));
    assert_eq!(admit(&app, "/admission/no-downscale", &deployment_scale).await["allowed"], true);
    assert_eq!(log.count(said), 2);
}
