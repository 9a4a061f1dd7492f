//! Node drains under a ZoneAwarePodDisruptionBudget: the budget object the API server serves, the
//! operator replicas serving `/admission/pod-eviction` through the real webhook router (each with the real budget
//! cache, fed by listing the simulated API, and its own in-process state, lost on a restart), the API server's
//! eviction path (`CREATE pods/{name}/eviction`: admitted by one replica, then the pod deleted, as a real API
//! server does), and the node-drain actor that evicts pods through that path as `kubectl drain` does (concurrently
//! per node, retrying 429 with backoff, some drains dry runs).
//!
//! Owns the drains world's environment. Must not decide anything about an eviction: every verdict is the real
//! webhook's (`rollout_operator::admission::evictions` over `rollout_core::zpdb`); judging the verdicts against the
//! committed history is the checker's ([`crate::checker::Checker::judge_disruption`]).

use crate::apiserver::{Reply, ServerEnv};
use crate::client::{BudgetFeed, SimCluster};
use crate::objects::{self, PodSum};
use crate::rng::SimRng;
use crate::store::{SharedStore, Store};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use madsim::net::Endpoint;
use rollout_operator::admission::evictions::{POD_EVICTION_PATH, ZPDB_VALIDATION_PATH};
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router_with_zpdb, system_clock};
use rollout_operator::cluster::{ApiError, LiveReads, PodAnnotations, StatefulSetAnnotations, ZoneTrackerStore};
use rollout_operator::ops::metrics::ZpdbMetrics;
use rollout_operator::pods::client::NoPodClient;
use rollout_operator::zpdb::Zpdb;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

/// How the budget counts unavailable pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetMode {
    /// Zone mode: unavailable pods in one zone at a time, at most `maxUnavailable` there.
    Zones,
    /// Partition mode: per partition (the pod's ordinal, by `podNamePartitionRegex`), at most `maxUnavailable`
    /// unavailable across the zones.
    Partitions,
}

/// Which eviction webhook the operator replicas serve: the real one, or one re-introducing a known bug (test-only,
/// sim-local: each changes only what the webhook is given, never its decision code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evictor {
    Real,
    /// The re-read after the eviction intent is answered from the first read (a cache, as the reference's
    /// in-memory view was): the intents of concurrent decisions are never seen, so nothing serialises them.
    NoSecondRead,
    /// The operator knows no budget (its cache never fed): every eviction is out of scope and allowed.
    IgnoresBudget,
}

impl Evictor {
    pub const ALL: [Evictor; 3] = [Evictor::Real, Evictor::NoSecondRead, Evictor::IgnoresBudget];

    pub fn name(self) -> &'static str {
        match self {
            Evictor::Real => "real",
            Evictor::NoSecondRead => "no-second-read",
            Evictor::IgnoresBudget => "ignores-budget",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// The drains world's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Drains {
    pub mode: BudgetMode,
    /// The budget's `maxUnavailable`.
    pub max_unavailable: u32,
    /// The budget's `maxUnavailablePercentage` instead (of the evicted pod's StatefulSet's replicas).
    pub percentage: Option<u32>,
    pub evictor: Evictor,
    /// Operator replicas serving the eviction webhook (each eviction goes to one of them at random).
    pub replicas: usize,
    /// How many node drains start during the fault phase (a range, inclusive).
    pub drains: (u64, u64),
    /// The budget is edited during the run ([`edit_budgets`]), and the operator watches it.
    pub budget_edits: bool,
    /// A user re-applies the StatefulSets from their manifests (`kubectl replace`) every 2-10 s of the fault phase,
    /// which drops any eviction intent kept on them.
    pub intent_wipes: bool,
}

impl Default for Drains {
    fn default() -> Self {
        Drains {
            mode: BudgetMode::Zones,
            max_unavailable: 1,
            percentage: None,
            evictor: Evictor::Real,
            replicas: 2,
            drains: (4, 8),
            budget_edits: false,
            intent_wipes: false,
        }
    }
}

impl Drains {
    /// How the operator's clients learn the budgets: watched when they change during the run, listed once
    /// otherwise (as the drains worlds always did, so their seeds replay).
    pub fn feed(&self) -> BudgetFeed {
        if self.budget_edits { BudgetFeed::Watch } else { BudgetFeed::ListOnce }
    }
}

/// The budget's name.
pub const BUDGET: &str = "ingester-rollout";
/// Nodes per zone: node `k` of a zone hosts the zone's pods whose ordinal is `k` modulo this.
pub const NODES_PER_ZONE: u32 = 2;
/// `timeoutSeconds` of the pod-eviction webhook configuration (`deploy/`), and the operator's
/// `-server-tls.request-timeout` (its handler deadline is 90 % of it).
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);
/// The tag of admission calls from the API server to a replica (and of their answers).
const TAG_ADMIT: u64 = 2;
/// Operator replica processes count their incarnations from here (above the admissions of the prepare-downscale
/// worlds), each restart a new one.
pub const REPLICA_INCARNATION_BASE: u64 = 1 << 41;
/// Partition mode's `crossZoneEvictionDelay`.
pub const CROSS_ZONE_EVICTION_DELAY: &str = "10s";
/// `-zpdb.pod-ready-annotation-patch-timeout` (the operator's default).
const READY_TIME_PATCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Seeds the drains world's own generator, so the run's other draws are those of the world without drains.
pub const DRAINS_STREAM: u64 = 0x6472_6169_6e73_2121;

