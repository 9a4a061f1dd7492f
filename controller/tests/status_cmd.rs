//! `rollout-operator status`: the controller's pass over a live read of the in-memory API server (with the zone
//! tracker's record and its failures), the example dumps through `-f`, the progress `--watch` keeps, the rendering
//! and the argument errors.
#![cfg(not(madsim))]

mod support;

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollout_core::keys;
use rollout_operator::cli::{self, Command};
use rollout_operator::cluster::ApiError;
use rollout_operator::commands::status::command::ShowError;
use rollout_operator::commands::status::render::render_text;
use rollout_operator::commands::status::{
    self, NamespaceStatus, StatusArgError, StatusError, StatusOptions, Watcher, summarize,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use support::{FakeCluster, pod, sts};

const NOW: &str = "2026-01-01T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn args(extra: &[&str]) -> StatusOptions {
    let argv = ["rollout-operator", "status"].into_iter().chain(extra.iter().copied());
    match cli::parse(argv) {
        Ok(Command::Status { args, .. }) => args.options(),
        other => panic!("{extra:?}: expected status, got {other:?}"),
    }
}

/// Zone a done on r2, zone b half-way (b-0 replaced but not ready), zone c on r1.
fn mid_rollout() -> FakeCluster {
    let statefulsets = vec![
        sts("ingester", "ingester-zone-a", 2, "r2", "r2"),
        sts("ingester", "ingester-zone-b", 2, "r1", "r2"),
        sts("ingester", "ingester-zone-c", 2, "r1", "r2"),
    ];
    let pods = vec![
        pod("ingester-zone-a", 0, "r2", true, 1),
        pod("ingester-zone-a", 1, "r2", true, 1),
        pod("ingester-zone-b", 0, "r2", false, 1),
        pod("ingester-zone-b", 1, "r1", true, 1),
        pod("ingester-zone-c", 0, "r1", true, 1),
        pod("ingester-zone-c", 1, "r1", true, 1),
    ];
    FakeCluster::new(statefulsets, pods)
}

async fn view(cluster: &FakeCluster, extra: &[&str]) -> (String, Result<(), ShowError>) {
    let mut out = Vec::new();
    let result = status::command::show(cluster, &args(extra), "ns", now(), None, &mut out).await;
    (String::from_utf8(out).unwrap(), result)
}

#[tokio::test]
async fn the_live_view_shows_each_zone_what_the_controller_would_do_and_why_it_waits() {
    let (text, result) = view(&mid_rollout(), &["-kubernetes.namespace=ns"]).await;
    result.expect("a view");
    let expected = "\
namespace ns at 2026-01-01T12:00:00Z

rollout group ingester: waiting: pods-not-ready (ingester-zone-b)
  STATEFULSET      UPDATED  UNAVAILABLE  REVISION
  ingester-zone-a      2/2            0  r2
  ingester-zone-b      1/2            1  r1 -> r2
  ingester-zone-c      0/2            0  r1 -> r2
  next: nothing; ingester-zone-b has 1 more pod to update but max unavailable (1) has been reached; waiting for pods to become ready
";
    assert_eq!(text, expected);

    let (json, result) = view(&mid_rollout(), &["-kubernetes.namespace=ns", "-o", "json"]).await;
    result.expect("a view");
    let v: Value = serde_json::from_str(&json).unwrap();
    let g = &v["groups"][0];
    assert_eq!(v["namespace"], "ns");
    assert_eq!(g["state"], "waiting");
    assert_eq!(g["wait"], serde_json::json!({"reason": "pods-not-ready", "statefulSet": "ingester-zone-b"}));
    assert_eq!(g["next"], serde_json::json!([]));
    assert_eq!(
        g["statefulSets"][1],
        serde_json::json!({"name": "ingester-zone-b", "replicas": 2, "updated": 1, "unavailable": 1,
            "currentRevision": "r1", "updateRevision": "r2", "paused": false})
    );
    assert!(g.get("progress").is_none(), "a single view knows nothing of progress: {g}");
}

