//! Cost of `rollout-operator plan` end to end (read, parse YAML, group, plan, render JSON) on a dump of 10 rollout
//! groups x 3 StatefulSets x 100 pods, as `kubectl get statefulsets,pods -o yaml` prints it. Goal: < 1 s.
//! The dump is generated in memory at start, so no large file is committed.

use criterion::{Criterion, criterion_group, criterion_main};
use rollout_operator::commands::plan::{PlanArgs, execute};
use std::fmt::Write as _;
use std::path::PathBuf;

const GROUPS: usize = 10;
const ZONES: [&str; 3] = ["a", "b", "c"];
const PODS: usize = 100;

fn statefulset(out: &mut String, group: usize, zone: &str, current: &str, update: &str, updated: usize) {
    let name = format!("group-{group}-zone-{zone}");
    let _ = write!(
        out,
        r#"- apiVersion: apps/v1
  kind: StatefulSet
  metadata:
    annotations:
      rollout-max-unavailable: "10"
    creationTimestamp: "2024-11-05T14:02:31Z"
    generation: 4
    labels:
      name: {name}
      rollout-group: group-{group}
    name: {name}
    namespace: prod
    resourceVersion: "480348082"
    uid: 00000000-0000-4000-8000-{group:06}{zone}{zone}{zone}{zone}{zone}{zone}
  spec:
    podManagementPolicy: Parallel
    replicas: {PODS}
    revisionHistoryLimit: 10
    selector:
      matchLabels:
        name: {name}
        rollout-group: group-{group}
    serviceName: {name}
    template:
      metadata:
        labels:
          name: {name}
          rollout-group: group-{group}
      spec:
        containers:
        - args:
          - -target=ingester
          - -config.file=/etc/mimir/mimir.yaml
          image: grafana/mimir:2.15.1
          name: ingester
          ports:
          - containerPort: 8080
            name: http-metrics
            protocol: TCP
          readinessProbe:
            httpGet:
              path: /ready
              port: 8080
          resources:
            requests:
              cpu: "4"
              memory: 15Gi
    updateStrategy:
      type: OnDelete
  status:
    availableReplicas: {PODS}
    currentReplicas: {current_replicas}
    currentRevision: {name}-{current}
    observedGeneration: 4
    readyReplicas: {PODS}
    replicas: {PODS}
    updateRevision: {name}-{update}
    updatedReplicas: {updated}
"#,
        current_replicas = PODS - updated,
    );
}

fn pod(out: &mut String, group: usize, zone: &str, ordinal: usize, revision: &str) {
    let sts = format!("group-{group}-zone-{zone}");
    let name = format!("{sts}-{ordinal}");
    let _ = write!(
        out,
        r#"- apiVersion: v1
  kind: Pod
  metadata:
    creationTimestamp: "2025-02-18T16:03:12Z"
    generateName: {sts}-
    labels:
      apps.kubernetes.io/pod-index: "{ordinal}"
      controller-revision-hash: {sts}-{revision}
      name: {sts}
      rollout-group: group-{group}
      statefulset.kubernetes.io/pod-name: {name}
    name: {name}
    namespace: prod
    ownerReferences:
    - apiVersion: apps/v1
      blockOwnerDeletion: true
      controller: true
      kind: StatefulSet
      name: {sts}
      uid: 00000000-0000-4000-8000-{group:06}{zone}{zone}{zone}{zone}{zone}{zone}
    resourceVersion: "486933258"
    uid: 11111111-0000-4000-8000-{group:04}{ordinal:08}
  spec:
    containers:
    - args:
      - -target=ingester
      - -config.file=/etc/mimir/mimir.yaml
      image: grafana/mimir:2.15.1
      imagePullPolicy: IfNotPresent
      name: ingester
      ports:
      - containerPort: 8080
        name: http-metrics
        protocol: TCP
      readinessProbe:
        httpGet:
          path: /ready
          port: 8080
          scheme: HTTP
      resources:
        requests:
          cpu: "4"
          memory: 15Gi
    hostname: {name}
    nodeName: gke-prod-pool-{ordinal:08}
    restartPolicy: Always
    subdomain: {sts}
    terminationGracePeriodSeconds: 1200
  status:
    conditions:
    - lastProbeTime: null
      lastTransitionTime: "2025-02-18T16:03:12Z"
      status: "True"
      type: Initialized
    - lastProbeTime: null
      lastTransitionTime: "2025-02-18T16:07:03Z"
      status: "True"
      type: Ready
    - lastProbeTime: null
      lastTransitionTime: "2025-02-18T16:07:03Z"
      status: "True"
      type: ContainersReady
    - lastProbeTime: null
      lastTransitionTime: "2025-02-18T16:03:12Z"
      status: "True"
      type: PodScheduled
    containerStatuses:
    - containerID: containerd://e97dddf6d9911859130983f85072b1b2e08d4a106d1155da337679f6fdf98d2f
      image: docker.io/grafana/mimir:2.15.1
      imageID: docker.io/grafana/mimir@sha256:83be7aee9fcd4cdaa157fbf8502a58fd1e422195d500f969cd9f8a9b9eac4dd2
      lastState: {{}}
      name: ingester
      ready: true
      restartCount: 0
      started: true
      state:
        running:
          startedAt: "2025-02-18T16:03:25Z"
    hostIP: 10.132.0.185
    phase: Running
    podIP: 10.92.83.56
    qosClass: Burstable
    startTime: "2025-02-18T16:03:12Z"
"#
    );
}

