//! One operator process, wired from an [`OperatorConfig`] and a cluster port: the Event sink, the
//! ZoneAwarePodDisruptionBudget cache fed by its watch, the `grafana.com/ready-time` tracker, the controller (its
//! planner, scaling, reporting and budgets), the admission webhooks' handlers and, with leader election, one
//! controller per term. `main` builds its process with it, and the simulation builds each simulated process with it,
//! so the two cannot drift apart.
//!
//! What stays outside: reading flags, the Kubernetes client, the HTTP and HTTPS listeners and their certificates.

use crate::admission::no_downscale::ParentLookups;
use crate::admission::router::{WebhookSettings, Webhooks, system_clock};
use crate::cluster::{ClusterApi, EventsApi, Leases};
use crate::election::{self, LeaderGate, MonotonicClock};
use crate::health_check::feed::{self as health_feed, HealthCheckSource};
use crate::health_check::gates::HealthGates;
use crate::health_check::prometheus::Transport;
use crate::ops::events::{EventRecorder, EventSettings, run_sink};
use crate::ops::health::ReadyFlag;
use crate::ops::metrics::{LeaderMetrics, Metrics};
use crate::pods::client::PodHttpClient;
use crate::rollout::reconciler::{Controller, DeletionBudgets, ReconcilerConfig};
use crate::rollout::scaling::ScalingConfig;
use crate::zpdb::Zpdb;
use crate::zpdb::ready_time::Tracker as ReadyTimeTracker;
use futures::future::BoxFuture;
use rollout_core::election::ElectionConfig;
use rollout_core::{Planner, RolloutPlanner};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Where the controller's ZoneAwarePodDisruptionBudgets come from.
#[derive(Clone, Default)]
pub enum BudgetSource {
    /// A cache of this process, fed by the budgets' watch, which the webhooks of this process share (`main`).
    #[default]
    Watched,
    /// A cache the process already has (the eviction webhook's), so the controller's deletions and the evictions
    /// share one serialisation.
    Shared(Zpdb),
    /// No budget is honoured and no budget is watched (a process that serves no eviction, in a cluster without
    /// budgets).
    Off,
}

/// Leader election of this process (`-leader-election.*`).
pub struct ElectionSetup {
    pub lease_name: String,
    pub config: ElectionConfig,
    pub clock: MonotonicClock,
    pub metrics: LeaderMetrics,
}

/// Everything one operator process is built from besides its cluster port, pod client and planner.
#[derive(Clone)]
pub struct OperatorConfig {
    /// `-kubernetes.namespace`.
    pub namespace: String,
    pub reconciler: ReconcilerConfig,
    pub scaling: ScalingConfig,
    /// `-rollout.progress-deadline`.
    pub progress_deadline: Duration,
    /// `-events.enabled`: the sink's settings; `None` keeps a disabled recorder.
    pub events: Option<EventSettings>,
    pub budgets: BudgetSource,
    /// `-zpdb.pod-ready-annotation-patch-timeout`: the ready-time tracker runs with it; `None` runs none (a process
    /// whose budgets another process stamps).
    pub ready_time_patch_timeout: Option<Duration>,
}

/// A built process: its tasks are running; [`Operator::run`] runs the controller (or the election).
pub struct Operator<C, H, P = RolloutPlanner> {
    cluster: C,
    pods: H,
    planner: P,
    config: OperatorConfig,
    metrics: Arc<Metrics>,
    events: EventRecorder,
    zpdb: Option<Zpdb>,
    health_gates: Option<HealthGates>,
}

impl<C: Clone, H: Clone, P: Clone> Clone for Operator<C, H, P> {
    fn clone(&self) -> Self {
        Operator {
            cluster: self.cluster.clone(),
            pods: self.pods.clone(),
            planner: self.planner.clone(),
            config: self.config.clone(),
            metrics: self.metrics.clone(),
            events: self.events.clone(),
            zpdb: self.zpdb.clone(),
            health_gates: self.health_gates.clone(),
        }
    }
}

