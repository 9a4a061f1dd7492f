//! The operator processes, built as `main` builds them: the configuration `main` would make from its flags for this
//! world, the one controller process (with the scenario's planner), and the HA replicas running the leader-elected
//! wiring, each start a new process.

use crate::actors::pods::DELAYED_PODS_STREAM;
use crate::actors::pods::DelayedDownscalePods;
use crate::environment::client::{BudgetFeed, SimCluster};
use crate::environment::prometheus::SimPrometheus;
use crate::environment::store::SharedStore;
use crate::harness::eviction_replicas::EvictionTls;
use crate::harness::eviction_replicas::REPLICA_INCARNATION_BASE;
use crate::harness::eviction_replicas::operator_zpdb;
use crate::harness::eviction_replicas::replica_ip as eviction_replica_ip;
use crate::harness::eviction_replicas::replica_process;
use crate::harness::eviction_replicas::serve_admissions;
use crate::harness::replicas::ClockDrift;
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::scenario::drains::Drains;
use crate::scenario::drains::Evictor;
use crate::scenario::planner::PlannerKind;
use madsim::runtime::Handle;
use rollout_core::{Defences, Planner, RolloutPlanner};
use rollout_operator::operator::{BudgetSource, Operator, OperatorConfig};
use rollout_operator::ops::events::{EventRecorder, EventSettings, run_sink};
use rollout_operator::ops::health::ReadyFlag;
use rollout_operator::ops::metrics::Metrics;
use rollout_operator::rollout::reconciler::ReconcilerConfig;
use rollout_operator::rollout::scaling::ScalingConfig;
use rollout_operator::zpdb::Zpdb;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// What the controller process is started with besides its planner.
#[derive(Clone)]
pub(crate) struct ControllerSetup {
    /// The zone tracker's ConfigMap and whether Events are on.
    operator: OperatorSetup,
    defences: Defences,
    /// The pods' delayed-downscale endpoints.
    pods: DelayedDownscalePods,
    /// The drains worlds: the controller honours the ZoneAwarePodDisruptionBudgets before its deletions, with a
    /// budget cache of its own fed by the real watch task (as `main` runs it). Other worlds leave it out, so their
    /// controller runs no extra task and their pinned seeds replay the same interleaving.
    budgets: BudgetFeed,
    /// This process's readiness (`/ready`), which the world keeps to judge (each process starts unready).
    ready: ReadyFlag,
    /// The ZPDB state of the eviction webhook this process also serves (the `no-patch` drains world: one operator
    /// process, as `main` runs it, whose in-process serialisation covers its controller's deletions and its
    /// evictions alike). `None`: a controller process of its own.
    zpdb: Option<Zpdb>,
    /// The health-gated worlds' Prometheus: the process is built with health checks, as `main` builds it. Other
    /// worlds leave them out, so their processes run no extra task and their pinned seeds replay as before.
    prometheus: Option<SimPrometheus>,
}

/// The operator process's configuration for this world, as `main` makes it from its flags: the flags' defaults
/// but for the namespace, the zone tracker, Events, the progress deadline and the defences in force. The operator
/// replicas of the drains worlds stamp the ready times, so the controller process runs no tracker of its own.
pub(crate) fn operator_config(setup: &ControllerSetup) -> OperatorConfig {
    OperatorConfig {
        namespace: crate::environment::objects::NAMESPACE.to_string(),
        reconciler: ReconcilerConfig { defences: setup.defences, ..ReconcilerConfig::default() },
        scaling: ScalingConfig {
            namespace: crate::environment::objects::NAMESPACE.to_string(),
            zone_tracker_config_map: setup.operator.record.clone(),
            ..ScalingConfig::default()
        },
        progress_deadline: crate::harness::operator::PROGRESS_DEADLINE,
        events: setup
            .operator
            .events
            .then(|| EventSettings::new(crate::environment::objects::NAMESPACE, "rollout-operator-0")),
        budgets: match (&setup.zpdb, setup.budgets) {
            (Some(zpdb), _) => BudgetSource::Shared(zpdb.clone()),
            (None, BudgetFeed::None) => BudgetSource::Off,
            (None, _) => BudgetSource::Watched,
        },
        ready_time_patch_timeout: None,
    }
}

