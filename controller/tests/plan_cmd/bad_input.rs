//! Bad arguments and bad input: exit 2, nothing on stdout, a message naming the file and the object.

use super::*;

#[test]
fn invalid_now_and_output() {
    let outcome = run(&[Path::new(EXAMPLE)], &[("now", "yesterday")]);
    outcome.assert_bad_input(&["invalid --now value \"yesterday\"", "RFC 3339"]);
    let outcome = run(&[Path::new(EXAMPLE)], &[("output", "yaml")]);
    outcome.assert_bad_input(&["invalid --output value \"yaml\": expected text or json"]);
    let outcome = run(&[], &[]);
    outcome.assert_bad_input(&["no input"]);
}

#[test]
fn unreadable_and_not_utf8_files() {
    let dir = Dir::new("unreadable");
    let missing = dir.0.join("nope.yaml");
    run(&[&missing], &[]).assert_bad_input(&["nope.yaml: cannot read"]);
    let binary = dir.file("bin.yaml", [0x00, 0x41, 0xc3, 0x28]);
    run(&[&binary], &[]).assert_bad_input(&["bin.yaml: not text: invalid UTF-8"]);
    let odd = dir.file("odd.yaml", [0xff, 0xfe, 0x41]);
    run(&[&odd], &[]).assert_bad_input(&["odd.yaml: not text: UTF-16 input with an odd number of bytes"]);
    let lone_surrogate = dir.file("surrogate.yaml", [0xff, 0xfe, 0x00, 0xd8, 0x41, 0x00]);
    run(&[&lone_surrogate], &[]).assert_bad_input(&["surrogate.yaml: not text: invalid UTF-16"]);
}

#[test]
fn unparsable_yaml_and_json() {
    let dir = Dir::new("unparsable");
    let bad_yaml = dir.file("bad.yaml", "kind: Pod\nmetadata:\n  name: [unclosed\n");
    run(&[&bad_yaml], &[]).assert_bad_input(&["bad.yaml: invalid YAML"]);
    let bad_json = dir.file("bad.json", "{\"kind\": \"Pod\", \"metadata\": {\"name\": \"x\"\n");
    run(&[&bad_json], &[]).assert_bad_input(&["bad.json: invalid JSON", "line"]);
    let outcome = run_with_stdin(&args(&[Path::new("-")], &[]), "a: b: c\n");
    outcome.assert_bad_input(&["<stdin>: invalid YAML"]);
}

/// A YAML alias bomb or absurd nesting is refused with a message in words: where, which limit, and that kubectl's
/// dumps never look like that; never the parser's internal names.
#[test]
fn alias_bombs_and_deep_nesting_are_refused_in_words() {
    let dir = Dir::new("bombs");
    let mut bomb = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (previous, name) in
        ["a", "b", "c", "d", "e", "f", "g", "h"].iter().zip(["b", "c", "d", "e", "f", "g", "h", "i"])
    {
        bomb.push_str(&format!("{name}: &{name} [{}]\n", vec![format!("*{previous}"); 9].join(",")));
    }
    let bomb = dir.file("bomb.yaml", bomb);
    let outcome = run(&[&bomb], &[]);
    outcome.assert_bad_input(&["bomb.yaml: invalid YAML: line ", "an alias bomb", "refused as unsafe to load"]);
    let mut deep = String::from("kind: Pod\nmetadata:\n");
    for level in 1..100 {
        deep.push_str(&format!("{}k{level}:\n", "  ".repeat(level)));
    }
    let deep = dir.file("deep.yaml", deep);
    let nested = run(&[&deep], &[]);
    nested.assert_bad_input(&["deep.yaml: invalid YAML: line ", "nested more than 64 levels deep"]);
    for outcome in [&outcome, &nested] {
        for debug_text in ["budget breached", "Nodes {", "Depth {", "{ depth", "BudgetBreach"] {
            assert!(!outcome.err.contains(debug_text), "debug text {debug_text:?} in: {}", outcome.err);
        }
        assert_eq!(outcome.err.lines().count(), 1, "one line: {}", outcome.err);
    }
}

/// A dump of the StatefulSets alone is planned (every pod is missing) and said to be one on stderr.
#[test]
fn statefulsets_without_pods_are_noted() {
    let objects: Vec<Value> = zones("prod", [3, 0, 0]).into_iter().filter(|o| o["kind"] == "StatefulSet").collect();
    let outcome = plan("no-pods", &objects, &[("output", "text")]);
    assert_eq!(outcome.code, 0, "{}", outcome.err);
    assert!(
        outcome.err.contains(
            "note: the input has 3 StatefulSets but no pods, so every pod counts as missing; dump the pods too \
             (kubectl get statefulsets,pods -o yaml)"
        ),
        "{}",
        outcome.err
    );
    let with_pods = plan("with-pods", &zones("prod", [3, 0, 0]), &[]);
    assert!(!with_pods.err.contains("no pods"), "{}", with_pods.err);
    // Pods of another namespace only: still none for the namespace planned.
    let mut other = objects.clone();
    other.extend(zones("dev", [3, 0, 0]).into_iter().filter(|o| o["kind"] == "Pod"));
    let outcome = plan("other-ns-pods", &other, &[("namespace", "prod")]);
    assert!(outcome.err.contains("3 StatefulSets of namespace prod but no pods"), "{}", outcome.err);
}

