//! `SimCluster`: the operator's cluster ports over madsim's network, so partitions, message loss and latency between
//! an operator process and the API server affect it exactly as they would over a real network. It behaves like
//! kube-runtime's watcher: a watch resumes from the last resourceVersion it saw, relists when told the version is
//! too old, and gives up on a silent connection.
//!
//! It also reports, with every write, how far the process has consumed each watch stream: the oracle's notion of
//! "what the controller knew".

pub mod ports;
#[cfg(test)]
mod tests;

use crate::Kind;
use crate::environment::apiserver::{Answer, Op, Reply, Request, WatchMsg, WatchRequest};
use crate::environment::store::Obj;
use crate::oracle::checker::Knowledge;
use futures::StreamExt;
use futures::channel::mpsc;
use futures::stream::BoxStream;
use madsim::net::Endpoint;
use rollout_operator::cluster::{ApiError, WatchEvent};
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
    consumed: Mutex<[VecDeque<(u64, tokio::time::Instant)>; 4]>,
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
            Kind::ValidatingWebhooks | Kind::MutatingWebhooks => 3,
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

    /// The objects `list` asks for (budgets, RolloutHealthChecks), listed once they can be (retrying with backoff),
    /// then nothing more: the simulated ones never change during a run.
    pub(crate) async fn list_until_listed(
        self,
        list: fn() -> Op,
        tx: futures::channel::mpsc::UnboundedSender<Result<WatchEvent<serde_json::Value>, ApiError>>,
    ) {
        let mut backoff = Duration::from_millis(200);
        loop {
            match self.call(list()).await {
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

    /// A request of an optional feature ([`crate::environment::apiserver::rbac::told_by_refusal`]): a refusal (403) it receives is recorded as
    /// the one this process received, for the server's judgement of its later requests.
    async fn call_optional(&self, op: Op) -> Result<Reply, ApiError> {
        let feature = crate::environment::apiserver::rbac::told_by_refusal(&op);
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
            .send_to_raw(
                crate::environment::apiserver::address(),
                crate::environment::apiserver::TAG_API,
                Box::new(req),
            )
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
                    Kind::Budgets | Kind::ValidatingWebhooks | Kind::MutatingWebhooks => {}
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
            let Ok((sender, mut receiver)) = self.inner.ep.connect1(crate::environment::apiserver::address()).await
            else {
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
