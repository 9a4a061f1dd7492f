//! The API server node: serves the controller's writes (request/response datagrams, so message loss can drop either
//! half) and its watches (one reliable, ordered connection per watch, like a watch over HTTP: a partition stalls
//! it, a restart or a server-side timeout ends it). Watch events reach a watcher after a configurable delay, in
//! order; a watch that resumes from a compacted (or unluckily old) resourceVersion is told "too old resource
//! version" and the client relists. The node keeps nothing: the store survives its restarts, the watches do not.

use crate::Kind;
use crate::checker::Knowledge;
use crate::rng::SimRng;
use crate::store::{LogEntry, Obj, SharedStore};
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use madsim::net::Endpoint;
use rollout_operator::cluster::{ApiError, ApiResourceRef, Preconditions};
use rollout_operator::kube::rbac::Access;
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
    /// `LIST zoneawarepoddisruptionbudgets` (the operator's budget watch).
    ListBudgets,
    /// `CREATE pods/{name}/eviction` (a node drain's): admitted by the pod-eviction webhook, then the pod deleted.
    /// `dry_run` is the request's `dryRun`, `options_dry_run` the Eviction's `deleteOptions.dryRun`.
    Evict {
        name: String,
        dry_run: bool,
        options_dry_run: bool,
    },
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
    pub log: Arc<crate::client::ProcessLog>,
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
        }
    }
}

#[derive(Clone)]
pub struct ServerEnv {
    pub store: SharedStore,
    pub knobs: Arc<Mutex<Knobs>>,
    pub rng: Arc<Mutex<SimRng>>,
    /// Told (with the writer's process) when a controller deletion committed and the controller should crash now.
    pub crash_tx: tokio::sync::mpsc::UnboundedSender<u64>,
    /// The HA world: told (with the process) when the leader's process should be frozen with a request in flight.
    pub pause_tx: tokio::sync::mpsc::UnboundedSender<u64>,

    /// What the operator's ServiceAccount is granted (a real deployment's RBAC); `None`: everything.
    pub grants: Option<Arc<Grants>>,
    /// Where the operator replicas serve `/admission/pod-eviction` (empty: no eviction webhook is configured).
    pub eviction_webhooks: Vec<SocketAddr>,
}

impl ServerEnv {
    fn sample_ms(&self, range: (u64, u64)) -> Duration {
        self.rng.lock().unwrap().millis(range.0, range.1.max(range.0 + 1))
    }
}

/// The API server process: runs until its node is killed.
pub async fn serve(env: ServerEnv) {
    let ep = Endpoint::bind(address()).await.expect("bind API server address");
    env.store.lock().unwrap().trace("apiserver", "started");
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
            // An eviction waits for its admission (a call to an operator replica), so it is served apart.
            let reply = match op {
                Op::Evict { name, dry_run, options_dry_run } => {
                    crate::drains::evict(&env, &name, dry_run, options_dry_run).await
                }
                op => handle(&env, Request { reply_tag: tag, knowledge, op, handed_at, log }),
            };
            let _ = ep.send_to_raw(from, tag, Box::new(Answer { client, reply })).await;
        });
    }
}

