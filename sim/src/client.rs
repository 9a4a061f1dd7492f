//! `SimCluster`: the cluster port (`rollout_operator::cluster::ClusterApi`) implemented over madsim's network, so
//! partitions, message loss and latency between the controller and the API server affect the controller exactly as
//! they would over a real network. It behaves like kube-runtime's watcher: a watch resumes from the last
//! resourceVersion it saw, relists when told the version is too old, and gives up on a silent connection.
//!
//! It also reports, with every write, how far the controller has consumed each watch stream: the checker's notion of
//! "what the controller knew". The controller consumes watch events only between reconciles, so the position at the
//! time of a write is the position its plan was made at.

use crate::Kind;
use crate::apiserver::{self, Answer, Op, Reply, Request, WatchMsg, WatchRequest};
use crate::checker::Knowledge;
use crate::store::Obj;
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use madsim::net::Endpoint;
use rollout_operator::cluster::{
    ApiError, ApiResourceRef, CertificateStore, DisruptionBudgets, EventsApi, Leases, LiveReads, PodAnnotations,
    Preconditions, RolloutApi, ScaleTargets, StatefulSetAnnotations, WatchEvent, WebhookConfiguration, WebhookKind,
    ZoneTrackerStore,
};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a write waits for its reply.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// A watch that has been silent this long (the server bookmarks every 10 s) is presumed dead and restarted.
const WATCH_SILENCE: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub struct SimCluster {
    inner: Arc<Inner>,
}

struct Inner {
    ep: Endpoint,
    incarnation: u64,
    /// Added before each request: a client on a busy node, or far from the API server.
    delay: Duration,
    next_tag: AtomicU64,
    consumed: Mutex<(u64, u64)>,
    /// What this process saw, for the server's judgements.
    log: Arc<ProcessLog>,
    /// How the budget watch learns the ZoneAwarePodDisruptionBudgets.
    budgets: BudgetFeed,
    /// Reads of one StatefulSet, Deployment or ReplicaSet by name: asked, and answered with the object.
    parent_reads: Mutex<(u32, u32)>,
}

/// What a watch loop hands its stream: an event (with the resourceVersion it brings the client to, if any), or the
/// error the server refused the watch with.
type WatchItem<K> = Result<(Option<u64>, WatchEvent<K>), ApiError>;

/// How a client's budget watch learns the ZoneAwarePodDisruptionBudgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetFeed {
    /// Lists none without asking, as before budgets existed in the simulation (so every world without budgets makes
    /// the same requests as it always did).
    None,
    /// Lists them from the API server once (retrying until it can), then stays quiet: the drains worlds whose
    /// budgets never change.
    ListOnce,
    /// Watches them as any other kind (the API server's watch: delays, expiry, "too old" and relists): the
    /// budget-edits worlds.
    Watch,
}

/// What a process saw, for the server's judgements, kept by reference (simulation bookkeeping, not part of any
/// message's content): when it consumed its recent watch events, per stream (how long the controller took from
/// consuming the commit that gave it work to sending the write), and when it first received a refusal of each
/// optional feature (after that, the feature must be off in this process).
#[derive(Debug, Default)]
pub struct ProcessLog {
    consumed: Mutex<[VecDeque<(u64, tokio::time::Instant)>; 3]>,
    /// Per feature: when the process first and last received a refusal of it.
    refusals: Mutex<std::collections::BTreeMap<&'static str, (tokio::time::Instant, tokio::time::Instant)>>,
}

impl ProcessLog {
    /// Enough for the events of one group's pass and more; older ones are forgotten (no sample then).
    const KEPT: usize = 256;

    fn stream(kind: Kind) -> usize {
        match kind {
            Kind::StatefulSets => 0,
            Kind::Pods => 1,
            Kind::Budgets => 2,
        }
    }

    fn consumed(&self, kind: Kind, rv: u64, at: tokio::time::Instant) {
        let log = &mut self.consumed.lock().unwrap()[Self::stream(kind)];
        if log.len() == Self::KEPT {
            log.pop_front();
        }
        log.push_back((rv, at));
    }