/// The ZoneAwarePodDisruptionBudget over `group`'s pods and StatefulSets.
pub fn budget_object(group: &str, drains: &Drains) -> serde_json::Value {
    let mut spec = serde_json::json!({
        "selector": {"matchLabels": {rollout_core::keys::ROLLOUT_GROUP: group}},
    });
    match drains.percentage {
        Some(p) => spec["maxUnavailablePercentage"] = serde_json::json!(p),
        None => spec["maxUnavailable"] = serde_json::json!(drains.max_unavailable),
    }
    if drains.mode == BudgetMode::Partitions {
        spec["podNamePartitionRegex"] = serde_json::json!("[a-z\\-]+-zone-[a-z]-([0-9]+)");
        spec["podNameRegexGroup"] = serde_json::json!(1);
        // A peer counts as ready only once stamped ready this long ago by the replicas' ready-time trackers.
        spec["crossZoneEvictionDelay"] = serde_json::json!(CROSS_ZONE_EVICTION_DELAY);
    }
    serde_json::json!({
        "apiVersion": "rollout-operator.grafana.com/v1",
        "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": BUDGET, "namespace": objects::NAMESPACE, "uid": format!("uid-{BUDGET}"),
            "generation": 1, "resourceVersion": "1"},
        "spec": spec,
    })
}

/// Where operator replica `i` serves its webhooks.
pub fn replica_address(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 10 + i as u8], 8443))
}

pub fn replica_ip(i: usize) -> IpAddr {
    replica_address(i).ip()
}

/// An admission call from the API server to a replica: the AdmissionReview as sent over HTTP, and the call's
/// number (its answer carries it back).
struct AdmitRequest {
    call: u64,
    /// The webhook's path: `/admission/pod-eviction` or `/admission/zpdb-validation`.
    path: &'static str,
    body: Vec<u8>,
}

/// A replica's answer: the response body, and how many writes the admission made (a dry run must make none).
struct AdmitAnswer {
    call: u64,
    body: Result<Vec<u8>, String>,
    writes: u32,
}

/// The cluster port one admission uses: the replica's client, counting the admission's writes, and (for
/// [`Evictor::NoSecondRead`]) answering every pod and StatefulSet list after the first with the first one's result
/// (intents may be kept on either).
#[derive(Clone)]
struct AdmissionClient {
    api: SimCluster,
    first_pods: Option<Arc<Mutex<Option<Vec<Pod>>>>>,
    first_statefulsets: Option<Arc<Mutex<Option<Vec<StatefulSet>>>>>,
    writes: Arc<AtomicU32>,
}

impl LiveReads for AdmissionClient {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        self.api.get_statefulset(name).await
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        self.api.get_deployment(name).await
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        self.api.get_replicaset(name).await
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        let Some(first) = &self.first_statefulsets else { return self.api.list_statefulsets(label_selector).await };
        if let Some(statefulsets) = first.lock().unwrap().clone() {
            return Ok(statefulsets);
        }
        let statefulsets = self.api.list_statefulsets(label_selector).await?;
        *first.lock().unwrap() = Some(statefulsets.clone());
        Ok(statefulsets)
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        let Some(first) = &self.first_pods else { return self.api.list_pods(label_selector).await };
        if let Some(pods) = first.lock().unwrap().clone() {
            return Ok(pods);
        }
        let pods = self.api.list_pods(label_selector).await?;
        *first.lock().unwrap() = Some(pods.clone());
        Ok(pods)
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        self.api.get_pod(name).await
    }
}

impl PodAnnotations for AdmissionClient {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.api.patch_pod_annotations(name, uid, changes).await
    }
}

impl StatefulSetAnnotations for AdmissionClient {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.api.merge_statefulset_annotations(name, changes).await
    }
}

impl ZoneTrackerStore for AdmissionClient {
    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        self.api.get_config_map(name).await
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.api.create_config_map(config_map).await
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.api.replace_config_map(config_map).await
    }

    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.api.patch_statefulset_annotations(name, resource_version, annotations).await
    }
}