/// The controller process, built by the operator's own builder over `api`, run until the node is killed.
pub(crate) async fn run_controller<P: Planner + Clone + Send + 'static>(
    api: SimCluster,
    setup: ControllerSetup,
    planner: P,
) {
    // Never set: a process ends only by being killed, as a crashed pod does.
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let metrics = Arc::new(Metrics::new());
    let config = operator_config(&setup);
    let operator = Operator::build(config, api.clone(), setup.pods.clone(), planner, metrics, stopped.clone());
    let operator = match &setup.prometheus {
        Some(prometheus) => operator.with_health_checks(api, prometheus.clone(), stopped.clone()),
        None => operator,
    };
    operator.run(setup.ready.clone(), stopped, None).await
}

/// One HA replica node: every start of it is a new process, built by the operator's builder with
/// `-leader-election.enabled=true`, each term's controller on a client of its own (a new incarnation: the checker
/// judges each term's controller by what that controller knew).
pub(crate) fn start_replica(
    handle: &Handle,
    store: &SharedStore,
    index: u32,
    ha: crate::scenario::ha::Ha,
    drift: crate::harness::replicas::ClockDrift,
    setup: &ControllerSetup,
    incarnations: &Arc<AtomicU64>,
) -> madsim::task::NodeId {
    let (store, setup, incarnations) = (store.clone(), setup.clone(), incarnations.clone());
    handle
        .create_node()
        .name(crate::harness::replicas::identity(index))
        .ip(crate::harness::replicas::replica_ip(index))
        .init(move || {
            let (store, setup, incarnations) = (store.clone(), setup.clone(), incarnations.clone());
            async move {
                let incarnation = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
                crate::harness::replicas::trace_start(&store, index, incarnation, drift);
                let api = SimCluster::connect(incarnation).await.expect("bind replica endpoint");
                // Never set: a replica ends only by being killed, as a crashed pod does (graceful release is tested
                // apart).
                let (_stop, stopped) = tokio::sync::watch::channel(false);
                let mut metrics = Metrics::new();
                let election = crate::harness::replicas::election_setup(
                    index,
                    ha.election,
                    drift,
                    metrics.register_leader_election(),
                );
                let (config, pods) = (operator_config(&setup), setup.pods.clone());
                let operator =
                    Operator::build(config, api.clone(), pods, RolloutPlanner, Arc::new(metrics), stopped.clone());
                let operator = match &setup.prometheus {
                    Some(prometheus) => operator.with_health_checks(api, prometheus.clone(), stopped.clone()),
                    None => operator,
                };
                let gated = ha.election.gated();
                operator
                    .run_elected(election, ReadyFlag::new(), stopped, move |operator, gate, end| {
                        let (store, incarnations) = (store.clone(), incarnations.clone());
                        async move {
                            let term = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
                            {
                                let mut st = store.lock().unwrap();
                                st.oracle.ha.process_started(term, crate::harness::replicas::identity(index));
                                st.trace(
                                    &format!("controller#{term}"),
                                    format!(
                                        "term of {} begins: a new controller",
                                        crate::harness::replicas::identity(index)
                                    ),
                                );
                            }
                            let Ok(api) = SimCluster::connect(term).await else { return };
                            let controller = operator.controller_over(api);
                            let controller = if gated { controller.with_leadership(gate) } else { controller };
                            let end: futures::future::BoxFuture<'static, ()> = match ha.election.late_stop() {
                                Some(late) => Box::pin(async move {
                                    end.await;
                                    tokio::time::sleep(late).await;
                                }),
                                None => end,
                            };
                            controller.run(ReadyFlag::new(), end).await;
                            store.lock().unwrap().trace(&format!("controller#{term}"), "term over: controller stopped");
                        }
                    })
                    .await
            }
        })
        .build()
        .id()
}

