//! HTTP handling (content types, malformed bodies, review versions) and arbitrary input: whatever the body, an
//! answer, never a panic.

use super::*;

#[tokio::test]
async fn malformed_requests_get_400_with_a_reason() {
    let app = app(&FakeCluster::default(), &FakePods::default());
    for path in ["/admission/no-downscale", "/admission/prepare-downscale"] {
        let (status, body) = post(&app, path, Some("text/plain"), b"{}".to_vec()).await;
        assert_eq!((status, body.as_slice()), (StatusCode::BAD_REQUEST, b"wrong content type".as_slice()));
        let (status, body) = post(&app, path, None, b"{}".to_vec()).await;
        assert_eq!((status, body.as_slice()), (StatusCode::BAD_REQUEST, b"wrong content type".as_slice()));
        let (status, body) = post(&app, path, Some("application/json"), b"{".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(String::from_utf8_lossy(&body).starts_with("Request could not be decoded: "));
        let no_request = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#.to_vec();
        let (status, body) = post(&app, path, Some("application/json"), no_request).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(String::from_utf8_lossy(&body), "Request could not be decoded: the AdmissionReview has no request");
    }
    let (status, _) = post(&app, "/admission/other", Some("application/json"), b"{}".to_vec()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn v1beta1_reviews_are_answered_in_v1beta1() {
    let app = app(&FakeCluster::default(), &FakePods::default());
    let mut r = review("statefulsets", "a", Value::Null, Value::Null, false);
    r["apiVersion"] = json!("admission.k8s.io/v1beta1");
    let (status, body) =
        post(&app, "/admission/no-downscale", Some("application/json"), serde_json::to_vec(&r).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let out: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(out["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(out["kind"], "AdmissionReview");
    assert_eq!(out["response"]["uid"], "uid-a");
    assert_eq!(out["response"]["allowed"], true);
}

fn check_http(app: &axum::Router, rt: &tokio::runtime::Runtime, body: Vec<u8>) {
    for path in ["/admission/no-downscale", "/admission/prepare-downscale"] {
        let (status, out) = rt.block_on(post(app, path, Some("application/json"), body.clone()));
        match status {
            StatusCode::BAD_REQUEST => assert!(!out.is_empty(), "a 400 says why"),
            StatusCode::OK => {
                let request: Value = serde_json::from_slice(&body).expect("a 200 answers a JSON request");
                let response: Value = serde_json::from_slice(&out).expect("a 200 carries JSON");
                assert_eq!(response["kind"], "AdmissionReview");
                assert_eq!(response["apiVersion"], request["apiVersion"]);
                assert_eq!(response["response"]["uid"], request["request"]["uid"]);
                assert!(response["response"]["allowed"].is_boolean());
            }
            other => panic!("unexpected status {other} for {}", String::from_utf8_lossy(&body)),
        }
    }
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..10).prop_map(|n| json!(n)),
        prop_oneof![
            Just("statefulsets"),
            Just("apps/v1"),
            Just("StatefulSet"),
            Just("autoscaling/v1"),
            Just("Scale"),
            Just("true"),
            Just("")
        ]
        .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(4, 40, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("apiVersion"),
                    Just("kind"),
                    Just("uid"),
                    Just("object"),
                    Just("oldObject"),
                    Just("spec"),
                    Just("replicas"),
                    Just("metadata"),
                    Just("labels"),
                    Just("dryRun"),
                    Just("resource"),
                    Just("name"),
                ]
                .prop_map(String::from),
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_get_400_or_a_well_formed_review(body in prop::collection::vec(any::<u8>(), 0..200)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let app = app(&cluster_with_zones(), &FakePods::default());
        check_http(&app, &rt, body);
    }

    #[test]
    fn arbitrary_json_gets_400_or_a_well_formed_review(
        request in arb_json(), old in arb_json(), new in arb_json(), version in prop_oneof![Just("admission.k8s.io/v1"), Just("admission.k8s.io/v1beta1")]
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let app = app(&cluster_with_zones(), &FakePods::default());
        check_http(&app, &rt, serde_json::to_vec(&request).unwrap());
        let mut r = review("statefulsets", "ingester-zone-a", old, new, false);
        r["apiVersion"] = json!(version);
        check_http(&app, &rt, serde_json::to_vec(&r).unwrap());
        r["request"]["oldObject"] = with_replicas(zone("ingester-zone-a", 3), 3);
        if let Some(object) = r["request"]["object"].as_object_mut() {
            object.insert("apiVersion".into(), json!("apps/v1"));
        }
        check_http(&app, &rt, serde_json::to_vec(&r).unwrap());
        r["request"] = request;
        check_http(&app, &rt, serde_json::to_vec(&r).unwrap());
    }
}