/// One operator replica process: the budget cache fed by the real watch task over the simulated API (loading
/// until it lists them: evictions are denied with 429 meanwhile), the real `grafana.com/ready-time` tracker (as the
/// operator always runs it), and the webhook router serving each admission the API server sends. Its in-process
/// serialisation state lives as long as the process.
pub async fn serve_replica(store: SharedStore, replica: usize, incarnation: u64, evictor: Evictor, feed: BudgetFeed) {
    store.lock().unwrap().trace(&replica_process(replica, incarnation), "process started");
    let api = SimCluster::connect_operator(incarnation, feed).await.expect("bind operator replica endpoint");
    let zpdb = operator_zpdb(&api, evictor);
    serve_admissions(replica, api, zpdb, evictor).await
}

/// How the trace names process `incarnation` of replica `replica`.
pub fn replica_process(replica: usize, incarnation: u64) -> String {
    format!("operator-{replica}#{}", incarnation - REPLICA_INCARNATION_BASE)
}

/// A replica process's ZPDB state over `api`: the budget cache and its watch, and the ready-time tracker (both
/// tasks of the calling process).
pub fn operator_zpdb(api: &SimCluster, evictor: Evictor) -> Zpdb {
    match evictor {
        Evictor::IgnoresBudget => Zpdb::with_budgets(rollout_core::zpdb::Budgets::default()),
        Evictor::Real | Evictor::NoSecondRead => {
            let metrics = ZpdbMetrics::default();
            let zpdb = Zpdb::new(metrics.clone());
            let watch = rollout_operator::zpdb::budgets::run(
                api.clone(),
                zpdb.budgets.clone(),
                metrics,
                std::future::pending(),
            );
            tokio::spawn(watch);
            let tracker = rollout_operator::zpdb::ready_time::Tracker::new(
                api.clone(),
                zpdb.budgets.clone(),
                READY_TIME_PATCH_TIMEOUT,
                Arc::new(jiff::Timestamp::now),
                zpdb.metrics.clone(),
            );
            tokio::spawn(tracker.run(std::future::pending()));
            zpdb
        }
    }
}

/// Serves the eviction webhook of replica `replica` with `zpdb`, until the process ends.
pub async fn serve_admissions(replica: usize, api: SimCluster, zpdb: Zpdb, evictor: Evictor) {
    let ep = Endpoint::bind(replica_address(replica)).await.expect("bind operator replica webhook address");
    while let Ok((payload, from)) = ep.recv_from_raw(TAG_ADMIT).await {
        let Ok(request) = payload.downcast::<AdmitRequest>() else { continue };
        let (ep, api, zpdb) = (ep.clone(), api.clone(), zpdb.clone());
        tokio::spawn(async move {
            let answer =
                AdmitAnswer { call: request.call, ..admit(api, zpdb, evictor, request.path, request.body).await };
            let _ = ep.send_to_raw(from, TAG_ADMIT, Box::new(answer)).await;
        });
    }
}

/// One admission through the real router (`path`), driven with `tower::ServiceExt::oneshot`.
async fn admit(api: SimCluster, zpdb: Zpdb, evictor: Evictor, path: &'static str, body: Vec<u8>) -> AdmitAnswer {
    let writes = Arc::new(AtomicU32::new(0));
    let client = AdmissionClient {
        api,
        first_pods: (evictor == Evictor::NoSecondRead).then(Arc::default),
        first_statefulsets: (evictor == Evictor::NoSecondRead).then(Arc::default),
        writes: writes.clone(),
    };
    let app = router_with_zpdb(
        Webhooks {
            api: client,
            pods: NoPodClient,
            settings: WebhookSettings::new(objects::NAMESPACE, "cluster.local.", None, WEBHOOK_TIMEOUT),
            clock: system_clock(),
        },
        zpdb,
    );
    let body = async {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body))
            .map_err(|e| e.to_string())?;
        let response = app.oneshot(request).await.map_err(|e| e.to_string())?;
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.map_err(|e| e.to_string())?;
        Ok::<_, String>(bytes.to_vec())
    }
    .await;
    AdmitAnswer { call: 0, body, writes: writes.load(Ordering::Relaxed) }
}

/// Calls the eviction webhook at `at` (failure policy Fail: no answer within the timeout is an error). A fresh
/// endpoint may get the port of an earlier call that gave up, and with it that call's late answer: an answer is
/// taken only by the call it answers (seed 35 of the first drains batch allowed an eviction on another call's
/// answer, judged before a pod crashed), as over HTTP, where a late response dies with its connection.
async fn call_webhook(at: SocketAddr, call: u64, path: &'static str, body: Vec<u8>) -> Result<AdmitAnswer, String> {
    let ep = Endpoint::bind("0.0.0.0:0").await.map_err(|e| e.to_string())?;
    ep.send_to_raw(at, TAG_ADMIT, Box::new(AdmitRequest { call, path, body })).await.map_err(|e| e.to_string())?;
    let deadline = Instant::now() + WEBHOOK_TIMEOUT;
    loop {
        match tokio::time::timeout(deadline.saturating_duration_since(Instant::now()), ep.recv_from_raw(TAG_ADMIT))
            .await
        {
            Ok(Ok((payload, _))) => match payload.downcast::<AdmitAnswer>() {
                Ok(answer) if answer.call == call => return Ok(*answer),
                Ok(_) => continue,
                Err(_) => return Err("malformed answer".into()),
            },
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("context deadline exceeded".into()),
        }
    }
}

