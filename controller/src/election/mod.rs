//! Leader election (`-leader-election.enabled`): the driver loop of the core's [`Elector`], the gate the
//! controller asks before every write, and the supervisor that runs one fresh controller per term.
//!
//! Owns: carrying out the election's Lease reads and writes (each within a timeout), publishing what the core
//! decided, the leader metrics and log lines, and starting and stopping the controller at term boundaries. Must
//! not decide who leads or until when (the core does), nor touch anything but its Lease.
//!
//! Every replica serves the webhooks whether or not it leads; only the controller waits for a term. A term ends
//! when the core's write window ends (at the latest `-leader-election.renew-deadline` after the last renewal was
//! sent, even if the loop is stuck in a request), when another holder is seen, or at shutdown; the controller of
//! that term is then stopped and dropped with its cache and expectations, and the replica competes again. A new
//! term starts a new controller, which waits for its own caches before its first pass.

use crate::cluster::{ApiError, Leases};
use crate::ops::metrics::LeaderMetrics;
use futures::future::BoxFuture;
use jiff::Timestamp;
use rollout_core::Failure;
use rollout_core::election::{ElectionConfig, Elector, Event, LeaseRecord, Need, Observed};
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A clock that does not jump: the wall time at start plus the monotonic time since. The election compares only
/// readings of this clock on one replica, so a step of the wall clock (NTP) cannot stretch or cut a term.
#[derive(Debug, Clone, Copy)]
pub struct MonotonicClock {
    base: Instant,
    base_time: Timestamp,
    /// How much faster (positive) or slower than true time this clock runs, in parts per million: 0 for a real
    /// replica's clock (its own monotonic clock is its truth); the simulation gives each replica a different rate,
    /// as the oscillators of different nodes have, to check that the election holds within its skew margin.
    rate_ppm: i32,
}

impl MonotonicClock {
    /// Starts the clock at `wall` (the wall time now).
    pub fn start(wall: Timestamp) -> Self {
        MonotonicClock { base: Instant::now(), base_time: wall, rate_ppm: 0 }
    }

    /// The same clock running `ppm` parts per million fast (negative: slow); at most half again or half as fast.
    pub fn with_rate_ppm(self, ppm: i32) -> Self {
        MonotonicClock { rate_ppm: ppm.clamp(-500_000, 500_000), ..self }
    }

    pub fn now(&self) -> Timestamp {
        self.timestamp_of(Instant::now())
    }

    fn timestamp_of(&self, at: Instant) -> Timestamp {
        let true_elapsed = at.saturating_duration_since(self.base).as_nanos();
        let elapsed = true_elapsed * u128::from(1_000_000u32.saturating_add_signed(self.rate_ppm)) / 1_000_000;
        let elapsed = i64::try_from(elapsed).map(jiff::SignedDuration::from_nanos).unwrap_or(jiff::SignedDuration::MAX);
        self.base_time.checked_add(elapsed).unwrap_or(Timestamp::MAX)
    }

    /// The instant this clock reads `at`.
    fn instant_of(&self, at: Timestamp) -> Instant {
        let since = at.duration_since(self.base_time);
        match Duration::try_from(since) {
            Ok(d) => {
                let rate = u128::from(1_000_000u32.saturating_add_signed(self.rate_ppm)).max(1);
                let d = u64::try_from(d.as_nanos() * 1_000_000 / rate).map_or(Duration::MAX, Duration::from_nanos);
                self.base.checked_add(d).unwrap_or_else(|| self.base + Duration::from_secs(86_400 * 365))
            }
            Err(_) => self.base,
        }
    }
}

/// What the loop last published: the core's state after its last step, and the number of the term it is in.
#[derive(Debug, Clone)]
struct Published {
    term: u64,
    elector: Elector,
}

/// The question the controller asks right before each write: may this replica act as the leader now? Cheap to
/// clone and to ask; answered by the core ([`Elector::may_write`]) on the election loop's last state and the clock
/// now, so it turns false at the end of the write window even while the loop waits for an answer.
#[derive(Clone)]
pub struct LeaderGate {
    state: watch::Receiver<Option<Published>>,
    clock: MonotonicClock,
}

