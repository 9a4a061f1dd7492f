//! The API server node: serves the operator's requests (request/response datagrams, so message loss can drop either
//! half) and its watches (one reliable, ordered connection per watch, like a watch over HTTP: a partition stalls
//! it, a restart or a server-side timeout ends it). The node keeps nothing: the store survives its restarts, the
//! watches do not.

pub mod ops;
pub mod rbac;
pub mod watch;

use crate::Kind;
use crate::environment::apiserver::ops::serve_op;
use crate::environment::apiserver::watch::serve_watch;
use crate::environment::store::{Obj, SharedStore};
use crate::oracle::activity;
use crate::oracle::checker::Knowledge;
use crate::rng::SimRng;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use madsim::net::Endpoint;
use rollout_operator::cluster::{ApiError, ApiResourceRef, Preconditions, WebhookConfiguration, WebhookKind};
use rollout_operator::kube::reference_deployments::Grants;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The incarnation the user's actor (standing in for the prepare-downscale webhook's record claims) sends with its
/// requests; controller processes count from 1.
pub const WEBHOOK_INCARNATION: u64 = 0;

/// Incarnations from this one up are single admissions served by the real prepare-downscale webhook router (one
/// client per admission, so the API server can tell which admission its live reads belong to).
pub const ADMISSION_INCARNATION_BASE: u64 = 1 << 40;

/// The incarnations of the node-drain actor's clients (one per drain), below the admissions' and far above any
/// controller process's.
pub const DRAIN_INCARNATION_BASE: u64 = 1 << 39;

/// The generator of which committed writes lose their answer (`Scenario::lost_answers`), apart from the run's.
pub const LOST_ANSWERS_STREAM: u64 = 0x6c6f_7374_616e_7377;

/// The tag API requests are sent with; replies use the tag the client chose.
pub const TAG_API: u64 = 1;

pub fn address() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 6443))
}

pub enum Op {
    DeletePod {
        name: String,
        preconditions: Preconditions,
    },
    UpdateStatus {
        statefulset: Box<StatefulSet>,
    },
    GetConfigMap {
        name: String,
    },
    CreateConfigMap {
        config_map: Box<ConfigMap>,
    },
    ReplaceConfigMap {
        config_map: Box<ConfigMap>,
    },
    PatchReplicas {
        name: String,
        replicas: u32,
        resource_version: String,
        annotations: std::collections::BTreeMap<String, String>,
    },
    PatchAnnotations {
        name: String,
        resource_version: String,
        annotations: std::collections::BTreeMap<String, String>,
    },
    /// A merge patch of a StatefulSet's annotations (`None` removes), without precondition.
    MergeStatefulSetAnnotations {
        name: String,
        changes: std::collections::BTreeMap<String, Option<String>>,
    },
    Discover {
        group: String,
        kind: String,
    },
    GetScale {
        plural: String,
        name: String,
    },
    PatchResourceStatus {
        plural: String,
        name: String,
        patch: serde_json::Value,
    },
    GetStatefulSet {
        name: String,
    },
    ListStatefulSets {
        selector: String,
    },
    ListPods {
        selector: String,
    },
    GetPod {
        name: String,
    },
    PatchPodAnnotations {
        name: String,
        uid: String,
        changes: std::collections::BTreeMap<String, Option<String>>,
    },
    GetSecret {
        name: String,
    },
    GetDeployment {
        name: String,
    },
    GetReplicaSet {
        name: String,
    },
    CreateSecret {
        secret: Box<Secret>,
    },
    ReplaceSecret {
        secret: Box<Secret>,
    },
    CreateEvent {
        event: Box<k8s_openapi::api::events::v1::Event>,
    },
    PatchEvent {
        name: String,
        patch: serde_json::Value,
    },
    /// `GET leases/{name}` (leader election).
    GetLease {
        name: String,
    },
    /// `POST leases`.
    CreateLease {
        lease: Box<Lease>,
    },
    /// `PUT leases/{name}`, conditional on its resourceVersion.
    ReplaceLease {
        lease: Box<Lease>,
    },
    /// `PATCH {validating,mutating}webhookconfigurations/{name}` (the CA injector's), a JSON merge patch.
    PatchWebhookConfiguration {
        kind: WebhookKind,
        name: String,
        patch: serde_json::Value,
    },
    /// `LIST zoneawarepoddisruptionbudgets` (the operator's budget watch).
    ListBudgets,
    /// `LIST rollouthealthchecks` (the operator's health-check feed).
    ListHealthChecks,
    /// `CREATE pods/{name}/eviction` (a node drain's): admitted by the pod-eviction webhook, then the pod deleted.
    /// `dry_run` is the request's `dryRun`, `options_dry_run` the Eviction's `deleteOptions.dryRun`.
    Evict {
        name: String,
        dry_run: bool,
        options_dry_run: bool,
    },
}

