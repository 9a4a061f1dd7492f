//! `rollout-operator review`: the offline counterpart of `plan` for admission ("why was my downscale denied?",
//! "why was this eviction denied?").
//!
//! `rollout-operator review --path /admission/<no-downscale|prepare-downscale|pod-eviction|zpdb-validation>
//! -f admissionreview.json [-f cluster-dump.yaml ...] [--now RFC3339]` runs the real webhook router on the
//! AdmissionReview (the first `-f`), answering its lookups (a `/scale` request's parent, the group's StatefulSets
//! and pods, the zone tracker's ConfigMap, the evicted pod and its budget's StatefulSets and pods) from the dumps
//! (the other `-f`s, loaded as `plan` loads them) instead of the API, and prints the AdmissionReview response the
//! webhook would return. The dump's ZoneAwarePodDisruptionBudgets are the budgets the eviction is judged against,
//! as the operator's watch would know them (invalid ones are reported on stderr and left out). Pods are not called:
//! prepare-downscale lists the endpoints it would call (on stderr) and decides as if they all succeeded. Writes
//! (an eviction intent, a downscale record) change only the dump's copy. Nothing leaves the process.
//!
//! Owns the in-memory cluster over a dump ([`DumpCluster`]) and the command's I/O; decisions are the router's.

use crate::admission::evictions::{POD_EVICTION_PATH, ZPDB_VALIDATION_PATH};
use crate::admission::no_downscale::NO_DOWNSCALE_PATH;
use crate::admission::prepare_downscale::PREPARE_DOWNSCALE_PATH;
use crate::admission::router::{WebhookSettings, Webhooks, router_with_zpdb};
use crate::cluster::{
    ApiError, DisruptionBudgets, LiveReads, PodAnnotations, StatefulSetAnnotations, WatchEvent, ZoneTrackerStore,
    memory,
};
use crate::commands::plan::{Objects, load_objects, parse_now};
use crate::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use crate::zpdb::Zpdb;
use futures::StreamExt;
use http_body_util::BodyExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use rollout_core::zpdb::Budgets;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt;

/// Exit status for bad input (including an AdmissionReview the webhook would answer with HTTP 400).
pub const EXIT_BAD_INPUT: u8 = 2;
/// Exit status when the webhook would refuse the request (`response.allowed: false`), or the answer could not be
/// written.
pub const EXIT_DENIED: u8 = 1;

#[derive(Debug, Clone, clap::Args)]
pub struct ReviewArgs {
    /// Webhook path: /admission/no-downscale, /admission/prepare-downscale, /admission/pod-eviction or
    /// /admission/zpdb-validation.
    #[arg(long)]
    pub path: String,
    /// The AdmissionReview (JSON) first, then optional cluster dumps (YAML or JSON, as for `plan`; `-` is stdin).
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Decide as of this time (RFC 3339) instead of now.
    #[arg(long)]
    pub now: Option<String>,
    /// Cluster domain of pod DNS names, as the controller's -kubernetes.cluster-domain.
    #[arg(long = "cluster-domain", visible_alias = "kubernetes.cluster-domain", default_value = "cluster.local.")]
    pub cluster_domain: String,
    /// Judge with the zone tracker, the group downscale record in this ConfigMap of the dump (as the operator with
    /// -use-zone-tracker=true -zone-tracker.config-map-name=NAME). Without it, as the operator's default: the
    /// StatefulSets' grafana.com/last-downscale annotations.
    #[arg(long = "zone-tracker-config-map-name", visible_alias = "zone-tracker.config-map-name", value_name = "NAME")]
    pub zone_tracker_config_map: Option<String>,
}

/// An in-memory cluster made of a dump: reads answer from it, writes change only this copy.
#[derive(Clone, Default)]
pub struct DumpCluster {
    state: Arc<Mutex<DumpState>>,
}

#[derive(Default)]
struct DumpState {
    rv: u64,
    statefulsets: BTreeMap<String, StatefulSet>,
    pods: BTreeMap<String, Pod>,
    deployments: BTreeMap<String, Deployment>,
    replicasets: BTreeMap<String, ReplicaSet>,
    config_maps: BTreeMap<String, ConfigMap>,
    /// ZoneAwarePodDisruptionBudgets, as read.
    budgets: Vec<serde_json::Value>,
}

fn typed<T: DeserializeOwned>(value: &serde_json::Value) -> Option<T> {
    serde_json::from_value(value.clone()).ok()
}

