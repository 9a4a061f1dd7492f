//! The example dump: its exact plan in both formats, as JSON, a list and from stdin, and its variants.

use super::*;

#[test]
fn example_dump_json_is_exactly_the_expected_plan() {
    let outcome = run(&[Path::new(EXAMPLE)], &[]);
    let reason = budget_reason(ZONE_B_NEW, 0, 2);
    assert_eq!(
        outcome.json(),
        json!({"groups": [{
            "group": "ingester",
            "state": "progressing",
            "reason": "replacing 2 pods of ingester-zone-b: ingester-zone-b-1, ingester-zone-b-2; \
                       then waiting for replaced pods of ingester-zone-b to become ready",
            "actions": [
                delete("ingester-zone-b", "ingester-zone-b-1", &reason),
                delete("ingester-zone-b", "ingester-zone-b-2", &reason),
            ],
        }]})
    );
    assert!(outcome.err.is_empty(), "no warnings expected: {}", outcome.err);
}

#[test]
fn example_dump_text_has_one_line_per_group_and_action() {
    let outcome = run(&[Path::new(EXAMPLE)], &[("output", "text")]);
    assert_eq!(outcome.code, 0, "{}", outcome.err);
    let reason = budget_reason(ZONE_B_NEW, 0, 2);
    let expected = format!(
        "ingester: progressing: replacing 2 pods of ingester-zone-b: ingester-zone-b-1, ingester-zone-b-2; \
         then waiting for replaced pods of ingester-zone-b to become ready\n  \
         delete pod ingester-zone-b-1 of StatefulSet ingester-zone-b: {reason}\n  \
         delete pod ingester-zone-b-2 of StatefulSet ingester-zone-b: {reason}\n"
    );
    assert_eq!(outcome.out, expected);
}

#[test]
fn example_dump_as_json_list_and_from_stdin_gives_the_same_plan() {
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let value: Value = serde_saphyr::from_str(&text).unwrap();
    let from_yaml = run(&[Path::new(EXAMPLE)], &[]).json();

    let as_json = serde_json::to_string_pretty(&value).unwrap();
    let from_stdin = run_with_stdin(&args(&[Path::new("-")], &[]), &as_json);
    assert_eq!(from_stdin.json(), from_yaml);

    let yaml_stdin = run_with_stdin(&args(&[Path::new("-")], &[]), &text);
    assert_eq!(yaml_stdin.json(), from_yaml);
}

#[test]
fn example_dump_waits_when_the_replaced_pod_is_not_ready_yet() {
    // Same dump, as of the moment ingester-zone-b-0 had just been recreated and was not ready: zone-b is the one
    // not-ready StatefulSet, its budget (2) has 1 spent, so only one more pod goes.
    let text = std::fs::read_to_string(EXAMPLE).unwrap();
    let mut value: Value = serde_saphyr::from_str(&text).unwrap();
    let b0 = value["items"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|o| o["metadata"]["name"] == "ingester-zone-b-0")
        .unwrap();
    set(
        b0,
        &["status", "containerStatuses"],
        json!([{"name": "ingester", "image": "x", "imageID": "", "ready": false, "restartCount": 0, "state": {"running": {}}}]),
    );
    set(b0, &["status", "conditions"], json!([{"type": "Ready", "status": "False"}]));
    let outcome = run_with_stdin(&args(&[Path::new("-")], &[]), &serde_json::to_string(&value).unwrap());
    let group = only_group(&outcome);
    assert_eq!(
        group["actions"],
        json!([delete("ingester-zone-b", "ingester-zone-b-1", &budget_reason(ZONE_B_NEW, 1, 2))])
    );
}

#[test]
fn crash_loop_example_replaces_the_crashing_old_pod_first() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/crash-loop-on-old-revision.yaml");
    let outcome = run(&[Path::new(example)], &[]);
    assert_eq!(
        outcome.json(),
        json!({"groups": [{
            "group": "store-gateway",
            "state": "progressing",
            "reason": "replacing 1 pod of store-gateway-zone-a: store-gateway-zone-a-1; then store-gateway-zone-a \
                       has 1 more pod to update but max unavailable (1) has been reached; waiting for pods to become \
                       ready",
            "actions": [delete(
                "store-gateway-zone-a",
                "store-gateway-zone-a-1",
                "pod is not on update revision store-gateway-zone-a-8d4f6c9b7q and is already unavailable; replacing \
                 it does not reduce availability",
            )],
        }]})
    );
}