/// Every group mid-rollout: zone a done, zone b half replaced, zone c untouched.
fn dump() -> String {
    let mut out = String::from("apiVersion: v1\nkind: List\nmetadata:\n  resourceVersion: \"\"\nitems:\n");
    for group in 0..GROUPS {
        for (zone, updated) in ZONES.iter().zip([PODS, PODS / 2, 0]) {
            let current = if updated == PODS { "new" } else { "old" };
            statefulset(&mut out, group, zone, current, "new", updated);
            for ordinal in 0..PODS {
                pod(&mut out, group, zone, ordinal, if ordinal < updated { "new" } else { "old" });
            }
        }
    }
    out
}

fn plan_dump(c: &mut Criterion) {
    let yaml = dump();
    let args = PlanArgs {
        files: vec![PathBuf::from("-")],
        namespace: None,
        now: Some("2025-03-04T10:30:00Z".to_string()),
        output: "json".to_string(),
        prometheus_url: None,
    };
    let now = jiff::Timestamp::UNIX_EPOCH;
    let mut out = Vec::new();
    let mut err = Vec::new();

    // Measure what we mean to: every group parsed and planned, 10 deletions in each.
    let code = execute(&args, &mut yaml.as_bytes(), &mut out, &mut err, now);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    let plan: serde_json::Value = serde_json::from_slice(&out).expect("JSON output");
    let groups = plan["groups"].as_array().expect("groups");
    assert_eq!(groups.len(), GROUPS);
    assert!(groups.iter().all(|g| g["actions"].as_array().map(Vec::len) == Some(10)), "{plan}");

    // Wall-clock figures swing with other work on a shared machine; CPU time per pass does not.
    if let Some(before) = process_cpu_ticks() {
        const PASSES: u64 = 5;
        for _ in 0..PASSES {
            out.clear();
            execute(&args, &mut yaml.as_bytes(), &mut out, &mut err, now);
        }
        if let Some(after) = process_cpu_ticks() {
            // Ticks are 1/100 s (USER_HZ) on Linux.
            let ms = (after - before) * 10 / PASSES;
            eprintln!("plan_dump: {:.1} MiB of YAML, about {ms} ms of CPU per pass", yaml.len() as f64 / 1048576.0);
        }
    }

    let mut bench = c.benchmark_group("plan_dump");
    bench.sample_size(10);
    bench.throughput(criterion::Throughput::Bytes(yaml.len() as u64));
    bench.bench_function(format!("{GROUPS}x3x{PODS}_yaml_to_json"), |b| {
        b.iter(|| {
            out.clear();
            err.clear();
            execute(&args, &mut yaml.as_bytes(), &mut out, &mut err, now)
        })
    });

    // The same dump as `kubectl get -o json` would print it, to separate the YAML parser's share.
    let mut unlimited = serde_saphyr::Options::default();
    unlimited.budget = None;
    let as_value: serde_json::Value =
        serde_saphyr::from_str_with_options(&yaml, unlimited).expect("the generated dump is valid YAML");
    let json = serde_json::to_string_pretty(&as_value).expect("serializable");
    bench.throughput(criterion::Throughput::Bytes(json.len() as u64));
    bench.bench_function(format!("{GROUPS}x3x{PODS}_json_to_json"), |b| {
        b.iter(|| {
            out.clear();
            err.clear();
            execute(&args, &mut json.as_bytes(), &mut out, &mut err, now)
        })
    });
    bench.finish();
}

/// User + system CPU time of this process so far, in clock ticks (Linux only).
fn process_cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

criterion_group!(benches, plan_dump);
criterion_main!(benches);