impl DumpCluster {
    /// The objects of `namespace` (objects without a namespace are taken to be in it).
    pub fn from_objects(objects: &Objects, namespace: &str) -> Self {
        let in_ns = |ns: Option<&String>| ns.is_none_or(|ns| ns == namespace);
        let mut st = DumpState::default();
        for s in objects.statefulsets.iter().filter(|s| in_ns(s.metadata.namespace.as_ref())) {
            st.statefulsets.insert(s.metadata.name.clone().unwrap_or_default(), s.clone());
        }
        for p in objects.pods.iter().filter(|p| in_ns(p.metadata.namespace.as_ref())) {
            st.pods.insert(p.metadata.name.clone().unwrap_or_default(), p.clone());
        }
        for other in &objects.others {
            let kind = other.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
            let ns = other.pointer("/metadata/namespace").and_then(|n| n.as_str()).map(str::to_string);
            let name = other.pointer("/metadata/name").and_then(|n| n.as_str()).unwrap_or_default().to_string();
            if !in_ns(ns.as_ref()) {
                continue;
            }
            match kind {
                "ConfigMap" => {
                    if let Some(mut cm) = typed::<ConfigMap>(other) {
                        // A dumped record may lack a resourceVersion; writes here are conditional on one.
                        cm.metadata.resource_version.get_or_insert_with(|| "1".to_string());
                        st.config_maps.insert(name, cm);
                    }
                }
                "Deployment" => {
                    if let Some(d) = typed(other) {
                        st.deployments.insert(name, d);
                    }
                }
                "ReplicaSet" => {
                    if let Some(r) = typed(other) {
                        st.replicasets.insert(name, r);
                    }
                }
                rollout_core::zpdb::config::KIND => st.budgets.push(other.clone()),
                _ => {}
            }
        }
        // Writes continue the dump's resourceVersions, as the API server would.
        let numeric = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
            meta.resource_version.as_deref().and_then(|rv| rv.parse::<u64>().ok()).unwrap_or(0)
        };
        st.rv = [
            st.statefulsets.values().map(|o| numeric(&o.metadata)).max(),
            st.pods.values().map(|o| numeric(&o.metadata)).max(),
            st.config_maps.values().map(|o| numeric(&o.metadata)).max(),
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0);
        DumpCluster { state: Arc::new(Mutex::new(st)) }
    }

    /// The dump's ZoneAwarePodDisruptionBudgets, as the operator's watch would know them, with the invalid ones
    /// (left out) and why.
    pub fn budgets(&self) -> (Budgets, Vec<(String, rollout_core::zpdb::ConfigError)>) {
        Budgets::from_objects(self.state().budgets.iter())
    }

    fn state(&self) -> std::sync::MutexGuard<'_, DumpState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl LiveReads for DumpCluster {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        Ok(self.state().statefulsets.get(name).cloned())
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        Ok(self.state().deployments.get(name).cloned())
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        Ok(self.state().replicasets.get(name).cloned())
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        Ok(memory::list(&self.state().statefulsets, label_selector))
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        Ok(memory::list(&self.state().pods, label_selector))
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        Ok(self.state().pods.get(name).cloned())
    }
}

/// An eviction intent lands in the dump's copy, as it would on the pod.
impl PodAnnotations for DumpCluster {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        let st = &mut *self.state();
        memory::patch_annotations_of_uid(&mut st.pods, &mut st.rv, "pods", name, uid, changes)
    }
}

/// An eviction intent kept on a StatefulSet lands in the dump's copy too.
impl StatefulSetAnnotations for DumpCluster {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        let st = &mut *self.state();
        memory::patch_annotations_of_uid(&mut st.statefulsets, &mut st.rv, "statefulsets.apps", name, "", changes)
    }
}

/// The dump's budgets, listed once as a watch would list them (`status` reads them so).
impl DisruptionBudgets for DumpCluster {
    fn watch_disruption_budgets(
        &self,
    ) -> futures::stream::BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        let listed = self.state().budgets.clone().into_iter().map(|b| Ok(WatchEvent::InitApply(b)));
        let events = std::iter::once(Ok(WatchEvent::Init)).chain(listed).chain([Ok(WatchEvent::InitDone)]);
        // Then nothing more happens in a dump.
        futures::stream::iter(events.collect::<Vec<_>>()).chain(futures::stream::pending()).boxed()
    }
}

/// The webhook's writes land in the dump's copy, as they would in the cluster (compare-and-swap included), never
/// in the real cluster.
impl ZoneTrackerStore for DumpCluster {
    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        Ok(self.state().config_maps.get(name).cloned())
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let st = &mut *self.state();
        memory::create(&mut st.config_maps, &mut st.rv, "configmaps", config_map)
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        let st = &mut *self.state();
        memory::replace(&mut st.config_maps, &mut st.rv, "configmaps", config_map)
    }

    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let st = &mut *self.state();
        memory::patch_annotations(&mut st.statefulsets, &mut st.rv, "statefulsets", name, resource_version, annotations)
    }
}

/// Pods that all answer 200, remembering what they were asked.
#[derive(Clone, Default)]
pub struct RecordingPods {
    pub calls: Arc<Mutex<Vec<PodRequest>>>,
}

impl PodHttpClient for RecordingPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push(request);
        Ok(PodResponse { status: 200, body: Vec::new() })
    }
}

