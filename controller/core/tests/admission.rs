//! Admission decisions: review parsing and rendering, no-downscale and prepare-downscale rules with the
//! reference's messages, and the controller side of "no rollout step while a downscale is being prepared".

use jiff::Timestamp;
use proptest::prelude::*;
use rollout_core::admission::no_downscale::{self, ParentResource, Step};
use rollout_core::admission::prepare::{self, PlanInput, Precheck, Target};
use rollout_core::admission::{
    AdmissionRequest, ReviewVersion, Verdict, check_content_type, go_time, parse_review, render_response,
};
use rollout_core::downscale::{DownscaleInProgress, DownscaleRecord, parse_in_progress, render_in_progress};
use rollout_core::fixture::{annotate, label, not_ready, pod, statefulset};
use rollout_core::keys;
use rollout_core::{GroupSnapshot, GroupState, MemberSnapshot, PlanContext, StatefulSetView, plan_group};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const NOW: &str = "2026-01-01T12:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn sts_object(name: &str, replicas: Option<i32>, labels: Value, annotations: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": "ns", "labels": labels, "annotations": annotations},
        "spec": {
            "replicas": replicas, "serviceName": "svc",
            "selector": {"matchLabels": {"name": name}},
            "template": {"metadata": {"labels": {"name": name}}},
        },
    })
}

fn scale_object(name: &str, replicas: i32) -> Value {
    json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": "ns"}, "spec": {"replicas": replicas}})
}

