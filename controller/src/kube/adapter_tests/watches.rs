//! Watches: list then watch, pages, back-off after failures, expiry.

use super::*;

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