fn bad_object(test: &str, objects: &[Value], needles: &[&str]) {
    let dir = Dir::new(test);
    let file = dir.file("dump.yaml", multi_doc_yaml(objects));
    let mut all = vec!["dump.yaml: "];
    all.extend_from_slice(needles);
    run(&[&file], &[]).assert_bad_input(&all);
}

#[test]
fn object_without_kind() {
    let mut objects = zones("prod", [3, 0, 0]);
    remove(find(&mut objects, "ingester-zone-b-1"), &["kind"]);
    bad_object("no-kind", &objects, &["object \"ingester-zone-b-1\" at document 7", "missing kind"]);

    let nameless = json!({"apiVersion": "v1", "metadata": {}});
    bad_object("no-kind-no-name", &[nameless], &["object at document 1", "missing kind"]);
}

#[test]
fn statefulset_without_status() {
    let mut objects = zones("prod", [3, 0, 0]);
    remove(find(&mut objects, "ingester-zone-c"), &["status"]);
    bad_object("no-status", &objects, &["StatefulSet/ingester-zone-c (document 9", "missing status"]);
}

#[test]
fn statefulset_without_name() {
    let mut objects = zones("prod", [3, 0, 0]);
    remove(find(&mut objects, "ingester-zone-b"), &["metadata", "name"]);
    bad_object("no-name", &objects, &["StatefulSet at document 5", "missing metadata.name"]);

    let mut pod_objects = zones("prod", [3, 0, 0]);
    remove(find(&mut pod_objects, "ingester-zone-a-2"), &["metadata", "name"]);
    bad_object("pod-no-name", &pod_objects, &["Pod at document 4", "missing metadata.name"]);
}

#[test]
fn wrong_types_name_the_field() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-b"), &["spec", "replicas"], json!("three"));
    bad_object("replicas-string", &objects, &["StatefulSet/ingester-zone-b (document 5", "spec.replicas: ", "three"]);

    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-a-1"), &["status", "containerStatuses"], json!({"ready": true}));
    bad_object("pod-statuses-map", &objects, &["Pod/ingester-zone-a-1 (document 3", "status.containerStatuses: "]);

    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-a-1"), &["kind"], json!(7));
    bad_object("kind-number", &objects, &["ingester-zone-a-1", "kind must be a string, found a number"]);
}

#[test]
fn bad_object_inside_a_list_names_the_item() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-c-2"), &["metadata", "labels"], json!(["not", "a", "map"]));
    let dir = Dir::new("list-item");
    let file = dir.file("dump.json", list(&objects).to_string());
    run(&[&file], &[])
        .assert_bad_input(&["dump.json: Pod/ingester-zone-c-2 (document 1, item 11): metadata.labels: invalid type"]);

    let not_a_sequence = json!({"apiVersion": "v1", "kind": "List", "items": {"a": 1}});
    let file = dir.file("items.json", not_a_sequence.to_string());
    run(&[&file], &[]).assert_bad_input(&["items.json: List at document 1", "items must be a sequence"]);
}

#[test]
fn document_that_is_not_a_mapping() {
    let dir = Dir::new("scalar-doc");
    let file = dir.file("dump.yaml", format!("{}---\njust a string\n", yaml(&zones("prod", [3, 0, 0])[0])));
    run(&[&file], &[])
        .assert_bad_input(&["dump.yaml: object at document 2, line ", "expected a mapping, found a string"]);
}

#[test]
fn never_panics_on_mangled_input() {
    // Truncations and byte flips of the example exercise every parser error path; each must end in a plan or in a
    // clean exit 2.
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let bytes = text.as_bytes();
    let a = args(&[Path::new("-")], &[]);
    for (step, cut) in (0..bytes.len()).step_by(1999).enumerate() {
        let truncated = String::from_utf8_lossy(&bytes[..cut]);
        let outcome = run_with_stdin(&a, &truncated);
        assert!(outcome.code == 0 || outcome.code == 2, "cut at {cut}: {}", outcome.err);
        let mut flipped = bytes.to_vec();
        flipped[cut] = b"{}[]:-\"' \n#&*!|>"[step % 16];
        let outcome = run_with_stdin(&a, &String::from_utf8_lossy(&flipped));
        assert!(outcome.code == 0 || outcome.code == 2, "flip at {cut}: {}", outcome.err);
    }
    for weird in ["[", "]", "{", "null", "~", "[1, 2]", "- a\n- b\n", "&a [*a]", "!!binary aGk=", "{\"items\": 1}"] {
        let outcome = run_with_stdin(&a, weird);
        assert!(outcome.code == 0 || outcome.code == 2, "{weird:?}: {}", outcome.err);
    }
    let deep = "[".repeat(10_000);
    assert_eq!(run_with_stdin(&a, &deep).code, 2);
    let deep_yaml = "a:\n".to_string() + &(1..2000).map(|i| format!("{}a:\n", " ".repeat(i))).collect::<String>();
    assert_eq!(run_with_stdin(&a, &deep_yaml).code, 2);
}
