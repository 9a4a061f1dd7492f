//! Prepare-downscale with the zone tracker: the record claim, pod calls and their undo, the handler deadline, dry
//! runs, concurrent admissions, and the window between the first read and the claim.

use super::*;

const ALLOWED: &str = "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is allowed -- all pods successfully prepared for shutdown.";
const DENIED: &str = "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is not allowed because";

#[tokio::test]
async fn prepare_calls_the_leaving_pods_records_the_downscale_and_does_not_touch_the_statefulset() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["status"]["message"], ALLOWED);
    let mut calls = pods.calls();
    calls.sort_by(|a, b| a.1.cmp(&b.1));
    assert_eq!(
        calls,
        [
            (
                PodMethod::Post,
                "http://ingester-zone-a-1.ingester-zone-a.ns.svc.cluster.local.:8080/ingester/prepare-shutdown".into()
            ),
            (
                PodMethod::Post,
                "http://ingester-zone-a-2.ingester-zone-a.ns.svc.cluster.local.:8080/ingester/prepare-shutdown".into()
            ),
        ]
    );
    assert!(pods.calls.lock().unwrap().iter().all(|r| r.json_content_type));
    let record = record(&cluster).expect("the record was created");
    // Dated when the replica change will have committed: the answer (NOW) plus the commit margin.
    let committed_by = NOW.parse::<Timestamp>().unwrap() + jiff::SignedDuration::try_from(COMMIT_MARGIN).unwrap();
    assert_eq!(record.last_downscaled.get("ingester-zone-a"), Some(&committed_by));
    let cm = cluster.config_map(CM).unwrap();
    let markers = rollout_core::downscale::parse_in_progress(
        cm.metadata.annotations.unwrap_or_default().get(keys::DOWNSCALES_IN_PROGRESS).map(String::as_str),
    )
    .unwrap();
    assert_eq!(markers.len(), 1);
    assert_eq!(markers[0].until, committed_by, "the marker now lasts only until the change has committed");
    assert!(
        cluster.calls().iter().all(|c| !matches!(c, Call::UpdateStatus { .. })),
        "nothing is written to the object under admission"
    );

    // Another zone while zone-a's change may still be committing: denied as in progress.
    let before = pods.calls().len();
    let mut r = downscale_review("ingester-zone-b", false);
    r["request"]["name"] = json!("ingester-zone-b");
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert!(response["status"]["message"].as_str().unwrap().ends_with("already in process of updating replicas"));
    // Later, within 12 h: denied by the min time, no pod called.
    let later = app_at(&cluster, &pods, "2026-01-01T12:01:00Z");
    let response = admit(&later, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(
        response["status"]["message"],
        "downscale of statefulsets/ingester-zone-b in ns from 3 to 1 replicas is not allowed because statefulset \
         ingester-zone-a was downscaled at 2026-01-01 12:00:10 +0000 UTC and is labelled to wait 12h0m0s between zone downscales"
    );
    assert_eq!(pods.calls().len(), before);
}

#[tokio::test]
async fn a_failed_prepare_is_undone_and_denied() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    pods.failing.lock().unwrap().insert("ingester-zone-a-1.".into());
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], format!("{DENIED} one or more pods failed to prepare for shutdown."));
    assert!(response["warnings"][0].as_str().unwrap().contains("connection refused"), "{response}");
    let deletes: BTreeSet<String> =
        pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).map(|(_, u)| u).collect();
    assert_eq!(deletes.len(), 2, "DELETE to every endpoint: {:?}", pods.calls());
    let record = record(&cluster).expect("record");
    assert!(!record.last_downscaled.contains_key("ingester-zone-a"), "the claim is undone: {record:?}");
    // So another zone may go at once.
    let mut r = downscale_review("ingester-zone-b", false);
    r["request"]["name"] = json!("ingester-zone-b");
    pods.failing.lock().unwrap().clear();
    assert_eq!(admit(&app, "/admission/prepare-downscale", &r).await["allowed"], true);
}