/// The permission `op` needs, as the real API server's authorizer sees it: API group, resource (with subresource),
/// verb, object name; and whether the resource is cluster-scoped. `None`: not subject to RBAC here (discovery).
fn access_of(op: &Op) -> Option<(Access, bool)> {
    let access = |group: &str, resource: &str, verb: &str, name: Option<&str>| {
        Some((
            Access {
                group: group.to_string(),
                resource: resource.to_string(),
                verb: verb.to_string(),
                resource_name: name.map(str::to_string),
            },
            false,
        ))
    };
    let name_of =
        |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| meta.name.clone().unwrap_or_default();
    match op {
        Op::DeletePod { name, .. } => access("", "pods", "delete", Some(name)),
        Op::UpdateStatus { statefulset } => {
            access("apps", "statefulsets/status", "update", Some(&name_of(&statefulset.metadata)))
        }
        Op::GetConfigMap { name } => access("", "configmaps", "get", Some(name)),
        // RBAC cannot restrict a create by name.
        Op::CreateConfigMap { .. } => access("", "configmaps", "create", None),
        Op::ReplaceConfigMap { config_map } => access("", "configmaps", "update", Some(&name_of(&config_map.metadata))),
        Op::PatchReplicas { name, .. }
        | Op::PatchAnnotations { name, .. }
        | Op::MergeStatefulSetAnnotations { name, .. } => access("apps", "statefulsets", "patch", Some(name)),
        Op::Discover { .. } => None,
        Op::GetScale { plural, name } => {
            access("rollout-operator.grafana.com", &format!("{plural}/scale"), "get", Some(name))
        }
        Op::PatchResourceStatus { plural, name, .. } => {
            access("rollout-operator.grafana.com", &format!("{plural}/status"), "patch", Some(name))
        }
        Op::GetStatefulSet { name } => access("apps", "statefulsets", "get", Some(name)),
        Op::ListStatefulSets { .. } => access("apps", "statefulsets", "list", None),
        Op::ListPods { .. } => access("", "pods", "list", None),
        Op::GetPod { name } => access("", "pods", "get", Some(name)),
        Op::PatchPodAnnotations { name, .. } => access("", "pods", "patch", Some(name)),
        Op::GetSecret { name } => access("", "secrets", "get", Some(name)),
        Op::GetDeployment { name } => access("apps", "deployments", "get", Some(name)),
        Op::GetReplicaSet { name } => access("apps", "replicasets", "get", Some(name)),
        Op::CreateSecret { .. } => access("", "secrets", "create", None),
        Op::ReplaceSecret { secret } => access("", "secrets", "update", Some(&name_of(&secret.metadata))),
        // RBAC cannot restrict a create by name.
        Op::CreateEvent { .. } => access("events.k8s.io", "events", "create", None),
        Op::PatchEvent { name, .. } => access("events.k8s.io", "events", "patch", Some(name)),
        Op::ListBudgets => access("rollout-operator.grafana.com", "zoneawarepoddisruptionbudgets", "list", None),
        Op::GetLease { name } => access("coordination.k8s.io", "leases", "get", Some(name)),
        // RBAC cannot restrict a create by name.
        Op::CreateLease { .. } => access("coordination.k8s.io", "leases", "create", None),
        Op::ReplaceLease { lease } => {
            access("coordination.k8s.io", "leases", "update", Some(&name_of(&lease.metadata)))
        }
        // The drain's own request: not the operator's ServiceAccount (the pod's deletion that follows is the API
        // server's own).
        Op::Evict { .. } => None,
    }
}

/// The controller's replica changes (leader/follower and mirror scaling, opt-in by annotations): refused, the
/// controller goes on rolling without them and asks again once a resync period later, in case the permission was
/// granted meanwhile.
pub(crate) const COORDINATED_SCALING: &str = "coordinated scaling";

/// Writes of the zone tracker's record (`-use-zone-tracker`, opt-in): refused (where RBAC grants only reads), the
/// controller stops claiming in it, rolls on without claims and claims again a resync period after its last refusal.
/// Only the controller's writes are probes: the prepare-downscale webhook asks at every admission it must claim,
/// and each refusal it meets is reported. Refused reads are reported too: the controller reads the record at every
/// pass even while its writes are refused, so as to see a downscale in progress the moment RBAC lets the webhook
/// claim one (a refused read still tells the process, see [`told_by_refusal`]).
pub(crate) const ZONE_TRACKER: &str = "zone tracker";

/// How long after its last refusal a process may ask for an optional feature again: its feature gate's retry period,
/// less a second for the timers' rounding.
const REPROBE_AFTER: Duration =
    rollout_operator::ops::feature_gate::RETRY_REFUSED_AFTER.saturating_sub(Duration::from_secs(1));

