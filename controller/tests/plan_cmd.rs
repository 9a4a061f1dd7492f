//! `rollout-operator plan` end to end through `offline::plan::execute`: input formats, per-namespace grouping, the
//! rollout rules as seen from a dump, both output formats, and bad input (exit 2 with a message naming the file and
//! the object).

use jiff::Timestamp;
use rollout_operator::offline::plan::{PlanArgs, execute};
use serde_json::{Value, json};
use std::io::Write;
use std::path::{Path, PathBuf};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/three-zone-mid-rollout.yaml");
const NOW: &str = "2025-03-04T10:30:00Z";

struct Outcome {
    code: u8,
    out: String,
    err: String,
}

impl Outcome {
    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "stderr: {}", self.err);
        serde_json::from_str(&self.out).unwrap_or_else(|e| panic!("output is not JSON ({e}): {}", self.out))
    }

    /// Exit 2, nothing on stdout, and every `needle` in the message.
    fn assert_bad_input(&self, needles: &[&str]) {
        assert_eq!(self.code, 2, "stdout: {}\nstderr: {}", self.out, self.err);
        assert!(self.out.is_empty(), "nothing may be printed on stdout: {}", self.out);
        for needle in needles {
            assert!(self.err.contains(needle), "stderr should mention {needle:?}: {}", self.err);
        }
    }
}

fn args(files: &[&Path], extra: &[(&str, &str)]) -> PlanArgs {
    let mut args = PlanArgs {
        files: files.iter().map(|p| p.to_path_buf()).collect(),
        namespace: None,
        now: Some(NOW.to_string()),
        output: "json".to_string(),
    };
    for &(flag, value) in extra {
        match flag {
            "namespace" => args.namespace = Some(value.to_string()),
            "now" => args.now = Some(value.to_string()),
            "output" => args.output = value.to_string(),
            other => panic!("unknown flag {other}"),
        }
    }
    args
}

fn run_with_stdin(args: &PlanArgs, stdin: &str) -> Outcome {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let code = execute(args, &mut stdin.as_bytes(), &mut out, &mut err, Timestamp::UNIX_EPOCH);
    Outcome { code, out: String::from_utf8(out).unwrap(), err: String::from_utf8(err).unwrap() }
}

fn run(files: &[&Path], extra: &[(&str, &str)]) -> Outcome {
    run_with_stdin(&args(files, extra), "")
}

/// A scratch directory per test, removed at the end.
struct Dir(PathBuf);

impl Dir {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!("plan-cmd-{}-{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        Dir(path)
    }

    fn file(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.join(name);
        std::fs::File::create(&path).unwrap().write_all(content.as_ref()).unwrap();
        path
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Objects, written as the API server prints them.

/// A managed OnDelete StatefulSet in namespace `ns` (none if empty) of group `ingester`, 3 replicas, all ready.
fn sts(ns: &str, name: &str, current: &str, update: &str) -> Value {
    let mut v = json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "uid": format!("uid-{ns}-{name}"),
            "generation": 2,
            "labels": {"rollout-group": "ingester", "name": name},
        },
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"name": name}},
            "serviceName": name,
            "template": {"metadata": {"labels": {"name": name}}},
            "updateStrategy": {"type": "OnDelete"},
        },
        "status": {
            "replicas": 3,
            "readyReplicas": 3,
            "currentRevision": current,
            "updateRevision": update,
            "observedGeneration": 2,
        },
    });
    if !ns.is_empty() {
        set(&mut v, &["metadata", "namespace"], json!(ns));
    }
    v
}

/// A running, ready pod `<sts>-<ordinal>` of `sts` at `revision`.
fn pod(ns: &str, sts: &str, ordinal: u32, revision: &str) -> Value {
    let name = format!("{sts}-{ordinal}");
    let mut v = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "uid": format!("uid-{ns}-{name}-{revision}"),
            "labels": {"name": sts, "controller-revision-hash": revision},
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts, "uid": format!("uid-{ns}-{sts}"),
                "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {"containers": [{"name": "main", "image": "example:1"}]},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2025-03-01T00:00:00Z"}],
            "containerStatuses": [{
                "name": "main", "image": "example:1", "imageID": "", "ready": true, "restartCount": 0,
                "state": {"running": {"startedAt": "2025-03-04T08:59:00Z"}},
            }],
        },
    });
    if !ns.is_empty() {
        set(&mut v, &["metadata", "namespace"], json!(ns));
    }
    v
}