/// A pod that never answers: the handler deadline (90 % of the 10 s request timeout) ends the wait, the prepare
/// calls are undone and the downscale is denied. Runs on a paused clock, so the 9 s pass instantly.
#[tokio::test(start_paused = true)]
async fn a_pod_that_never_answers_is_cut_off_by_the_handler_deadline() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    pods.hanging.lock().unwrap().insert("ingester-zone-a-2.".into());
    let app = app(&cluster, &pods);
    let started = tokio::time::Instant::now();
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    let took = started.elapsed();
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["message"], format!("{DENIED} one or more pods failed to prepare for shutdown."));
    assert!(response["warnings"][0].as_str().unwrap().contains("deadline"), "{response}");
    assert!(took >= Duration::from_secs(9) && took < Duration::from_secs(30), "answered after {took:?} (virtual time)");
    let deletes = pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).count();
    assert_eq!(deletes, 2, "{:?}", pods.calls());
    assert!(!record(&cluster).unwrap().last_downscaled.contains_key("ingester-zone-a"));
}

#[tokio::test]
async fn dry_runs_have_no_side_effects_but_get_the_real_verdict() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", true)).await;
    assert_eq!(response["allowed"], true);
    assert!(response["status"]["message"].as_str().unwrap().contains("dry run: 2 pods would be prepared"));
    assert_eq!(pods.calls(), []);
    assert!(cluster.config_map(CM).is_none());
    assert!(cluster.calls().is_empty(), "{:?}", cluster.calls());
    // A dry run that would be denied is denied.
    cluster.set_pod_ready("ingester-zone-b-0", false);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", true)).await;
    assert_eq!(response["allowed"], false);
}

#[tokio::test]
async fn prepare_is_denied_while_another_zone_has_unavailable_pods_and_skips_missing_pods() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    cluster.set_pod_ready("ingester-zone-c-2", false);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(
        response["status"]["message"],
        format!("{DENIED} statefulset ingester-zone-c has 0 non-updated replicas and 1 non-ready replicas")
    );
    cluster.set_pod_ready("ingester-zone-c-2", true);

    // Zone a's pod 2 does not exist yet (still scaling up): only pod 1 is called.
    let remaining: Vec<_> =
        cluster.pods().into_iter().filter(|p| p.metadata.name.as_deref() != Some("ingester-zone-a-2")).collect();
    let statefulsets = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"].iter().map(|z| zone(z, 3)).collect();
    let cluster = FakeCluster::new(statefulsets, remaining);
    let app = self::app(&cluster, &pods);
    pods.calls.lock().unwrap().clear();
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(response["warnings"][0], "pods that do not exist were not called: ingester-zone-a-2");
    assert_eq!(pods.calls().len(), 1);
}

#[tokio::test]
async fn listing_failures_deny() {
    let cluster = cluster_with_zones();
    let app = app(&cluster, &FakePods::default());
    cluster.fail_reads(Some(ApiError::Unavailable("etcd timeout".into())));
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["status"]["message"], format!("{DENIED} finding other statefulsets failed."));
    assert!(response["warnings"][0].as_str().unwrap().contains("etcd timeout"));
}

