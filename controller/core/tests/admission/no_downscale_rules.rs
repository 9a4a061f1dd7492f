//! No-downscale (reference 4.2): the table of outcomes, Deployments and ReplicaSets, `/scale`, dry runs.

use super::*;

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
        no_downscale::decide_with_parent(
            &req,
            3,
            1,
            Err(&rollout_core::Failure::NotFound("not found: statefulsets ingester-zone-a".into()))
        ),
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