/// What a webhook's answer to `review` says, as the API server reads it: allowed, the status code (403 when it
/// gives none) and message; an error if there was no usable answer (failure policy Fail).
fn admission_verdict(
    review: &serde_json::Value,
    answer: &Result<AdmitAnswer, String>,
) -> Result<(bool, u16, String), String> {
    let answer = answer.as_ref().map_err(String::clone)?;
    let body = answer.body.as_ref().map_err(String::clone)?;
    let response = objects::admission_response(review, body)?;
    let allowed = objects::admitted(&response);
    let code = response.pointer("/status/code").and_then(|c| c.as_u64()).unwrap_or(403) as u16;
    let message = response.pointer("/status/message").and_then(|m| m.as_str()).unwrap_or("").to_string();
    Ok((allowed, code, message))
}

/// The API server's `CREATE pods/{name}/eviction`: the eviction admission by one operator replica (picked at
/// random, as a Service picks an endpoint), then, allowed and not a dry run, the pod's deletion (after the rest of
/// the admission chain, 0-0.5 s). The checker judges each committed eviction, and each dry run's writes.
pub async fn evict(env: &ServerEnv, pod: &str, dry_run: bool, options_dry_run: bool) -> Reply {
    let dry = dry_run || options_dry_run;
    let what = format!("EVICT pod {pod}{}", if dry { " (dry run)" } else { "" });
    // A pod terminating (uid) when the eviction arrives; it stays so while that uid exists.
    let terminating_uid = |st: &Store| {
        st.pods.get(pod).filter(|p| p.metadata.deletion_timestamp.is_some()).and_then(|p| p.metadata.uid.clone())
    };
    // The group whose budget covers the pod as the eviction arrives (by its labels, as the budget selects pods):
    // the pod may be gone by the answer (a scale-down removed it).
    let (arrival_rv, n, terminating, group) = {
        let mut st = env.store.lock().unwrap();
        let Some(group) = st.pods.get(pod).map(objects::budget_group_of) else {
            st.trace("drain", format!("{what} -> not_found"));
            return Reply::Done(Err(ApiError::NotFound(format!("pods \"{pod}\" not found"))));
        };
        st.checker.drains.asked += 1;
        let terminating = terminating_uid(&st);
        st.checker.drains.of_terminating += u64::from(terminating.is_some());
        (st.rv, st.checker.drains.asked, terminating, group)
    };
    if env.eviction_webhooks.is_empty() {
        return Reply::Done(Err(ApiError::Unavailable("no eviction webhook configured".into())));
    }
    let replica = env.rng.lock().unwrap().range(0..env.eviction_webhooks.len() as u64) as usize;
    let mut eviction = serde_json::json!({"apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": objects::NAMESPACE}});
    if options_dry_run {
        eviction["deleteOptions"] = serde_json::json!({"dryRun": ["All"]});
    }
    let review = serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": format!("eviction-{n}"),
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "subResource": "eviction",
        "name": pod, "namespace": objects::NAMESPACE, "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:node-drainer"},
        "dryRun": dry_run,
        "object": eviction}});
    let body = serde_json::to_vec(&review).unwrap_or_default();
    let answer = call_webhook(env.eviction_webhooks[replica], n, POD_EVICTION_PATH, body).await;
    let (allowed, code, message) = match admission_verdict(&review, &answer) {
        Ok(v) => v,
        Err(e) => {
            let mut st = env.store.lock().unwrap();
            st.checker.drains.failed += 1;
            st.trace("drain", format!("{what} via operator-{replica} -> webhook failed: {e}"));
            let message = format!(
                "Internal error occurred: failed calling webhook \"pod-eviction-rollout-operator.grafana.com\": {e}"
            );
            return Reply::Done(Err(ApiError::Rejected { code: 500, message }));
        }
    };
    let writes = answer.as_ref().map_or(0, |a| a.writes);
    if dry && writes > 0 {
        let mut st = env.store.lock().unwrap();
        let at = st.elapsed();
        st.checker.record_dry_run_write(at, format!("{what} made {writes} writes (allowed: {allowed})"));
    }
    if !allowed {
        let mut st = env.store.lock().unwrap();
        let at = st.elapsed();
        st.checker.judge_eviction_denial(at, group.as_deref().unwrap_or_default(), pod, code, &message);
        let what = format!("the eviction of {pod} ({code})");
        crate::world::judge_denial_scope_of(&mut st, group.clone(), &message, crate::checker::ZPDB_SCOPE, &what);
        let intent = format!("grafana.com/eviction-intent.eviction-{n}");
        let carries = |annotations: &Option<std::collections::BTreeMap<String, String>>| {
            annotations.as_ref().is_some_and(|a| a.contains_key(&intent))
        };
        let present = st.pods.values().any(|p| carries(&p.metadata.annotations))
            || st.statefulsets.values().any(|s| carries(&s.metadata.annotations));
        st.checker.record_denied_decision(&format!("eviction-{n}"), code, present);
        if message.contains("max unavailable = 0") {
            let denial_rv = st.rv;
            st.checker.judge_zero_budget_denial(at, arrival_rv, denial_rv, pod, &message);
        }
        if code == 429 && terminating.is_some() && terminating == terminating_uid(&st) {
            st.checker.judge_terminating_denial(at, pod, &message);
        }
        st.checker.drains.denied += 1;
        st.trace("drain", format!("{what} via operator-{replica} -> denied ({code}): {message}"));
        return Reply::Done(Err(ApiError::Rejected { code, message }));
    }
    if dry {
        let mut st = env.store.lock().unwrap();
        st.checker.drains.dry_runs_allowed += 1;
        st.trace("drain", format!("{what} via operator-{replica} -> allowed"));
        return Reply::Done(Ok(()));
    }
    // The rest of the admission chain and the eviction handler's own reads.
    let chain = env.rng.lock().unwrap().millis(0, 500);
    tokio::time::sleep(chain).await;
    let mut st = env.store.lock().unwrap();
    let Some(mut p) = st.pods.get(pod).cloned() else {
        st.trace("drain", format!("{what} via operator-{replica} -> allowed, but the pod is gone"));
        return Reply::Done(Err(ApiError::NotFound(format!("pods \"{pod}\" not found"))));
    };
    if p.metadata.deletion_timestamp.is_some() {
        st.trace("drain", format!("{what} via operator-{replica} -> allowed (already terminating)"));
        return Reply::Done(Ok(()));
    }
    let at = st.elapsed();
    let before = st.rv;
    let disruptor = format!("eviction by the drain, admitted by operator-{replica}");
    st.checker.judge_disruption(at, arrival_rv, before, &PodSum::of(&p), &disruptor);
    st.checker.drains.committed += 1;
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::now()));
    st.put_pod(p);
    st.trace("drain", format!("{what} via operator-{replica} -> evicted ({message})"));
    Reply::Done(Ok(()))
}