/// Many simultaneous downscale admissions for the zones of one group: exactly the ones the min-time rule allows
/// pass (every admission of the first zone to claim, no other), and only the admitted ones called pods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_admissions_for_different_zones_let_exactly_one_zone_through() {
    for round in 0..10 {
        let cluster = cluster_with_zones();
        let pods = FakePods::default();
        let app = app(&cluster, &pods);
        let mut tasks = Vec::new();
        for i in 0..9 {
            let zone = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"][(i + round) % 3];
            let mut r = downscale_review(zone, false);
            r["request"]["name"] = json!(zone);
            r["request"]["uid"] = json!(format!("uid-{i}"));
            let app = app.clone();
            tasks.push(tokio::spawn(async move { (zone, admit(&app, "/admission/prepare-downscale", &r).await) }));
        }
        let mut allowed = BTreeSet::new();
        let mut denied = 0;
        for task in tasks {
            let (zone, response) = task.await.unwrap();
            if response["allowed"] == true {
                allowed.insert(zone);
            } else {
                denied += 1;
                let message = response["status"]["message"].as_str().unwrap().to_string();
                assert!(
                    message.contains("between zone downscales")
                        || message.contains("already in process of updating replicas"),
                    "round {round}: {message}"
                );
            }
        }
        assert_eq!(allowed.len(), 1, "round {round}: exactly one zone passes, got {allowed:?}");
        // Exactly one request passes: concurrent requests for the winning zone are refused too while its downscale
        // is being prepared (a second claim of a StatefulSet would take over the first one's marker).
        assert_eq!(denied, 8, "round {round}");
        let winner = allowed.into_iter().next().unwrap();
        assert!(
            pods.calls().iter().all(|(_, url)| url.contains(&format!("{winner}-"))),
            "round {round}: {:?}",
            pods.calls()
        );
        assert_eq!(record(&cluster).unwrap().last_downscaled.keys().collect::<Vec<_>>(), [winner]);
    }
}

/// Invariant 5, the window between the webhook's first live read and its claim: a rollout step that lands just as the
/// marker is written (here, zone b's pod 0 replaced by a not-yet-ready pod at a new revision) is seen by the re-read
/// after the claim: the downscale is denied, no pod is called, and the claim is rolled back.
#[tokio::test]
async fn a_rollout_step_racing_the_claim_is_seen_by_the_re_read_and_the_downscale_is_denied() {
    let cluster = cluster_with_zones();
    cluster.after_next_config_map_write(|c| {
        let mut s = c.statefulset("ingester-zone-b").unwrap();
        s.status.as_mut().unwrap().update_revision = Some("r2".into());
        c.put_statefulset(s);
        c.put_pod(pod("ingester-zone-b", 0, "r2", false, 2));
    });
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("statefulset ingester-zone-b has 2 non-updated replicas and 1 non-ready replicas"),
        "{message}"
    );
    assert!(pods.calls().iter().all(|(m, _)| *m == PodMethod::Delete), "no prepare call: {:?}", pods.calls());
    let record = record(&cluster).expect("record");
    assert!(!record.last_downscaled.contains_key("ingester-zone-a"), "the claim is rolled back: {record:?}");
    let cm = cluster.config_map(CM).unwrap();
    assert!(
        !cm.metadata.annotations.unwrap_or_default().contains_key(keys::DOWNSCALES_IN_PROGRESS),
        "the in-progress marker is cleared"
    );
}

/// With a clock that is not on a whole second, the in-progress marker was stored rounded down
/// but looked up rounded up, so it was never cleared and held the group for the whole marker lifetime. Both the
/// success and the undo path must clear it.
#[tokio::test]
async fn the_in_progress_marker_is_cleared_when_the_clock_is_between_seconds() {
    let in_progress = |cluster: &FakeCluster| {
        cluster
            .config_map(CM)
            .and_then(|cm| cm.metadata.annotations)
            .and_then(|a| a.get(keys::DOWNSCALES_IN_PROGRESS).cloned())
            .filter(|v| v != "{}")
    };
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app_at(&cluster, &pods, "2026-01-01T12:00:00.5Z");
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], true, "{response}");
    // After a successful prepare the marker is found and shortened to the commit (12:00:10.5, rounded up).
    let left = in_progress(&cluster).expect("shortened, not left at its claim deadline");
    assert!(left.contains("\"until\":\"2026-01-01T12:00:11Z\""), "{left}");

    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    pods.failing.lock().unwrap().insert("ingester-zone-a-1.".into());
    let app = app_at(&cluster, &pods, "2026-01-01T12:00:00.5Z");
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    assert_eq!(in_progress(&cluster), None, "marker left after an undone prepare");
}

