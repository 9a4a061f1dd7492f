//! Scaling on offline dumps: follower and forced replicas planned, mirrors and delayed downscales as waits, and
//! scaling errors.

use super::*;

#[test]
fn follower_scaling_is_planned_as_a_scale_action() {
    let mut objects = zones("", [3, 3, 3]);
    let b = find(&mut objects, "ingester-zone-b");
    set(b, &["metadata", "annotations"], json!({"grafana.com/rollout-downscale-leader": "ingester-zone-a"}));
    set(b, &["spec", "replicas"], json!(2));
    let group = only_group(&plan("follower-scale", &objects, &[]));
    assert_eq!(group["state"], "progressing", "{group:#}");
    assert_eq!(
        group["actions"],
        json!([{"action": "scale", "statefulSet": "ingester-zone-b", "from": 2, "to": 3,
                "reason": "scaling up statefulset to match leader ingester-zone-a"}])
    );
    assert!(group["reason"].as_str().unwrap().contains("no pod deletions"), "{group:#}");
}

#[test]
fn force_replicas_is_planned_in_text_output() {
    let mut objects = zones("", [3, 3, 3]);
    let c = find(&mut objects, "ingester-zone-c");
    set(
        c,
        &["metadata", "annotations"],
        json!({"grafana.com/rollout-downscale-leader": "ingester-zone-a", "grafana.com/rollout-force-replicas": "1"}),
    );
    let out = plan("force-text", &objects, &[("output", "text")]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(
        out.out.contains(
            "  scale StatefulSet ingester-zone-c from 3 to 1 replica: grafana.com/rollout-force-replicas=1 (applied immediately)"
        ),
        "{}",
        out.out
    );
}

/// As in the reference, force replicas on a StatefulSet that is neither follower nor mirror is ignored: nothing is
/// scaled, the group is done, and the warning names the StatefulSet and what the annotation needs.
#[test]
fn force_replicas_without_leader_or_mirror_is_a_warning_in_text_output() {
    let mut objects = zones("", [3, 3, 3]);
    let c = find(&mut objects, "ingester-zone-c");
    set(c, &["metadata", "annotations"], json!({"grafana.com/rollout-force-replicas": "1"}));
    let out = plan("force-plain-text", &objects, &[("output", "text")]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(!out.out.contains("scale StatefulSet"), "{}", out.out);
    assert!(out.out.starts_with("ingester: done: "), "{}", out.out);
    assert!(
        out.out.contains(
            "  warning: grafana.com/rollout-force-replicas=1 on StatefulSet ingester-zone-c is ignored: it applies \
             only to a follower (grafana.com/rollout-downscale-leader) or a mirror \
             (grafana.com/rollout-mirror-replicas-from-resource-*)"
        ),
        "{}",
        out.out
    );
}

#[test]
fn mirror_and_delayed_downscale_are_waits_that_need_a_live_cluster() {
    let mut objects = zones("", [3, 3, 3]);
    let b = find(&mut objects, "ingester-zone-b");
    set(
        b,
        &["metadata", "annotations"],
        json!({
            "grafana.com/rollout-mirror-replicas-from-resource-name": "ingester",
            "grafana.com/rollout-mirror-replicas-from-resource-kind": "ReplicaTemplate",
            "grafana.com/rollout-delayed-downscale": "1h",
            "grafana.com/rollout-prepare-delayed-downscale-url": "http://pod:8080/prepare",
        }),
    );
    let group = only_group(&plan("mirror-wait", &objects, &[]));
    assert_eq!(group["state"], "waiting", "{group:#}");
    assert_eq!(group["actions"], json!([]));
    let reason = group["reason"].as_str().unwrap();
    assert!(
        reason.contains("ingester-zone-b: mirroring replicas from ReplicaTemplate/ingester needs a live cluster")
            && reason.contains("delayed-downscale endpoints"),
        "{reason}"
    );
}

#[test]
fn scaling_errors_are_reported_in_the_json_plan() {
    let mut objects = zones("", [3, 3, 3]);
    let b = find(&mut objects, "ingester-zone-b");
    set(b, &["metadata", "annotations"], json!({"grafana.com/rollout-downscale-leader": "nowhere"}));
    let group = only_group(&plan("scaling-error", &objects, &[]));
    assert_eq!(group["state"], "done", "the rest of the group is unaffected: {group:#}");
    assert_eq!(
        group["scalingErrors"],
        json!([{"statefulSet": "ingester-zone-b",
                "message": "could not find leader for ingester-zone-b using grafana.com/rollout-downscale-leader"}])
    );
}
