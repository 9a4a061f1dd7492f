//! The operator replicas of the drains worlds serving `/admission/pod-eviction` through the real webhook router: each
//! with the real budget cache fed by listing the simulated API and its own in-process state, lost on a restart.
//! Every eviction verdict is the real webhook's.

use crate::environment::client::{BudgetFeed, SimCluster};
use crate::environment::eviction::WEBHOOK_TIMEOUT;
use crate::environment::store::SharedStore;
use crate::harness::webhook_servers::ServedCertificates;
use crate::oracle::activity::WorldEvent;
use crate::scenario::Scenario;
use crate::scenario::drains::Evictor;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use madsim::net::Endpoint;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router_with_zpdb, system_clock};
use rollout_operator::admission::server::{ServedCertificate, WebhookServerConfig};
use rollout_operator::cluster::{ApiError, LiveReads, PodAnnotations, StatefulSetAnnotations, ZoneTrackerStore};
use rollout_operator::ops::metrics::ZpdbMetrics;
use rollout_operator::pods::client::NoPodClient;
use rollout_operator::zpdb::Zpdb;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tower::ServiceExt;

/// The tag of admission calls from the API server to a replica (and of their answers).
pub(crate) const TAG_ADMIT: u64 = 2;

/// Operator replica processes count their incarnations from here (above the admissions of the prepare-downscale
/// worlds), each restart a new one.
pub const REPLICA_INCARNATION_BASE: u64 = 1 << 41;

/// `-zpdb.pod-ready-annotation-patch-timeout` (the operator's default).
pub(crate) const READY_TIME_PATCH_TIMEOUT: Duration = Duration::from_secs(5);

/// Where operator replica `i` serves its webhooks.
pub fn replica_address(i: usize) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 10 + i as u8], 8443))
}

pub fn replica_ip(i: usize) -> IpAddr {
    replica_address(i).ip()
}

/// An admission call from the API server to a replica: the AdmissionReview as sent over HTTP, and the call's
/// number (its answer carries it back).
pub(crate) struct AdmitRequest {
    pub(crate) call: u64,
    /// The webhook's path: `/admission/pod-eviction` or `/admission/zpdb-validation`.
    pub(crate) path: &'static str,
    pub(crate) body: Vec<u8>,
}

/// A replica's answer: the response body, and how many writes the admission made (a dry run must make none).
pub(crate) struct AdmitAnswer {
    pub(crate) call: u64,
    pub(crate) body: Result<Vec<u8>, String>,
    pub(crate) writes: u32,
}

/// The cluster port one admission uses: the replica's client, counting the admission's writes, and (for
/// [`Evictor::NoSecondRead`]) answering every pod and StatefulSet list after the first with the first one's result
/// (intents may be kept on either).
#[derive(Clone)]
pub(crate) struct AdmissionClient {
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

/// The certificate world's drains: the operator's webhook server configuration from the deployment's flags, and
/// what each eviction replica serves.
#[derive(Clone)]
pub struct EvictionTls {
    pub config: WebhookServerConfig,
    pub served: ServedCertificates,
}

impl EvictionTls {
    /// The certificate world's, for the eviction replicas whose certificates `served` holds.
    pub fn of(sc: &Scenario, served: Option<&ServedCertificates>) -> Option<Self> {
        let (certificates, served) = (sc.certificates?, served?.clone());
        Some(EvictionTls { config: crate::harness::webhook_servers::server_config(sc, certificates), served })
    }

    /// The certificate start of a process of replica `replica` over its client `api` (kept for as long as the
    /// process runs).
    pub async fn start(&self, store: &SharedStore, replica: usize, api: &SimCluster) -> ServedCertificate {
        let connect = || {
            let api = api.clone();
            async move { Ok(api) }
        };
        crate::harness::webhook_servers::start_serving(replica, store, &self.served, &self.config, connect).await
    }
}

/// One operator replica process: in the certificate world its certificate start first (the Secret, renewal, CA
/// injection), then the budget cache fed by the real watch task over the simulated API (loading until it lists
/// them: evictions are denied with 429 meanwhile), the real `grafana.com/ready-time` tracker (as the operator
/// always runs it), and the webhook router serving each admission the API server sends. Its in-process
/// serialisation state lives as long as the process.
pub async fn serve_replica(
    store: SharedStore,
    replica: usize,
    incarnation: u64,
    evictor: Evictor,
    feed: BudgetFeed,
    tls: Option<EvictionTls>,
) {
    {
        let mut st = store.lock().unwrap();
        st.trace(&replica_process(replica, incarnation), "process started");
        st.oracle.activity.happened(WorldEvent::ReplicaStarted { replica, runs_controller: false });
    }
    let api = SimCluster::connect_operator(incarnation, feed).await.expect("bind operator replica endpoint");
    let _certificate = match &tls {
        Some(tls) => Some(tls.start(&store, replica, &api).await),
        None => None,
    };
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
pub(crate) async fn admit(
    api: SimCluster,
    zpdb: Zpdb,
    evictor: Evictor,
    path: &'static str,
    body: Vec<u8>,
) -> AdmitAnswer {
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
            settings: WebhookSettings::new(
                crate::environment::objects::NAMESPACE,
                "cluster.local.",
                None,
                WEBHOOK_TIMEOUT,
            ),
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