/// A `/scale` downscale (HPA, `kubectl scale`) whose StatefulSet cannot be read must not pass
/// unprepared and unchecked; only a StatefulSet that is really gone is let through (nothing to prepare).
#[tokio::test]
async fn prepare_downscale_denies_a_scale_request_when_the_statefulset_cannot_be_read() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    let r = review("statefulsets", "ingester-zone-a", scale(3), scale(1), false);
    cluster.fail_reads(Some(ApiError::Unavailable("connection refused".into())));
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(DENIED) && message.contains("connection refused"), "{message}");
    assert!(pods.calls().is_empty());
    cluster.fail_reads(None);
    // Readable again: the normal path prepares the leaving pods.
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert_eq!(pods.calls().len(), 2);
    // Gone: nothing to prepare, allowed with a warning.
    let r = review("statefulsets", "ingester-zone-x", scale(3), scale(1), false);
    let response = admit(&app, "/admission/prepare-downscale", &r).await;
    assert_eq!(response["allowed"], true, "{response}");
    assert!(response["warnings"][0].as_str().unwrap().contains("not found"), "{response}");
}

/// Requests for another namespace are not decided on the objects of the operator's namespace that
/// happen to have the same name: allowed with a warning, no read, no pod call, no record.
#[tokio::test]
async fn requests_for_another_namespace_are_allowed_with_a_warning_and_touch_nothing() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    let app = app(&cluster, &pods);
    for path in ["/admission/prepare-downscale", "/admission/no-downscale"] {
        let mut r = downscale_review("ingester-zone-a", false);
        r["request"]["namespace"] = json!("elsewhere");
        let response = admit(&app, path, &r).await;
        assert_eq!(response["allowed"], true, "{path}: {response}");
        assert!(response["warnings"][0].as_str().unwrap().contains("\"elsewhere\" is not managed"), "{response}");
    }
    assert!(pods.calls().is_empty());
    assert!(cluster.config_map(CM).is_none(), "no record written");
}

/// The record must date an admitted downscale no earlier than its commit, which follows the webhook's answer. When
/// finishing the claim takes so long that the date it wrote has already passed, the downscale is denied instead and
/// everything is undone (pods told to cancel, the record's entry restored).
#[tokio::test]
async fn a_downscale_whose_record_date_passed_before_the_answer_is_denied_and_undone() {
    let cluster = cluster_with_zones();
    let pods = FakePods::default();
    // A clock that moves 6 s at every reading: the date written (a reading + the 5 s margin) has passed at the
    // next reading.
    let start: Timestamp = NOW.parse().unwrap();
    let readings = Arc::new(std::sync::atomic::AtomicI64::new(0));
    let app = router(Webhooks {
        api: cluster.clone(),
        pods: pods.clone(),
        settings: WebhookSettings::new("ns", "cluster.local.", Some(CM), Duration::from_secs(10)),
        clock: Arc::new(move || {
            let n = readings.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            start + jiff::SignedDuration::from_secs(6 * n)
        }),
    });
    let response = admit(&app, "/admission/prepare-downscale", &downscale_review("ingester-zone-a", false)).await;
    assert_eq!(response["allowed"], false, "{response}");
    let message = response["status"]["message"].as_str().unwrap();
    assert!(message.starts_with(DENIED) && message.contains("took longer than 10s"), "{message}");
    let deletes = pods.calls().into_iter().filter(|(m, _)| *m == PodMethod::Delete).count();
    assert_eq!(deletes, 2, "the prepared pods are told to cancel: {:?}", pods.calls());
    let record = record(&cluster).expect("the record exists");
    assert_eq!(record.last_downscaled.get("ingester-zone-a"), None, "the entry is restored (there was none)");
}