impl std::fmt::Debug for LeaderGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderGate").field("term", &self.term()).finish()
    }
}

impl LeaderGate {
    /// True while this replica holds a Lease it renewed recently enough that no other replica can consider it
    /// expired.
    pub fn may_write(&self) -> bool {
        self.state.borrow().as_ref().is_some_and(|p| p.elector.may_write(self.clock.now()))
    }

    /// The current term's number, while this replica may write.
    pub fn term(&self) -> Option<u64> {
        self.state.borrow().as_ref().filter(|p| p.elector.may_write(self.clock.now())).map(|p| p.term)
    }

    /// Waits for a term (this replica may write); `None` once the election loop has ended.
    pub async fn next_term(&mut self) -> Option<u64> {
        loop {
            if let Some(term) = self.term() {
                return Some(term);
            }
            // A window that is published already over (an answer that came too late) is no term; wait for the
            // next step.
            self.state.changed().await.ok()?;
        }
    }

    /// Resolves when term `term` is over: its write window has ended (by the clock, whatever the loop is doing),
    /// another term began, or the loop ended.
    pub async fn term_ended(&self, term: u64) {
        let mut state = self.state.clone();
        loop {
            let until = {
                let published = state.borrow_and_update();
                match published.as_ref() {
                    Some(p) if p.term == term && p.elector.may_write(self.clock.now()) => p.elector.write_until(),
                    _ => return,
                }
            };
            let Some(until) = until else { return };
            tokio::select! {
                () = tokio::time::sleep_until(self.clock.instant_of(until)) => {}
                changed = state.changed() => if changed.is_err() { return },
            }
        }
    }
}

/// One replica's election loop over the Lease `lease_name`.
pub struct Election<L: Leases> {
    api: L,
    lease_name: String,
    elector: Elector,
    clock: MonotonicClock,
    metrics: LeaderMetrics,
    term: u64,
    publish: watch::Sender<Option<Published>>,
    /// How long one Lease request may take before it counts as failed.
    request_timeout: Duration,
    /// A refused Lease request has been said (once: a candidate retries every retry period).
    forbidden_said: std::sync::atomic::AtomicBool,
}

impl<L: Leases> Election<L> {
    /// The loop and the gate the controller asks. `config` must be valid ([`ElectionConfig::validate`]).
    pub fn new(
        api: L,
        lease_name: &str,
        config: ElectionConfig,
        clock: MonotonicClock,
        metrics: LeaderMetrics,
    ) -> (Self, LeaderGate) {
        let (publish, state) = watch::channel(None);
        // Long enough for a loaded API server; short enough that a hung request does not keep a candidate from
        // trying again for long (a leader's window ends by the clock anyway).
        let request_timeout = (config.renew_deadline / 2).max(config.retry_period);
        metrics.set_leader(false);
        let election = Election {
            api,
            lease_name: lease_name.to_string(),
            elector: Elector::new(config),
            clock,
            metrics,
            term: 0,
            publish,
            request_timeout,
            forbidden_said: std::sync::atomic::AtomicBool::new(false),
        };
        (election, LeaderGate { state, clock })
    }

    /// Runs the election until `release` resolves, then gives the Lease back if this replica holds it. The
    /// controller must have stopped before `release` resolves (its writes are over): the release ends the write
    /// window first, then clears the holder.
    pub async fn run(mut self, release: impl Future<Output = ()> + Send) {
        tokio::pin!(release);
        tracing::info!(lease = %self.lease_name, identity = %self.elector.config().identity,
            "leader election started; the controller runs only while this replica holds the lease");
        let mut step = self.elector.step(Observed::Start, self.clock.now());
        loop {
            self.report(&step.events);
            let need = step.need.clone();
            // A Lease write in flight is let finish (within the request timeout) before the release: its answer
            // tells the release which version to clear; abandoned, it could commit after the release and hold the
            // Lease for a stopped replica (found by the election model).
            let writing = matches!(need, Need::Create(_) | Need::Replace(_));
            let observed = tokio::select! {
                biased;
                () = &mut release, if !writing => break,
                observed = self.carry_out(&need) => observed,
            };
            let Some(observed) = observed else { break };
            crate::ops::needs::failed("election", need.kind(), observed.failure().map(|f| f.kind()));
            step = self.elector.step(observed, self.clock.now());
        }
        // The release: reads and compare-and-swaps as the core asks, until it is done.
        let mut step = self.elector.release(self.clock.now());
        let held = !matches!(step.need, Need::Done);
        let mut released = false;
        loop {
            self.report(&step.events);
            released |= step.events.contains(&Event::Released);
            let Some(observed) = self.carry_out(&step.need).await else { break };
            crate::ops::needs::failed("election", step.need.kind(), observed.failure().map(|f| f.kind()));
            step = self.elector.step(observed, self.clock.now());
        }
        if held && !released {
            tracing::warn!(lease = %self.lease_name,
                "could not release the leader lease; the next leader takes over once it expires");
        }
    }