fn review(version: &str, resource: &str, name: &str, old: Value, new: Value, dry_run: Option<bool>) -> Value {
    let mut request = json!({
        "uid": "uid-1", "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
        "resource": {"group": "apps", "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": "UPDATE", "userInfo": {"username": "alice"},
        "object": new, "oldObject": old,
    });
    if let Some(d) = dry_run {
        request["dryRun"] = json!(d);
    }
    json!({"apiVersion": version, "kind": "AdmissionReview", "request": request})
}

fn request(old: Value, new: Value) -> AdmissionRequest {
    parse(review("admission.k8s.io/v1", "statefulsets", "ingester-zone-a", old, new, None))
}

fn parse(v: Value) -> AdmissionRequest {
    parse_review(&serde_json::to_vec(&v).unwrap()).expect("valid review")
}

fn decided(step: Step) -> Verdict {
    match step {
        Step::Decided(v) => v,
        other => panic!("expected a verdict, got {other:?}"),
    }
}

// ---- review parsing and rendering -------------------------------------------------------------------------------

#[test]
fn content_type_must_be_exactly_application_json() {
    assert_eq!(check_content_type(Some("application/json")), Ok(()));
    for bad in [None, Some("application/json; charset=utf-8"), Some("text/plain"), Some("")] {
        let err = check_content_type(bad).unwrap_err();
        assert_eq!(err.to_string(), "wrong content type");
    }
}

#[test]
fn malformed_reviews_get_a_reason() {
    let cases: Vec<(&[u8], &str)> = vec![
        (b"not json", "Request could not be decoded: "),
        (b"[1,2]", "Request could not be decoded: expected a JSON object"),
        (br#"{"apiVersion":"v1","kind":"Pod"}"#, "Unsupported group version kind: /v1, Kind=Pod"),
        (
            br#"{"apiVersion":"admission.k8s.io/v2","kind":"AdmissionReview"}"#,
            "Unsupported group version kind: admission.k8s.io/v2, Kind=AdmissionReview",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
            "Request could not be decoded: the AdmissionReview has no request",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}"#,
            "Request could not be decoded: request.uid is missing",
        ),
        (
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","dryRun":"yes"}}"#,
            "Request could not be decoded: request.dryRun is not a boolean",
        ),
    ];
    for (body, prefix) in cases {
        let err = parse_review(body).expect_err(std::str::from_utf8(body).unwrap());
        assert!(err.to_string().starts_with(prefix), "{err} does not start with {prefix}");
    }
}

#[test]
fn v1_and_v1beta1_are_answered_in_their_own_version_with_the_request_uid() {
    for (version, expected) in
        [("admission.k8s.io/v1", ReviewVersion::V1), ("admission.k8s.io/v1beta1", ReviewVersion::V1Beta1)]
    {
        let req = parse(review(version, "statefulsets", "a", Value::Null, Value::Null, Some(true)));
        assert_eq!(req.version, expected);
        assert_eq!((req.uid.as_str(), req.username.as_str(), req.dry_run), ("uid-1", "alice", true));
        let out = render_response(&req, &Verdict::deny("no").with_warning("w"));
        assert_eq!(
            out,
            json!({"apiVersion": version, "kind": "AdmissionReview",
                   "response": {"uid": "uid-1", "allowed": false, "status": {"message": "no"}, "warnings": ["w"]}})
        );
    }
    let req = parse(review("admission.k8s.io/v1", "statefulsets", "a", Value::Null, Value::Null, None));
    assert!(!req.dry_run, "a missing dryRun is false");
    assert_eq!(render_response(&req, &Verdict::allow())["response"], json!({"uid": "uid-1", "allowed": true}));
}

// ---- no-downscale (reference 4.2) ------------------------------------------------------------------------------

fn labelled(no_downscale: &str) -> Value {
    json!({"rollout-group": "ingester", keys::NO_DOWNSCALE: no_downscale})
}

#[test]
fn no_downscale_table_of_outcomes() {
    let warn = |w: &str| Verdict::allow_with_warning(w);
    let deny_msg = "downscale of statefulsets/ingester-zone-a in ns from 3 to 2 replicas is not allowed because it \
                    has the label 'grafana.com/no-downscale=true'";
    let cases: Vec<(&str, Value, Value, Verdict)> = vec![
        (
            "upscale",
            sts_object("a", Some(2), labelled("true"), json!({})),
            sts_object("a", Some(3), labelled("true"), json!({})),
            Verdict::allow(),
        ),
        (
            "equal",
            sts_object("a", Some(3), labelled("true"), json!({})),
            sts_object("a", Some(3), labelled("true"), json!({})),
            Verdict::allow(),
        ),
        (
            "both nil",
            sts_object("a", None, labelled("true"), json!({})),
            sts_object("a", None, labelled("true"), json!({})),
            Verdict::allow(),
        ),
        (
            "old nil",
            sts_object("a", None, labelled("true"), json!({})),
            sts_object("a", Some(1), labelled("true"), json!({})),
            warn("old/new replicas is nil, allowing the change"),
        ),
        (
            "new nil",
            sts_object("a", Some(3), labelled("true"), json!({})),
            sts_object("a", None, labelled("true"), json!({})),
            warn("old/new replicas is nil, allowing the change"),
        ),
        (
            "downscale, label absent",
            sts_object("a", Some(3), json!({}), json!({})),
            sts_object("a", Some(2), json!({}), json!({})),
            Verdict::allow(),
        ),
        (
            "downscale, label false",
            sts_object("a", Some(3), labelled("false"), json!({})),
            sts_object("a", Some(2), labelled("true"), json!({})),
            Verdict::allow(),
        ),
        (
            "downscale, label true on old object",
            sts_object("a", Some(3), labelled("true"), json!({})),
            sts_object("a", Some(2), labelled("false"), json!({})),
            Verdict::deny(deny_msg),
        ),
        (
            "old object missing",
            Value::Null,
            sts_object("a", Some(2), json!({}), json!({})),
            warn("can't decode old object, allowing the change, err: Object 'Kind' is missing in ''"),
        ),
        (
            "old object of an unsupported type",
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {}}),
            sts_object("a", Some(2), json!({}), json!({})),
            warn("can't get old replicas, allowing the change, err: unsupported type v1, Kind=Pod"),
        ),
        (
            "new object missing",
            sts_object("a", Some(3), json!({}), json!({})),
            Value::Null,
            warn("can't decode new object, allowing the change, err: Object 'Kind' is missing in ''"),
        ),
        (
            "new object of an unsupported type",
            sts_object("a", Some(3), json!({}), json!({})),
            json!({"apiVersion": "v1", "kind": "ConfigMap"}),
            warn("can't get new replicas, allowing the change, err: unsupported type v1, Kind=ConfigMap"),
        ),
    ];
    for (what, old, new, expected) in cases {
        assert_eq!(decided(no_downscale::evaluate(&request(old, new))), expected, "{what}");
    }
}

