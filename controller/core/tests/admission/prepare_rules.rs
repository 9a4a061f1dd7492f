//! Prepare-downscale's rules (the Go operator's, with the changes of docs/reference/differences.md): its
//! prechecks, the plan of the pods to call, and its denials with the reference's messages.

use super::*;

fn target_of(req: &AdmissionRequest) -> (StatefulSetView, i32, i32) {
    match prepare::evaluate(req) {
        Target::StatefulSet { sts, old, new } => (*sts, old, new),
        other => panic!("expected a StatefulSet target, got {other:?}"),
    }
}

#[test]
fn prepare_fails_open_when_the_statefulset_cannot_be_determined() {
    let deployment = |r: i32| json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": r, "selector": {}, "template": {}}});
    let req = parse(review("admission.k8s.io/v1", "deployments", "d", deployment(3), deployment(1), None));
    assert_eq!(
        prepare::evaluate(&req),
        Target::Decided(Verdict::allow_with_warning("unsupported type apps/v1, Kind=Deployment, allowing the change"))
    );
    let req =
        parse(review("admission.k8s.io/v1", "deployments", "d", scale_object("d", 3), scale_object("d", 1), None));
    assert_eq!(
        prepare::evaluate(&req),
        Target::Decided(Verdict::allow_with_warning("unsupported resource deployments, allowing the change"))
    );
    let req =
        parse(review("admission.k8s.io/v1", "statefulsets", "s", scale_object("s", 3), scale_object("s", 1), None));
    assert_eq!(prepare::evaluate(&req), Target::LookupStatefulSet { name: "s".into(), old: 3, new: 1 });
    assert_eq!(
        prepare::lookup_failed("statefulsets s not found"),
        Verdict::allow_with_warning("statefulsets s not found, allowing the change")
    );
    // Upscales are not judged.
    let req = request(
        sts_object("a", Some(1), prepare_labels(), prepare_annotations()),
        sts_object("a", Some(3), prepare_labels(), prepare_annotations()),
    );
    assert_eq!(prepare::evaluate(&req), Target::Decided(Verdict::allow()));
}

#[test]
fn prepare_precheck_messages() {
    let subject = "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is not allowed because";
    let cases: Vec<(Value, Value, Option<&str>, Option<String>)> = vec![
        (json!({"rollout-group": "ingester"}), prepare_annotations(), None, None),
        (json!({keys::PREPARE_DOWNSCALE: "false"}), prepare_annotations(), None, None),
        (
            prepare_labels(),
            json!({keys::PREPARE_DOWNSCALE_HTTP_PATH: "p"}),
            None,
            Some(format!("{subject} the grafana.com/prepare-downscale-http-port annotation is not set or empty.")),
        ),
        (
            prepare_labels(),
            json!({keys::PREPARE_DOWNSCALE_HTTP_PORT: "8080", keys::PREPARE_DOWNSCALE_HTTP_PATH: ""}),
            None,
            Some(format!("{subject} the grafana.com/prepare-downscale-http-path annotation is not set or empty.")),
        ),
        (
            prepare_labels(),
            prepare_annotations(),
            Some(""),
            Some(format!("{subject} the serviceName is not set or empty.")),
        ),
    ];
    for (labels, annotations, service, denial) in cases {
        let mut old = sts_object("ingester-zone-a", Some(3), labels.clone(), annotations.clone());
        if let Some(s) = service {
            old["spec"]["serviceName"] = json!(s);
        }
        let req = request(old, sts_object("ingester-zone-a", Some(1), labels, annotations));
        let Some(message) = denial else {
            // Not labelled for prepare-downscale: allowed without further reading.
            assert_eq!(prepare::evaluate(&req), Target::Decided(Verdict::allow()));
            continue;
        };
        let (sts, o, n) = target_of(&req);
        assert_eq!(prepare::precheck(&req, o, n, &sts), Precheck::Decided(Verdict::deny(message)));
    }
    let req = request(
        sts_object("ingester-zone-a", Some(3), prepare_labels(), prepare_annotations()),
        sts_object("ingester-zone-a", Some(1), prepare_labels(), prepare_annotations()),
    );
    let (sts, o, n) = target_of(&req);
    assert_eq!(prepare::precheck(&req, o, n, &sts), Precheck::Continue { group: Some("ingester".into()) });
}

