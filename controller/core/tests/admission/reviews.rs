//! Review parsing and rendering, and arbitrary input: whatever the body, a typed error or an answer, never a panic.

use super::*;

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

/// Whatever the body, the core answers with a typed error or a request whose response carries its uid; the
/// decisions never panic.
fn check_any_body(body: &[u8]) {
    let Ok(req) = parse_review(body) else { return };
    let verdicts = vec![
        match no_downscale::evaluate(&req) {
            Step::Decided(v) => v,
            Step::LookupParent { old, new, .. } => {
                no_downscale::decide_with_parent(&req, old, new, Err(&rollout_core::Failure::Failed("x".into())))
            }
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