/// Runs the controller with the scenario's planner (the production one, or a test-only one with a known bug).
pub(crate) async fn run_with_planner(planner: PlannerKind, api: SimCluster, setup: ControllerSetup) {
    match planner {
        PlannerKind::Real => run_controller(api, setup, RolloutPlanner).await,
        PlannerKind::StatusCountReadiness => run_controller(api, setup, rollout_known_bugs::StatusCountReadiness).await,
        PlannerKind::PausedLetsOthersProceed => {
            run_controller(api, setup, rollout_known_bugs::PausedLetsOthersProceed).await
        }
        PlannerKind::NoExpectations => run_controller(api, setup, rollout_known_bugs::NoExpectations).await,
        PlannerKind::TerminatingCountsAsReady => {
            run_controller(api, setup, rollout_known_bugs::TerminatingCountsAsReady).await
        }
        PlannerKind::SkipsMinTimeCheck => run_controller(api, setup, rollout_known_bugs::SkipsMinTimeCheck).await,
        PlannerKind::IgnoresDownscalesInProgress => {
            run_controller(api, setup, rollout_known_bugs::IgnoresDownscalesInProgress).await
        }
        PlannerKind::DownscalesDuringRollouts => {
            run_controller(api, setup, rollout_known_bugs::DownscalesDuringRollouts).await
        }
        PlannerKind::PercentAsCount => run_controller(api, setup, rollout_known_bugs::PercentAsCount).await,
        PlannerKind::IgnoresMinReadySeconds => {
            run_controller(api, setup, rollout_known_bugs::IgnoresMinReadySeconds).await
        }
        PlannerKind::IgnoresObservedGeneration => {
            run_controller(api, setup, rollout_known_bugs::IgnoresObservedGeneration).await
        }
        PlannerKind::MinTimeSecondEarly => run_controller(api, setup, rollout_known_bugs::MinTimeSecondEarly).await,
        PlannerKind::MissingPodsSpendNoBudget => {
            run_controller(api, setup, rollout_known_bugs::MissingPodsSpendNoBudget).await
        }
        PlannerKind::CondemnedPodFillsMissingSlot => {
            run_controller(api, setup, rollout_known_bugs::CondemnedPodFillsMissingSlot).await
        }
        PlannerKind::IgnoresContainerReadiness => {
            run_controller(api, setup, rollout_known_bugs::IgnoresContainerReadiness).await
        }
        PlannerKind::UpscalesBeforeLeaderReady => {
            run_controller(api, setup, rollout_known_bugs::UpscalesBeforeLeaderReady).await
        }
        PlannerKind::FinishesStepWhileOutcomeUnknown => {
            run_controller(api, setup, rollout_known_bugs::FinishesStepWhileOutcomeUnknown).await
        }
        PlannerKind::DeletesOnAStaleStepClaim => {
            run_controller(api, setup, rollout_known_bugs::DeletesOnAStaleStepClaim).await
        }
        PlannerKind::PatchesOnARefusedDownscaleClaim => {
            run_controller(api, setup, rollout_known_bugs::PatchesOnARefusedDownscaleClaim).await
        }
        PlannerKind::GivesBackAClaimWhoseOutcomeIsUnknown => {
            run_controller(api, setup, rollout_known_bugs::GivesBackAClaimWhoseOutcomeIsUnknown).await
        }
    }
}

/// `-rollout.progress-deadline` in the simulation: shorter than production's 30 minutes, so that faults that hold a
/// group (pods that never become ready, refused pod creation) make it stuck within a run.
pub const PROGRESS_DEADLINE: Duration = Duration::from_secs(120);

/// How the controller process is configured beyond its planner.
#[derive(Debug, Clone)]
pub struct OperatorSetup {
    /// `-zone-tracker.config-map-name` with `-use-zone-tracker=true`.
    pub record: Option<String>,
    /// `-events.enabled`.
    pub events: bool,
}

impl OperatorSetup {
    /// As the scenario runs the operator.
    pub fn of(sc: &Scenario) -> Self {
        OperatorSetup { record: sc.zone_tracker_config_map(), events: sc.events }
    }

    /// The recorder the controller sends its Events to, its sink running on the controller's node; a disabled
    /// recorder when Events are off.
    pub fn recorder(&self, api: &SimCluster, metrics: Arc<Metrics>) -> EventRecorder {
        if !self.events {
            return EventRecorder::disabled();
        }
        let settings = EventSettings::new(crate::environment::objects::NAMESPACE, "rollout-operator-0");
        let (recorder, queue) = EventRecorder::new(settings.queue, metrics.clone());
        tokio::spawn(run_sink(api.clone(), queue, settings, metrics));
        recorder
    }
}