    /// Publishes the core's state and reports its events.
    fn report(&mut self, events: &[Event]) {
        for event in events {
            match event {
                Event::Acquired { transitions } => {
                    self.term += 1;
                    self.metrics.transition("acquired");
                    tracing::info!(lease = %self.lease_name, identity = %self.elector.config().identity,
                        transitions, "acquired the leader lease; starting the controller");
                }
                Event::Lost { why } => {
                    self.metrics.transition("lost");
                    tracing::warn!(lease = %self.lease_name, reason = %why,
                        "lost the leader lease; the controller stops and this replica competes again");
                }
                Event::Released => {
                    self.metrics.transition("released");
                    tracing::info!(lease = %self.lease_name, "released the leader lease");
                }
            }
        }
        self.metrics.set_leader(self.elector.may_write(self.clock.now()));
        self.publish.send_replace(Some(Published { term: self.term, elector: self.elector.clone() }));
    }

    /// Carries out one need; `None` when there is nothing more to do.
    async fn carry_out(&self, need: &Need) -> Option<Observed> {
        Some(match need {
            Need::Get => {
                let read = tokio::time::timeout(self.request_timeout, self.api.get_lease(&self.lease_name)).await;
                Observed::Read(match read {
                    Ok(Ok(lease)) => Ok(lease.as_ref().map(LeaseRecord::from_lease)),
                    Ok(Err(error)) => Err(Failure::from(&error).map_message(|_| self.failed("read", &error))),
                    Err(_) => Err(Failure::Deadline(format!("reading lease {} timed out", self.lease_name))),
                })
            }
            Need::Create(record) => {
                let lease = record.to_lease(&self.lease_name);
                let created = tokio::time::timeout(self.request_timeout, self.api.create_lease(&lease)).await;
                self.written(created.ok())
            }
            Need::Replace(record) => self.replace(record).await,
            Need::Wait(d) => {
                tokio::time::sleep(*d).await;
                Observed::Tick
            }
            Need::Done => return None,
        })
    }

    async fn replace(&self, record: &LeaseRecord) -> Observed {
        let lease = record.to_lease(&self.lease_name);
        self.written(tokio::time::timeout(self.request_timeout, self.api.replace_lease(&lease)).await.ok())
    }

    /// What a write's answer means to the core (`None`: it timed out).
    fn written(&self, answer: Option<Result<k8s_openapi::api::coordination::v1::Lease, ApiError>>) -> Observed {
        Observed::Written(match answer {
            Some(Ok(lease)) => Ok(LeaseRecord::from_lease(&lease)),
            Some(Err(error @ ApiError::Conflict(_))) => Err(Failure::from(&error)),
            Some(Err(error)) => Err(Failure::from(&error).map_message(|_| self.failed("write", &error))),
            None => Err(Failure::Deadline(format!("writing lease {} timed out", self.lease_name))),
        })
    }

    /// A failed request, said in the log (a 403 says what to grant).
    fn failed(&self, what: &str, error: &ApiError) -> String {
        if let ApiError::Forbidden(_) = error
            && !self.forbidden_said.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            // Not leading is the safe way down: running the controller without the lease could let two replicas
            // act at once. The webhooks go on serving on every replica; `rollout_operator_leader` stays 0.
            tracing::error!(lease = %self.lease_name, %error,
                "the operator may not use its leader election lease: grant get, update (on this lease) and create \
                 on coordination.k8s.io leases; no replica can lead until then");
        } else {
            tracing::debug!(lease = %self.lease_name, %error, "leader election: lease {what} failed");
        }
        error.to_string()
    }
}