impl Op {
    /// What the request asks, and about which object, as the activity ledger records it.
    pub fn served_as(&self) -> (activity::Request, String) {
        use activity::Request as R;
        let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| m.name.clone().unwrap_or_default();
        match self {
            Op::DeletePod { name, .. } => (R::DeletePod, name.clone()),
            Op::UpdateStatus { statefulset } => (R::UpdateStatus, name(&statefulset.metadata)),
            Op::CreateConfigMap { config_map } => (R::CreateConfigMap, name(&config_map.metadata)),
            Op::ReplaceConfigMap { config_map } => (R::ReplaceConfigMap, name(&config_map.metadata)),
            Op::PatchReplicas { name, .. } => (R::PatchReplicas, name.clone()),
            Op::PatchAnnotations { name, .. } | Op::MergeStatefulSetAnnotations { name, .. } => {
                (R::PatchStatefulSetAnnotations, name.clone())
            }
            Op::PatchPodAnnotations { name, .. } => (R::PatchPodAnnotations, name.clone()),
            Op::PatchResourceStatus { plural, name, .. } => (R::PatchResourceStatus, format!("{plural}/{name}")),
            Op::Evict { name, dry_run, options_dry_run } => match *dry_run || *options_dry_run {
                true => (R::DryRunEvict, name.clone()),
                false => (R::Evict, name.clone()),
            },
            Op::CreateSecret { secret } | Op::ReplaceSecret { secret } => (R::OtherWrite, name(&secret.metadata)),
            Op::CreateEvent { event } => (R::CreateEvent, name(&event.metadata)),
            Op::CreateLease { lease } | Op::ReplaceLease { lease } => (R::OtherWrite, name(&lease.metadata)),
            Op::PatchEvent { name, .. } | Op::PatchWebhookConfiguration { name, .. } => (R::OtherWrite, name.clone()),
            Op::GetConfigMap { name } => (R::GetConfigMap, name.clone()),
            Op::GetScale { name, .. }
            | Op::GetStatefulSet { name }
            | Op::GetPod { name }
            | Op::GetSecret { name }
            | Op::GetDeployment { name }
            | Op::GetReplicaSet { name }
            | Op::GetLease { name } => (R::Read, name.clone()),
            Op::Discover { kind, .. } => (R::Read, kind.clone()),
            Op::ListStatefulSets { .. } => (R::Read, "statefulsets".to_string()),
            Op::ListPods { .. } => (R::Read, "pods".to_string()),
            Op::ListBudgets => (R::Read, "zoneawarepoddisruptionbudgets".to_string()),
            Op::ListHealthChecks => (R::Read, "rollouthealthchecks".to_string()),
        }
    }
}

/// Who sent a request, from its client's incarnation.
pub(crate) fn sender_of(client: u64) -> activity::Sender {
    if client == WEBHOOK_INCARNATION || client >= ADMISSION_INCARNATION_BASE {
        activity::Sender::Webhook
    } else if client >= DRAIN_INCARNATION_BASE {
        activity::Sender::Drain
    } else {
        activity::Sender::Operator
    }
}

pub struct Request {
    pub reply_tag: u64,
    /// Also names the client: its incarnation is unique in a run (a controller process, an admission, the user's
    /// actor), and the answer carries it back.
    pub knowledge: Knowledge,
    pub op: Op,
    /// When the client handed the request to the network (after the caller's last check, such as the leader gate):
    /// a freeze of the process between this and the request leaving it is told apart from network delay.
    pub handed_at: Instant,
    /// What the client's process saw (bookkeeping for the server's judgements, not content).
    pub log: Arc<crate::environment::client::ProcessLog>,
}