/// Found by fuzzing the dump reader (`fuzz/`, target `dump`): the text view pads the StatefulSet column to the
/// longest name, and a format width over 65535 panics. A dump may hold a name of any length.
#[tokio::test]
async fn a_statefulset_name_longer_than_any_format_width_is_shown_whole() {
    let long = format!("ingester-{}", "z".repeat(70_000));
    let cluster = FakeCluster::new(vec![sts("ingester", &long, 1, "r1", "r1")], vec![pod(&long, 0, "r1", true, 1)]);
    let (text, result) = view(&cluster, &["-kubernetes.namespace=ns"]).await;
    result.expect("a view");
    assert!(text.contains(&format!("\n  {long}      1/1")), "the long name's row, whole");
    assert!(text.lines().all(|line| line.len() < 71_000), "no line padded beyond the name itself");
}

#[tokio::test]
async fn the_view_runs_the_controllers_pass_with_the_zone_tracker_record() {
    // Zone b's pod became ready: the controller would replace b-1 next...
    let cluster = mid_rollout();
    cluster.set_pod_ready("ingester-zone-b-0", true);
    let (text, _) = view(&cluster, &["-kubernetes.namespace=ns"]).await;
    assert!(text.contains("rollout group ingester: progressing\n"), "{text}");
    assert!(
        text.contains("    delete pod ingester-zone-b-1 of ingester-zone-b: pod is not on update revision r2"),
        "{text}"
    );

    // ... unless the webhook (with the zone tracker) is preparing a downscale of the group: its marker holds it.
    let mut served: Vec<StatefulSet> = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"]
        .iter()
        .map(|name| cluster.statefulset(name).unwrap())
        .collect();
    for s in &mut served {
        s.metadata.labels.get_or_insert_default().insert(keys::PREPARE_DOWNSCALE.into(), "true".into());
        s.metadata
            .annotations
            .get_or_insert_default()
            .insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
        cluster.put_statefulset(s.clone());
    }
    let marker = r#"{"ingester-zone-c":{"group":"ingester","until":"2026-01-01T12:00:30Z"}}"#;
    cluster.put_config_map(ConfigMap {
        metadata: ObjectMeta {
            name: Some("rollout-operator-zone-tracker".into()),
            annotations: Some(BTreeMap::from([(keys::DOWNSCALES_IN_PROGRESS.into(), marker.into())])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("ingester-zone-c".into(), r#"{"lastDownscaled":"2026-01-01T09:00:00Z"}"#.into())])),
        ..Default::default()
    });
    let tracker = ["-kubernetes.namespace=ns", "-use-zone-tracker=true"];
    let (text, _) = view(&cluster, &tracker).await;
    assert!(text.contains("rollout group ingester: waiting: downscale-in-progress (ingester-zone-c)"), "{text}");
    assert!(text.contains("  last downscale: ingester-zone-c at 2026-01-01T09:00:00Z"), "{text}");
    assert!(
        text.contains("  downscale of ingester-zone-a waits until after 2026-01-01T21:00:00Z (9h0m0s left)"),
        "{text}"
    );
    assert!(!text.contains("downscale of ingester-zone-c waits"), "its own downscale does not hold it: {text}");
    // Without the tracker flag the record is not read: the group acts.
    let (text, _) = view(&cluster, &["-kubernetes.namespace=ns"]).await;
    assert!(text.contains("rollout group ingester: progressing"), "{text}");

    // An unreadable record fails the pass closed, as in the controller, and says why.
    cluster.fail_config_map_reads(Some(ApiError::Unavailable("timeout".into())));
    let (text, _) = view(&cluster, &tracker).await;
    assert!(text.contains("waiting: downscale-record-unreadable"), "{text}");
    assert!(text.contains("warning: cannot read the group downscale record"), "{text}");
}

#[tokio::test]
async fn a_failed_read_is_an_error_naming_what_could_not_be_read() {
    let cluster = mid_rollout();
    cluster.fail_reads(Some(ApiError::Forbidden("forbidden".into())));
    let (_, result) = view(&cluster, &["-kubernetes.namespace=ns"]).await;
    match result {
        Err(ShowError::Read(StatusError::StatefulSets(ApiError::Forbidden(_)))) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn watching_keeps_the_progress_clock_and_reports_a_stuck_group() {
    let cluster = mid_rollout();
    let deadline = Duration::from_secs(600);
    let mut watcher = Watcher::default();
    let views = [0i64, 300, 601].map(|secs| {
        let at = now() + jiff::SignedDuration::from_secs(secs);
        (at, secs)
    });
    let mut last = None;
    for (at, _) in views {
        let planned = status::read(&cluster, None, None, at).await.unwrap();
        let mut g = summarize(&planned[0], at);
        watcher.observe(&planned[0].group, &planned[0].plan, &mut g, at, deadline);
        last = Some((g, at));
    }
    let (g, at) = last.unwrap();
    let progress = g.progress.clone().expect("progress with --watch");
    assert_eq!((progress.seconds_without_progress, progress.stuck), (601, true));
    let view = NamespaceStatus { namespace: "ns".into(), at: at.to_string(), groups: vec![g], budgets_unknown: None };
    let mut out = Vec::new();
    render_text(&view, deadline, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("  no progress for 10m1s while watching; STUCK (-rollout.progress-deadline=10m0s)"),
        "{text}"
    );
}

/// The example dumps (`examples/`), read with -f: the same pass as `plan`, in the view's shape.
#[test]
fn the_example_dumps_through_dash_f() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = |file: &str, extra: &[&str]| {
        let path = root.join("examples").join(file);
        let mut argv: Vec<&str> = vec!["-f", path.to_str().unwrap(), "--now", NOW];
        argv.extend(extra);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = status::command::execute_on_dumps(&args(&argv), &mut std::io::empty(), &mut out, &mut err, now());
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    };
    let (code, text, err) = run("three-zone-mid-rollout.yaml", &[]);
    assert_eq!(code, 0, "{err}");
    assert!(
        text.starts_with("namespace mimir at 2026-01-01T12:00:00Z\n\nrollout group ingester: progressing\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  ingester-zone-b      1/3            0  ingester-zone-b-tpgffs5997 -> ingester-zone-b-nv9j2pkrz6\n"
        ),
        "{text}"
    );
    assert!(text.contains("    delete pod ingester-zone-b-2 of ingester-zone-b: "), "{text}");
    // docs/operate.md shows this output.
    let page = std::fs::read_to_string(root.join("docs/operate.md")).unwrap();
    let after =
        page.split("On `examples/three-zone-mid-rollout.yaml` (`status -f`):").nth(1).expect("the docs' example");
    let block = after.split("```text\n").nth(1).and_then(|b| b.split("```").next()).expect("a text block");
    assert_eq!(text, block);
    let (code, json, _) = run("crash-loop-on-old-revision.yaml", &["-o", "json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["groups"][0]["group"], "store-gateway");
    assert_eq!(v["groups"][0]["statefulSets"][0]["unavailable"], 1);
    assert_eq!(v["groups"][0]["next"][0]["pod"], "store-gateway-zone-a-1");
}

#[test]
fn bad_arguments_are_clear_errors() {
    let check = |extra: &[&str]| status::check_args(&args(extra)).err();
    assert_eq!(check(&["-o", "yaml", "-kubernetes.namespace=ns"]), Some(StatusArgError::Output("yaml".into())));
    assert_eq!(check(&[]), None, "without a namespace, the kubeconfig context's");
    assert_eq!(check(&["-f", "x.yaml", "--context", "prod"]), Some(StatusArgError::ContextWithFiles));
    assert_eq!(check(&["-f", "x.yaml", "--watch"]), Some(StatusArgError::WatchWithFiles));
    assert_eq!(check(&["-kubernetes.namespace=ns", "--now", NOW]), Some(StatusArgError::NowWithoutFiles));
    assert_eq!(check(&["-kubernetes.namespace=ns", "--watch", "--interval=0s"]), Some(StatusArgError::ZeroInterval));
    assert_eq!(check(&["-f", "x.yaml"]), None, "a dump needs no namespace");
    // A dump that does not exist: exit 2, naming the file.
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = status::command::execute_on_dumps(
        &args(&["-f", "/nonexistent.yaml"]),
        &mut std::io::empty(),
        &mut out,
        &mut err,
        now(),
    );
    assert_eq!(code, status::EXIT_BAD_INPUT);
    assert!(String::from_utf8(err).unwrap().contains("/nonexistent.yaml"));
}

/// docs/operate.md shows what `status --watch` prints on a group half-way through zone b; this is that view, and
/// the page's text must stay exactly what the command prints.
#[tokio::test]
async fn the_documented_example_is_what_status_prints() {
    let cluster = mid_rollout();
    for name in ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"] {
        let mut s = cluster.statefulset(name).unwrap();
        let annotations = s.metadata.annotations.get_or_insert_default();
        annotations.insert(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into(), "12h".into());
        if name == "ingester-zone-c" {
            annotations.insert(keys::LAST_DOWNSCALE.into(), "2026-01-01T09:00:00Z".into());
        }
        cluster.put_statefulset(s);
    }
    let args = args(&["-kubernetes.namespace=mimir", "--watch"]);
    let mut watcher = Watcher::default();
    let earlier = now() - jiff::SignedDuration::from_secs(12 * 60 + 4);
    status::command::show(&cluster, &args, "mimir", earlier, Some(&mut watcher), &mut Vec::new()).await.unwrap();
    let mut out = Vec::new();
    status::command::show(&cluster, &args, "mimir", now(), Some(&mut watcher), &mut out).await.unwrap();
    let printed = String::from_utf8(out).unwrap();

    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operate.md")).unwrap();
    let after = page.split("On a group half-way through zone b").nth(1).expect("the docs' example");
    let block = after.split("```text\n").nth(1).and_then(|b| b.split("```").next()).expect("a text block");
    assert_eq!(printed, block);
}

#[tokio::test]
async fn the_view_names_the_budgets_over_each_group_and_the_evictions_they_are_allowing() {
    let cluster = mid_rollout();
    for p in cluster.pods() {
        let mut p = p;
        p.metadata.labels.get_or_insert_default().insert(keys::ROLLOUT_GROUP.into(), "ingester".into());
        if p.metadata.name.as_deref() == Some("ingester-zone-c-1") {
            let until = (now() + jiff::SignedDuration::from_secs(30)).to_string();
            p.metadata.annotations.get_or_insert_default().insert(keys::EVICTION_INTENT.into(), until);
        }
        cluster.put_pod(p);
    }
    cluster.put_budget(serde_json::json!({
        "apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "ingester-rollout", "namespace": "ns", "uid": "u1", "generation": 1},
        "spec": {"maxUnavailablePercentage": 50, "selector": {"matchLabels": {"rollout-group": "ingester"}}}}));
    let (text, result) = view(&cluster, &["-kubernetes.namespace=ns"]).await;
    result.expect("a view");
    assert!(
        text.contains(
            "  budget ingester-rollout: zone mode, maxUnavailable 50%; evictions in flight: ingester-zone-c-1\n"
        ),
        "{text}"
    );
    let (json, _) = view(&cluster, &["-kubernetes.namespace=ns", "-o", "json"]).await;
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        v["groups"][0]["budgets"],
        serde_json::json!([{"name": "ingester-rollout", "mode": "zone", "maxUnavailable": "50%",
            "evictionsInFlight": ["ingester-zone-c-1"]}])
    );
    // A budget over other pods is not this group's.
    cluster.delete_budget("ingester-rollout");
    cluster.put_budget(serde_json::json!({
        "apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "store-gateway", "namespace": "ns", "uid": "u2", "generation": 1},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"rollout-group": "store-gateway"}}}}));
    let (text, _) = view(&cluster, &["-kubernetes.namespace=ns"]).await;
    assert!(!text.contains("budget "), "{text}");
}

/// Without `-n`, `status` shows the namespace of the kubeconfig's context (`--context`, else the current one), as
/// kubectl does; an unknown context is named, with how to list them.
#[tokio::test]
async fn the_namespace_defaults_to_the_kubeconfig_contexts() {
    let dir = std::env::temp_dir().join(format!("status-context-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("config");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\nclusters:\n- name: c\n  cluster: {server: \
         'https://10.0.0.1:6443'}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n- name: dev\n  context: \
         {cluster: c, user: u, namespace: mimir-dev}\n- name: prod\n  context: {cluster: c, user: u, namespace: \
         mimir}\n- name: bare\n  context: {cluster: c, user: u}\n",
    )
    .unwrap();
    let namespace = async |context: Option<&'static str>| {
        rollout_operator::kube::adapter::cli_config(Some(&kubeconfig), None, Duration::from_secs(5), context)
            .await
            .map(|config| config.default_namespace)
            .map_err(|e| e.to_string())
    };
    assert_eq!(namespace(None).await.unwrap(), "mimir-dev");
    assert_eq!(namespace(Some("prod")).await.unwrap(), "mimir");
    assert_eq!(namespace(Some("bare")).await.unwrap(), "default");
    let err = namespace(Some("staging")).await.expect_err("no such context");
    assert!(err.contains("\"staging\"") && err.contains("kubectl config get-contexts"), "{err}");
    assert_eq!(status::command::namespace_to_show("", "mimir-dev"), "mimir-dev");
    assert_eq!(status::command::namespace_to_show("loki", "mimir-dev"), "loki", "-n wins");
}

/// `--watch` clears the screen only on a terminal; into a file or a pipe the views follow one another, each with
/// its header, and JSON lines get no header at all.
#[test]
fn watch_writes_control_codes_only_to_a_terminal() {
    let interval = Duration::from_secs(2);
    let on_terminal = status::render::watch_header(true, true, false, interval, "mimir");
    assert_eq!(on_terminal, "\x1b[2J\x1b[Hevery 2s: rollout-operator status, namespace mimir\n\n");
    for first in [true, false] {
        let piped = status::render::watch_header(true, false, first, interval, "mimir");
        assert!(!piped.contains('\x1b'), "{piped:?}");
        assert!(piped.contains("every 2s: rollout-operator status, namespace mimir\n"), "{piped:?}");
        assert_eq!(piped.starts_with('\n'), !first, "a blank line between views: {piped:?}");
        assert_eq!(status::render::watch_header(false, false, first, interval, "mimir"), "");
        assert_eq!(status::render::watch_header(false, true, first, interval, "mimir"), "", "JSON lines stay JSON");
    }
}

/// A dump with StatefulSets and no pods is said to be one: every pod would count as missing.
#[test]
fn a_dump_without_pods_is_noted_on_stderr() {
    let dir = std::env::temp_dir().join(format!("status-no-pods-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let full = std::fs::read_to_string(root.join("examples/three-zone-mid-rollout.yaml")).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&full).unwrap();
    let statefulsets: Vec<Value> = docs
        .iter()
        .flat_map(|d| d["items"].as_array().cloned().unwrap_or_else(|| vec![d.clone()]))
        .filter(|o| o["kind"] == "StatefulSet")
        .collect();
    assert!(!statefulsets.is_empty());
    let path = dir.join("statefulsets-only.json");
    std::fs::write(&path, serde_json::json!({"apiVersion": "v1", "kind": "List", "items": statefulsets}).to_string())
        .unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let argv = ["-f", path.to_str().unwrap(), "--now", NOW];
    let code = status::command::execute_on_dumps(&args(&argv), &mut std::io::empty(), &mut out, &mut err, now());
    let err = String::from_utf8(err).unwrap();
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains(
            "note: the input has 3 StatefulSets of namespace mimir but no pods, so every pod counts as missing"
        ),
        "{err}"
    );
    // With the pods, nothing to note.
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let full_path = root.join("examples/three-zone-mid-rollout.yaml");
    let argv = ["-f", full_path.to_str().unwrap(), "--now", NOW];
    status::command::execute_on_dumps(&args(&argv), &mut std::io::empty(), &mut out, &mut err, now());
    assert!(!String::from_utf8(err).unwrap().contains("no pods"));
}
