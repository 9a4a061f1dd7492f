//! Input formats: multi-document YAML, lists (typed or not), JSON, stdin, byte-order marks, several files.

use super::*;

#[test]
fn multi_document_yaml_with_empty_documents_and_other_kinds() {
    let mut objects = zones("prod", [3, 0, 0]);
    objects.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "ingester", "namespace": "prod"}}));
    objects.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}));
    // A custom resource that happens to be called StatefulSet is not ours.
    objects.push(json!({"apiVersion": "apps.kruise.io/v1beta1", "kind": "StatefulSet", "metadata": {"name": "k"}}));
    let text = format!("# dump\n---\n{}---\n---\n", multi_doc_yaml(&objects));
    let dir = Dir::new("multi-doc");
    let outcome = run(&[&dir.file("dump.yml", text)], &[]);
    assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}));
}

#[test]
fn list_in_yaml() {
    let dir = Dir::new("list");
    let outcome = run(&[&dir.file("list.yaml", yaml(&list(&zones("prod", [3, 0, 0]))))], &[]);
    assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}));
}

#[test]
fn typed_lists_whose_items_have_no_kind() {
    // `kubectl get --raw` prints StatefulSetList / PodList items without apiVersion and kind.
    let objects = zones("prod", [3, 0, 0]);
    let strip = |kind: &str| -> Vec<Value> {
        objects
            .iter()
            .filter(|o| o["kind"] == kind)
            .cloned()
            .map(|mut o| {
                remove(&mut o, &["kind"]);
                remove(&mut o, &["apiVersion"]);
                o
            })
            .collect()
    };
    let sts_list = json!({"apiVersion": "apps/v1", "kind": "StatefulSetList", "items": strip("StatefulSet")});
    let pod_list = json!({"apiVersion": "v1", "kind": "PodList", "items": strip("Pod")});
    let dir = Dir::new("typed-lists");
    let outcome =
        run(&[&dir.file("sts.json", sts_list.to_string()), &dir.file("pods.json", pod_list.to_string())], &[]);
    assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}));
}

#[test]
fn json_single_list_and_concatenated_objects() {
    let objects = zones("prod", [3, 0, 0]);
    let dir = Dir::new("json");
    let one = dir.file("one.json", serde_json::to_string_pretty(&list(&objects)).unwrap());
    assert_eq!(run(&[&one], &[]).json(), json!({"groups": [expected_zone_b_first_pod()]}));

    let stream: String = objects.iter().map(|o| format!("{}\n", serde_json::to_string_pretty(o).unwrap())).collect();
    let many = dir.file("many.json", stream);
    assert_eq!(run(&[&many], &[]).json(), json!({"groups": [expected_zone_b_first_pod()]}));
}

#[test]
fn stdin_dash() {
    let objects = zones("prod", [3, 0, 0]);
    let outcome = run_with_stdin(&args(&[Path::new("-")], &[]), &multi_doc_yaml(&objects));
    assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}));
}

#[test]
fn utf16_and_utf8_bom_dumps() {
    // Windows PowerShell's `>` writes UTF-16 LE with a byte-order mark.
    let text = multi_doc_yaml(&zones("prod", [3, 0, 0]));
    let dir = Dir::new("utf16");
    let le: Vec<u8> = [0xFF, 0xFE].into_iter().chain(text.encode_utf16().flat_map(u16::to_le_bytes)).collect();
    let be: Vec<u8> = [0xFE, 0xFF].into_iter().chain(text.encode_utf16().flat_map(u16::to_be_bytes)).collect();
    let bom: Vec<u8> = [0xEF, 0xBB, 0xBF].into_iter().chain(text.bytes()).collect();
    for (name, bytes) in [("le.yaml", le), ("be.yaml", be), ("bom.yaml", bom)] {
        let outcome = run(&[&dir.file(name, bytes)], &[]);
        assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}), "{name}");
    }
}

#[test]
fn several_files_and_stdin_together() {
    let objects = zones("prod", [3, 0, 0]);
    let (statefulsets, pods): (Vec<Value>, Vec<Value>) = objects.into_iter().partition(|o| o["kind"] == "StatefulSet");
    let (zone_a_pods, other_pods): (Vec<Value>, Vec<Value>) =
        pods.into_iter().partition(|o| o["metadata"]["name"].as_str().unwrap().starts_with("ingester-zone-a"));
    let dir = Dir::new("several");
    let sts_file = dir.file("sts.yaml", multi_doc_yaml(&statefulsets));
    let pod_file = dir.file("pods.json", list(&other_pods).to_string());
    let outcome = run_with_stdin(&args(&[&sts_file, Path::new("-"), &pod_file], &[]), &multi_doc_yaml(&zone_a_pods));
    assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}));

    // Without the zone-a pods, zone-a is missing pods: it is the one not-ready StatefulSet and the group waits.
    let outcome = run(&[&sts_file, &pod_file], &[]);
    let group = only_group(&outcome);
    assert_eq!(group["state"], "waiting");
    assert_eq!(group["actions"], json!([]));
    assert!(group["reason"].as_str().unwrap().contains("3 of 3 pods missing"), "{group}");
}

#[test]
fn the_same_object_twice_counts_once() {
    let dir = Dir::new("dup");
    let file = dir.file("dump.yaml", multi_doc_yaml(&zones("prod", [3, 0, 0])));
    let outcome = run(&[&file, &file], &[]);
    assert_eq!(outcome.json(), json!({"groups": [expected_zone_b_first_pod()]}));
    assert!(outcome.err.contains("note: Pod prod/ingester-zone-b-0 appears more than once"), "{}", outcome.err);
}

#[test]
fn empty_input_plans_nothing() {
    let dir = Dir::new("empty");
    let file = dir.file("empty.yaml", "");
    assert_eq!(run(&[&file], &[]).json(), json!({"groups": []}));
    let text = run(&[&file], &[("output", "text")]);
    assert_eq!(
        (text.code, text.out.as_str()),
        (0, "no rollout groups found (StatefulSets with a rollout-group label)\n")
    );
}