/// A reply on its way back, sent with the request's `reply_tag`, naming the client it answers. A new process binds
/// the address of the one it replaces and numbers its requests from the same first tag, so a late reply to the dead
/// process would otherwise pass for the reply to the new one's request; the client drops it instead, as a reply on
/// a dead process's connection is lost over HTTP.
pub struct Answer {
    /// The incarnation of the client that sent the request.
    pub client: u64,
    pub reply: Reply,
}

impl Reply {
    /// The error's kind when the request failed.
    pub fn failure(&self) -> Option<&'static str> {
        fn kind<T>(r: &Result<T, ApiError>) -> Option<&'static str> {
            r.as_ref().err().map(ApiError::kind)
        }
        match self {
            Reply::Deleted(r) | Reply::Done(r) => kind(r),
            Reply::Patched(r) => kind(r),
            Reply::ConfigMap(r) => kind(r),
            Reply::Discovered(r) => kind(r),
            Reply::Value(r) => kind(r),
            Reply::StatefulSet(r) => kind(r),
            Reply::StatefulSets(r) => kind(r),
            Reply::Pods(r) => kind(r),
            Reply::Pod(r) => kind(r),
            Reply::Secret(r) => kind(r),
            Reply::Deployment(r) => kind(r),
            Reply::ReplicaSet(r) => kind(r),
            Reply::Values(r) => kind(r),
            Reply::Lease(r) => kind(r),
            Reply::Webhook(r) => kind(r),
        }
    }
}

pub enum Reply {
    Deleted(Result<(), ApiError>),
    Patched(Result<Box<StatefulSet>, ApiError>),
    ConfigMap(Result<Option<Box<ConfigMap>>, ApiError>),
    Discovered(Result<Vec<ApiResourceRef>, ApiError>),
    Value(Result<serde_json::Value, ApiError>),
    Done(Result<(), ApiError>),
    StatefulSet(Result<Option<Box<StatefulSet>>, ApiError>),
    StatefulSets(Result<Vec<StatefulSet>, ApiError>),
    Pods(Result<Vec<Pod>, ApiError>),
    Pod(Result<Option<Box<Pod>>, ApiError>),
    Secret(Result<Option<Box<Secret>>, ApiError>),
    Deployment(Result<Option<Box<Deployment>>, ApiError>),
    ReplicaSet(Result<Option<Box<ReplicaSet>>, ApiError>),
    Values(Result<Vec<serde_json::Value>, ApiError>),
    Lease(Result<Option<Box<Lease>>, ApiError>),
    Webhook(Result<Box<WebhookConfiguration>, ApiError>),
}

pub struct WatchRequest {
    pub kind: Kind,
    /// Resume after this resourceVersion; `None` lists first.
    pub resume: Option<u64>,
}

pub enum WatchMsg {
    /// "410 Gone: too old resource version": the client must relist.
    Gone,
    List {
        rv: u64,
        items: Vec<Obj>,
    },
    Event {
        rv: u64,
        deleted: bool,
        obj: Obj,
    },
    /// Nothing of this kind changed up to `rv`.
    Bookmark {
        rv: u64,
    },
    /// The watch is not allowed (RBAC): the error, as the client's stream reports it.
    Refused(ApiError),
}

/// What the fault injector changes while the run goes on.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// Delay between a commit and its watch event leaving the server, in milliseconds.
    pub event_delay_ms: (u64, u64),
    /// Extra time the server takes to answer a request, in milliseconds.
    pub api_delay_ms: (u64, u64),
    /// How long the server keeps a watch open before ending it (clients resume), in seconds.
    pub watch_lifetime_s: (u64, u64),
    /// Chance that a resuming watch is told its resourceVersion is too old anyway.
    pub gone_chance: f64,
    /// Chance that the controller process is killed right after one of its deletions commits.
    pub crash_after_delete: f64,
    /// Chance that the answer to a controller's committed write is dropped (`Scenario::lost_answers`).
    pub lost_answer_chance: f64,
    /// The HA world: chance per request of a pass of the leader's process (a live read or a write) that the
    /// process is frozen with the request in flight, for about the lease.
    pub pause_in_flight: f64,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            event_delay_ms: (1, 50),
            api_delay_ms: (1, 20),
            watch_lifetime_s: (60, 600),
            gone_chance: 0.0,
            crash_after_delete: 0.0,
            pause_in_flight: 0.0,
            lost_answer_chance: 0.0,
        }
    }
}