/// The optional feature a request serves, when a real deployment may refuse it and the operator then turns that
/// feature off through its feature gate, with one log line, and asks again only after the gate's retry period
/// (docs/install.md, "RBAC"): pod annotations, which the chart mimir-distributed pins does not grant (`patch pods`),
/// for ready-time stamps and for eviction intents; the controller's replica changes; the zone tracker's record
/// writes; Events. A refused request of a feature that left its
/// process before the process received a refusal of that feature is the probe the design allows (the process could
/// not know yet: an earlier refusal may have been lost on the way back); one sent after means the feature did not
/// turn itself off.
pub(crate) fn optional_probe(op: &Op) -> Option<&'static str> {
    if let Op::PatchReplicas { .. } = op {
        return Some(COORDINATED_SCALING);
    }
    if let Op::CreateEvent { .. } | Op::PatchEvent { .. } = op {
        return Some("events");
    }
    if let Op::CreateConfigMap { .. } | Op::ReplaceConfigMap { .. } = op {
        return Some(ZONE_TRACKER);
    }
    if let Op::MergeStatefulSetAnnotations { changes, .. } = op {
        let intents = changes.keys().any(|k| crate::checker::is_intent_key(k));
        return intents.then_some("eviction intents on statefulsets");
    }
    let Op::PatchPodAnnotations { changes, .. } = op else { return None };
    if changes.keys().any(|k| k == rollout_core::keys::READY_TIME) {
        Some("ready-time stamps")
    } else if changes.keys().any(|k| crate::checker::is_intent_key(k)) {
        Some("eviction intents")
    } else {
        None
    }
}

/// The feature whose refusal `op`'s process is told when `op` is refused: its optional feature, or, for a read of
/// the zone tracker's record, the tracker (a refused read tells the controller to stop writing the record too).
pub(crate) fn told_by_refusal(op: &Op) -> Option<&'static str> {
    optional_probe(op).or_else(|| matches!(op, Op::GetConfigMap { .. }).then_some(ZONE_TRACKER))
}

/// The real API server's answer to a request RBAC does not allow, in the variant `op` expects.
fn forbidden_reply(op: &Op, access: &Access) -> Reply {
    let on = access.resource_name.as_deref().map(|n| format!(" \"{n}\"")).unwrap_or_default();
    let err = ApiError::Forbidden(format!(
        "{}{on} is forbidden: User \"system:serviceaccount:{}:rollout-operator\" cannot {} resource \"{}\" in API group \"{}\"",
        access.resource,
        crate::objects::NAMESPACE,
        access.verb,
        access.resource,
        access.group
    ));
    match op {
        Op::DeletePod { .. } => Reply::Deleted(Err(err)),
        Op::UpdateStatus { .. }
        | Op::PatchReplicas { .. }
        | Op::PatchAnnotations { .. }
        | Op::MergeStatefulSetAnnotations { .. } => Reply::Patched(Err(err)),
        Op::GetConfigMap { .. } | Op::CreateConfigMap { .. } | Op::ReplaceConfigMap { .. } => {
            Reply::ConfigMap(Err(err))
        }
        Op::Discover { .. } => Reply::Discovered(Err(err)),
        Op::GetScale { .. } => Reply::Value(Err(err)),
        Op::PatchResourceStatus { .. } | Op::CreateEvent { .. } | Op::PatchEvent { .. } => Reply::Done(Err(err)),
        Op::GetStatefulSet { .. } => Reply::StatefulSet(Err(err)),
        Op::ListStatefulSets { .. } => Reply::StatefulSets(Err(err)),
        Op::ListPods { .. } => Reply::Pods(Err(err)),
        Op::GetPod { .. } | Op::PatchPodAnnotations { .. } => Reply::Pod(Err(err)),
        Op::GetSecret { .. } | Op::CreateSecret { .. } | Op::ReplaceSecret { .. } => Reply::Secret(Err(err)),
        Op::GetDeployment { .. } => Reply::Deployment(Err(err)),
        Op::GetReplicaSet { .. } => Reply::ReplicaSet(Err(err)),
        Op::ListBudgets => Reply::Values(Err(err)),
        Op::Evict { .. } => Reply::Done(Err(err)),
        Op::GetLease { .. } | Op::CreateLease { .. } | Op::ReplaceLease { .. } => Reply::Lease(Err(err)),
    }
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
        Op::CreateSecret { .. } | Op::ReplaceSecret { .. } => "write of a secret".to_string(),
        _ => return None,
    })
}

