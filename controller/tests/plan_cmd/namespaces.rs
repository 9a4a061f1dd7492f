//! Namespaces: planned separately with qualified names, the namespace filter, and groups of one name in two.

use super::*;

/// Namespace `a`: zone-b next; namespace `b`: done; and a namespace-less group `other`.
fn two_namespaces() -> Vec<Value> {
    let mut objects = zones("a", [3, 0, 0]);
    objects.extend(zones("b", [3, 3, 3]));
    let mut other = sts("", "other", "r1", "r1");
    set(&mut other, &["metadata", "labels", "rollout-group"], json!("other"));
    objects.push(other);
    for i in 0..3 {
        objects.push(pod("", "other", i, "r1"));
    }
    objects
}

#[test]
fn two_namespaces_are_planned_separately_with_qualified_names() {
    let v = plan("two-ns", &two_namespaces(), &[]).json();
    let names: Vec<&str> = v["groups"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    // Objects without a namespace are in `default`.
    assert_eq!(names, ["a/ingester", "b/ingester", "default/other"]);
    let groups = v["groups"].as_array().unwrap();
    let mut expected_a = expected_zone_b_first_pod();
    expected_a["group"] = json!("a/ingester");
    assert_eq!(groups[0], expected_a);
    assert_eq!(groups[1]["state"], "done");
    assert_eq!(groups[2]["state"], "done");
}

#[test]
fn namespace_filter_keeps_that_namespace_and_objects_without_one() {
    let v = plan("ns-filter", &two_namespaces(), &[("namespace", "a")]).json();
    let names: Vec<&str> = v["groups"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    assert_eq!(names, ["ingester", "other"]);
    assert_eq!(v["groups"][0], expected_zone_b_first_pod());

    let v = plan("ns-filter-none", &two_namespaces(), &[("namespace", "nope")]).json();
    let names: Vec<&str> = v["groups"].as_array().unwrap().iter().map(|g| g["group"].as_str().unwrap()).collect();
    assert_eq!(names, ["other"]);
}

#[test]
fn same_group_name_in_two_namespaces_does_not_mix_pods() {
    // Namespace b has zone-a pods all at `old` while namespace a's are at `new`: if pods leaked across namespaces,
    // one of the groups would see 6 pods or the wrong revisions.
    let mut objects = zones("a", [3, 3, 3]);
    objects.extend(zones("b", [0, 0, 0]));
    let v = plan("ns-mix", &objects, &[]).json();
    assert_eq!(v["groups"][0]["state"], "done", "{v:#}");
    assert_eq!(v["groups"][1]["actions"][0]["pod"], "ingester-zone-a-0", "{v:#}");
}