#[derive(Clone)]
pub struct ServerEnv {
    pub store: SharedStore,
    pub knobs: Arc<Mutex<Knobs>>,
    pub rng: Arc<Mutex<SimRng>>,
    /// Which committed writes lose their answer: a stream of its own, drawn only while answers are being lost.
    pub lost_answers: Arc<Mutex<SimRng>>,
    /// Told (with the writer's process) when a controller deletion committed and the controller should crash now.
    pub crash_tx: tokio::sync::mpsc::UnboundedSender<u64>,
    /// The HA world: told (with the process) when the leader's process should be frozen with a request in flight.
    pub pause_tx: tokio::sync::mpsc::UnboundedSender<u64>,

    /// What the operator's ServiceAccount is granted (a real deployment's RBAC); `None`: everything.
    pub grants: Option<Arc<Grants>>,
    /// Where the operator replicas serve `/admission/pod-eviction` (empty: no eviction webhook is configured).
    pub eviction_webhooks: Vec<SocketAddr>,
    /// The certificate world's drains: what each eviction replica serves; a call goes only to a replica serving a
    /// certificate, through TLS that verifies against the pod-eviction configuration's CA bundle.
    pub eviction_certificates: Option<crate::harness::webhook_servers::ServedCertificates>,
}

impl ServerEnv {
    fn sample_ms(&self, range: (u64, u64)) -> Duration {
        self.rng.lock().unwrap().millis(range.0, range.1.max(range.0 + 1))
    }
}

/// The API server process: runs until its node is killed.
pub async fn serve(env: ServerEnv) {
    let ep = Endpoint::bind(address()).await.expect("bind API server address");
    {
        let mut st = env.store.lock().unwrap();
        st.apiserver_down = false;
        st.trace("apiserver", "started");
    }
    let watch_ep = ep.clone();
    let watch_env = env.clone();
    tokio::spawn(async move {
        while let Ok((tx, rx, _)) = watch_ep.accept1().await {
            tokio::spawn(serve_watch(watch_env.clone(), tx, rx));
        }
    });
    while let Ok((payload, from)) = ep.recv_from_raw(TAG_API).await {
        let Ok(req) = payload.downcast::<Request>() else { continue };
        let env = env.clone();
        let ep = ep.clone();
        tokio::spawn(async move {
            let delay = {
                let range = env.knobs.lock().unwrap().api_delay_ms;
                env.sample_ms(range)
            };
            tokio::time::sleep(delay).await;
            let Request { reply_tag: tag, knowledge, op, handed_at, log } = *req;
            let client = knowledge.incarnation;
            let write = (sender_of(client) == activity::Sender::Operator).then(|| controller_write(&op)).flatten();
            let (request, object) = op.served_as();
            let before = env.store.lock().unwrap().rv;
            // An eviction waits for its admission (a call to an operator replica), so it is served apart.
            let reply = match op {
                Op::Evict { name, dry_run, options_dry_run } => {
                    crate::environment::eviction::evict(&env, &name, dry_run, options_dry_run).await
                }
                op => handle(&env, Request { reply_tag: tag, knowledge, op, handed_at, log }),
            };
            let failure = reply.failure();
            env.store.lock().unwrap().oracle.activity.serve(activity::Served {
                sender: sender_of(client),
                request,
                object,
                failure,
            });
            if let Some(what) = write
                && answer_lost(&env, before)
            {
                env.store.lock().unwrap().trace("apiserver", format!("{what} committed; its answer is lost"));
                return;
            }
            let _ = ep.send_to_raw(from, tag, Box::new(Answer { client, reply })).await;
        });
    }
}

