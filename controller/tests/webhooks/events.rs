//! Events: denied and prepared downscales told on their StatefulSet, dry runs not; no-downscale denials told on their
//! object.

use super::*;

/// With Events on, a denied downscale and one admitted after preparing pods are told on the StatefulSet; a dry run
/// and a request that is not a downscale tell nothing.
#[tokio::test]
async fn denied_and_prepared_downscales_are_told_as_events_but_dry_runs_are_not() {
    use rollout_operator::ops::events::{EventRecorder, EventType};
    use rollout_operator::ops::metrics::Metrics;
    let cluster = cluster_with_zones();
    let (events, mut queue) = EventRecorder::new(16, Arc::new(Metrics::new()));
    let now: Timestamp = NOW.parse().unwrap();
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: FakePods::default(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10)).with_events(events),
        clock: Arc::new(move || now),
    });
    let mut told = || std::iter::from_fn(|| queue.try_recv()).collect::<Vec<_>>();

    assert_eq!(
        admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-b", true)).await["allowed"],
        true
    );
    assert!(told().is_empty(), "a dry run tells nothing");
    assert_eq!(
        admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await["allowed"],
        true
    );
    let events = told();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].reason, events[0].type_), ("DownscalePrepared", EventType::Normal));
    assert_eq!((events[0].regarding.kind, events[0].regarding.name.as_str()), ("StatefulSet", "ingester-zone-a"));
    assert_eq!(events[0].note, "downscale by hpa admitted after preparing ingester-zone-a-2, ingester-zone-a-1");

    // Zone b within zone a's 12 h: denied, and told with the webhook's message.
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-b", false)).await;
    assert_eq!(response["allowed"], false);
    let events = told();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!((events[0].reason, events[0].type_), ("DownscaleDenied", EventType::Warning));
    let message = response["status"]["message"].as_str().unwrap_or_default();
    assert_eq!(events[0].note, format!("downscale by hpa denied: {message}"));
    // An upscale is no news.
    let up = review(
        "statefulsets",
        "ingester-zone-c",
        with_replicas(zone("ingester-zone-c", 3), 3),
        with_replicas(zone("ingester-zone-c", 4), 4),
        false,
    );
    assert_eq!(admit(&app, "/admission/prepare-downscale", &up).await["allowed"], true);
    assert!(told().is_empty());
}

#[tokio::test]
async fn a_no_downscale_denial_is_told_on_its_object() {
    use rollout_operator::ops::events::{EventRecorder, EventType};
    use rollout_operator::ops::metrics::Metrics;
    let cluster = FakeCluster::new(vec![no_downscale_sts(3)], vec![]);
    let (events, mut queue) = EventRecorder::new(16, Arc::new(Metrics::new()));
    let app = router(Webhooks {
        api: cluster,
        pods: FakePods::default(),
        settings: WebhookSettings::new("ns", "cluster.local.", None, Duration::from_secs(10)).with_events(events),
        clock: Arc::new(Timestamp::now),
    });
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(2), false);
    assert_eq!(admit(&app, "/admission/no-downscale", &r).await["allowed"], false);
    let told = queue.try_recv().expect("an Event");
    assert_eq!(
        (told.reason, told.type_, told.regarding.name.as_str()),
        ("DownscaleDenied", EventType::Warning, "ingester-zone-a")
    );
    assert!(
        told.note.starts_with("downscale by hpa denied: downscale of statefulsets/ingester-zone-a"),
        "{}",
        told.note
    );
    assert!(queue.try_recv().is_none());
}