/// The node-drain actor: `count` drains (drawn from `r`) start at random times of the fault phase, each of one node
/// (a zone's pods whose ordinal is the node's index modulo [`NODES_PER_ZONE`]), concurrently with each other. A
/// drain evicts its node's pods concurrently, each retried on 429 (and on errors) with exponential backoff from 1 s
/// to 8 s plus jitter, until it is evicted or the pod is gone; a fifth of the drains are dry runs
/// (`kubectl drain --dry-run=server`), half by the request's `dryRun`, half by the Eviction's `deleteOptions`.
pub async fn drain_nodes(
    store: SharedStore,
    mut r: SimRng,
    drains: Drains,
    groups: &[&str],
    zones: u32,
    start: Instant,
    phase: Duration,
) {
    let until = start + phase;
    let count = r.range(drains.drains.0..drains.drains.1 + 1);
    let mut plan: Vec<(Duration, u32, u32, bool, u64)> = (0..count)
        .map(|_| {
            let at = r.millis(5_000, phase.as_millis() as u64 * 4 / 5);
            let zone = r.range(0..u64::from(zones)) as u32;
            let node = r.range(0..u64::from(NODES_PER_ZONE)) as u32;
            (at, zone, node, r.chance(0.2), r.next_u64())
        })
        .collect();
    plan.sort_unstable();
    // With a second rollout group, a third of the drains are of its nodes (drawn after the plan, so the one-group
    // worlds draw as before).
    let of_group: Vec<&str> =
        plan.iter().map(|_| if groups.len() > 1 && r.chance(0.33) { groups[1] } else { groups[0] }).collect();
    let mut running = Vec::new();
    for (n, ((at, zone, node, dry, seed), group)) in plan.into_iter().zip(of_group).enumerate() {
        tokio::time::sleep_until((start + at).max(Instant::now())).await;
        let sts = format!("{group}-zone-{}", (b'a' + zone as u8) as char);
        let pods: Vec<String> = {
            let mut st = store.lock().unwrap();
            let replicas = st.statefulsets.get(&sts).and_then(|s| s.spec.as_ref()?.replicas).unwrap_or(0).max(0) as u32;
            let pods: Vec<String> =
                (0..replicas).filter(|o| o % NODES_PER_ZONE == node).map(|o| format!("{sts}-{o}")).collect();
            let how = if dry { " (dry run)" } else { "" };
            st.trace("drain", format!("drains node {sts}-node-{node}{how}: {}", pods.join(", ")));
            pods
        };
        let incarnation = crate::apiserver::DRAIN_INCARNATION_BASE + n as u64;
        let Ok(api) = SimCluster::connect(incarnation).await else { continue };
        let mut r = SimRng::new(seed);
        for pod in pods {
            let options = dry && r.chance(0.5);
            let (api, mut r) = (api.clone(), SimRng::new(r.next_u64()));
            running.push(tokio::spawn(async move {
                evict_until_done(&api, &pod, dry && !options, options, &mut r, until).await
            }));
        }
    }
    for task in running {
        let _ = task.await;
    }
}