/// Whether the answer to a write that committed (the store moved past `before`) is dropped.
fn answer_lost(env: &ServerEnv, before: u64) -> bool {
    let chance = env.knobs.lock().unwrap().lost_answer_chance;
    chance > 0.0 && env.store.lock().unwrap().rv != before && env.lost_answers.lock().unwrap().chance(chance)
}

/// What a committed request of `op` writes for the controller's role (the writes only the leader may make), named
/// for the judgement; `None` for reads, Lease requests (the election's own) and Events (reports, not actions).
fn controller_write(op: &Op) -> Option<String> {
    Some(match op {
        Op::DeletePod { name, .. } => format!("DELETE pod {name}"),
        Op::UpdateStatus { statefulset } => {
            format!("PUT {}/status", statefulset.metadata.name.as_deref().unwrap_or_default())
        }
        Op::CreateConfigMap { config_map } | Op::ReplaceConfigMap { config_map } => {
            format!("write of configmap {}", config_map.metadata.name.as_deref().unwrap_or_default())
        }
        Op::PatchReplicas { name, replicas, .. } => format!("PATCH {name} replicas={replicas}"),
        Op::PatchAnnotations { name, .. } | Op::MergeStatefulSetAnnotations { name, .. } => {
            format!("PATCH {name} annotations")
        }
        Op::PatchPodAnnotations { name, .. } => format!("PATCH pod {name} annotations"),
        Op::PatchResourceStatus { plural, name, .. } => format!("PATCH {plural}/{name}/status"),
        // The certificate Secret is not among them: every replica's webhook server keeps it, leader or not.
        _ => return None,
    })
}

/// The controller's own part of a reaction: from its consuming the watch event of the commit that gave it work to
/// its handing this write to the network.
fn own_part(req: &Request, waited: Option<crate::oracle::reaction::Wait>) -> Option<Duration> {
    let waited = waited?;
    let consumed = req.log.consumed_at(waited.kind, waited.rv)?;
    Some(req.handed_at.saturating_duration_since(consumed))
}

/// Serves one request; in the HA world, a committed write of a replica's controller is judged against the Lease.
fn handle(env: &ServerEnv, req: Request) -> Reply {
    let incarnation = req.knowledge.incarnation;
    let write = controller_write(&req.op);
    let (before, handed_at) = {
        let store = env.store.lock().unwrap();
        (store.rv, store.since_start(req.handed_at))
    };
    let pause_chance = env.knobs.lock().unwrap().pause_in_flight;
    if pause_chance > 0.0 {
        pause_in_flight(env, incarnation, &req.op, write.is_some(), pause_chance);
    }
    let reply = serve_op(env, req);
    let mut store = env.store.lock().unwrap();
    // Only what committed (a new resourceVersion): a refused write, or one that changed nothing (a deletion of a
    // pod already terminating), wrote nothing a second leader could clash with.
    if let Some(what) = write
        && store.rv != before
    {
        let at = store.elapsed();
        if let Some(v) = store.oracle.ha.judge_write(at, incarnation, &what, handed_at) {
            store.trace("checker", format!("VIOLATION {} at {:.3}s: {}", v.invariant, at.as_secs_f64(), v.detail));
            store.oracle.checker.violations.push(v);
        }
    }
    reply
}

/// The HA world's freeze at the worst moment: the leader's process, with a request of its pass in flight (a live
/// read, or a write), is paused by the world for about the lease, so its pass goes on from the answer after its
/// write window ended, and often after another replica took over. The election's own Lease requests are not
/// passes.
fn pause_in_flight(env: &ServerEnv, incarnation: u64, op: &Op, write: bool, chance: f64) {
    let pass_read =
        matches!(op, Op::GetStatefulSet { .. } | Op::ListPods { .. } | Op::GetPod { .. } | Op::GetConfigMap { .. });
    if !(pass_read || write) {
        return;
    }
    // Mostly at reads: a pass goes on to write after its read, while a write is usually its pass's last request.
    let chance = if pass_read { chance } else { chance / 6.0 };
    let holder = env.store.lock().unwrap().oracle.ha.holder_process() == Some(incarnation);
    if holder && env.rng.lock().unwrap().chance(chance) {
        let _ = env.pause_tx.send(incarnation);
    }
}
