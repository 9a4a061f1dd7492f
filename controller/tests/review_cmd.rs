//! `rollout-operator review`: answering an AdmissionReview offline against a cluster dump.
#![cfg(not(madsim))]

mod support;

use jiff::Timestamp;
use rollout_core::keys;
use rollout_operator::commands::review::{EXIT_BAD_INPUT, EXIT_DENIED, ReviewArgs, execute};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{pod, sts};

fn temp(name: &str, contents: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("review-{}-{name}", std::process::id()));
    std::fs::write(&path, contents).unwrap();
    path
}

fn zone(name: &str) -> Value {
    let mut s = sts("ingester", name, 3, "r1", "r1");
    s.metadata.labels.get_or_insert_default().insert(keys::PREPARE_DOWNSCALE.into(), "true".into());
    let annotations = s.metadata.annotations.get_or_insert_default();
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PORT.into(), "8080".into());
    annotations.insert(keys::PREPARE_DOWNSCALE_HTTP_PATH.into(), "prepare-shutdown".into());
    annotations.insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
    let mut v = serde_json::to_value(s).unwrap();
    v["apiVersion"] = json!("apps/v1");
    v["kind"] = json!("StatefulSet");
    v
}

fn dump(with_record: bool) -> String {
    let mut items: Vec<Value> = Vec::new();
    for z in ["ingester-zone-a", "ingester-zone-b"] {
        items.push(zone(z));
        for i in 0..3 {
            let mut p = serde_json::to_value(pod(z, i, "r1", true, 1)).unwrap();
            p["apiVersion"] = json!("v1");
            p["kind"] = json!("Pod");
            items.push(p);
        }
    }
    if with_record {
        items.push(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rollout-operator-zone-tracker", "namespace": "ns"},
            "data": {"ingester-zone-b": "{\"lastDownscaled\":\"2026-01-01T06:00:00Z\"}"}}));
    }
    items.push(json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "labels": {keys::NO_DOWNSCALE: "true"}},
        "spec": {"selector": {}, "template": {}}}));
    serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap()
}

fn review(resource: &str, name: &str, old: Value, new: Value) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1", "resource": {"group": "apps", "version": "v1", "resource": resource},
        "name": name, "namespace": "ns", "operation": "UPDATE", "object": new, "oldObject": old}})
    .to_string()
}

fn with_replicas(mut v: Value, replicas: i32) -> Value {
    v["spec"]["replicas"] = json!(replicas);
    v
}

fn run(path: &str, files: Vec<PathBuf>) -> (u8, Value, String) {
    let args = ReviewArgs {
        path: path.into(),
        files,
        now: Some("2026-01-01T12:00:00Z".into()),
        cluster_domain: "cluster.local.".into(),
        zone_tracker_config_map: Some("rollout-operator-zone-tracker".into()),
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
    let out = serde_json::from_slice(&out).unwrap_or(Value::Null);
    (code, out, String::from_utf8(err).unwrap())
}

#[test]
fn prepare_downscale_lists_the_endpoints_and_decides_as_if_they_succeeded() {
    let r = temp(
        "allow.json",
        &review(
            "statefulsets",
            "ingester-zone-a",
            with_replicas(zone("ingester-zone-a"), 3),
            with_replicas(zone("ingester-zone-a"), 1),
        ),
    );
    let d = temp("allow-dump.json", &dump(false));
    let (code, out, err) = run("/admission/prepare-downscale", vec![r, d]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out["response"]["uid"], "u-1");
    assert_eq!(out["response"]["allowed"], true);
    assert!(
        err.contains(
            "would call: POST http://ingester-zone-a-2.ingester-zone-a.ns.svc.cluster.local.:8080/prepare-shutdown"
        ),
        "{err}"
    );
    assert!(err.contains("ingester-zone-a-1."), "{err}");
}

#[test]
fn prepare_downscale_explains_a_denial_from_the_record_in_the_dump() {
    let r = temp(
        "deny.json",
        &review(
            "statefulsets",
            "ingester-zone-a",
            with_replicas(zone("ingester-zone-a"), 3),
            with_replicas(zone("ingester-zone-a"), 1),
        ),
    );
    let d = temp("deny-dump.yaml", &dump(true));
    let (code, out, err) = run("/admission/prepare-downscale", vec![r, d]);
    assert_eq!(code, EXIT_DENIED, "a refused downscale: {err}");
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(
        out["response"]["status"]["message"],
        "downscale of statefulsets/ingester-zone-a in ns from 3 to 1 replicas is not allowed because statefulset \
         ingester-zone-b was downscaled at 2026-01-01 06:00:00 +0000 UTC and is labelled to wait 12h0m0s between zone downscales"
    );
    assert!(!err.contains("would call"), "{err}");
}

#[test]
fn no_downscale_of_a_scale_request_looks_the_parent_up_in_the_dump() {
    let scale = |r: i32| json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "web"}, "spec": {"replicas": r}});
    let r = temp("scale.json", &review("deployments", "web", scale(4), scale(2)));
    let d = temp("scale-dump.json", &dump(false));
    let (code, out, _) = run("/admission/no-downscale", vec![r.clone(), d]);
    assert_eq!(code, EXIT_DENIED);
    assert_eq!(
        out["response"]["status"]["message"],
        "downscale of deployments/web in ns from 4 to 2 replicas is not allowed because it has the label 'grafana.com/no-downscale=true'"
    );
    // Without the dump the parent is not found: allowed with the reference's warning.
    let (code, out, _) = run("/admission/no-downscale", vec![r]);
    assert_eq!(code, 0);
    assert_eq!(out["response"]["allowed"], true);
    assert!(out["response"]["warnings"][0].as_str().unwrap().starts_with("can't get deployments/web in namespace ns"));
}