/// Runs one controller per term until `stopped` says the process stops: waits for a term, starts a controller with
/// `start_term` (its argument resolves when the term or the process ends, and the controller must stop then), waits
/// for it, and starts over. Returns once the process stops and the current term's controller has stopped.
pub async fn run_terms<F, Fut>(mut gate: LeaderGate, mut stopped: watch::Receiver<bool>, mut start_term: F)
where
    F: FnMut(BoxFuture<'static, ()>) -> Fut,
    Fut: Future<Output = ()>,
{
    loop {
        let term = tokio::select! {
            _ = stopped.wait_for(|stop| *stop) => return,
            term = gate.next_term() => match term {
                Some(term) => term,
                None => return,
            },
        };
        let ends = gate.clone();
        let mut process = stopped.clone();
        let stop: BoxFuture<'static, ()> = Box::pin(async move {
            tokio::select! {
                () = ends.term_ended(term) => {}
                _ = process.wait_for(|stop| *stop) => {}
            }
        });
        start_term(stop).await;
        if *stopped.borrow() {
            return;
        }
        tracing::info!(term, "the controller stopped at the end of its term; drops its cache and expectations");
    }
}

/// One replica's whole leader-elected run, as `main` wires it (and the simulation runs it on each replica node):
/// the election loop over `api`'s Lease on a task of its own, readiness once the caches would have synced, and one
/// controller per term started by `start_term` with the gate it must ask before every write and the future that
/// resolves when its term (or the process) ends. Returns once `stopped` says the process stops and the last term's
/// controller has stopped; the Lease is then given back (so another replica takes over at once).
#[allow(clippy::too_many_arguments)]
pub async fn run_elected<C, F, Fut>(
    api: C,
    lease_name: String,
    config: ElectionConfig,
    clock: MonotonicClock,
    metrics: LeaderMetrics,
    ready: crate::ops::health::ReadyFlag,
    stopped: watch::Receiver<bool>,
    mut start_term: F,
) where
    C: Leases + crate::cluster::RolloutApi,
    F: FnMut(LeaderGate, BoxFuture<'static, ()>) -> Fut,
    Fut: Future<Output = ()>,
{
    let (election, gate) = Election::new(api.clone(), &lease_name, config, clock, metrics);
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let election = tokio::spawn(election.run(async move {
        let _ = released.await;
    }));
    tokio::spawn(ready_when_synced(api, ready));
    let terms = gate.clone();
    run_terms(gate, stopped, move |end| start_term(terms.clone(), end)).await;
    // The controller has stopped: no write of this replica is in flight. Give the Lease back.
    let _ = release.send(());
    if let Err(e) = election.await {
        tracing::error!(err = %e, "the leader election task failed");
    }
}

#[cfg(test)]
mod tests;

/// Readiness of a replica that may not lead: sets `ready` once a StatefulSet and pod cache would have synced (both
/// watches listed), as a leading replica's controller does, then stops watching. The webhooks need no controller
/// to answer, so every replica is ready on the same condition.
pub async fn ready_when_synced<C: crate::cluster::RolloutApi>(api: C, ready: crate::ops::health::ReadyFlag) {
    use futures::StreamExt;
    let mut cache = crate::rollout::cache::ClusterCache::new();
    let mut statefulsets = api.watch_statefulsets();
    let mut pods = api.watch_pods();
    while !cache.is_synced() && !ready.is_ready() {
        tokio::select! {
            Some(event) = statefulsets.next() => if let Ok(event) = event {
                cache.apply_statefulset_event(event);
            },
            Some(event) = pods.next() => if let Ok(event) = event {
                cache.apply_pod_event(event);
            },
            else => return,
        }
    }
    if !ready.is_ready() {
        tracing::info!("caches synced; serving as a standby replica until this replica leads");
    }
    ready.set_ready();
}
