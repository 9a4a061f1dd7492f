//! `rollout-operator plan` end to end through `commands::plan::execute`, by topic: the example dump ([`example`]),
//! input formats ([`inputs`]), the rollout rules as seen from a dump ([`situations`]), per-namespace grouping
//! ([`namespaces`]), bad arguments and bad input: exit 2 with a message naming the file and the object
//! ([`bad_input`]), and scaling ([`scaling`]).
//!
//! Owns running the command and the objects the tests write, as the API server prints them.

mod bad_input;
mod example;
mod inputs;
mod namespaces;
mod scaling;
mod situations;

use jiff::Timestamp;
use rollout_operator::commands::plan::{PlanArgs, execute};
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
        prometheus_url: None,
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

/// Zone b's update revision in the example dump.
const ZONE_B_NEW: &str = "ingester-zone-b-nv9j2pkrz6";

/// The plan of group `ingester` whose next step replaces zone b's first pod.
fn expected_zone_b_first_pod() -> Value {
    json!({
        "group": "ingester",
        "state": "progressing",
        "reason": "replacing 1 pod of ingester-zone-b: ingester-zone-b-0; then ingester-zone-b has 2 more pods to \
                   update but max unavailable (1) has been reached; waiting for pods to become ready",
        "actions": [delete("ingester-zone-b", "ingester-zone-b-0", &budget_reason("new", 0, 1))],
    })
}
