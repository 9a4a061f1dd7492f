//! Rollout situations as seen from a dump: done groups, missing, terminating and crash-looping pods, paused zones,
//! rolling updates, and the warnings of malformed annotations.

use super::*;

#[test]
fn done_group_and_set_current_revision() {
    // Every pod is on `new`; zone-c still reports currentRevision `old`: advance it.
    let mut objects = zones("prod", [3, 3, 3]);
    set(find(&mut objects, "ingester-zone-c"), &["status", "currentRevision"], json!("old"));
    let group = only_group(&plan("set-current", &objects, &[]));
    assert_eq!(
        group,
        json!({
            "group": "ingester",
            "state": "progressing",
            "reason": "advancing currentRevision of ingester-zone-c to new",
            "actions": [{
                "action": "set-current-revision",
                "statefulSet": "ingester-zone-c",
                "revision": "new",
                "reason": "all 3 pods are on revision new and ready",
            }],
        })
    );

    let done = only_group(&plan("done", &zones("prod", [3, 3, 3]), &[]));
    assert_eq!(
        done,
        json!({"group": "ingester", "state": "done", "reason": "all StatefulSets are on their update revision and ready", "actions": []})
    );
}

#[test]
fn missing_pod_counts_as_unavailable() {
    // zone-b lost pod 2: it is the one not-ready StatefulSet, goes first, and its budget (1) is spent by the missing
    // pod, so nothing is deleted.
    let mut objects = zones("prod", [3, 0, 0]);
    objects.retain(|o| o["metadata"]["name"] != "ingester-zone-b-2");
    let group = only_group(&plan("missing", &objects, &[]));
    assert_eq!(
        group,
        json!({
            "group": "ingester",
            "state": "waiting",
            "reason": "ingester-zone-b has 2 more pods to update but max unavailable (1) has been reached; waiting for pods to become ready",
            "actions": [],
        })
    );

    // All of zone-b updated but one pod missing: wait, and zone-c is not touched.
    let mut objects = zones("prod", [3, 3, 0]);
    objects.retain(|o| o["metadata"]["name"] != "ingester-zone-b-1");
    let group = only_group(&plan("missing-updated", &objects, &[]));
    assert_eq!(group["state"], "waiting");
    assert_eq!(group["actions"], json!([]));
    assert_eq!(
        group["reason"],
        "StatefulSet ingester-zone-b pods are all updated but it is not ready: 1 of 3 pods missing"
    );
}

#[test]
fn terminating_pod_is_waited_for_not_deleted_again() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-b-0"), &["metadata", "deletionTimestamp"], json!("2025-03-04T10:29:30Z"));
    let group = only_group(&plan("terminating", &objects, &[]));
    assert_eq!(group["state"], "waiting");
    assert_eq!(group["actions"], json!([]), "{group}");

    // With budget for two, the terminating pod still takes a place and the next outdated pod goes.
    set(find(&mut objects, "ingester-zone-b"), &["metadata", "annotations", "rollout-max-unavailable"], json!("2"));
    let group = only_group(&plan("terminating-2", &objects, &[]));
    assert_eq!(group["actions"], json!([delete("ingester-zone-b", "ingester-zone-b-1", &budget_reason("new", 1, 2))]));
}