    /// When the first event of `kind` at or after `rv` was consumed, if that is still remembered (a stream's events
    /// come in resourceVersion order, so one consumed before the oldest remembered is not).
    pub fn consumed_at(&self, kind: Kind, rv: u64) -> Option<tokio::time::Instant> {
        let log = &self.consumed.lock().unwrap()[Self::stream(kind)];
        if log.front().is_none_or(|(oldest, _)| *oldest > rv) {
            return None;
        }
        log.iter().find(|(seen, _)| *seen >= rv).map(|(_, at)| *at)
    }

    fn refused(&self, feature: &'static str, at: tokio::time::Instant) {
        self.refusals.lock().unwrap().entry(feature).and_modify(|(_, last)| *last = at).or_insert((at, at));
    }

    /// When the process first received a refusal (403) of `feature`.
    pub fn refusal_received(&self, feature: &'static str) -> Option<tokio::time::Instant> {
        self.refusals.lock().unwrap().get(feature).map(|(first, _)| *first)
    }

    /// When the process last received a refusal (403) of `feature`.
    pub fn last_refusal_received(&self, feature: &'static str) -> Option<tokio::time::Instant> {
        self.refusals.lock().unwrap().get(feature).map(|(_, last)| *last)
    }
}

impl SimCluster {
    /// Binds this process's endpoint. `incarnation` names the controller process in traces and judgements.
    pub async fn connect(incarnation: u64) -> std::io::Result<Self> {
        Self::connect_slow(incarnation, Duration::ZERO).await
    }

    /// [`SimCluster::connect`] for a client whose every request first waits `delay`.
    pub async fn connect_slow(incarnation: u64, delay: Duration) -> std::io::Result<Self> {
        Self::bind(incarnation, delay, BudgetFeed::None).await
    }

    /// An operator replica's client: like [`SimCluster::connect`], and its budget watch learns the budgets the API
    /// server holds, by `feed`.
    pub async fn connect_operator(incarnation: u64, feed: BudgetFeed) -> std::io::Result<Self> {
        Self::bind(incarnation, Duration::ZERO, feed).await
    }

    async fn bind(incarnation: u64, delay: Duration, budgets: BudgetFeed) -> std::io::Result<Self> {
        let ep = Endpoint::bind("0.0.0.0:0").await?;
        let inner = Inner {
            ep,
            incarnation,
            delay,
            next_tag: AtomicU64::new(1 << 32),
            consumed: Mutex::new((0, 0)),
            log: Arc::default(),
            budgets,
            parent_reads: Mutex::new((0, 0)),
        };
        Ok(SimCluster { inner: Arc::new(inner) })
    }