/// One pod of a drain: evicted, retried with backoff on a denial or an error, until it is evicted or gone (or
/// `until`).
async fn evict_until_done(
    api: &SimCluster,
    pod: &str,
    dry_run: bool,
    options_dry_run: bool,
    r: &mut SimRng,
    until: Instant,
) {
    let mut backoff = Duration::from_secs(1);
    while Instant::now() < until {
        match api.evict_pod(pod, dry_run, options_dry_run).await {
            Ok(()) | Err(ApiError::NotFound(_)) => return,
            // 429 (the budget, or budgets not loaded yet), 500 (the webhook failed), or no answer: retry.
            Err(_) => {}
        }
        tokio::time::sleep(backoff + r.millis(0, 1_000)).await;
        backoff = (backoff * 2).min(Duration::from_secs(8));
    }
}

/// Restarts of the operator replicas during the fault phase (the drains world's own faults): 0-3, each a replica
/// down for 1-15 s; a restarted replica has lost its in-process state and lists the budgets again.
pub fn replica_restarts(r: &mut SimRng, replicas: usize, phase: Duration) -> Vec<(Duration, usize, Duration)> {
    let count = r.range(0..4);
    (0..count)
        .map(|_| {
            let at = r.millis(5_000, phase.as_millis() as u64 * 4 / 5);
            (at, r.range(0..replicas as u64) as usize, r.millis(1_000, 15_000))
        })
        .collect()
}

/// One edit of the budget by the user (`--budget-edits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BudgetEdit {
    /// `maxUnavailable` 1 <-> 2 (the generation goes up).
    Resize,
    /// A label added (a metadata-only update: the generation stays).
    Relabel,
    /// Deleted, and created again 0-3 s later (a new uid, generation 1) with `maxUnavailable` 1 or 2.
    Recreate,
    /// Deleted for 40-70 s (longer than the checker's grace), then created again (unless that falls after the fault
    /// phase: the budget then stays deleted).
    DeleteForAWhile,
    /// An invalid update, which the validation webhook must refuse.
    Invalid,
}