#[test]
fn crash_looping_outdated_pod_is_replaced_first_without_spending_budget() {
    let mut objects = zones("prod", [3, 0, 0]);
    let b2 = find(&mut objects, "ingester-zone-b-2");
    set(b2, &["status", "conditions"], json!([{"type": "Ready", "status": "False"}]));
    set(
        b2,
        &["status", "containerStatuses"],
        json!([{"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
    );
    let group = only_group(&plan("crash", &objects, &[]));
    let actions: Vec<&str> = group["actions"].as_array().unwrap().iter().map(|a| a["pod"].as_str().unwrap()).collect();
    assert_eq!(actions, ["ingester-zone-b-2"], "{group}");
}

#[test]
fn paused_zone_is_skipped_and_the_next_one_rolls() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(
        find(&mut objects, "ingester-zone-b"),
        &["metadata", "annotations", "grafana.com/rollout-paused"],
        json!("true"),
    );
    let group = only_group(&plan("paused", &objects, &[]));
    assert_eq!(group["actions"], json!([delete("ingester-zone-c", "ingester-zone-c-0", &budget_reason("new", 0, 1))]));

    // Every zone with outdated pods paused: blocked until a person unpauses.
    set(
        find(&mut objects, "ingester-zone-c"),
        &["metadata", "annotations", "grafana.com/rollout-paused"],
        json!("true"),
    );
    let group = only_group(&plan("paused-all", &objects, &[]));
    assert_eq!(group["state"], "blocked");
    assert_eq!(group["actions"], json!([]));
    assert!(group["reason"].as_str().unwrap().contains("rollout paused"), "{group}");

    // "True" is not "true".
    set(
        find(&mut objects, "ingester-zone-b"),
        &["metadata", "annotations", "grafana.com/rollout-paused"],
        json!("True"),
    );
    let group = only_group(&plan("paused-case", &objects, &[]));
    assert_eq!(group["actions"][0]["pod"], "ingester-zone-b-0");
}

#[test]
fn rolling_update_statefulset_blocks_the_group() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-c"), &["spec", "updateStrategy"], json!({"type": "RollingUpdate"}));
    let group = only_group(&plan("rolling", &objects, &[]));
    assert_eq!(
        group,
        json!({
            "group": "ingester",
            "state": "blocked",
            "reason": "StatefulSet ingester-zone-c has RollingUpdate update strategy while OnDelete is expected, skipping reconcile",
            "actions": [],
        })
    );
}

#[test]
fn invalid_max_unavailable_is_a_warning_and_falls_back_to_one() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-b"), &["metadata", "annotations", "rollout-max-unavailable"], json!("xxx"));
    let dir = Dir::new("invalid-max");
    let file = dir.file("dump.yaml", multi_doc_yaml(&objects));

    let text = run(&[&file], &[("output", "text")]);
    assert_eq!(text.code, 0, "{}", text.err);
    let warning = "  warning: StatefulSet ingester-zone-b: invalid rollout-max-unavailable value \"xxx\": expected \
                   positive integer or percentage as integer%; using 1\n";
    assert!(text.out.ends_with(warning), "{}", text.out);
    assert!(text.out.contains("  delete pod ingester-zone-b-0 of StatefulSet ingester-zone-b: "), "{}", text.out);
    assert_eq!(text.out.matches("delete pod").count(), 1, "{}", text.out);

    // JSON keeps its exact shape; the warning goes to stderr.
    let json_run = run(&[&file], &[]);
    assert_eq!(json_run.json(), json!({"groups": [expected_zone_b_first_pod()]}));
    assert!(json_run.err.contains("warning: ingester: StatefulSet ingester-zone-b: invalid rollout-max-unavailable"));
}

/// A malformed min time between zone downscales is a warning of the plan as soon as it is read, though no
/// downscale is due.
#[test]
fn malformed_min_time_between_zones_is_a_warning_when_read() {
    let mut objects = zones("prod", [3, 3, 3]);
    set(
        find(&mut objects, "ingester-zone-b"),
        &["metadata", "annotations", "grafana.com/min-time-between-zones-downscale"],
        json!("12hours"),
    );
    let text = plan("min-time", &objects, &[("output", "text")]);
    assert_eq!(text.code, 0, "{}", text.err);
    assert!(
        text.out.contains(
            "  warning: StatefulSet ingester-zone-b: invalid grafana.com/min-time-between-zones-downscale value \
             \"12hours\": "
        ),
        "{}",
        text.out
    );
    assert_eq!(text.out.matches("min-time-between-zones-downscale").count(), 1, "once: {}", text.out);
}

#[test]
fn min_ready_seconds_uses_now() {
    // zone-b-0 became ready at 09:00; with minReadySeconds 600 it counts as available from 09:10 on.
    let mut objects = zones("prod", [3, 1, 0]);
    set(find(&mut objects, "ingester-zone-b"), &["spec", "minReadySeconds"], json!(600));
    let ready_since = json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2025-03-04T09:00:00Z"}]);
    set(find(&mut objects, "ingester-zone-b-0"), &["status", "conditions"], ready_since);
    let early = only_group(&plan("min-ready-early", &objects, &[("now", "2025-03-04T09:05:00Z")]));
    assert_eq!(early["actions"], json!([]), "{early}");
    let late = only_group(&plan("min-ready-late", &objects, &[("now", "2025-03-04T09:10:00Z")]));
    assert_eq!(late["actions"][0]["pod"], "ingester-zone-b-1", "{late}");
}
