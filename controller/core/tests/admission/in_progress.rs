//! In-progress markers and the controller side of invariant 5: no pod replaced while a downscale of the group is
//! being prepared.

use super::*;

#[test]
fn in_progress_markers_round_trip_through_the_annotation() {
    let markers = vec![
        DownscaleInProgress { statefulset: "a".into(), group: "g".into(), until: ts(NOW) },
        DownscaleInProgress { statefulset: "b".into(), group: "h".into(), until: ts("2026-01-01T12:00:05Z") },
    ];
    let raw = render_in_progress(&markers).unwrap();
    assert_eq!(
        raw,
        r#"{"a":{"group":"g","until":"2026-01-01T12:00:00Z"},"b":{"group":"h","until":"2026-01-01T12:00:05Z"}}"#
    );
    assert_eq!(parse_in_progress(Some(&raw)).unwrap(), markers);
    assert_eq!(parse_in_progress(None).unwrap(), []);
    assert_eq!(render_in_progress(&[]), None);
    let err = parse_in_progress(Some("{")).unwrap_err();
    assert_eq!(err.annotation, keys::DOWNSCALES_IN_PROGRESS);
    assert!(err.to_string().contains(keys::DOWNSCALES_IN_PROGRESS), "{err}");
}

#[test]
fn the_planner_replaces_no_pod_while_a_downscale_of_the_group_is_being_prepared() {
    // Zone b needs a rollout.
    let a = statefulset("ingester", "ingester-zone-a", 3, "r1");
    let mut b = statefulset("ingester", "ingester-zone-b", 3, "r1");
    b.status.as_mut().unwrap().update_revision = "r2".into();
    let pods: Vec<_> = (0..3).map(|i| pod(&a, i, "r1")).chain((0..3).map(|i| pod(&b, i, "r1"))).collect();
    let group = GroupSnapshot::assemble("ingester", vec![a, b], pods.iter());
    let now = ts(NOW);
    assert_eq!(plan_group(&group, &PlanContext::new(now, &[])).state, GroupState::Progressing);

    let markers = [DownscaleInProgress {
        statefulset: "ingester-zone-a".into(),
        group: "ingester".into(),
        until: ts("2026-01-01T12:00:09Z"),
    }];
    let plan = plan_group(&group, &PlanContext::new(now, &[]).with_downscales_in_progress(&markers));
    assert_eq!(plan.state, GroupState::Waiting);
    assert!(plan.actions.is_empty());
    assert!(plan.reason.contains("a downscale of StatefulSet ingester-zone-a is being prepared"), "{}", plan.reason);

    // Expired, or of another group: the rollout goes on.
    let expired = [DownscaleInProgress { until: now, ..markers[0].clone() }];
    assert_eq!(
        plan_group(&group, &PlanContext::new(now, &[]).with_downscales_in_progress(&expired)).state,
        GroupState::Progressing
    );
    let other = [DownscaleInProgress { group: "other".into(), ..markers[0].clone() }];
    assert_eq!(
        plan_group(&group, &PlanContext::new(now, &[]).with_downscales_in_progress(&other)).state,
        GroupState::Progressing
    );
}