/// The controller's own part of a reaction: from its consuming the watch event of the commit that gave it work to
/// its handing this write to the network.
fn own_part(req: &Request, waited: Option<crate::reaction::Wait>) -> Option<Duration> {
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
        if let Some(v) = store.ha.judge_write(at, incarnation, &what, handed_at) {
            store.trace("checker", format!("VIOLATION {} at {:.3}s: {}", v.invariant, at.as_secs_f64(), v.detail));
            store.checker.violations.push(v);
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
    let holder = env.store.lock().unwrap().ha.holder_process() == Some(incarnation);
    if holder && env.rng.lock().unwrap().chance(chance) {
        let _ = env.pause_tx.send(incarnation);
    }
}

fn serve_op(env: &ServerEnv, req: Request) -> Reply {
    let mut store = env.store.lock().unwrap();
    let admission = req.knowledge.incarnation >= ADMISSION_INCARNATION_BASE;
    let who = if req.knowledge.incarnation == WEBHOOK_INCARNATION || admission {
        "webhook".to_string()
    } else if req.knowledge.incarnation >= DRAIN_INCARNATION_BASE {
        "drain".to_string()
    } else {
        format!("controller#{}", req.knowledge.incarnation)
    };
    let controller = who.starts_with("controller");
    let lease_request = matches!(req.op, Op::GetLease { .. } | Op::CreateLease { .. } | Op::ReplaceLease { .. });
    if controller && !lease_request {
        store.reactions.controller_requests += 1;
    }
    if let (Some(grants), Some((access, cluster_scoped))) = (&env.grants, access_of(&req.op))
        && !grants.allows(&access, cluster_scoped)
    {
        store.trace(&who, format!("{access} -> forbidden (403)"));
        // The tracker's probes are the controller's alone: the webhook asks at every admission it must claim.
        let feature = optional_probe(&req.op).filter(|feature| *feature != ZONE_TRACKER || controller);
        let probe = feature.is_some_and(|feature| {
            let told = req.log.refusal_received(feature);
            let reprobe =
                req.log.last_refusal_received(feature).is_some_and(|last| req.handed_at >= last + REPROBE_AFTER);
            told.is_none_or(|told| req.handed_at <= told) || reprobe
        });
        // The no-downscale webhook reads the parent of every `/scale` request, as the reference does, and no real
        // deployment grants those reads of Deployments and ReplicaSets: a refusal is its fail-open path (the
        // reference's warning), said once in its log; the checker judges the answer (`NO_DOWNSCALE_LABEL`).
        let parent_lookup = matches!(req.op, Op::GetDeployment { .. } | Op::GetReplicaSet { .. }) && !controller;
        if !probe && !parent_lookup {
            let feature = optional_probe(&req.op).map(|f| format!(" ({f})")).unwrap_or_default();
            store.forbidden.push(format!("{who} (process {:#x}): {access}{feature}", req.knowledge.incarnation));
        }
        return forbidden_reply(&req.op, &access);
    }
    match &req.op {
        Op::DeletePod { name, preconditions } => {
            let group = store.pods.get(name).and_then(|p| store.group_of_pod(p)).filter(|_| controller);
            let waited = group.as_ref().and_then(|g| store.reactions.take_wait(g));
            let result = store.api_delete_pod(name, preconditions, req.knowledge);
            if let Some(group) = group {
                let at = store.elapsed();
                let own = own_part(&req, waited);
                store.reactions.write_tried(&group, waited, result.is_ok(), at, own);
                if result.is_ok() {
                    store.reactions.pod_deleted_by_controller(name, at);
                }
            }
            let line = match &result {
                Ok(()) => format!("DELETE pod {name} -> ok"),
                Err(e) => format!("DELETE pod {name} -> {}", e.kind()),
            };
            store.trace(&who, line);
            if result.is_ok() {
                let crash = env.knobs.lock().unwrap().crash_after_delete;
                if env.rng.lock().unwrap().chance(crash) {
                    let _ = env.crash_tx.send(req.knowledge.incarnation);
                }
            }
            Reply::Deleted(result)
        }
        Op::UpdateStatus { statefulset } => {
            let result = store.api_update_status(statefulset, req.knowledge).map(Box::new);
            let name = statefulset.metadata.name.clone().unwrap_or_default();
            let rev = statefulset.status.as_ref().and_then(|s| s.current_revision.clone()).unwrap_or_default();
            let line = match &result {
                Ok(_) => format!("PUT {name}/status currentRevision={rev} -> ok"),
                Err(e) => format!("PUT {name}/status currentRevision={rev} -> {}", e.kind()),
            };
            store.trace(&who, line);
            if result.is_ok() {
                let snapshot = store.describe();
                store.trace("cluster", snapshot);
            }
            Reply::Patched(result)
        }
        Op::GetConfigMap { name } => Reply::ConfigMap(Ok(store.config_maps.get(name).cloned().map(Box::new))),
        Op::CreateConfigMap { config_map } => {
            store.admission_writing = admission.then_some(req.knowledge.incarnation);
            let result = store.api_create_config_map(config_map);
            store.admission_writing = None;
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let line = match &result {
                Ok(_) => format!("CREATE configmap {name} -> ok"),
                Err(e) => format!("CREATE configmap {name} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::ConfigMap(result.map(|cm| Some(Box::new(cm))))
        }
        Op::ReplaceConfigMap { config_map } => {
            store.admission_writing = admission.then_some(req.knowledge.incarnation);
            let result = store.api_replace_config_map(config_map);
            store.admission_writing = None;
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let line = match &result {
                Ok(_) => format!("REPLACE configmap {name} -> ok"),
                Err(e) => format!("REPLACE configmap {name} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::ConfigMap(result.map(|cm| Some(Box::new(cm))))
        }
        Op::PatchReplicas { name, replicas, resource_version, annotations } => {
            store.writer = who.clone();
            let group = store.group_of_statefulset(name).filter(|_| who.starts_with("controller"));
            let waited = group.as_ref().and_then(|g| store.reactions.take_wait(g));
            let controller = (who != "webhook").then_some(req.knowledge);
            let result =
                store.api_patch_replicas(name, *replicas, resource_version, annotations, controller).map(Box::new);
            store.writer = "cluster".to_string();
            if let Some(group) = group {
                let at = store.elapsed();
                let own = own_part(&req, waited);
                store.reactions.write_tried(&group, waited, result.is_ok(), at, own);
            }
            let line = match &result {
                Ok(_) => format!("PATCH {name} replicas={replicas} -> ok"),
                Err(e) => format!("PATCH {name} replicas={replicas} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Patched(result)
        }
        Op::PatchAnnotations { name, resource_version, annotations } => {
            let result = store.api_patch_annotations(name, resource_version, annotations).map(Box::new);
            if admission && result.is_ok() && annotations.contains_key(rollout_core::keys::LAST_DOWNSCALE) {
                store.recorded_by_admission.insert(req.knowledge.incarnation);
            }
            let line = match &result {
                Ok(_) => format!("PATCH {name} annotations -> ok"),
                Err(e) => format!("PATCH {name} annotations -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Patched(result)
        }
        Op::MergeStatefulSetAnnotations { name, changes } => {
            let annotations = |s: &StatefulSet| s.metadata.annotations.clone().unwrap_or_default();
            let before = store.statefulsets.get(name).map(annotations).unwrap_or_default();
            let result = store.api_merge_statefulset_annotations(name, changes).map(Box::new);
            if let Ok(after) = &result {
                store.checker.record_intents_written(changes);
                let at = store.elapsed();
                let after = annotations(after);
                store.checker.judge_statefulset_intent_write(
                    at,
                    name,
                    &before,
                    changes,
                    &after,
                    jiff::Timestamp::now(),
                );
            }
            let line = match &result {
                Ok(_) => format!("PATCH {name} annotations {} -> ok", describe_changes(changes)),
                Err(e) => format!("PATCH {name} annotations -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Patched(result)
        }
        Op::Discover { group, kind } => Reply::Discovered(Ok(store.api_discover(group, kind))),
        Op::GetScale { plural, name } => Reply::Value(store.api_get_scale(plural, name)),
        Op::PatchResourceStatus { plural, name, patch } => {
            let result = store.api_patch_resource_status(plural, name, patch);
            let line = match &result {
                Ok(()) => format!("PATCH {plural}/{name}/status -> ok"),
                Err(e) => format!("PATCH {plural}/{name}/status -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Done(result)
        }
        Op::GetStatefulSet { name } => Reply::StatefulSet(Ok(store.statefulsets.get(name).cloned().map(Box::new))),
        Op::GetDeployment { name } => Reply::Deployment(Ok(store.deployments.get(name).cloned().map(Box::new))),
        Op::GetReplicaSet { name } => Reply::ReplicaSet(Ok(store.replicasets.get(name).cloned().map(Box::new))),
        Op::ListStatefulSets { selector } => Reply::StatefulSets(Ok(list_statefulsets(&store, selector))),
        Op::ListPods { selector } => Reply::Pods(Ok(list_pods(&store, selector))),
        Op::GetPod { name } => Reply::Pod(Ok(store.pods.get(name).cloned().map(Box::new))),
        Op::PatchPodAnnotations { name, uid, changes } => {
            let result = store.api_patch_pod_annotations(name, uid, changes).map(|p| Some(Box::new(p)));
            if result.is_ok() {
                store.checker.record_intents_written(changes);
            }
            // A refused patch (the pod gone, another uid) wrote nothing.
            if let (Ok(Some(pod)), true) = (&result, changes.contains_key(rollout_core::keys::READY_TIME)) {
                let group = crate::objects::budget_group_of(pod);
                let at = store.elapsed();
                store.checker.judge_ready_time_write(at, name, group.as_deref());
            }
            let line = match &result {
                Ok(_) => format!("PATCH pod {name} annotations -> ok"),
                Err(e) => format!("PATCH pod {name} annotations -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Pod(result)
        }
        Op::GetSecret { name } => Reply::Secret(Ok(store.secrets.get(name).cloned().map(Box::new))),
        Op::CreateSecret { secret } => Reply::Secret(store.api_create_secret(secret).map(|s| Some(Box::new(s)))),
        Op::ReplaceSecret { secret } => Reply::Secret(store.api_replace_secret(secret).map(|s| Some(Box::new(s)))),
        Op::CreateEvent { event } => {
            let at = store.elapsed();
            let result = store.events.create(at, event);
            let what = format!(
                "EVENT {} {} on {}: {}",
                event.type_.as_deref().unwrap_or_default(),
                event.reason.as_deref().unwrap_or_default(),
                event.regarding.as_ref().and_then(|r| r.name.as_deref()).unwrap_or_default(),
                event.note.as_deref().unwrap_or_default()
            );
            let line = match &result {
                Ok(()) => what,
                Err(e) => format!("{what} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Done(result)
        }
        Op::PatchEvent { name, patch } => Reply::Done(store.events.patch(name, patch)),
        Op::ListBudgets => Reply::Values(Ok(store.budgets.clone())),
        Op::GetLease { name } => Reply::Lease(Ok(store.leases.get(name).cloned().map(Box::new))),
        Op::CreateLease { lease } => Reply::Lease(store.api_create_lease(lease).map(|l| Some(Box::new(l)))),
        Op::ReplaceLease { lease } => Reply::Lease(store.api_replace_lease(lease).map(|l| Some(Box::new(l)))),
        // Served by `serve` before it gets here.
        Op::Evict { .. } => Reply::Done(Err(ApiError::Unavailable("eviction not served".into()))),
    }
}

fn list_statefulsets(store: &crate::store::Store, selector: &str) -> Vec<StatefulSet> {
    let matching =
        |s: &&StatefulSet| rollout_operator::cluster::memory::selector_matches(selector, s.metadata.labels.as_ref());
    store.statefulsets.values().filter(matching).cloned().collect()
}

fn list_pods(store: &crate::store::Store, selector: &str) -> Vec<Pod> {
    let matching = |p: &&Pod| rollout_operator::cluster::memory::selector_matches(selector, p.metadata.labels.as_ref());
    store.pods.values().filter(matching).cloned().collect()
}

async fn serve_watch(env: ServerEnv, tx: madsim::net::Sender, mut rx: madsim::net::Receiver) {
    let Ok(first) = rx.recv().await else { return };
    let Ok(req) = first.downcast::<WatchRequest>() else { return };
    if let Some(grants) = &env.grants {
        let (group, resource) = match req.kind {
            Kind::Pods => ("", "pods"),
            Kind::StatefulSets => ("apps", "statefulsets"),
            Kind::Budgets => ("rollout-operator.grafana.com", "zoneawarepoddisruptionbudgets"),
        };
        for verb in ["list", "watch"] {
            let access =
                Access { group: group.into(), resource: resource.into(), verb: verb.into(), resource_name: None };
            if !grants.allows(&access, false) {
                {
                    let mut store = env.store.lock().unwrap();
                    store.trace("controller", format!("{access} -> forbidden (403)"));
                    store.forbidden.push(format!("controller: {access}"));
                }
                // The budget watch's client is told (the operator then says which grant is missing); the
                // controller's own watches just end, as before.
                if req.kind == Kind::Budgets {
                    let message = format!("forbidden: cannot {access}");
                    let _ = tx.send(Box::new(WatchMsg::Refused(ApiError::Forbidden(message)))).await;
                }
                return;
            }
        }
    }
    let (lifetime, gone_chance) = {
        let k = env.knobs.lock().unwrap();
        (k.watch_lifetime_s, k.gone_chance)
    };
    let deadline = Instant::now() + env.sample_ms((lifetime.0 * 1000, lifetime.1 * 1000));
    let changes = env.store.lock().unwrap().subscribe();
    let cut = || req.kind == Kind::Budgets && env.store.lock().unwrap().budget_watches_down;
    if cut() {
        return;
    }
    let mut cursor = match req.resume {
        Some(rv) => {
            let too_old = {
                let store = env.store.lock().unwrap();
                rv < store.compacted_to || (req.kind == Kind::Budgets && rv < store.budget_resume_floor)
            } || env.rng.lock().unwrap().chance(gone_chance);
            if too_old {
                let _ = tx.send(Box::new(WatchMsg::Gone)).await;
                return;
            }
            rv
        }
        None => {
            let (rv, items) = {
                let store = env.store.lock().unwrap();
                (store.rv, store.list(req.kind))
            };
            if tx.send(Box::new(WatchMsg::List { rv, items })).await.is_err() {
                return;
            }
            rv
        }
    };
    // Events leave in order: each no earlier than the previous one.
    let mut not_before = Instant::now();
    let mut last_sent = Instant::now();
    loop {
        let seen = changes.version();
        let batch: Result<Vec<LogEntry>, ()> = {
            let store = env.store.lock().unwrap();
            if cursor < store.compacted_to {
                Err(())
            } else {
                let from = store.log.partition_point(|e| e.rv <= cursor);
                Ok(store.log.range(from..).cloned().collect())
            }
        };
        let Ok(batch) = batch else {
            let _ = tx.send(Box::new(WatchMsg::Gone)).await;
            return;
        };
        let newest = batch.last().map(|e| e.rv);
        for entry in batch.into_iter().filter(|e| e.kind() == req.kind) {
            let delay = {
                let range = env.knobs.lock().unwrap().event_delay_ms;
                env.sample_ms(range)
            };
            not_before = not_before.max(entry.at + delay);
            tokio::time::sleep_until(not_before).await;
            if Instant::now() >= deadline || cut() {
                return;
            }
            let msg = WatchMsg::Event { rv: entry.rv, deleted: entry.deleted, obj: entry.obj };
            if tx.send(Box::new(msg)).await.is_err() {
                return;
            }
            last_sent = Instant::now();
        }
        if let Some(rv) = newest {
            cursor = rv;
        }
        if Instant::now() >= deadline || cut() {
            return;
        }
        let bookmark_at = last_sent + Duration::from_secs(10);
        tokio::select! {
            biased;
            _ = changes.changed_since(seen) => {}
            _ = tokio::time::sleep_until(bookmark_at) => {
                if tx.send(Box::new(WatchMsg::Bookmark { rv: cursor })).await.is_err() {
                    return;
                }
                last_sent = Instant::now();
            }
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// `+key` for each annotation set, `-key` for each removed, for the trace.
fn describe_changes(changes: &std::collections::BTreeMap<String, Option<String>>) -> String {
    let each = changes.iter().map(|(k, v)| format!("{}{k}", if v.is_some() { "+" } else { "-" }));
    each.collect::<Vec<_>>().join(" ")
}