#[test]
fn bad_input_is_reported_with_exit_status_2() {
    let r = temp("bad.json", "{\"apiVersion\":\"v1\",\"kind\":\"Pod\"}");
    let (code, _, err) = run("/admission/no-downscale", vec![r.clone()]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(
        err.contains("bad.json: the webhook would answer HTTP 400: Unsupported group version kind: /v1, Kind=Pod"),
        "names the file: {err}"
    );
    // Not JSON (a YAML dump given first, say): the file is named, with what to do.
    let yaml = temp("not-json.yaml", "apiVersion: v1\nkind: List\nitems: []\n");
    let (code, _, err) = run("/admission/no-downscale", vec![yaml]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.contains("not-json.yaml: not an AdmissionReview: invalid JSON: "), "{err}");
    assert!(err.contains("the AdmissionReview must be the first -f"), "{err}");
    let (code, _, err) = run("/admission/other", vec![r]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.contains("unknown --path"), "{err}");
    let (code, _, err) = run("/admission/no-downscale", vec![PathBuf::from("/nonexistent/review.json")]);
    assert_eq!(code, EXIT_BAD_INPUT);
    assert!(err.contains("/nonexistent/review.json"), "{err}");
}

fn eviction(pod: &str) -> String {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "e-1", "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "subResource": "eviction",
        "name": pod, "namespace": "ns", "operation": "CREATE",
        "object": {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}}})
    .to_string()
}

/// The dump's pods, labelled for the budget, with one pod of zone b not ready, and its budgets.
fn budget_dump(budgets: &[Value]) -> String {
    let mut dump: Value = serde_json::from_str(&dump(false)).unwrap();
    let items = dump["items"].as_array_mut().unwrap();
    for item in items.iter_mut().filter(|i| i["kind"] == "Pod") {
        item["metadata"]["labels"]["rollout-group"] = json!("ingester");
        if item["metadata"]["name"] == "ingester-zone-b-2" {
            item["status"]["conditions"][0]["status"] = json!("False");
        }
    }
    items.extend(budgets.iter().cloned());
    dump.to_string()
}

fn zpdb(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
           "metadata": {"name": name, "namespace": "ns", "generation": 1}, "spec": spec})
}

#[test]
fn pod_eviction_is_judged_against_the_budgets_in_the_dump() {
    let budget = zpdb(
        "ingester-rollout",
        json!({"maxUnavailable": 1, "selector": {"matchLabels": {"rollout-group": "ingester"}}}),
    );
    let invalid = zpdb("broken", json!({"maxUnavailable": -1, "selector": {"matchLabels": {"x": "y"}}}));
    let d = temp("evict-dump.json", &budget_dump(&[budget, invalid]));
    let r = temp("evict-a.json", &eviction("ingester-zone-a-0"));
    let (code, out, err) = run("/admission/pod-eviction", vec![r, d.clone()]);
    assert_eq!(code, EXIT_DENIED, "{err}");
    assert_eq!(out["response"]["allowed"], false, "{out}");
    assert_eq!(out["response"]["status"]["code"], 429);
    assert_eq!(out["response"]["status"]["message"], "1 pod not ready in ingester-zone-b");
    let note = "ZoneAwarePodDisruptionBudget \"broken\" is not valid and is left out: invalid value: max unavailable \
                must be 0 <= val, got -1";
    assert!(err.contains(note), "{err}");
    // In the disrupted zone itself, within the budget.
    let r = temp("evict-b.json", &eviction("ingester-zone-b-2"));
    let (_, out, _) = run("/admission/pod-eviction", vec![r, d.clone()]);
    assert_eq!(out["response"]["allowed"], true, "{out}");
    // Without a budget: not in scope.
    let none = temp("evict-none.json", &budget_dump(&[]));
    let r = temp("evict-c.json", &eviction("ingester-zone-a-0"));
    let (_, out, _) = run("/admission/pod-eviction", vec![r, none]);
    assert_eq!(out["response"]["allowed"], true, "{out}");
}