    /// `CREATE pods/{name}/eviction` (not part of the operator's cluster port: the node-drain actor's request).
    /// `dry_run`: the request's `dryRun`; `options_dry_run`: the Eviction's `deleteOptions.dryRun`.
    pub async fn evict_pod(&self, name: &str, dry_run: bool, options_dry_run: bool) -> Result<(), ApiError> {
        match self.call(Op::Evict { name: name.to_string(), dry_run, options_dry_run }).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    /// The budgets, listed once they can be (retrying with backoff), then nothing more: the simulated budgets never
    /// change during a run.
    async fn list_budgets_until_listed(
        self,
        tx: futures::channel::mpsc::UnboundedSender<Result<WatchEvent<serde_json::Value>, ApiError>>,
    ) {
        let mut backoff = Duration::from_millis(200);
        loop {
            match self.call(Op::ListBudgets).await {
                Ok(Reply::Values(Ok(items))) => {
                    let _ = tx.unbounded_send(Ok(WatchEvent::Init));
                    for item in items {
                        let _ = tx.unbounded_send(Ok(WatchEvent::InitApply(item)));
                    }
                    let _ = tx.unbounded_send(Ok(WatchEvent::InitDone));
                    return;
                }
                Ok(Reply::Values(Err(e))) | Err(e) => {
                    if tx.unbounded_send(Err(e)).is_err() {
                        return;
                    }
                }
                Ok(_) => {}
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }

    fn knowledge(&self) -> Knowledge {
        let (sts_rv, pod_rv) = *self.inner.consumed.lock().unwrap();
        Knowledge { incarnation: self.inner.incarnation, sts_rv, pod_rv }
    }

    /// A request of an optional feature ([`apiserver::told_by_refusal`]): a refusal (403) it receives is recorded as
    /// the one this process received, for the server's judgement of its later requests.
    async fn call_optional(&self, op: Op) -> Result<Reply, ApiError> {
        let feature = apiserver::told_by_refusal(&op);
        let reply = self.call(op).await?;
        let refused = matches!(
            &reply,
            Reply::Pod(Err(ApiError::Forbidden(_)))
                | Reply::Patched(Err(ApiError::Forbidden(_)))
                | Reply::ConfigMap(Err(ApiError::Forbidden(_)))
                | Reply::Done(Err(ApiError::Forbidden(_)))
        );
        if let (Some(feature), true) = (feature, refused) {
            self.inner.log.refused(feature, tokio::time::Instant::now());
        }
        Ok(reply)
    }

    async fn call(&self, op: Op) -> Result<Reply, ApiError> {
        if !self.inner.delay.is_zero() {
            tokio::time::sleep(self.inner.delay).await;
        }
        let reply_tag = self.inner.next_tag.fetch_add(1, Ordering::Relaxed);
        let req = Request {
            reply_tag,
            knowledge: self.knowledge(),
            op,
            handed_at: tokio::time::Instant::now(),
            log: self.inner.log.clone(),
        };
        self.inner
            .ep
            .send_to_raw(apiserver::address(), apiserver::TAG_API, Box::new(req))
            .await
            .map_err(|e| ApiError::Unavailable(e.to_string()))?;
        let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let payload = match tokio::time::timeout(left, self.inner.ep.recv_from_raw(reply_tag)).await {
                Ok(Ok((payload, _))) => payload,
                Ok(Err(e)) => return Err(ApiError::Unavailable(e.to_string())),
                Err(_) => return Err(ApiError::Unavailable("request timed out".into())),
            };
            let Ok(answer) = payload.downcast::<Answer>() else {
                return Err(ApiError::Unavailable("malformed reply".into()));
            };
            // A late reply to the process that had this address before (same tags): not ours, dropped.
            if answer.client == self.inner.incarnation {
                return Ok(answer.reply);
            }
        }
    }

    /// This client's reads of one StatefulSet, Deployment or ReplicaSet by name so far: (asked, answered with the
    /// object). A webhook that says it could not read a parent must have asked for it without getting it.
    pub fn parent_reads(&self) -> (u32, u32) {
        *self.inner.parent_reads.lock().unwrap()
    }

    /// Counts one read by name of a parent object, and whether it returned the object.
    async fn read_parent<T>(
        &self,
        read: impl Future<Output = Result<Option<T>, ApiError>>,
    ) -> Result<Option<T>, ApiError> {
        self.inner.parent_reads.lock().unwrap().0 += 1;
        let result = read.await;
        if matches!(result, Ok(Some(_))) {
            self.inner.parent_reads.lock().unwrap().1 += 1;
        }
        result
    }

    /// The address this client sends from (a restarted process binds the same one again).
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.ep.local_addr()
    }

    fn watch<K: Send + 'static>(
        &self,
        kind: Kind,
        unwrap: fn(Obj) -> Option<K>,
    ) -> BoxStream<'static, Result<WatchEvent<K>, ApiError>> {
        let (tx, rx) = mpsc::unbounded::<WatchItem<K>>();
        let this = self.clone();
        tokio::spawn(async move { this.watch_loop(kind, unwrap, tx).await });
        let this = self.clone();
        rx.map(move |item| {
            let (rv, event) = item?;
            if let Some(rv) = rv {
                this.inner.log.consumed(kind, rv, tokio::time::Instant::now());
                let mut consumed = this.inner.consumed.lock().unwrap();
                match kind {
                    Kind::StatefulSets => consumed.0 = rv,
                    Kind::Pods => consumed.1 = rv,
                    // Not part of what the controller's writes are judged against.
                    Kind::Budgets => {}
                }
            }
            Ok(event)
        })
        .boxed()
    }

    async fn watch_loop<K>(&self, kind: Kind, unwrap: fn(Obj) -> Option<K>, tx: mpsc::UnboundedSender<WatchItem<K>>) {
        let mut resume: Option<u64> = None;
        let mut backoff = Duration::from_millis(200);
        while !tx.is_closed() {
            let Ok((sender, mut receiver)) = self.inner.ep.connect1(apiserver::address()).await else {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(10));
                continue;
            };
            if sender.send(Box::new(WatchRequest { kind, resume })).await.is_err() {
                continue;
            }
            loop {
                let msg = match tokio::time::timeout(WATCH_SILENCE, receiver.recv()).await {
                    Ok(Ok(payload)) => match payload.downcast::<WatchMsg>() {
                        Ok(m) => *m,
                        Err(_) => break,
                    },
                    // Closed by the server, reset, or silent for too long: resume on a new connection.
                    _ => break,
                };
                backoff = Duration::from_millis(200);
                let sent = match msg {
                    WatchMsg::Gone => {
                        resume = None;
                        break;
                    }
                    WatchMsg::List { rv, items } => {
                        let mut ok = tx.unbounded_send(Ok((None, WatchEvent::Init))).is_ok();
                        for obj in items.into_iter().filter_map(unwrap) {
                            ok &= tx.unbounded_send(Ok((None, WatchEvent::InitApply(obj)))).is_ok();
                        }
                        resume = Some(rv);
                        ok && tx.unbounded_send(Ok((Some(rv), WatchEvent::InitDone))).is_ok()
                    }
                    WatchMsg::Event { rv, deleted, obj } => {
                        resume = Some(rv);
                        match unwrap(obj) {
                            Some(o) if deleted => tx.unbounded_send(Ok((Some(rv), WatchEvent::Delete(o)))).is_ok(),
                            Some(o) => tx.unbounded_send(Ok((Some(rv), WatchEvent::Apply(o)))).is_ok(),
                            None => true,
                        }
                    }
                    WatchMsg::Bookmark { rv } => {
                        resume = Some(rv);
                        true
                    }
                    // Told to the stream; the watch is tried again after the backoff, as a reflector does.
                    WatchMsg::Refused(err) => {
                        resume = None;
                        if tx.unbounded_send(Err(err)).is_err() {
                            return;
                        }
                        backoff = Duration::from_secs(5);
                        break;
                    }
                };
                if !sent {
                    return;
                }
            }
            tokio::time::sleep(backoff).await;
        }
    }
}