/// Starts the operator processes the scenario runs: the HA world's replicas, or one controller process (which, in
/// the `no-patch` drains world, also serves the eviction webhook as `main` would run them). Returns their nodes.
pub(crate) fn start_operators(
    handle: &Handle,
    store: &SharedStore,
    sc: &Scenario,
    seed: u64,
    ha_rng: &mut SimRng,
    prometheus: Option<&SimPrometheus>,
    eviction_tls: Option<EvictionTls>,
) -> Vec<madsim::task::NodeId> {
    let incarnations = Arc::new(AtomicU64::new(0));
    let setup = ControllerSetup {
        operator: OperatorSetup::of(sc),
        budgets: sc.drains.as_ref().map_or(BudgetFeed::None, Drains::feed),
        defences: sc.defences,
        pods: DelayedDownscalePods {
            store: store.clone(),
            rng: Arc::new(Mutex::new(SimRng::new(seed ^ DELAYED_PODS_STREAM))),
            failing_until: Instant::now() + sc.fault_phase,
        },
        ready: ReadyFlag::new(),
        zpdb: None,
        prometheus: prometheus.cloned(),
    };
    if let Some(ha) = sc.ha {
        return (0..ha.replicas)
            .map(|i| {
                let drift = ClockDrift::draw(ha_rng, ha.max_clock_rate_ppm);
                start_replica(handle, store, i, ha, drift, &setup, &incarnations)
            })
            .collect();
    }
    let one_operator_process = sc.one_operator_process();
    let (s, planner) = (store.clone(), sc.planner);
    let evictor = sc.drains.as_ref().map_or(Evictor::Real, |d| d.evictor);
    let replica_incarnations = Arc::new(AtomicU64::new(REPLICA_INCARNATION_BASE));
    let ip = if one_operator_process { eviction_replica_ip(0) } else { IpAddr::from([10, 0, 0, 3]) };
    let controller = handle
        .create_node()
        .name("controller")
        .ip(ip)
        .init(move || {
            let incarnation = incarnations.fetch_add(1, Ordering::Relaxed) + 1;
            let replica = one_operator_process.then(|| replica_incarnations.fetch_add(1, Ordering::Relaxed));
            let (store, tls) = (s.clone(), eviction_tls.clone());
            let mut setup = ControllerSetup { ready: ReadyFlag::new(), ..setup.clone() };
            store.lock().unwrap().controller_ready = Some(setup.ready.clone());
            async move {
                store.lock().unwrap().trace(&format!("controller#{incarnation}"), "process started");
                // Kept as long as the process runs: the certificate's renewal and injection tasks.
                let mut _certificate = None;
                if let Some(replica) = replica {
                    let process = replica_process(0, replica);
                    {
                        let mut st = store.lock().unwrap();
                        st.trace(&process, "process started (it also runs the controller)");
                        let started =
                            crate::oracle::activity::WorldEvent::ReplicaStarted { replica: 0, runs_controller: true };
                        st.oracle.activity.happened(started);
                    }
                    let api = SimCluster::connect_operator(replica, setup.budgets)
                        .await
                        .expect("bind operator replica endpoint");
                    if let Some(tls) = &tls {
                        _certificate = Some(tls.start(&store, 0, &api).await);
                    }
                    let zpdb = operator_zpdb(&api, evictor);
                    // The test-only evictor that knows no budget blinds only the webhook.
                    if evictor != Evictor::IgnoresBudget {
                        setup.zpdb = Some(zpdb.clone());
                    }
                    tokio::spawn(serve_admissions(0, api, zpdb, evictor));
                }
                let api = match setup.budgets {
                    BudgetFeed::None => SimCluster::connect(incarnation).await,
                    feed => SimCluster::connect_operator(incarnation, feed).await,
                };
                let api = api.expect("bind controller endpoint");
                run_with_planner(planner, api, setup).await
            }
        })
        .build();
    vec![controller.id()]
}