#[test]
fn zpdb_validation_explains_a_rejected_budget() {
    let request = |object: Value| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": "z-1", "name": "ingester-rollout", "namespace": "ns", "operation": "CREATE", "object": object}})
        .to_string()
    };
    let bad = zpdb(
        "x",
        json!({
            "selector": {"matchLabels": {"a": "b"}},
            "crossZoneEvictionDelay": "1d",
            "podNamePartitionRegex": "x-([0-9]+)",
        }),
    );
    let r = temp("zpdb-bad.json", &request(bad));
    let (code, out, _) = run("/admission/zpdb-validation", vec![r]);
    assert_eq!(code, EXIT_DENIED);
    assert_eq!(out["response"]["allowed"], false);
    assert_eq!(out["response"]["status"]["code"], 400);
    assert_eq!(
        out["response"]["status"]["message"],
        "invalid value: crossZoneEvictionDelay is not a valid duration, got time: unknown unit \"d\" in duration \"1d\""
    );
    let good = zpdb("x", json!({"selector": {"matchLabels": {"a": "b"}}}));
    let (_, out, _) = run("/admission/zpdb-validation", vec![temp("zpdb-good.json", &request(good))]);
    assert_eq!(out["response"]["allowed"], true);
}

/// The AdmissionReviews of `examples/` against their dump, as examples/README.md shows them: the prepare-downscale
/// `/scale` review is allowed (exit 0) and names the pod it would prepare; the no-downscale review and the eviction
/// are refused (exit 1).
#[test]
fn the_example_reviews_are_answered_as_the_examples_readme_says() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let readme = std::fs::read_to_string(examples.join("README.md")).unwrap();
    let dump = examples.join("downscale-and-eviction.yaml");
    let review = |path: &str, file: &str| {
        assert!(readme.contains(&format!("-f examples/{file}")), "examples/README.md runs review on {file}");
        let args = ReviewArgs {
            path: path.into(),
            files: vec![examples.join(file), dump.clone()],
            now: Some("2026-01-01T12:00:00Z".into()),
            cluster_domain: "cluster.local.".into(),
            zone_tracker_config_map: None,
        };
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = execute(&args, &mut std::io::empty(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
        let out: Value = serde_json::from_slice(&out).expect("an AdmissionReview on stdout");
        (code, out, String::from_utf8(err).unwrap())
    };

    let (code, out, err) = review("/admission/prepare-downscale", "review-prepare-downscale-scale.json");
    assert_eq!(code, 0, "{out} {err}");
    assert_eq!(out["response"]["allowed"], true);
    assert_eq!(out["response"]["uid"], "8a6b0c43-2b0f-4b8e-9c55-1f0e6c7d3a01");
    let call = "would call: POST http://ingester-zone-b-2.ingester-zone-b.mimir.svc.cluster.local.:8080/ingester/\
                prepare-shutdown (assumed to succeed)";
    assert_eq!(err.trim_end(), call);
    assert!(readme.contains(call));

    let (code, out, _) = review("/admission/no-downscale", "review-no-downscale.json");
    assert_eq!(code, EXIT_DENIED);
    let message = "downscale of deployments/distributor in mimir from 6 to 4 replicas is not allowed because it has \
                   the label 'grafana.com/no-downscale=true'";
    assert_eq!(out["response"]["status"]["message"], message);
    assert!(readme.replace('\n', " ").contains(message));

    let (code, out, _) = review("/admission/pod-eviction", "review-eviction.json");
    assert_eq!(code, EXIT_DENIED);
    assert_eq!(out["response"]["status"]["code"], 429);
    assert_eq!(out["response"]["status"]["message"], "1 pod not ready in ingester-zone-b");
    assert!(readme.contains("`1 pod not ready in ingester-zone-b`"));
}