impl<C, H, P> Operator<C, H, P>
where
    C: ClusterApi + EventsApi,
    H: PodHttpClient + Clone,
    P: Planner + Clone + Send + 'static,
{
    /// Builds the process over `cluster` and starts its background tasks (the Event sink, the budgets' watch, the
    /// ready-time tracker) on the current runtime; they stop when `stopped` says so.
    pub fn build(
        config: OperatorConfig,
        cluster: C,
        pods: H,
        planner: P,
        metrics: Arc<Metrics>,
        stopped: watch::Receiver<bool>,
    ) -> Self {
        let events = match &config.events {
            Some(settings) => {
                let (recorder, queue) = EventRecorder::new(settings.queue, metrics.clone());
                tokio::spawn(run_sink(cluster.clone(), queue, settings.clone(), metrics.clone()));
                recorder
            }
            None => EventRecorder::disabled(),
        };
        let zpdb = match &config.budgets {
            BudgetSource::Watched => {
                let zpdb = Zpdb::new(metrics.zpdb.clone());
                tokio::spawn(crate::zpdb::budgets::run(
                    cluster.clone(),
                    zpdb.budgets.clone(),
                    metrics.zpdb.clone(),
                    until_stopped(stopped.clone()),
                ));
                Some(zpdb)
            }
            BudgetSource::Shared(zpdb) => Some(zpdb.clone()),
            BudgetSource::Off => None,
        };
        if let (Some(timeout), Some(zpdb)) = (config.ready_time_patch_timeout, &zpdb) {
            let tracker = ReadyTimeTracker::new(
                cluster.clone(),
                zpdb.budgets.clone(),
                timeout,
                Arc::new(jiff::Timestamp::now),
                metrics.zpdb.clone(),
            );
            tokio::spawn(tracker.run(until_stopped(stopped)));
        }
        Operator { cluster, pods, planner, config, metrics, events, zpdb, health_gates: None }
    }

    /// The same process with health-gated zones: gates querying Prometheus through `transport`, fed with the
    /// namespace's RolloutHealthChecks by their watch over `source` (a task that runs until `stopped` says so; it
    /// blocks nothing, and a refused or missing resource turns the gates off as the feed says).
    pub fn with_health_checks<S: HealthCheckSource, T: Transport>(
        self,
        source: S,
        transport: T,
        stopped: watch::Receiver<bool>,
    ) -> Self {
        let gates = HealthGates::new(transport, &self.config.namespace);
        let features = self.metrics.gates().clone();
        tokio::spawn(health_feed::run(source, gates.clone(), features, until_stopped(stopped)));
        self.with_health_gates(gates)
    }

    /// The same process holding each zone after the first back until its RolloutHealthCheck passes, with `gates`
    /// (their RolloutHealthChecks fed by the caller); they record into the process's metrics and Events.
    pub fn with_health_gates(mut self, gates: HealthGates) -> Self {
        let gates = gates.with_metrics(self.metrics.health_checks.clone()).with_events(self.events.clone());
        self.health_gates = Some(gates);
        self
    }

    /// The process's budget cache and eviction serialisation (a fresh, empty one when budgets are off).
    pub fn zpdb(&self) -> Zpdb {
        self.zpdb.clone().unwrap_or_default()
    }

    /// Where the process tells Events.
    pub fn events(&self) -> EventRecorder {
        self.events.clone()
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// A new controller over the process's cluster port.
    pub fn controller(&self) -> Controller<C, P, H> {
        self.controller_over(self.cluster.clone())
    }

    /// A new controller, as [`Operator::controller`], over another port to the same cluster (a term's own client).
    pub fn controller_over(&self, cluster: C) -> Controller<C, P, H> {
        let controller =
            Controller::new(cluster, self.planner.clone(), self.config.reconciler.clone(), self.metrics.clone())
                .with_scaling(self.pods.clone(), self.config.scaling.clone())
                .with_reporting(self.events.clone(), self.config.progress_deadline);
        let controller = match &self.zpdb {
            Some(zpdb) => controller.with_budgets(DeletionBudgets::new(zpdb.clone(), &self.config.namespace)),
            None => controller,
        };
        match &self.health_gates {
            Some(gates) => controller.with_health_gates(gates.clone()),
            None => controller,
        }
    }

    /// The admission webhooks' handlers with `settings`, telling the process's Events and keeping its memory of
    /// refused parent lookups, reading through `cluster` and calling pods with `pods`.
    pub fn webhooks_over<A, Q>(
        &self,
        cluster: A,
        pods: Q,
        settings: WebhookSettings,
        lookups: ParentLookups,
    ) -> Webhooks<A, Q> {
        Webhooks {
            api: cluster,
            pods,
            settings: settings.with_events(self.events.clone()).with_parent_lookups(lookups),
            clock: system_clock(),
        }
    }

    /// Runs the controller until `stopped` says the process stops: alone, or with `election` one controller per
    /// term it wins. `ready` is the process's `/ready`.
    pub async fn run(self, ready: ReadyFlag, stopped: watch::Receiver<bool>, election: Option<ElectionSetup>)
    where
        C: Leases,
    {
        match election {
            None => self.controller().run(ready, until_stopped(stopped)).await,
            Some(election) => {
                let term_ready = ready.clone();
                self.run_elected(election, ready, stopped, move |operator, gate, end| {
                    operator.controller().with_leadership(gate).run(term_ready.clone(), end)
                })
                .await
            }
        }
    }

    /// The leader-elected run with each term's controller started by `start_term` (given this process, the gate
    /// its writes must ask, and the future that resolves when the term or the process ends).
    pub async fn run_elected<F, Fut>(
        self,
        election: ElectionSetup,
        ready: ReadyFlag,
        stopped: watch::Receiver<bool>,
        mut start_term: F,
    ) where
        C: Leases,
        F: FnMut(Self, LeaderGate, BoxFuture<'static, ()>) -> Fut,
        Fut: Future<Output = ()>,
    {
        let ElectionSetup { lease_name, config, clock, metrics } = election;
        let cluster = self.cluster.clone();
        election::run_elected(cluster, lease_name, config, clock, metrics, ready, stopped, move |gate, end| {
            start_term(self.clone(), gate, end)
        })
        .await
    }
}

/// Resolves once the shutdown switch is set (or its sender is gone, which also means shutdown).
pub async fn until_stopped(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}