/// Sets a field, creating the objects on the way.
fn set(v: &mut Value, path: &[&str], value: Value) {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut at = v;
    for key in parents {
        at = at.as_object_mut().expect("object").entry(key.to_string()).or_insert_with(|| json!({}));
    }
    at.as_object_mut().expect("object").insert(last.to_string(), value);
}

fn remove(v: &mut Value, path: &[&str]) {
    let (last, parents) = path.split_last().expect("non-empty path");
    let mut at = v;
    for key in parents {
        at = at.get_mut(*key).expect("path exists");
    }
    at.as_object_mut().expect("object").remove(*last);
}

/// Group `ingester` in `ns`: zones a, b, c with 3 pods each, moving from revision `old` to `new`. `updated[z]` pods
/// of zone z (lowest ordinals first) are at `new`; a zone with all 3 updated has its currentRevision advanced.
fn zones(ns: &str, updated: [u32; 3]) -> Vec<Value> {
    let mut objects = Vec::new();
    for (zone, &n) in ["a", "b", "c"].iter().zip(&updated) {
        let name = format!("ingester-zone-{zone}");
        let current = if n == 3 { "new" } else { "old" };
        objects.push(sts(ns, &name, current, "new"));
        for ordinal in 0..3 {
            objects.push(pod(ns, &name, ordinal, if ordinal < n { "new" } else { "old" }));
        }
    }
    objects
}

fn find<'a>(objects: &'a mut [Value], name: &str) -> &'a mut Value {
    objects.iter_mut().find(|o| o["metadata"]["name"] == name).unwrap_or_else(|| panic!("no object {name}"))
}

fn yaml(v: &Value) -> String {
    serde_saphyr::to_string(v).expect("serializable")
}

fn multi_doc_yaml(objects: &[Value]) -> String {
    objects.iter().map(|o| format!("---\n{}", yaml(o))).collect()
}

fn list(objects: &[Value]) -> Value {
    json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": objects})
}

fn delete(sts: &str, pod: &str, reason: &str) -> Value {
    json!({"action": "delete-pod", "statefulSet": sts, "pod": pod, "reason": reason})
}

fn budget_reason(revision: &str, unavailable: u32, max: u32) -> String {
    format!("pod is not on update revision {revision}; {unavailable} of max {max} pods unavailable before this pass")
}

/// Plans `objects` given as one multi-document YAML file.
fn plan(test: &str, objects: &[Value], extra: &[(&str, &str)]) -> Outcome {
    let dir = Dir::new(test);
    let file = dir.file("dump.yaml", multi_doc_yaml(objects));
    run(&[&file], extra)
}

fn only_group(outcome: &Outcome) -> Value {
    let v = outcome.json();
    let groups = v["groups"].as_array().expect("groups array");
    assert_eq!(groups.len(), 1, "{v:#}");
    groups[0].clone()
}

// ---------------------------------------------------------------------------------------------------------------
// The example dump.

const ZONE_B_NEW: &str = "ingester-zone-b-nv9j2pkrz6";

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

// ---------------------------------------------------------------------------------------------------------------
// Input formats.

fn expected_zone_b_first_pod() -> Value {
    json!({
        "group": "ingester",
        "state": "progressing",
        "reason": "replacing 1 pod of ingester-zone-b: ingester-zone-b-0; then ingester-zone-b has 2 more pods to \
                   update but max unavailable (1) has been reached; waiting for pods to become ready",
        "actions": [delete("ingester-zone-b", "ingester-zone-b-0", &budget_reason("new", 0, 1))],
    })
}

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

// ---------------------------------------------------------------------------------------------------------------
// Rollout situations.

#[test]
fn done_group_and_set_current_revision() {
    // Every pod is on `new`; zone-c still reports currentRevision `old`: advance it.
    let mut objects = zones("prod", [3, 3, 3]);
    set(find(&mut objects, "ingester-zone-c"), &["status", "currentRevision"], json!("old"));
    let group = only_group(&plan("set-current", &objects, &[]));
    assert_eq!(
        group,
        json!({
            "group": "ingester",
            "state": "progressing",
            "reason": "advancing currentRevision of ingester-zone-c to new",
            "actions": [{
                "action": "set-current-revision",
                "statefulSet": "ingester-zone-c",
                "revision": "new",
                "reason": "all 3 pods are on revision new and ready",
            }],
        })
    );

    let done = only_group(&plan("done", &zones("prod", [3, 3, 3]), &[]));
    assert_eq!(
        done,
        json!({"group": "ingester", "state": "done", "reason": "all StatefulSets are on their update revision and ready", "actions": []})
    );
}

