//! The operator replicas that serve the prepare-downscale webhook in the webhook worlds, and the certificate
//! start every webhook-serving replica runs in the certificate world (these and the drains worlds' eviction
//! replicas). There each start of a replica's process runs the operator's own certificate start
//! (`rollout_operator::admission::server::start_certificate`, configured from the deployment's flags through the
//! operator's own flag parser): the Secret, renewal, CA injection. What a replica serves is kept where the API
//! server's TLS check finds it; a replica whose certificate start failed exits and is started again after a
//! back-off, as the kubelet restarts a crashed container, and is no endpoint of the Service meanwhile.

use crate::environment::client::SimCluster;
use crate::environment::objects::NAMESPACE;
use crate::environment::store::SharedStore;
use crate::environment::tls::{
    installed_configurations, pod_eviction_configuration, prepare_downscale_configuration, service_dns_name,
    verify_served,
};
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::scenario::certificates::Certificates;
use crate::scenario::deployment::ReferenceDeployment;
use madsim::runtime::{Handle, NodeHandle};
use rollout_operator::admission::server::{ServedCertificate, WebhookServerConfig, start_certificate};
use rollout_operator::cli::{Command, parse};
use rollout_operator::cluster::WebhookKind;
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::tls::listener::SwappableCert;
use std::collections::BTreeMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Seeds the replicas' restarts, so their draws move nothing else.
const RESTARTS_STREAM: u64 = 0x6365_7274_7321_2121;
/// How long a replica whose certificate start failed stays down (the kubelet's first back-offs).
const CRASH_BACKOFF: Duration = Duration::from_secs(10);

/// The replicas' nodes and, in the certificate world, what each serves.
pub(crate) struct WebhookServers {
    pub nodes: Arc<Vec<NodeHandle>>,
    pub served: Option<ServedCertificates>,
}

/// The certificate each replica of one set serves now, by replica index (a replica without one is no endpoint),
/// and the webhook configuration whose CA bundle the API server's calls to them verify against.
#[derive(Clone)]
pub struct ServedCertificates {
    replicas: Arc<Mutex<BTreeMap<usize, Arc<SwappableCert>>>>,
    configuration: (WebhookKind, String),
    /// How the oracle names replica `i`.
    name: fn(usize) -> String,
}

impl ServedCertificates {
    /// The prepare-downscale replicas (`operator-<i>`), called through the mutating configuration.
    pub fn prepare_downscale() -> Self {
        ServedCertificates {
            replicas: Arc::default(),
            configuration: (WebhookKind::Mutating, prepare_downscale_configuration()),
            name: |i| format!("operator-{i}"),
        }
    }

    /// The drains worlds' eviction replicas (`operator-replica-<i>`), called through the pod-eviction validating
    /// configuration.
    pub fn pod_eviction() -> Self {
        ServedCertificates {
            replicas: Arc::default(),
            configuration: (WebhookKind::Validating, pod_eviction_configuration()),
            name: |i| format!("operator-replica-{i}"),
        }
    }

    /// The replicas the Service routes to.
    pub fn serving(&self) -> Vec<usize> {
        self.replicas.lock().unwrap().keys().copied().collect()
    }

    /// Where the Service sends a call: a replica serving a certificate (`pick(n)` draws an index below `n`), and the
    /// API server's refusal of the call when none serves or the replica's certificate fails the TLS check.
    pub fn route(&self, store: &SharedStore, pick: impl FnOnce(u64) -> u64) -> (usize, Option<String>) {
        let serving = self.serving();
        if serving.is_empty() {
            let refusal = format!(
                "failed calling webhook \"{}.grafana.com\": no endpoints available for service \"{}\"",
                self.configuration.1,
                crate::environment::tls::SERVICE
            );
            return (0, Some(refusal));
        }
        let i = serving[pick(serving.len() as u64) as usize];
        (i, self.check_call(store, i).err())
    }

    /// The API server's TLS check of a call to replica `i` with its configuration's CA bundle as it is now, judged
    /// by the oracle; the error is the call's failure as the API server reports it.
    pub fn check_call(&self, store: &SharedStore, i: usize) -> Result<(), String> {
        let chain = self.replicas.lock().unwrap().get(&i).map(|c| c.served_chain());
        let mut guard = store.lock().unwrap();
        let st = &mut *guard;
        let configuration = self.configuration.1.clone();
        let bundle = st
            .webhook_configurations
            .get(&self.configuration)
            .and_then(|c| c.ca_bundles().into_iter().next())
            .and_then(|(_, bundle)| bundle);
        let verdict = match chain {
            Some(chain) => verify_served(&chain, bundle.as_deref(), &service_dns_name(), jiff::Timestamp::now()),
            None => Err("the replica serves no certificate".to_string()),
        };
        let at = st.elapsed();
        let replica = (self.name)(i);
        st.oracle.certificates.judge_call(
            &mut st.oracle.checker,
            at,
            &replica,
            verdict.as_ref().err().map(String::as_str),
        );
        verdict.map_err(|reason| format!("failed calling webhook \"{configuration}.grafana.com\": tls: {reason}"))
    }
}