#[test]
fn no_downscale_of_deployments_and_replicasets_reads_their_labels() {
    for kind in ["Deployment", "ReplicaSet"] {
        let obj = |replicas: i32| {
            json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "d", "labels": labelled("true")},
                   "spec": {"replicas": replicas, "selector": {}, "template": {}}})
        };
        let resource = if kind == "Deployment" { "deployments" } else { "replicasets" };
        let req = parse(review("admission.k8s.io/v1", resource, "d", obj(5), obj(1), None));
        let v = decided(no_downscale::evaluate(&req));
        assert_eq!(
            v.message.as_deref(),
            Some(format!("downscale of {resource}/d in ns from 5 to 1 replicas is not allowed because it has the label 'grafana.com/no-downscale=true'").as_str())
        );
    }
}

#[test]
fn no_downscale_of_a_scale_subresource_asks_for_the_parent() {
    let req = parse(review(
        "admission.k8s.io/v1",
        "statefulsets",
        "ingester-zone-a",
        scale_object("ingester-zone-a", 3),
        scale_object("ingester-zone-a", 1),
        None,
    ));
    let Step::LookupParent { resource, name, old, new } = no_downscale::evaluate(&req) else {
        panic!("lookup expected")
    };
    assert_eq!((resource, name.as_str(), old, new), (ParentResource::StatefulSets, "ingester-zone-a", 3, 1));
    let labels = BTreeMap::from([(keys::NO_DOWNSCALE.to_string(), "true".to_string())]);
    let v = no_downscale::decide_with_parent(&req, 3, 1, Ok(&labels));
    assert!(!v.allowed);
    assert_eq!(
        v.message.as_deref(),
        Some(
            "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is not allowed because it has the label 'grafana.com/no-downscale=true'"
        )
    );
    assert_eq!(no_downscale::decide_with_parent(&req, 3, 1, Ok(&BTreeMap::new())), Verdict::allow());
    assert_eq!(
        no_downscale::decide_with_parent(&req, 3, 1, Err("not found: statefulsets ingester-zone-a".into())),
        Verdict::allow_with_warning(
            "can't get statefulsets/ingester-zone-a in namespace ns, allowing the change: not found: statefulsets ingester-zone-a"
        )
    );
    // A /scale of another resource kind cannot be looked up: allowed with a warning.
    let req =
        parse(review("admission.k8s.io/v1", "replicatemplates", "x", scale_object("x", 3), scale_object("x", 1), None));
    assert_eq!(
        decided(no_downscale::evaluate(&req)),
        Verdict::allow_with_warning(
            "can't get replicatemplates/x in namespace ns, allowing the change: unsupported resource replicatemplates"
        )
    );
}

#[test]
fn no_downscale_denies_dry_runs_too() {
    let req = parse(review(
        "admission.k8s.io/v1",
        "statefulsets",
        "a",
        sts_object("a", Some(3), labelled("true"), json!({})),
        sts_object("a", Some(2), labelled("true"), json!({})),
        Some(true),
    ));
    assert!(!decided(no_downscale::evaluate(&req)).allowed);
}

// ---- prepare-downscale (the Go operator's, with the changes of docs/reference/differences.md) ------------------

fn prepare_annotations() -> Value {
    json!({keys::PREPARE_DOWNSCALE_HTTP_PORT: "8080", keys::PREPARE_DOWNSCALE_HTTP_PATH: "/ingester/prepare-shutdown"})
}

fn prepare_labels() -> Value {
    json!({"rollout-group": "ingester", keys::PREPARE_DOWNSCALE: "true"})
}

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