#[test]
fn missing_pod_counts_as_unavailable() {
    // zone-b lost pod 2: it is the one not-ready StatefulSet, goes first, and its budget (1) is spent by the missing
    // pod, so nothing is deleted.
    let mut objects = zones("prod", [3, 0, 0]);
    objects.retain(|o| o["metadata"]["name"] != "ingester-zone-b-2");
    let group = only_group(&plan("missing", &objects, &[]));
    assert_eq!(
        group,
        json!({
            "group": "ingester",
            "state": "waiting",
            "reason": "ingester-zone-b has 2 more pods to update but max unavailable (1) has been reached; waiting for pods to become ready",
            "actions": [],
        })
    );

    // All of zone-b updated but one pod missing: wait, and zone-c is not touched.
    let mut objects = zones("prod", [3, 3, 0]);
    objects.retain(|o| o["metadata"]["name"] != "ingester-zone-b-1");
    let group = only_group(&plan("missing-updated", &objects, &[]));
    assert_eq!(group["state"], "waiting");
    assert_eq!(group["actions"], json!([]));
    assert_eq!(
        group["reason"],
        "StatefulSet ingester-zone-b pods are all updated but it is not ready: 1 of 3 pods missing"
    );
}

#[test]
fn terminating_pod_is_waited_for_not_deleted_again() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-b-0"), &["metadata", "deletionTimestamp"], json!("2025-03-04T10:29:30Z"));
    let group = only_group(&plan("terminating", &objects, &[]));
    assert_eq!(group["state"], "waiting");
    assert_eq!(group["actions"], json!([]), "{group}");

    // With budget for two, the terminating pod still takes a place and the next outdated pod goes.
    set(find(&mut objects, "ingester-zone-b"), &["metadata", "annotations", "rollout-max-unavailable"], json!("2"));
    let group = only_group(&plan("terminating-2", &objects, &[]));
    assert_eq!(group["actions"], json!([delete("ingester-zone-b", "ingester-zone-b-1", &budget_reason("new", 1, 2))]));
}