/// The flags the deployment runs its replicas with, as far as the certificate goes, with `validity`.
fn certificate_flags(deployment: Option<ReferenceDeployment>, validity: Duration) -> Vec<String> {
    let mut flags = vec![
        "rollout-operator".to_string(),
        format!("-kubernetes.namespace={NAMESPACE}"),
        "-server-tls.enabled=true".to_string(),
        format!("-server-tls.self-signed-cert.expiration={}s", validity.as_secs().max(1)),
    ];
    // The Helm charts name the Secret `certificate` and the DNS name explicitly; the jsonnet leaves both default.
    if matches!(
        deployment,
        Some(ReferenceDeployment::HelmChart | ReferenceDeployment::HelmOld | ReferenceDeployment::NoPatch)
    ) {
        flags.push("-server-tls.self-signed-cert.secret-name=certificate".to_string());
        flags.push(format!("-server-tls.self-signed-cert.dns-name={}", service_dns_name()));
    }
    flags
}

/// The webhook server configuration the operator's flag parser makes of the deployment's flags.
pub(crate) fn server_config(sc: &Scenario, certificates: Certificates) -> WebhookServerConfig {
    match parse(certificate_flags(sc.deployment, certificates.validity)) {
        Ok(Command::Run(run)) => run.flags.webhook_server_config(),
        other => panic!("the certificate world's flags do not parse: {other:?}"),
    }
}

/// Starts the replicas' nodes; in the certificate world, installs the webhook configurations first and has each
/// replica process start its certificate, and with `restarts`, restarts each replica one to three times during
/// the fault phase. `next` numbers the replicas' clients among the admissions'.
pub(crate) fn start(store: &SharedStore, sc: &Scenario, seed: u64, next: &Arc<AtomicU64>) -> WebhookServers {
    let handle = Handle::current();
    let ip = |i: usize| IpAddr::from([10, 0, 0, 4 + i as u8]);
    let Some(certificates) = sc.certificates else {
        let nodes = (0..2).map(|i| handle.create_node().name(format!("operator-{i}")).ip(ip(i)).build()).collect();
        return WebhookServers { nodes: Arc::new(nodes), served: None };
    };
    for configuration in installed_configurations() {
        store.lock().unwrap().put_webhook_configuration(configuration);
    }
    let config = server_config(sc, certificates);
    let served = ServedCertificates::prepare_downscale();
    let nodes: Vec<NodeHandle> = (0..2)
        .map(|i| {
            let (store, served, next, config) = (store.clone(), served.clone(), next.clone(), config.clone());
            handle
                .create_node()
                .name(format!("operator-{i}"))
                .ip(ip(i))
                .init(move || {
                    let (store, served, next, config) = (store.clone(), served.clone(), next.clone(), config.clone());
                    async move { run_replica(i, store, served, next, config).await }
                })
                .build()
        })
        .collect();
    if certificates.restarts {
        let mut rng = SimRng::new(seed ^ RESTARTS_STREAM);
        let mut restarts: Vec<(Duration, usize)> = Vec::new();
        for i in 0..nodes.len() {
            for _ in 0..rng.range(1..4) {
                restarts.push((rng.millis(5_000, sc.fault_phase.as_millis() as u64), i));
            }
        }
        restarts.sort_unstable();
        let (ids, store) = (nodes.iter().map(NodeHandle::id).collect::<Vec<_>>(), store.clone());
        tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            for (at, i) in restarts {
                tokio::time::sleep_until(start + at).await;
                store.lock().unwrap().trace(&format!("operator-{i}"), "process crashes, restarted at once");
                crate::harness::restart(ids[i]);
            }
        });
    }
    WebhookServers { nodes: Arc::new(nodes), served: Some(served) }
}

/// One process of replica `i`: its certificate start, then serving until it is killed.
async fn run_replica(
    i: usize,
    store: SharedStore,
    served: ServedCertificates,
    next: Arc<AtomicU64>,
    config: WebhookServerConfig,
) {
    let connect = || {
        let id = next.fetch_add(1, Ordering::Relaxed);
        async move { SimCluster::connect(id).await.map_err(|e| e.to_string()) }
    };
    // The renewal and injection tasks run as long as the process.
    let _certificate = start_serving(i, &store, &served, &config, connect).await;
    std::future::pending::<()>().await;
}

/// The certificate start of one process of replica `i` (the operator's own, over the client `connect` gives):
/// while it fails, the process exits and is started again after the kubelet's back-off, a new client each time,
/// and is no endpoint meanwhile; once started, replica `i` serves its certificate. The caller keeps what it returns
/// (the renewal and injection tasks) as long as the process runs.
pub(crate) async fn start_serving<F, C>(
    i: usize,
    store: &SharedStore,
    served: &ServedCertificates,
    config: &WebhookServerConfig,
    mut connect: F,
) -> ServedCertificate
where
    F: FnMut() -> C,
    C: Future<Output = Result<SimCluster, String>>,
{
    served.replicas.lock().unwrap().remove(&i);
    let who = (served.name)(i);
    loop {
        let started = match connect().await {
            Ok(api) => start_certificate(config, api, &Arc::new(Metrics::new())).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        match started {
            Ok(certificate) => {
                store.lock().unwrap().trace(&who, "serving the webhooks with its certificate");
                served.replicas.lock().unwrap().insert(i, certificate.cert.clone());
                return certificate;
            }
            Err(e) => {
                let line = format!("the webhook server did not start: {e}; the process exits, restarted in 10 s");
                store.lock().unwrap().trace(&who, line);
                tokio::time::sleep(CRASH_BACKOFF).await;
            }
        }
    }
}