/// The budget editor (`--budget-edits`): 3-6 edits of the budget at random times of the fault phase, one after the
/// other, each create and update admitted by `/admission/zpdb-validation` on a replica picked at random (failure
/// policy Fail: an edit whose admission fails is retried until the phase ends), committed by the API server, and
/// seen by the operator replicas' budget watches. The checker judges every admission answer (the editor knows which
/// edits are valid) and, from each committed version on (after a grace), the decisions against that version.
pub async fn edit_budgets(store: SharedStore, mut r: SimRng, drains: Drains, start: Instant, phase: Duration) {
    let until = start + phase;
    let count = r.range(3..7);
    let mut plan: Vec<(Duration, BudgetEdit)> = (0..count)
        .map(|_| {
            let at = r.millis(5_000, phase.as_millis() as u64 * 4 / 5);
            let edit = match r.range(0..5) {
                0 => BudgetEdit::Resize,
                1 => BudgetEdit::Relabel,
                2 => BudgetEdit::Recreate,
                3 => BudgetEdit::DeleteForAWhile,
                _ => BudgetEdit::Invalid,
            };
            (at, edit)
        })
        .collect();
    plan.sort_unstable_by_key(|(at, _)| *at);
    for (n, (at, edit)) in plan.into_iter().enumerate() {
        tokio::time::sleep_until((start + at).max(Instant::now())).await;
        let current =
            store.lock().unwrap().budgets.iter().find(|b| b.pointer("/metadata/name") == Some(&BUDGET.into())).cloned();
        let Some(current) = current else { continue };
        let max_unavailable = current.pointer("/spec/maxUnavailable").and_then(serde_json::Value::as_u64).unwrap_or(1);
        let fresh = |max_unavailable: u64| {
            let mut budget = budget_object(
                crate::world::GROUP,
                &Drains { max_unavailable: max_unavailable as u32, ..drains.clone() },
            );
            budget["metadata"] = serde_json::json!({"name": BUDGET, "namespace": objects::NAMESPACE});
            budget
        };
        let edited = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut budget = current.clone();
            change(&mut budget);
            budget
        };
        let seed = r.next_u64();
        let admit_as = |object: serde_json::Value, operation: &'static str, valid: bool, what: String, dry: bool| {
            let (store, old) = (store.clone(), (operation == "UPDATE").then(|| current.clone()));
            // A dry run numbered apart, so that its calls and uids are its own.
            let number = if dry { n + (1 << 20) + usize::from(valid) * (1 << 21) } else { n };
            let what = if dry { format!("{what}, dry run") } else { what };
            let edit = BudgetAdmission { edit: number, object, old, operation, valid, what, dry_run: dry };
            admit_budget(store, SimRng::new(seed), drains.replicas, edit, until)
        };
        let admit = |object: serde_json::Value, operation: &'static str, valid: bool, what: String| {
            admit_as(object, operation, valid, what, false)
        };
        match edit {
            BudgetEdit::Resize => {
                let to = if max_unavailable == 1 { 2 } else { 1 };
                let object = edited(&|b| {
                    b["spec"]["maxUnavailable"] = serde_json::json!(to);
                    // As a template renders an unset value: an empty regex is no regex (zone mode), and valid.
                    if drains.mode == BudgetMode::Zones {
                        b["spec"]["podNamePartitionRegex"] = serde_json::json!("");
                    }
                });
                admit(object, "UPDATE", true, format!("maxUnavailable {max_unavailable} -> {to}")).await;
            }
            BudgetEdit::Relabel => {
                let object = edited(&|b| b["metadata"]["labels"] = serde_json::json!({"edited": n.to_string()}));
                admit(object, "UPDATE", true, format!("label edited={n}")).await;
            }
            BudgetEdit::Recreate | BudgetEdit::DeleteForAWhile => {
                let pause = if edit == BudgetEdit::Recreate { r.millis(0, 3_000) } else { r.millis(40_000, 70_000) };
                let to = r.range(1..3);
                // Half the deletions happen while the operator cannot watch (a network cut, the events of which
                // are compacted): it never sees the deletion, and learns what followed only by relisting. A quick
                // re-creation is over before the watches come back (the relist finds the new object, a new uid
                // with generation 1); a long deletion is still on (the relist does not find the budget at all).
                let outage = r.chance(0.5).then(|| match edit {
                    BudgetEdit::Recreate => pause + r.millis(500, 2_000),
                    _ => r.millis(2_000, 10_000),
                });
                {
                    let mut st = store.lock().unwrap();
                    if let Some(outage) = outage {
                        let at = st.elapsed();
                        st.budget_watches_down = true;
                        st.checker.budget_watch_outages.push((at, None));
                        st.trace("fault", format!("the budget watches are cut for {:.1}s", outage.as_secs_f64()));
                    }
                    st.delete_budget(BUDGET);
                    st.trace(
                        "user",
                        format!(
                            "DELETE zoneawarepoddisruptionbudget {BUDGET}; created again in {:.1}s",
                            pause.as_secs_f64()
                        ),
                    );
                }
                let restore = outage.map(|outage| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(outage).await;
                        let mut st = store.lock().unwrap();
                        let at = st.elapsed();
                        st.budget_watches_down = false;
                        st.budget_resume_floor = st.rv;
                        if let Some(outage) = st.checker.budget_watch_outages.last_mut() {
                            outage.1 = Some(at);
                        }
                        st.trace("fault", "the budget watches can connect again; resuming from before now is too old");
                    })
                });
                tokio::time::sleep(pause).await;
                admit(fresh(to), "CREATE", true, format!("created again, maxUnavailable {to}")).await;
                if let Some(restore) = restore {
                    let _ = restore.await;
                }
            }
            BudgetEdit::Invalid => {
                let (object, what) = match r.range(0..4) {
                    0 => (edited(&|b| b["spec"]["maxUnavailable"] = serde_json::json!(-1)), "maxUnavailable -1"),
                    1 => (
                        edited(&|b| b["spec"]["maxUnavailablePercentage"] = serde_json::json!(50)),
                        "both maxUnavailable and a percentage",
                    ),
                    2 => (
                        edited(&|b| {
                            b["spec"].as_object_mut().map(|s| s.remove("selector"));
                        }),
                        "no selector",
                    ),
                    _ if drains.mode == BudgetMode::Partitions && r.chance(0.5) => (
                        edited(&|b| b["spec"]["podNamePartitionRegex"] = serde_json::json!("[a-z\\-]+")),
                        "a partition regex without a group",
                    ),
                    // Go parses a negative duration; the reference refuses it with a message of its own. Which of
                    // this and the next by the edit's place in the plan, not by a draw: the world's draws stay as
                    // they were before the next was added.
                    _ if drains.mode == BudgetMode::Partitions && n % 2 == 0 => (
                        edited(&|b| b["spec"]["crossZoneEvictionDelay"] = serde_json::json!("-10s")),
                        "a negative crossZoneEvictionDelay",
                    ),
                    // A percentage counts the pods of a zone; partition mode counts one pod per zone, so the
                    // reference refuses the two together.
                    _ if drains.mode == BudgetMode::Partitions => (
                        edited(&|b| {
                            b["spec"].as_object_mut().map(|s| s.remove("maxUnavailable"));
                            b["spec"]["maxUnavailablePercentage"] = serde_json::json!(50);
                        }),
                        "a percentage in partition mode",
                    ),
                    _ => (
                        edited(&|b| b["spec"]["crossZoneEvictionDelay"] = serde_json::json!("10s")),
                        "crossZoneEvictionDelay without a partition regex",
                    ),
                };
                admit(object, "UPDATE", false, what.to_string()).await;
                // In partition mode the user also tries the longest delays as server-side dry runs (a budget that
                // long would hold every eviction): Go's largest duration, 2^63-1 ns, which Go accepts, and one
                // nanosecond more, which it refuses. Sent after the edit, with no draw: the world's draws stay.
                if drains.mode == BudgetMode::Partitions {
                    for (delay, valid, what) in [
                        (LONGEST_GO_DURATION, true, "crossZoneEvictionDelay at Go's longest"),
                        (BEYOND_GO_DURATION, false, "crossZoneEvictionDelay beyond Go's range"),
                    ] {
                        let object = edited(&|b| b["spec"]["crossZoneEvictionDelay"] = serde_json::json!(delay));
                        admit_as(object, "UPDATE", valid, what.to_string(), true).await;
                    }
                }
            }
        }
    }
}