fn sts_of(obj: Obj) -> Option<StatefulSet> {
    match obj {
        Obj::Sts(s) => Some(*s),
        _ => None,
    }
}

fn pod_of(obj: Obj) -> Option<Pod> {
    match obj {
        Obj::Pod(p) => Some(*p),
        _ => None,
    }
}

fn budget_of(obj: Obj) -> Option<serde_json::Value> {
    match obj {
        Obj::Budget(b) => Some(*b),
        _ => None,
    }
}

impl RolloutApi for SimCluster {
    fn watch_statefulsets(&self) -> BoxStream<'static, Result<WatchEvent<StatefulSet>, ApiError>> {
        self.watch(Kind::StatefulSets, sts_of)
    }

    fn watch_pods(&self) -> BoxStream<'static, Result<WatchEvent<Pod>, ApiError>> {
        self.watch(Kind::Pods, pod_of)
    }

    async fn delete_pod(&self, name: &str, preconditions: &Preconditions) -> Result<(), ApiError> {
        let op = Op::DeletePod { name: name.to_string(), preconditions: preconditions.clone() };
        match self.call(op).await? {
            Reply::Deleted(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_statefulset_status(&self, statefulset: &StatefulSet) -> Result<StatefulSet, ApiError> {
        let op = Op::UpdateStatus { statefulset: Box::new(statefulset.clone()) };
        match self.call(op).await? {
            Reply::Patched(r) => r.map(|s| *s),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl LiveReads for SimCluster {
    async fn get_statefulset(&self, name: &str) -> Result<Option<StatefulSet>, ApiError> {
        self.read_parent(async {
            match self.call(Op::GetStatefulSet { name: name.to_string() }).await? {
                Reply::StatefulSet(r) => r.map(|s| s.map(|s| *s)),
                _ => Err(ApiError::Unavailable("mismatched reply".into())),
            }
        })
        .await
    }

    async fn get_deployment(&self, name: &str) -> Result<Option<Deployment>, ApiError> {
        self.read_parent(async {
            match self.call(Op::GetDeployment { name: name.to_string() }).await? {
                Reply::Deployment(r) => r.map(|d| d.map(|d| *d)),
                _ => Err(ApiError::Unavailable("mismatched reply".into())),
            }
        })
        .await
    }

    async fn get_replicaset(&self, name: &str) -> Result<Option<ReplicaSet>, ApiError> {
        self.read_parent(async {
            match self.call(Op::GetReplicaSet { name: name.to_string() }).await? {
                Reply::ReplicaSet(r) => r.map(|d| d.map(|d| *d)),
                _ => Err(ApiError::Unavailable("mismatched reply".into())),
            }
        })
        .await
    }

    async fn list_statefulsets(&self, label_selector: &str) -> Result<Vec<StatefulSet>, ApiError> {
        match self.call(Op::ListStatefulSets { selector: label_selector.to_string() }).await? {
            Reply::StatefulSets(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn list_pods(&self, label_selector: &str) -> Result<Vec<Pod>, ApiError> {
        match self.call(Op::ListPods { selector: label_selector.to_string() }).await? {
            Reply::Pods(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn get_pod(&self, name: &str) -> Result<Option<Pod>, ApiError> {
        match self.call(Op::GetPod { name: name.to_string() }).await? {
            Reply::Pod(r) => r.map(|p| p.map(|p| *p)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl PodAnnotations for SimCluster {
    async fn patch_pod_annotations(
        &self,
        name: &str,
        uid: &str,
        changes: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<Pod, ApiError> {
        let op = Op::PatchPodAnnotations { name: name.to_string(), uid: uid.to_string(), changes: changes.clone() };
        match self.call_optional(op).await? {
            Reply::Pod(Ok(Some(p))) => Ok(*p),
            Reply::Pod(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

/// An operator replica's client learns the API server's budgets by its [`BudgetFeed`]; any other client's watch lists
/// none without asking.
impl DisruptionBudgets for SimCluster {
    fn watch_disruption_budgets(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        match self.inner.budgets {
            BudgetFeed::None => futures::stream::iter([Ok(WatchEvent::Init), Ok(WatchEvent::InitDone)])
                .chain(futures::stream::pending())
                .boxed(),
            BudgetFeed::ListOnce => {
                let (tx, rx) = mpsc::unbounded();
                tokio::spawn(self.clone().list_budgets_until_listed(tx));
                rx.chain(futures::stream::pending()).boxed()
            }
            BudgetFeed::Watch => self.watch(Kind::Budgets, budget_of),
        }
    }
}

impl StatefulSetAnnotations for SimCluster {
    async fn merge_statefulset_annotations(
        &self,
        name: &str,
        changes: &std::collections::BTreeMap<String, Option<String>>,
    ) -> Result<StatefulSet, ApiError> {
        let op = Op::MergeStatefulSetAnnotations { name: name.to_string(), changes: changes.clone() };
        match self.call_optional(op).await? {
            Reply::Patched(Ok(s)) => Ok(*s),
            Reply::Patched(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl ZoneTrackerStore for SimCluster {
    async fn patch_statefulset_annotations(
        &self,
        name: &str,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let op = Op::PatchAnnotations {
            name: name.to_string(),
            resource_version: resource_version.to_string(),
            annotations: annotations.clone(),
        };
        match self.call(op).await? {
            Reply::Patched(r) => r.map(|s| *s),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn get_config_map(&self, name: &str) -> Result<Option<ConfigMap>, ApiError> {
        match self.call_optional(Op::GetConfigMap { name: name.to_string() }).await? {
            Reply::ConfigMap(r) => r.map(|cm| cm.map(|cm| *cm)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn create_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        match self.call_optional(Op::CreateConfigMap { config_map: Box::new(config_map.clone()) }).await? {
            Reply::ConfigMap(Ok(Some(cm))) => Ok(*cm),
            Reply::ConfigMap(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_config_map(&self, config_map: &ConfigMap) -> Result<ConfigMap, ApiError> {
        match self.call_optional(Op::ReplaceConfigMap { config_map: Box::new(config_map.clone()) }).await? {
            Reply::ConfigMap(Ok(Some(cm))) => Ok(*cm),
            Reply::ConfigMap(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl ScaleTargets for SimCluster {
    async fn patch_statefulset_replicas(
        &self,
        name: &str,
        replicas: u32,
        resource_version: &str,
        annotations: &std::collections::BTreeMap<String, String>,
    ) -> Result<StatefulSet, ApiError> {
        let op = Op::PatchReplicas {
            name: name.to_string(),
            replicas,
            resource_version: resource_version.to_string(),
            annotations: annotations.clone(),
        };
        match self.call(op).await? {
            Reply::Patched(r) => r.map(|s| *s),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn discover_resources(&self, group: &str, kind: &str) -> Result<Vec<ApiResourceRef>, ApiError> {
        match self.call(Op::Discover { group: group.to_string(), kind: kind.to_string() }).await? {
            Reply::Discovered(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn get_scale(&self, resource: &ApiResourceRef, name: &str) -> Result<serde_json::Value, ApiError> {
        match self.call(Op::GetScale { plural: resource.plural.clone(), name: name.to_string() }).await? {
            Reply::Value(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn patch_resource_status(
        &self,
        resource: &ApiResourceRef,
        name: &str,
        patch: &serde_json::Value,
    ) -> Result<(), ApiError> {
        let op =
            Op::PatchResourceStatus { plural: resource.plural.clone(), name: name.to_string(), patch: patch.clone() };
        match self.call(op).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl EventsApi for SimCluster {
    async fn create_event(&self, event: &k8s_openapi::api::events::v1::Event) -> Result<(), ApiError> {
        match self.call_optional(Op::CreateEvent { event: Box::new(event.clone()) }).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn patch_event(&self, name: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        match self.call_optional(Op::PatchEvent { name: name.to_string(), patch: patch.clone() }).await? {
            Reply::Done(r) => r,
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

/// The leader election's Lease, over the same client (and so the same network) as the replica's controller.
impl Leases for SimCluster {
    async fn get_lease(&self, name: &str) -> Result<Option<Lease>, ApiError> {
        match self.call(Op::GetLease { name: name.to_string() }).await? {
            Reply::Lease(r) => r.map(|l| l.map(|l| *l)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn create_lease(&self, lease: &Lease) -> Result<Lease, ApiError> {
        match self.call(Op::CreateLease { lease: Box::new(lease.clone()) }).await? {
            Reply::Lease(Ok(Some(l))) => Ok(*l),
            Reply::Lease(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_lease(&self, lease: &Lease) -> Result<Lease, ApiError> {
        match self.call(Op::ReplaceLease { lease: Box::new(lease.clone()) }).await? {
            Reply::Lease(Ok(Some(l))) => Ok(*l),
            Reply::Lease(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }
}

impl CertificateStore for SimCluster {
    async fn get_secret(&self, name: &str) -> Result<Option<Secret>, ApiError> {
        match self.call(Op::GetSecret { name: name.to_string() }).await? {
            Reply::Secret(r) => r.map(|s| s.map(|s| *s)),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn create_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        match self.call(Op::CreateSecret { secret: Box::new(secret.clone()) }).await? {
            Reply::Secret(Ok(Some(s))) => Ok(*s),
            Reply::Secret(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    async fn replace_secret(&self, secret: &Secret) -> Result<Secret, ApiError> {
        match self.call(Op::ReplaceSecret { secret: Box::new(secret.clone()) }).await? {
            Reply::Secret(Ok(Some(s))) => Ok(*s),
            Reply::Secret(Err(e)) => Err(e),
            _ => Err(ApiError::Unavailable("mismatched reply".into())),
        }
    }

    /// The simulated cluster has no webhook configurations: the watch lists none and then stays quiet.
    fn watch_webhook_configurations(
        &self,
        _kind: WebhookKind,
        _label_selector: &str,
    ) -> BoxStream<'static, Result<WatchEvent<WebhookConfiguration>, ApiError>> {
        futures::stream::iter([Ok(WatchEvent::Init), Ok(WatchEvent::InitDone)])
            .chain(futures::stream::pending())
            .boxed()
    }

    async fn patch_webhook_configuration(
        &self,
        kind: WebhookKind,
        name: &str,
        _patch: &serde_json::Value,
    ) -> Result<WebhookConfiguration, ApiError> {
        Err(ApiError::NotFound(format!("{} {name} not found", kind.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use madsim::runtime::{Handle, Runtime};

    fn record(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.to_string());
        cm.metadata.resource_version = Some("7".to_string());
        cm
    }

    #[test]
    fn a_commit_is_known_from_the_first_event_at_or_after_it_on_its_own_stream() {
        let t0 = tokio::time::Instant::now();
        let ms = Duration::from_millis;
        let c = ProcessLog::default();
        c.consumed(Kind::Pods, 10, t0);
        c.consumed(Kind::StatefulSets, 12, t0 + ms(1));
        c.consumed(Kind::Pods, 14, t0 + ms(2));
        assert_eq!(c.consumed_at(Kind::Pods, 10), Some(t0));
        assert_eq!(c.consumed_at(Kind::Pods, 12), Some(t0 + ms(2)), "12 is not a pod commit: 14 tells of it");
        assert_eq!(c.consumed_at(Kind::StatefulSets, 12), Some(t0 + ms(1)));
        assert_eq!(c.consumed_at(Kind::Pods, 15), None, "not consumed yet");
        assert_eq!(c.consumed_at(Kind::Pods, 9), None, "before what is remembered");
        for rv in 100..100 + ProcessLog::KEPT as u64 {
            c.consumed(Kind::Pods, rv, t0 + ms(3));
        }
        assert_eq!(c.consumed_at(Kind::Pods, 14), None, "forgotten");
    }

    /// Seed 31's shape, alone: a process killed with a read of the record in flight, and the process that replaces
    /// it at the same address and sends its write with the same first tag. The server answers the dead process's
    /// read only once the write has arrived, and the write's own reply is lost: the new process must time out, not
    /// take the read's reply for its write's success.
    #[test]
    fn a_late_reply_to_a_dead_process_is_not_taken_by_the_next_one_at_its_address() {
        let rt = Runtime::with_seed_and_config(1, madsim::Config::default());
        rt.block_on(async {
            let handle = Handle::current();
            let server = handle.create_node().name("apiserver").ip(apiserver::address().ip()).build();
            let node = handle.create_node().name("controller").ip([10, 0, 0, 3].into()).build();
            server.spawn(async {
                let ep = Endpoint::bind(apiserver::address()).await.unwrap();
                let (read, reader) = ep.recv_from_raw(apiserver::TAG_API).await.unwrap();
                let read = read.downcast::<Request>().ok().unwrap();
                assert!(matches!(read.op, Op::GetConfigMap { .. }));
                let (write, _) = ep.recv_from_raw(apiserver::TAG_API).await.unwrap();
                let write = write.downcast::<Request>().ok().unwrap();
                assert!(matches!(write.op, Op::ReplaceConfigMap { .. }));
                assert_eq!(write.reply_tag, read.reply_tag, "the test needs both requests to carry the same tag");
                let reply = Reply::ConfigMap(Ok(Some(Box::new(record("record")))));
                let answer = Answer { client: read.knowledge.incarnation, reply };
                ep.send_to_raw(reader, read.reply_tag, Box::new(answer)).await.unwrap();
                std::future::pending::<()>().await
            });
            let (dead_at, next_at, written) = node
                .spawn(async {
                    let dead = SimCluster::connect(1).await.unwrap();
                    let dead_at = dead.local_addr().unwrap();
                    let in_flight = tokio::spawn(async move { dead.get_config_map("record").await });
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    // Killed: the task and its endpoint are gone.
                    in_flight.abort();
                    let _ = in_flight.await;
                    let next = SimCluster::connect(2).await.unwrap();
                    let next_at = next.local_addr().unwrap();
                    let written = next.replace_config_map(&record("record")).await;
                    (dead_at, next_at, written)
                })
                .await
                .unwrap();
            assert_eq!(dead_at, next_at, "the test needs the new process at the dead one's address");
            assert!(
                matches!(&written, Err(ApiError::Unavailable(why)) if why.contains("timed out")),
                "the write got no reply of its own, yet: {written:?}"
            );
        });
    }
}