/// A live group of three zones, 3 pods each, all updated and ready, with prepare-downscale settings on zone a.
fn zone(name: &str) -> StatefulSetView {
    let s = statefulset("ingester", name, 3, "r1");
    let s = label(s, keys::PREPARE_DOWNSCALE, "true");
    let s = annotate(s, keys::PREPARE_DOWNSCALE_HTTP_PORT, "8080");
    let s = annotate(s, keys::PREPARE_DOWNSCALE_HTTP_PATH, "/ingester/prepare-shutdown");
    let mut s = annotate(s, keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "12h");
    s.service_name = "svc".into();
    s
}

fn live_group(members: Vec<(StatefulSetView, Vec<rollout_core::PodView>)>) -> GroupSnapshot {
    GroupSnapshot {
        name: "ingester".into(),
        members: members.into_iter().map(|(sts, pods)| MemberSnapshot { sts, pods }).collect(),
        warnings: Vec::new(),
    }
}

fn healthy(s: StatefulSetView) -> (StatefulSetView, Vec<rollout_core::PodView>) {
    let pods = (0..3).map(|i| pod(&s, i, "r1")).collect();
    (s, pods)
}

struct Case {
    group: GroupSnapshot,
    record: Option<DownscaleRecord>,
    in_progress: Vec<DownscaleInProgress>,
    dry_run: bool,
}

impl Case {
    fn new() -> Self {
        Case {
            group: live_group(vec![
                healthy(zone("ingester-zone-a")),
                healthy(zone("ingester-zone-b")),
                healthy(zone("ingester-zone-c")),
            ]),
            record: None,
            in_progress: Vec::new(),
            dry_run: false,
        }
    }

    fn run(&self) -> Result<prepare::PreparePlan, Verdict> {
        let mut req = request(
            sts_object("ingester-zone-a", Some(3), prepare_labels(), prepare_annotations()),
            sts_object("ingester-zone-a", Some(1), prepare_labels(), prepare_annotations()),
        );
        req.dry_run = self.dry_run;
        let target = self.group.member("ingester-zone-a").unwrap();
        prepare::plan(&PlanInput {
            request: &req,
            old: 3,
            new: 1,
            sts: &target.sts,
            target,
            group: Some(&self.group),
            record: self.record.as_ref(),
            in_progress: &self.in_progress,
            cluster_domain: "cluster.local.",
            now: ts(NOW),
        })
    }