/// Go's largest duration, 2^63-1 ns (`time.ParseDuration` accepts it), and one nanosecond more (refused).
const LONGEST_GO_DURATION: &str = "2562047h47m16.854775807s";
const BEYOND_GO_DURATION: &str = "2562047h47m16.854775808s";

/// One budget create or update sent to the validation webhook: edit number `edit` of the run, `valid` or not.
struct BudgetAdmission {
    edit: usize,
    object: serde_json::Value,
    old: Option<serde_json::Value>,
    operation: &'static str,
    valid: bool,
    what: String,
    /// A server-side dry run (`kubectl apply --dry-run=server`): admitted, nothing is stored.
    dry_run: bool,
}

/// One budget create or update through the validation webhook, retried (on another replica, after 1-2 s) while its
/// admission fails, until `until`; committed if admitted and not a dry run. The checker judges the answer against
/// `valid`.
async fn admit_budget(store: SharedStore, mut r: SimRng, replicas: usize, edit: BudgetAdmission, until: Instant) {
    let BudgetAdmission { edit, object, old, operation, valid, what, dry_run } = edit;
    const CALLS: u64 = 1 << 32;
    let mut attempt = 0;
    while Instant::now() < until {
        attempt += 1;
        let replica = r.range(0..replicas as u64) as usize;
        let mut request = serde_json::json!({
            "uid": format!("budget-edit-{edit}-{attempt}"),
            "kind": {"group": "rollout-operator.grafana.com", "version": "v1", "kind": "ZoneAwarePodDisruptionBudget"},
            "resource": {"group": "rollout-operator.grafana.com", "version": "v1", "resource": "zoneawarepoddisruptionbudgets"},
            "name": BUDGET, "namespace": objects::NAMESPACE, "operation": operation,
            "userInfo": {"username": "someone@example.com"},
            "object": object,
        });
        if let Some(old) = &old {
            request["oldObject"] = old.clone();
        }
        if dry_run {
            request["dryRun"] = serde_json::json!(true);
        }
        let review =
            serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        let body = serde_json::to_vec(&review).unwrap_or_default();
        let answer =
            call_webhook(replica_address(replica), CALLS + ((edit as u64) << 16) + attempt, ZPDB_VALIDATION_PATH, body)
                .await;
        {
            let mut st = store.lock().unwrap();
            match admission_verdict(&review, &answer) {
                Err(e) => {
                    st.trace(
                        "user",
                        format!("{operation} budget ({what}) via operator-{replica} -> webhook failed: {e}"),
                    );
                }
                Ok((allowed, code, message)) => {
                    let at = st.elapsed();
                    st.checker.judge_budget_admission(at, &what, valid, allowed, &message);
                    if allowed && dry_run {
                        st.trace("user", format!("{operation} budget ({what}) via operator-{replica} -> admitted"));
                    } else if allowed {
                        let stored = st.put_budget(object);
                        let generation = stored.pointer("/metadata/generation").cloned().unwrap_or_default();
                        st.trace(
                            "user",
                            format!(
                                "{operation} budget ({what}) via operator-{replica} -> stored, generation {generation}"
                            ),
                        );
                    } else {
                        st.trace(
                            "user",
                            format!(
                                "{operation} budget ({what}) via operator-{replica} -> refused ({code}): {message}"
                            ),
                        );
                    }
                    return;
                }
            }
        }
        tokio::time::sleep(r.millis(1_000, 2_000)).await;
    }
}