/// The whole subcommand against the given streams and clock; returns the exit status.
pub fn execute(
    args: &ReviewArgs,
    stdin: &mut dyn Read,
    out: &mut dyn Write,
    err: &mut dyn Write,
    now: Timestamp,
) -> u8 {
    fn report(err: &mut dyn Write, message: &dyn std::fmt::Display) -> u8 {
        let _ = writeln!(err, "error: {message}");
        EXIT_BAD_INPUT
    }
    let paths = [NO_DOWNSCALE_PATH, PREPARE_DOWNSCALE_PATH, POD_EVICTION_PATH, ZPDB_VALIDATION_PATH];
    if !paths.contains(&args.path.as_str()) {
        return report(err, &format_args!("unknown --path {:?}: expected one of {}", args.path, paths.join(", ")));
    }
    let now = match args.now.as_deref().map(parse_now).transpose() {
        Ok(at) => at.unwrap_or(now),
        Err(e) => return report(err, &e),
    };
    let Some((review_file, dumps)) = args.files.split_first() else {
        return report(err, &"no input: give the AdmissionReview with -f FILE");
    };
    let review_name =
        if review_file.as_os_str() == "-" { "<stdin>".to_string() } else { review_file.display().to_string() };
    let body = if review_file.as_os_str() == "-" {
        let mut buf = Vec::new();
        match stdin.read_to_end(&mut buf) {
            Ok(_) => buf,
            Err(e) => return report(err, &format_args!("cannot read the AdmissionReview from stdin: {e}")),
        }
    } else {
        match std::fs::read(review_file) {
            Ok(bytes) => bytes,
            Err(e) => return report(err, &format_args!("cannot read {}: {e}", review_file.display())),
        }
    };
    // The webhook would answer HTTP 400 without naming the file.
    if let Err(e) = check_review(&body) {
        return report(err, &format_args!("{review_name}: {e}"));
    }
    let objects = match load_objects(dumps, stdin) {
        Ok(objects) => objects,
        Err(e) => return report(err, &e),
    };
    let namespace = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v.pointer("/request/namespace").and_then(|n| n.as_str()).map(str::to_string))
        .unwrap_or_else(|| "default".to_string());
    let pods = RecordingPods::default();
    let api = DumpCluster::from_objects(&objects, &namespace);
    let (budgets, invalid) = api.budgets();
    for (name, problem) in &invalid {
        let _ = writeln!(err, "note: ZoneAwarePodDisruptionBudget {name:?} is not valid and is left out: {problem}");
    }
    let app = router_with_zpdb(
        Webhooks {
            api,
            pods: pods.clone(),
            settings: WebhookSettings::new(
                &namespace,
                &args.cluster_domain,
                args.zone_tracker_config_map.as_deref(),
                Duration::from_secs(10),
            ),
            clock: Arc::new(move || now),
        },
        Zpdb::with_budgets(budgets),
    );
    let request = match http::Request::post(args.path.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(body))
    {
        Ok(request) => request,
        Err(e) => return report(err, &e),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => return report(err, &format_args!("cannot start the async runtime: {e}")),
    };
    let (status, bytes) = runtime.block_on(async {
        match app.oneshot(request).await {
            Ok(response) => {
                let status = response.status();
                let bytes = response.into_body().collect().await.map(|b| b.to_bytes().to_vec()).unwrap_or_default();
                (status, bytes)
            }
            Err(never) => match never {},
        }
    });
    for call in pods.calls.lock().unwrap_or_else(|e| e.into_inner()).iter() {
        let _ = writeln!(err, "would call: {} {} (assumed to succeed)", call.method.as_str(), call.url);
    }
    if status != http::StatusCode::OK {
        return report(
            err,
            &format_args!(
                "{review_name}: the webhook would answer HTTP {}: {}",
                status.as_u16(),
                String::from_utf8_lossy(&bytes)
            ),
        );
    }
    let answer = serde_json::from_slice::<serde_json::Value>(&bytes).ok();
    let allowed = answer.as_ref().and_then(|v| v.pointer("/response/allowed")).and_then(|a| a.as_bool());
    let pretty = answer
        .as_ref()
        .and_then(|v| serde_json::to_string_pretty(v).ok())
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).into_owned());
    if let Err(e) = writeln!(out, "{pretty}").and_then(|()| out.flush()) {
        let _ = writeln!(err, "error: cannot write the response: {e}");
        return EXIT_DENIED;
    }
    if allowed == Some(false) { EXIT_DENIED } else { 0 }
}

/// A review file that is not JSON, so not an AdmissionReview. (The webhook itself says what else is wrong with one.)
#[derive(Debug, thiserror::Error)]
#[error("not an AdmissionReview: invalid JSON: {0} (the AdmissionReview must be the first -f)")]
struct NotAReview(#[source] serde_json::Error);

/// Why `body` cannot be an AdmissionReview: it is not JSON.
fn check_review(body: &[u8]) -> Result<(), NotAReview> {
    serde_json::from_slice::<serde_json::Value>(body).map(|_| ()).map_err(NotAReview)
}

/// Entry point of `rollout-operator review`.
pub fn run(args: ReviewArgs) -> ExitCode {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let code = execute(&args, &mut std::io::stdin().lock(), &mut out, &mut std::io::stderr().lock(), Timestamp::now());
    ExitCode::from(code)
}