#[test]
fn crash_looping_outdated_pod_is_replaced_first_without_spending_budget() {
    let mut objects = zones("prod", [3, 0, 0]);
    let b2 = find(&mut objects, "ingester-zone-b-2");
    set(b2, &["status", "conditions"], json!([{"type": "Ready", "status": "False"}]));
    set(
        b2,
        &["status", "containerStatuses"],
        json!([{"name": "main", "image": "x", "imageID": "", "ready": false, "restartCount": 7, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
    );
    let group = only_group(&plan("crash", &objects, &[]));
    let actions: Vec<&str> = group["actions"].as_array().unwrap().iter().map(|a| a["pod"].as_str().unwrap()).collect();
    assert_eq!(actions, ["ingester-zone-b-2"], "{group}");
}

#[test]
fn paused_zone_is_skipped_and_the_next_one_rolls() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(
        find(&mut objects, "ingester-zone-b"),
        &["metadata", "annotations", "grafana.com/rollout-paused"],
        json!("true"),
    );
    let group = only_group(&plan("paused", &objects, &[]));
    assert_eq!(group["actions"], json!([delete("ingester-zone-c", "ingester-zone-c-0", &budget_reason("new", 0, 1))]));

    // Every zone with outdated pods paused: blocked until a person unpauses.
    set(
        find(&mut objects, "ingester-zone-c"),
        &["metadata", "annotations", "grafana.com/rollout-paused"],
        json!("true"),
    );
    let group = only_group(&plan("paused-all", &objects, &[]));
    assert_eq!(group["state"], "blocked");
    assert_eq!(group["actions"], json!([]));
    assert!(group["reason"].as_str().unwrap().contains("rollout paused"), "{group}");

    // "True" is not "true".
    set(
        find(&mut objects, "ingester-zone-b"),
        &["metadata", "annotations", "grafana.com/rollout-paused"],
        json!("True"),
    );
    let group = only_group(&plan("paused-case", &objects, &[]));
    assert_eq!(group["actions"][0]["pod"], "ingester-zone-b-0");
}

#[test]
fn rolling_update_statefulset_blocks_the_group() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-c"), &["spec", "updateStrategy"], json!({"type": "RollingUpdate"}));
    let group = only_group(&plan("rolling", &objects, &[]));
    assert_eq!(
        group,
        json!({
            "group": "ingester",
            "state": "blocked",
            "reason": "StatefulSet ingester-zone-c has RollingUpdate update strategy while OnDelete is expected, skipping reconcile",
            "actions": [],
        })
    );
}

#[test]
fn invalid_max_unavailable_is_a_warning_and_falls_back_to_one() {
    let mut objects = zones("prod", [3, 0, 0]);
    set(find(&mut objects, "ingester-zone-b"), &["metadata", "annotations", "rollout-max-unavailable"], json!("xxx"));
    let dir = Dir::new("invalid-max");
    let file = dir.file("dump.yaml", multi_doc_yaml(&objects));

    let text = run(&[&file], &[("output", "text")]);
    assert_eq!(text.code, 0, "{}", text.err);
    let warning = "  warning: StatefulSet ingester-zone-b: invalid rollout-max-unavailable value \"xxx\": expected \
                   positive integer or percentage as integer%; using 1\n";
    assert!(text.out.ends_with(warning), "{}", text.out);
    assert!(text.out.contains("  delete pod ingester-zone-b-0 of StatefulSet ingester-zone-b: "), "{}", text.out);
    assert_eq!(text.out.matches("delete pod").count(), 1, "{}", text.out);

    // JSON keeps its exact shape; the warning goes to stderr.
    let json_run = run(&[&file], &[]);
    assert_eq!(json_run.json(), json!({"groups": [expected_zone_b_first_pod()]}));
    assert!(json_run.err.contains("warning: ingester: StatefulSet ingester-zone-b: invalid rollout-max-unavailable"));
}

/// A malformed min time between zone downscales is a warning of the plan as soon as it is read, though no
/// downscale is due.
#[test]
fn malformed_min_time_between_zones_is_a_warning_when_read() {
    let mut objects = zones("prod", [3, 3, 3]);
    set(
        find(&mut objects, "ingester-zone-b"),
        &["metadata", "annotations", "grafana.com/min-time-between-zones-downscale"],
        json!("12hours"),
    );
    let text = plan("min-time", &objects, &[("output", "text")]);
    assert_eq!(text.code, 0, "{}", text.err);
    assert!(
        text.out.contains(
            "  warning: StatefulSet ingester-zone-b: invalid grafana.com/min-time-between-zones-downscale value \
             \"12hours\": "
        ),
        "{}",
        text.out
    );
    assert_eq!(text.out.matches("min-time-between-zones-downscale").count(), 1, "once: {}", text.out);
}

#[test]
fn min_ready_seconds_uses_now() {
    // zone-b-0 became ready at 09:00; with minReadySeconds 600 it counts as available from 09:10 on.
    let mut objects = zones("prod", [3, 1, 0]);
    set(find(&mut objects, "ingester-zone-b"), &["spec", "minReadySeconds"], json!(600));
    let ready_since = json!([{"type": "Ready", "status": "True", "lastTransitionTime": "2025-03-04T09:00:00Z"}]);
    set(find(&mut objects, "ingester-zone-b-0"), &["status", "conditions"], ready_since);
    let early = only_group(&plan("min-ready-early", &objects, &[("now", "2025-03-04T09:05:00Z")]));
    assert_eq!(early["actions"], json!([]), "{early}");
    let late = only_group(&plan("min-ready-late", &objects, &[("now", "2025-03-04T09:10:00Z")]));
    assert_eq!(late["actions"][0]["pod"], "ingester-zone-b-1", "{late}");
}

// ---------------------------------------------------------------------------------------------------------------
// Namespaces.

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

// ---------------------------------------------------------------------------------------------------------------
// Bad arguments and bad input: exit 2, nothing on stdout, a message naming the file and the object.

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

// ---------------------------------------------------------------------------------------------------------------
// Scaling on offline dumps.

#[test]
fn follower_scaling_is_planned_as_a_scale_action() {
    let mut objects = zones("", [3, 3, 3]);
    let b = find(&mut objects, "ingester-zone-b");
    set(b, &["metadata", "annotations"], json!({"grafana.com/rollout-downscale-leader": "ingester-zone-a"}));
    set(b, &["spec", "replicas"], json!(2));
    let group = only_group(&plan("follower-scale", &objects, &[]));
    assert_eq!(group["state"], "progressing", "{group:#}");
    assert_eq!(
        group["actions"],
        json!([{"action": "scale", "statefulSet": "ingester-zone-b", "from": 2, "to": 3,
                "reason": "scaling up statefulset to match leader ingester-zone-a"}])
    );
    assert!(group["reason"].as_str().unwrap().contains("no pod deletions"), "{group:#}");
}

#[test]
fn force_replicas_is_planned_in_text_output() {
    let mut objects = zones("", [3, 3, 3]);
    let c = find(&mut objects, "ingester-zone-c");
    set(
        c,
        &["metadata", "annotations"],
        json!({"grafana.com/rollout-downscale-leader": "ingester-zone-a", "grafana.com/rollout-force-replicas": "1"}),
    );
    let out = plan("force-text", &objects, &[("output", "text")]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(
        out.out.contains(
            "  scale StatefulSet ingester-zone-c from 3 to 1 replica: grafana.com/rollout-force-replicas=1 (applied immediately)"
        ),
        "{}",
        out.out
    );
}

/// As in the reference, force replicas on a StatefulSet that is neither follower nor mirror is ignored: nothing is
/// scaled, the group is done, and the warning names the StatefulSet and what the annotation needs.
#[test]
fn force_replicas_without_leader_or_mirror_is_a_warning_in_text_output() {
    let mut objects = zones("", [3, 3, 3]);
    let c = find(&mut objects, "ingester-zone-c");
    set(c, &["metadata", "annotations"], json!({"grafana.com/rollout-force-replicas": "1"}));
    let out = plan("force-plain-text", &objects, &[("output", "text")]);
    assert_eq!(out.code, 0, "{}", out.err);
    assert!(!out.out.contains("scale StatefulSet"), "{}", out.out);
    assert!(out.out.starts_with("ingester: done: "), "{}", out.out);
    assert!(
        out.out.contains(
            "  warning: grafana.com/rollout-force-replicas=1 on StatefulSet ingester-zone-c is ignored: it applies \
             only to a follower (grafana.com/rollout-downscale-leader) or a mirror \
             (grafana.com/rollout-mirror-replicas-from-resource-*)"
        ),
        "{}",
        out.out
    );
}

#[test]
fn mirror_and_delayed_downscale_are_waits_that_need_a_live_cluster() {
    let mut objects = zones("", [3, 3, 3]);
    let b = find(&mut objects, "ingester-zone-b");
    set(
        b,
        &["metadata", "annotations"],
        json!({
            "grafana.com/rollout-mirror-replicas-from-resource-name": "ingester",
            "grafana.com/rollout-mirror-replicas-from-resource-kind": "ReplicaTemplate",
            "grafana.com/rollout-delayed-downscale": "1h",
            "grafana.com/rollout-prepare-delayed-downscale-url": "http://pod:8080/prepare",
        }),
    );
    let group = only_group(&plan("mirror-wait", &objects, &[]));
    assert_eq!(group["state"], "waiting", "{group:#}");
    assert_eq!(group["actions"], json!([]));
    let reason = group["reason"].as_str().unwrap();
    assert!(
        reason.contains("ingester-zone-b: mirroring replicas from ReplicaTemplate/ingester needs a live cluster")
            && reason.contains("delayed-downscale endpoints"),
        "{reason}"
    );
}

#[test]
fn scaling_errors_are_reported_in_the_json_plan() {
    let mut objects = zones("", [3, 3, 3]);
    let b = find(&mut objects, "ingester-zone-b");
    set(b, &["metadata", "annotations"], json!({"grafana.com/rollout-downscale-leader": "nowhere"}));
    let group = only_group(&plan("scaling-error", &objects, &[]));
    assert_eq!(group["state"], "done", "the rest of the group is unaffected: {group:#}");
    assert_eq!(
        group["scalingErrors"],
        json!([{"statefulSet": "ingester-zone-b",
                "message": "could not find leader for ingester-zone-b using grafana.com/rollout-downscale-leader"}])
    );
}