    fn denial(&self) -> String {
        match self.run() {
            Err(v) => {
                assert!(!v.allowed);
                v.message.unwrap()
            }
            Ok(plan) => panic!("expected a denial, got {plan:?}"),
        }
    }
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

// ---- in-progress markers and the controller side of invariant 5 --------------------------------------------------

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

// ---- arbitrary input ------------------------------------------------------------------------------------------------

/// Whatever the body, the core answers with a typed error or a request whose response carries its uid; the
/// decisions never panic.
fn check_any_body(body: &[u8]) {
    let Ok(req) = parse_review(body) else { return };
    let verdicts = vec![
        match no_downscale::evaluate(&req) {
            Step::Decided(v) => v,
            Step::LookupParent { old, new, .. } => no_downscale::decide_with_parent(&req, old, new, Err("x".into())),
        },
        match prepare::evaluate(&req) {
            Target::Decided(v) => v,
            Target::StatefulSet { sts, old, new } => match prepare::precheck(&req, old, new, &sts) {
                Precheck::Decided(v) => v,
                Precheck::Continue { .. } => prepare::deny(&req, old, new, "x"),
            },
            Target::LookupStatefulSet { .. } => prepare::lookup_failed("x"),
        },
    ];
    for v in verdicts {
        let out = render_response(&req, &v);
        assert_eq!(out["response"]["uid"], json!(req.uid));
        assert_eq!(out["kind"], json!("AdmissionReview"));
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[a-zA-Z0-9/._-]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion".to_string()),
                    Just("kind".to_string()),
                    Just("request".to_string()),
                    Just("uid".to_string()),
                    Just("object".to_string()),
                    Just("oldObject".to_string()),
                    Just("spec".to_string()),
                    Just("replicas".to_string()),
                    Just("metadata".to_string()),
                    Just("dryRun".to_string()),
                    Just("resource".to_string()),
                    "[a-z]{1,6}".prop_map(String::from),
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(body in prop::collection::vec(any::<u8>(), 0..256)) {
        check_any_body(&body);
    }

    #[test]
    fn arbitrary_json_reviews_never_panic(request in arb_json(), old in arb_json(), new in arb_json(), replicas in (0i32..5, 0i32..5)) {
        check_any_body(&serde_json::to_vec(&request).unwrap());
        let mut r = review("admission.k8s.io/v1", "statefulsets", "a", old, new, None);
        check_any_body(&serde_json::to_vec(&r).unwrap());
        r["request"]["oldObject"] = sts_object("a", Some(replicas.0), prepare_labels(), prepare_annotations());
        r["request"]["object"] = scale_object("a", replicas.1);
        check_any_body(&serde_json::to_vec(&r).unwrap());
        r["request"]["oldObject"] = request;
        check_any_body(&serde_json::to_vec(&r).unwrap());
    }
}

/// Review finding: the leaving ordinals come from the request and may be as large as an int32; the plan walks the
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

mod prepare_flow {
    //! The prepare-downscale step machine: the needs it names, in order, and its policy at each step.

    use super::*;
    use rollout_core::admission::prepare_flow::{FlowSettings, Need, Observed, PrepareDownscale, StatefulSetLookup};
    use rollout_core::downscale::MarkedClaim;
    use std::time::Duration;

    fn settings(zone_tracker: bool) -> FlowSettings {
        FlowSettings {
            namespace: "ns".into(),
            cluster_domain: "cluster.local.".into(),
            zone_tracker,
            marker_lifetime: Duration::from_secs(20),
            commit_margin: Duration::from_secs(10),
            defences: rollout_core::Defences::ALL,
        }
    }

    fn downscale(dry_run: Option<bool>) -> AdmissionRequest {
        let old = sts_object("ingester-zone-a", Some(3), prepare_labels(), prepare_annotations());
        let new = sts_object("ingester-zone-a", Some(2), prepare_labels(), prepare_annotations());
        parse(review("admission.k8s.io/v1", "statefulsets", "ingester-zone-a", old, new, dry_run))
    }

    /// The live group: zone-a (the one downscaled) and zone-b, both healthy.
    fn members_and_pods() -> (Vec<StatefulSetView>, Vec<rollout_core::PodView>) {
        let (a, mut pods) = healthy(zone("ingester-zone-a"));
        let (b, b_pods) = healthy(zone("ingester-zone-b"));
        pods.extend(b_pods);
        (vec![a, b], pods)
    }

    /// A flow with the zone tracker, stepped through its live reads (the healthy group) and a granted claim: what
    /// it asks next is the re-read of the group under the marker.
    fn claimed(now: Timestamp) -> PrepareDownscale {
        let mut flow = PrepareDownscale::new(downscale(None), settings(true));
        flow.step(Observed::Start, now);
        let (members, pods) = members_and_pods();
        flow.step(Observed::GroupStatefulSets(Ok(members)), now);
        flow.step(Observed::Pods(Ok(pods)), now);
        flow.step(Observed::Record(Ok(None)), now);
        let again = flow.step(Observed::Claim(Ok(MarkedClaim::Claimed { previous: None })), now);
        assert_eq!(again, Need::GroupAgain { selector: "rollout-group=ingester".into() });
        flow
    }

    fn answer(need: Need) -> Verdict {
        match need {
            Need::Answer(verdict) => verdict,
            other => panic!("expected an answer, got {other:?}"),
        }
    }

    #[test]
    fn with_the_zone_tracker_every_step_is_named_in_order_and_the_downscale_is_dated_after_the_pods() {
        let now = ts(NOW);
        let mut flow = PrepareDownscale::new(downscale(None), settings(true));
        assert_eq!(
            flow.step(Observed::Start, now),
            Need::GroupStatefulSets { selector: "rollout-group=ingester".into() }
        );
        let (members, pods) = members_and_pods();
        assert_eq!(flow.step(Observed::GroupStatefulSets(Ok(members.clone())), now), Need::Pods);
        assert_eq!(flow.step(Observed::Pods(Ok(pods.clone())), now), Need::Record);
        let Need::Claim { statefulset, until, .. } = flow.step(Observed::Record(Ok(None)), now) else {
            panic!("a claim comes next")
        };
        assert_eq!((statefulset.as_str(), until), ("ingester-zone-a", ts("2026-01-01T12:00:20Z")));
        let again = flow.step(Observed::Claim(Ok(MarkedClaim::Claimed { previous: None })), now);
        assert_eq!(again, Need::GroupAgain { selector: "rollout-group=ingester".into() });
        let Need::PreparePods { plan } = flow.step(Observed::GroupAgain(Ok((members, pods))), now) else {
            panic!("pods are prepared next")
        };
        assert_eq!(plan.endpoints.len(), 1, "{plan:?}");
        let later = ts("2026-01-01T12:00:03.2Z");
        let dated = flow.step(Observed::PodsPrepared(Vec::new()), later);
        assert_eq!(
            dated,
            Need::DateInRecord {
                statefulset: "ingester-zone-a".into(),
                until: ts("2026-01-01T12:00:20Z"),
                committed_by: ts("2026-01-01T12:00:14Z"),
            },
            "dated at the pods' answer plus the commit margin, rounded up"
        );
        assert!(answer(flow.step(Observed::DatedInRecord(Ok(())), later)).allowed);
    }

    /// The test-only switch of the re-read (a defence in depth the harness shows alone): without it the flow goes
    /// from the claim straight to the pods, so a rollout step committed before the marker goes unseen.
    #[test]
    fn without_the_reread_layer_the_flow_prepares_pods_right_after_the_claim() {
        let now = ts(NOW);
        let defences = rollout_core::Defences::ALL.without(&[rollout_core::Layer::RereadAfterClaim]);
        let mut flow = PrepareDownscale::new(downscale(None), FlowSettings { defences, ..settings(true) });
        flow.step(Observed::Start, now);
        let (members, pods) = members_and_pods();
        flow.step(Observed::GroupStatefulSets(Ok(members)), now);
        flow.step(Observed::Pods(Ok(pods)), now);
        flow.step(Observed::Record(Ok(None)), now);
        let next = flow.step(Observed::Claim(Ok(MarkedClaim::Claimed { previous: None })), now);
        assert!(matches!(next, Need::PreparePods { .. }), "{next:?}");
    }

    #[test]
    fn a_dating_that_leaves_less_than_half_the_margin_is_denied_and_undone() {
        let now = ts(NOW);
        let mut flow = claimed(now);
        flow.step(Observed::GroupAgain(Ok(members_and_pods())), now);
        let Need::DateInRecord { committed_by, .. } = flow.step(Observed::PodsPrepared(Vec::new()), now) else {
            panic!("dating comes next")
        };
        let Need::Undo(undo) = flow.step(Observed::DatedInRecord(Ok(())), ts("2026-01-01T12:00:06Z")) else {
            panic!("an undo comes next")
        };
        assert_eq!(undo.dated_since, vec![committed_by]);
        assert_eq!(undo.claim, Some((None, ts("2026-01-01T12:00:20Z"))));
        let verdict = answer(flow.step(Observed::Undone, now));
        assert!(!verdict.allowed);
        assert!(
            verdict.message.as_deref().unwrap_or_default().contains("took longer than 10s"),
            "{:?}",
            verdict.message
        );
    }

    #[test]
    fn a_rollout_seen_after_the_claim_undoes_the_claim_and_denies() {
        let now = ts(NOW);
        let mut flow = claimed(now);
        let (members, pods) = members_and_pods();
        // zone-b's pod 0 became unready between the claim and the re-read.
        let pods: Vec<_> =
            pods.into_iter().map(|p| if p.name == "ingester-zone-b-0" { not_ready(p) } else { p }).collect();
        let Need::Undo(undo) = flow.step(Observed::GroupAgain(Ok((members, pods))), now) else {
            panic!("an undo comes next")
        };
        assert!(undo.plan.endpoints.is_empty(), "no pod was prepared yet");
        assert!(undo.claim.is_some());
        assert!(!answer(flow.step(Observed::Undone, now)).allowed);
    }

    #[test]
    fn a_dry_run_ends_at_the_plan_with_no_claim_and_no_pod_call() {
        let now = ts(NOW);
        let mut flow = PrepareDownscale::new(downscale(Some(true)), settings(true));
        flow.step(Observed::Start, now);
        let (members, pods) = members_and_pods();
        flow.step(Observed::GroupStatefulSets(Ok(members)), now);
        flow.step(Observed::Pods(Ok(pods)), now);
        assert!(answer(flow.step(Observed::Record(Ok(None)), now)).allowed);
    }

    #[test]
    fn without_the_tracker_an_update_is_recorded_through_the_json_patch() {
        let now = ts(NOW);
        let mut flow = PrepareDownscale::new(downscale(None), settings(false));
        flow.step(Observed::Start, now);
        let (members, pods) = members_and_pods();
        flow.step(Observed::GroupStatefulSets(Ok(members)), now);
        assert!(matches!(flow.step(Observed::Pods(Ok(pods)), now), Need::PreparePods { .. }), "no record, no claim");
        let verdict = answer(flow.step(Observed::PodsPrepared(Vec::new()), now));
        assert!(verdict.allowed);
        let patch = serde_json::to_string(&verdict.patch).unwrap();
        assert!(patch.contains("2026-01-01T12:00:10Z"), "{patch}");
    }

    /// A `/scale` downscale of zone-a as an HPA sends it (carrying the resourceVersion it read), stepped through its
    /// parent's read at `now` (the parent as given) and the healthy group up to the pods prepared.
    fn scale_prepared(parent: StatefulSetView, now: Timestamp) -> (PrepareDownscale, Need) {
        let mut hpa_scale = scale_object("ingester-zone-a", 2);
        hpa_scale["metadata"]["resourceVersion"] = json!(parent.resource_version);
        let old = scale_object("ingester-zone-a", 3);
        let request = parse(review("admission.k8s.io/v1", "statefulsets", "ingester-zone-a", old, hpa_scale, None));
        let mut flow = PrepareDownscale::new(request, settings(false));
        assert_eq!(flow.step(Observed::Start, now), Need::StatefulSet { name: "ingester-zone-a".into() });
        let next = flow.step(Observed::StatefulSet(StatefulSetLookup::Found(Box::new(parent.clone()))), now);
        assert_eq!(next, Need::GroupStatefulSets { selector: "rollout-group=ingester".into() });
        let (mut members, pods) = members_and_pods();
        members[0] = parent;
        flow.step(Observed::GroupStatefulSets(Ok(members)), now);
        assert!(matches!(flow.step(Observed::Pods(Ok(pods)), now), Need::PreparePods { .. }));
        let next = flow.step(Observed::PodsPrepared(Vec::new()), now);
        (flow, next)
    }

    /// Without the tracker a `/scale` downscale is recorded by a conditional patch of its parent, dated
    /// `SCALE_RETRY_WINDOW` ahead, and allowed, though it carries a resourceVersion: the API server admits it again
    /// after the conflict that write causes (a PATCH) or the client retries (an HPA's PUT), and that admission finds
    /// the date still at least half the commit margin ahead, writes nothing and is allowed.
    #[test]
    fn without_the_tracker_a_scale_downscale_is_recorded_on_its_parent_and_allowed_and_its_readmission_writes_nothing()
    {
        use rollout_core::admission::prepare_flow::SCALE_RETRY_WINDOW;
        let now = ts(NOW);
        let mut parent = zone("ingester-zone-a");
        parent.resource_version = "7".into();
        let (mut flow, next) = scale_prepared(parent.clone(), now);
        let Need::PatchLastDownscale { statefulset, resource_version, at } = next else {
            panic!("the parent is patched next, got {next:?}")
        };
        assert_eq!((statefulset.as_str(), resource_version.as_str()), ("ingester-zone-a", "7"));
        let verdict = answer(flow.step(Observed::LastDownscalePatched(Ok(())), now));
        assert!(verdict.allowed, "{:?}", verdict.message);
        assert_eq!(verdict.patch, None, "a Scale cannot carry the annotation");
        assert_eq!((at, SCALE_RETRY_WINDOW), (ts("2026-01-01T12:00:30Z"), Duration::from_secs(30)));
        // Admitted again (the parent now carries the date and a new resourceVersion), up to the last moment that
        // leaves half the commit margin: allowed, nothing written.
        let mut dated = annotate(parent, keys::LAST_DOWNSCALE, "2026-01-01T12:00:30Z");
        dated.resource_version = "8".into();
        for at in ["2026-01-01T12:00:02Z", "2026-01-01T12:00:25Z"] {
            let (_, next) = scale_prepared(dated.clone(), ts(at));
            let verdict = answer(next);
            assert!(verdict.allowed, "at {at}: {:?}", verdict.message);
        }
        // Later, the date could fall before the commit: written again, conditionally.
        let (_, next) = scale_prepared(dated, ts("2026-01-01T12:00:25.5Z"));
        assert_eq!(
            next,
            Need::PatchLastDownscale {
                statefulset: "ingester-zone-a".into(),
                resource_version: "8".into(),
                at: ts("2026-01-01T12:00:56Z"),
            }
        );
    }

    #[test]
    fn failures_deny_with_their_policy() {
        let now = ts(NOW);
        // A /scale request whose parent cannot be read: denied (an HPA's downscale must not skip the checks).
        let scale = parse(review(
            "admission.k8s.io/v1",
            "statefulsets",
            "ingester-zone-a",
            scale_object("ingester-zone-a", 3),
            scale_object("ingester-zone-a", 2),
            None,
        ));
        let mut flow = PrepareDownscale::new(scale.clone(), settings(true));
        assert_eq!(flow.step(Observed::Start, now), Need::StatefulSet { name: "ingester-zone-a".into() });
        let verdict = answer(flow.step(
            Observed::StatefulSet(StatefulSetLookup::Failed(rollout_core::Failure::Deadline("timeout".into()))),
            now,
        ));
        assert!(
            !verdict.allowed && verdict.message.as_deref().unwrap_or_default().contains("timeout"),
            "{:?}",
            verdict.message
        );
        // Gone: nothing to prepare (fail open, as the reference).
        let mut flow = PrepareDownscale::new(scale, settings(true));
        flow.step(Observed::Start, now);
        assert!(answer(flow.step(Observed::StatefulSet(StatefulSetLookup::NotFound), now)).allowed);
        // An unreadable record: denied with the reference's message (the min time cannot be checked).
        let mut flow = PrepareDownscale::new(downscale(None), settings(true));
        flow.step(Observed::Start, now);
        let (members, pods) = members_and_pods();
        flow.step(Observed::GroupStatefulSets(Ok(members.clone())), now);
        flow.step(Observed::Pods(Ok(pods.clone())), now);
        let verdict = answer(
            flow.step(Observed::Record(Err(rollout_core::Failure::Unavailable("connection refused".into()))), now),
        );
        let message = verdict.message.as_deref().unwrap_or_default();
        assert!(!verdict.allowed && message.contains("loading zones failed"), "{message}");
        // An observation the flow did not ask for: denied.
        let mut flow = PrepareDownscale::new(downscale(None), settings(true));
        flow.step(Observed::Start, now);
        flow.step(Observed::GroupStatefulSets(Ok(members)), now);
        let verdict = answer(flow.step(Observed::Undone, now));
        assert!(
            !verdict.allowed && verdict.message.as_deref().unwrap_or_default().contains("internal error"),
            "{:?}",
            verdict.message
        );
        assert_eq!(answer(flow.step(Observed::Pods(Ok(pods)), now)), verdict, "an answered flow keeps its answer");
    }
}