const SUBJECT: &str = "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is not allowed because";

#[test]
fn prepare_plan_calls_the_leaving_pods_highest_first() {
    let plan = Case::new().run().expect("allowed");
    assert_eq!(
        plan.endpoints.iter().map(|e| e.url.as_str()).collect::<Vec<_>>(),
        [
            "http://ingester-zone-a-2.svc.ns.svc.cluster.local.:8080/ingester/prepare-shutdown",
            "http://ingester-zone-a-1.svc.ns.svc.cluster.local.:8080/ingester/prepare-shutdown",
        ]
    );
    assert!(plan.skipped.is_empty());
}

#[test]
fn prepare_skips_pods_that_do_not_exist_yet() {
    let mut case = Case::new();
    let a = zone("ingester-zone-a");
    let pods = vec![pod(&a, 0, "r1"), pod(&a, 1, "r1")];
    case.group.members[0] = MemberSnapshot { sts: a, pods };
    let plan = case.run().expect("the group is otherwise healthy");
    assert_eq!(plan.endpoints.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>(), ["ingester-zone-a-1"]);
    assert_eq!(plan.skipped, ["ingester-zone-a-2"]);
}

#[test]
fn prepare_denies_within_the_min_time_of_another_zone() {
    let mut case = Case::new();
    let mut record = DownscaleRecord::default();
    record.record_downscale("ingester-zone-b", ts("2026-01-01T06:00:00Z"));
    case.record = Some(record);
    assert_eq!(
        case.denial(),
        format!(
            "{SUBJECT} statefulset ingester-zone-b was downscaled at 2026-01-01 06:00:00 +0000 UTC and is labelled to wait 12h0m0s between zone downscales"
        )
    );
    // Past the min time it is allowed.
    let mut record = DownscaleRecord::default();
    record.record_downscale("ingester-zone-b", ts("2025-12-31T23:59:59Z"));
    case.record = Some(record);
    assert!(case.run().is_ok());
}

#[test]
fn prepare_denies_on_an_unusable_min_time() {
    let mut case = Case::new();
    let b = annotate(zone("ingester-zone-b"), keys::LAST_DOWNSCALE, "yesterday");
    case.group.members[1] = healthy(b).into_member();
    let err = case.run().unwrap_err();
    assert_eq!(err.message.as_deref(), Some(format!("{SUBJECT} parsing downscale annotations failed.").as_str()));
    assert!(err.warnings[0].contains("yesterday"), "{:?}", err.warnings);
}

trait IntoMember {
    fn into_member(self) -> MemberSnapshot;
}

impl IntoMember for (StatefulSetView, Vec<rollout_core::PodView>) {
    fn into_member(self) -> MemberSnapshot {
        MemberSnapshot { sts: self.0, pods: self.1 }
    }
}

#[test]
fn prepare_denies_while_another_zone_is_mid_rollout() {
    // A non-updated pod.
    let mut case = Case::new();
    let b = zone("ingester-zone-b");
    let mut b_status = b.clone();
    b_status.status.as_mut().unwrap().update_revision = "r2".into();
    let pods = vec![pod(&b_status, 0, "r2"), pod(&b_status, 1, "r1"), pod(&b_status, 2, "r1")];
    case.group.members[1] = MemberSnapshot { sts: b_status, pods };
    assert_eq!(
        case.denial(),
        format!("{SUBJECT} statefulset ingester-zone-b has 2 non-updated replicas and 0 non-ready replicas")
    );

    // An unavailable pod and a missing one.
    let mut case = Case::new();
    let c = zone("ingester-zone-c");
    let pods = vec![pod(&c, 0, "r1"), not_ready(pod(&c, 1, "r1"))];
    case.group.members[2] = MemberSnapshot { sts: c, pods };
    assert_eq!(
        case.denial(),
        format!("{SUBJECT} statefulset ingester-zone-c has 0 non-updated replicas and 2 non-ready replicas")
    );

    // The StatefulSet being downscaled does not block itself.
    let mut case = Case::new();
    let a = zone("ingester-zone-a");
    let pods = vec![pod(&a, 0, "r0"), not_ready(pod(&a, 1, "r1")), pod(&a, 2, "r1")];
    case.group.members[0] = MemberSnapshot { sts: a, pods };
    assert!(case.run().is_ok());
}

#[test]
fn prepare_denies_while_another_zones_downscale_is_being_prepared() {
    let mut case = Case::new();
    case.in_progress = vec![DownscaleInProgress {
        statefulset: "ingester-zone-c".into(),
        group: "ingester".into(),
        until: ts("2026-01-01T12:00:09Z"),
    }];
    assert_eq!(
        case.denial(),
        format!("{SUBJECT} statefulset ingester-zone-c is already in process of updating replicas")
    );
    // An expired marker (its webhook died) does not block, nor does one of another group.
    case.in_progress[0].until = ts(NOW);
    assert!(case.run().is_ok());
    case.in_progress[0].until = ts("2026-01-01T12:00:09Z");
    case.in_progress[0].group = "other".into();
    assert!(case.run().is_ok());
}

#[test]
fn prepare_verdict_messages() {
    let mut req = request(Value::Null, Value::Null);
    req.resource = "statefulsets".into();
    req.name = "ingester-zone-a".into();
    let plan = prepare::PreparePlan {
        endpoints: vec![prepare::Endpoint { pod: "p".into(), url: "u".into() }],
        skipped: vec!["ingester-zone-a-2".into()],
    };
    let v = prepare::allowed(&req, 3, 1, &plan);
    assert_eq!(
        v.message.as_deref(),
        Some(
            "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is allowed -- all pods successfully prepared for shutdown."
        )
    );
    assert_eq!(v.warnings, ["pods that do not exist were not called: ingester-zone-a-2"]);
    req.dry_run = true;
    assert!(prepare::allowed(&req, 3, 1, &plan).message.unwrap().contains("dry run: 1 pods would be prepared"));
    let cases = [
        (
            prepare::deny_prepare_failed(&req, 3, 1, &["p: connection refused".into()]),
            "one or more pods failed to prepare for shutdown.",
        ),
        (
            prepare::deny_claim_failed(&req, 3, 1, "conflict"),
            "setting downscale timestamp in the zone ConfigMap failed.",
        ),
        (prepare::deny_load_record(&req, 3, 1, "bad"), "loading zones failed."),
        (prepare::deny_list_statefulsets(&req, 3, 1, "x"), "finding other statefulsets failed."),
        (
            prepare::deny_list_pods(&req, 3, 1, "x"),
            "an error occurred while checking whether StatefulSets have non-updated replicas",
        ),
    ];
    for (v, reason) in cases {
        assert!(!v.allowed);
        assert_eq!(v.message.unwrap(), format!("{SUBJECT} {reason}"));
        assert_eq!(v.warnings.len(), 1);
    }
}

#[test]
fn go_time_matches_gos_default_formatting() {
    assert_eq!(go_time(ts("2024-05-01T12:00:00Z")), "2024-05-01 12:00:00 +0000 UTC");
}

/// The leaving ordinals come from the request and may be as large as an int32; the plan walks the
/// pods that exist, so a downscale from i32::MAX is planned at once (and summarises the pods that do not exist).
#[test]
fn a_huge_replica_count_is_planned_from_the_existing_pods() {
    let case = Case::new();
    let req = request(
        sts_object("ingester-zone-a", Some(i32::MAX), prepare_labels(), prepare_annotations()),
        sts_object("ingester-zone-a", Some(1), prepare_labels(), prepare_annotations()),
    );
    let target = case.group.member("ingester-zone-a").unwrap();
    let plan = prepare::plan(&PlanInput {
        request: &req,
        old: i32::MAX,
        new: 1,
        sts: &target.sts,
        target,
        group: Some(&case.group),
        record: None,
        in_progress: &[],
        cluster_domain: "cluster.local.",
        now: "2026-01-01T12:00:00Z".parse().unwrap(),
    })
    .expect("planned");
    assert_eq!(
        plan.endpoints.iter().map(|e| e.pod.as_str()).collect::<Vec<_>>(),
        ["ingester-zone-a-2", "ingester-zone-a-1"]
    );
    assert_eq!(plan.skipped.len(), 1);
    assert!(
        plan.skipped[0].starts_with(&format!("{} pods between ingester-zone-a-1 and", i32::MAX as u32 - 3)),
        "{:?}",
        plan.skipped
    );
}
