//! One simulated run: [`run`] starts a fresh madsim runtime for a seed; [`world`] builds the nodes (API server,
//! StatefulSet controller and kubelet, the operator processes), starts the actors the scenario names for the fault
//! phase, then heals everything and hands over to the oracle's liveness check and verdict.
//!
//! Owns the world's wiring and its phases. Must not judge (the oracle does) nor decide for the operator (the
//! operator processes are built by the product's own builder).

pub mod eviction_replicas;
pub mod operator;
pub mod outcome;
pub mod pass_log;
pub mod populate;
pub mod replicas;
pub mod webhook_servers;

use crate::actors::ha_faults::st_ha_faults_over;
use crate::actors::pod_users::set_sidecar;
use crate::actors::{
    drains, faults, force, ha_faults, leader_scaling, mirror, no_downscale, pod_users, pushes, record,
};
use crate::environment::apiserver;
use crate::environment::apiserver::{Knobs, LOST_ANSWERS_STREAM, ServerEnv};
use crate::environment::kube;
use crate::environment::kube::KubeState;
use crate::environment::prometheus::SimPrometheus;
use crate::environment::store::{SharedStore, Store};
use crate::harness::eviction_replicas::replica_address;
use crate::harness::operator::start_operators;
use crate::harness::outcome::{Outcome, await_convergence, judge};
use crate::harness::populate::populate;
use crate::harness::replicas::HA_STREAM;
use crate::harness::replicas::identity;
use crate::rng::SimRng;
use crate::scenario::Scenario;
use crate::scenario::deployment::{with_ha_grants, with_health_check_grants};
use crate::trace::Trace;
use madsim::net::NetSim;
use madsim::runtime::{Handle, Runtime};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Runs `scenario` over `seeds` and returns the outcomes; panics at the first failing seed with its violations and
/// the command that replays it. For tests that assert on the outcomes of runs that must all pass.
pub fn run_passing(scenario: &Scenario, seeds: std::ops::Range<u64>) -> Vec<Outcome> {
    let outcomes: Vec<Outcome> = seeds.map(|s| run(s, scenario, false)).collect();
    if let Some(o) = outcomes.iter().find(|o| !o.passed()) {
        let line = scenario.to_line();
        panic!(
            "seed {} failed: {:#?}\nreplay: rollout-sim replay --seed {} --scenario '{line}'",
            o.seed, o.violations, o.seed
        );
    }
    outcomes
}

/// Runs one seed to completion.
pub fn run(seed: u64, scenario: &Scenario, echo: bool) -> Outcome {
    run_logged(seed, scenario, echo, false)
}

/// Runs one seed to completion; with `logs`, the controller's own log is printed as well.
pub fn run_logged(seed: u64, scenario: &Scenario, echo: bool, logs: bool) -> Outcome {
    // Each run gets a fresh thread, so thread-local state of earlier runs (std's HashMap keys, which madsim seeds
    // from the simulation when they are first needed inside it; tokio's thread-local generator; the controller's
    // pass reports heard) cannot leak into it.
    let scenario = scenario.clone();
    std::thread::spawn(move || {
        let _listening = tracing::subscriber::set_default(pass_log::subscriber(logs));
        let rt = Runtime::with_seed_and_config(seed, madsim::Config::default());
        rt.block_on(world(seed, scenario, echo))
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

pub struct Nodes {
    pub apiserver: madsim::task::NodeId,
    /// The controller node, or the HA world's replica nodes.
    pub controllers: Vec<madsim::task::NodeId>,
    /// Currently killed by a fault: the API server, and each controller node.
    pub killed: Mutex<(bool, Vec<bool>)>,
    /// HA replica nodes currently frozen, since when (simulated time since the start).
    pub paused: Mutex<Vec<Option<Duration>>>,
}

impl Nodes {
    pub fn set_api_killed(&self, down: bool) {
        self.killed.lock().unwrap().0 = down;
    }

    pub fn set_controller_killed(&self, i: usize, down: bool) {
        self.killed.lock().unwrap().1[i] = down;
    }

    /// Which controller node a fault drawn with `pick` hits (the one controller node outside the HA world).
    pub fn pick_controller(&self, pick: u64) -> usize {
        ((pick >> 20) % self.controllers.len() as u64) as usize
    }

    /// How a fault names controller node `i` in the trace.
    pub fn controller_name(&self, i: usize) -> String {
        if self.controllers.len() == 1 {
            "controller".to_string()
        } else {
            crate::harness::replicas::identity(i as u32)
        }
    }
}

/// What every actor is started with: the run's seed and scenario, the store, the fault phase's times, the run's
/// shared random stream (drawn from in a fixed order by the actors that have no stream of their own yet), and the
/// world's knobs, kubelet and nodes, which the fault injectors turn.
pub struct Stage {
    pub seed: u64,
    pub sc: Scenario,
    pub store: SharedStore,
    pub start: Instant,
    pub fault_end: Instant,
    pub rng: Arc<Mutex<SimRng>>,
    pub knobs: Arc<Mutex<Knobs>>,
    pub kube: Arc<Mutex<KubeState>>,
    pub nodes: Arc<Nodes>,
    /// The health-gated worlds' Prometheus.
    pub prometheus: Option<SimPrometheus>,
    /// The certificate world's drains: what each eviction replica serves.
    pub eviction_certificates: Option<crate::harness::webhook_servers::ServedCertificates>,
}

/// The actors' tasks: `tasks` are stopped when the fault phase ends; `users` run to their end (an admission in
/// flight runs to its answer: the prepare window it opened must close).
#[derive(Default)]
pub struct Actors {
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
    pub users: Vec<tokio::task::JoinHandle<()>>,
}

pub async fn world(seed: u64, sc: Scenario, echo: bool) -> Outcome {
    let handle = Handle::current();
    let rng = Arc::new(Mutex::new(SimRng::new(seed)));
    let store: SharedStore = Arc::new(Mutex::new(Store::new(Trace::new(echo), 400)));
    populate(&store, &sc, seed);
    let knobs = Arc::new(Mutex::new(Knobs::default()));
    let kube_rng = SimRng::new(rng.lock().unwrap().next_u64());
    let mut kube = KubeState::new(kube_rng);
    kube.sidecars = sc.sidecars;
    if sc.observe_lag {
        kube.observe_lag = true;
        kube.slow_observe_chance = 0.5;
    }
    let kube_state = Arc::new(Mutex::new(kube));
    let eviction_certificates = sc
        .drains
        .as_ref()
        .and(sc.certificates)
        .map(|_| crate::harness::webhook_servers::ServedCertificates::pod_eviction());
    let (crash_tx, crash_rx) = tokio::sync::mpsc::unbounded_channel();
    let (pause_tx, pause_rx) = tokio::sync::mpsc::unbounded_channel();
    let env = ServerEnv {
        store: store.clone(),
        knobs: knobs.clone(),
        rng: Arc::new(Mutex::new(SimRng::new(rng.lock().unwrap().next_u64()))),
        lost_answers: Arc::new(Mutex::new(SimRng::new(seed ^ LOST_ANSWERS_STREAM))),
        crash_tx,
        pause_tx,
        // The HA world runs the deployment's RBAC plus the HA overlay's Lease grants.
        grants: sc.deployment.map(|d| {
            let grants = if sc.ha.is_some() { with_ha_grants(d.grants()) } else { d.grants() };
            let granted = sc.health.as_ref().is_some_and(|h| h.rbac_grant);
            Arc::new(if granted { with_health_check_grants(grants) } else { grants })
        }),
        eviction_webhooks: sc.drains.iter().flat_map(|d| (0..d.replicas).map(replica_address)).collect(),
        eviction_certificates: eviction_certificates.clone(),
    };
    let apiserver = handle
        .create_node()
        .name("apiserver")
        .ip(apiserver::address().ip())
        .init(move || apiserver::serve(env.clone()))
        .build();
    let (s, k) = (store.clone(), kube_state.clone());
    handle
        .create_node()
        .name("kube")
        .ip(IpAddr::from([10, 0, 0, 2]))
        .init(move || kube::run(s.clone(), k.clone()))
        .build();
    let mut ha_rng = SimRng::new(seed ^ HA_STREAM);
    // The health-gated worlds' Prometheus, on a node of its own (it scrapes from the start and through every fault).
    let prometheus = sc.health.as_ref().map(|h| SimPrometheus::new(seed, h.query_faults));
    if let Some(prometheus) = &prometheus {
        let (p, s) = (prometheus.clone(), store.clone());
        handle
            .create_node()
            .name("prometheus")
            .ip(IpAddr::from([10, 0, 0, 9]))
            .init(move || p.clone().scrape(s.clone()))
            .build();
    }
    let eviction_tls = crate::harness::eviction_replicas::EvictionTls::of(&sc, eviction_certificates.as_ref());
    let controllers = start_operators(&handle, &store, &sc, seed, &mut ha_rng, prometheus.as_ref(), eviction_tls);
    let nodes = Arc::new(Nodes {
        apiserver: apiserver.id(),
        killed: Mutex::new((false, vec![false; controllers.len()])),
        paused: Mutex::new(vec![None; controllers.len()]),
        controllers,
    });
    let start = Instant::now();
    let fault_end = start + sc.fault_phase;
    let stage = Stage {
        seed,
        sc,
        store,
        start,
        fault_end,
        rng,
        knobs,
        kube: kube_state,
        nodes,
        prometheus,
        eviction_certificates,
    };

    // The actors, started in a fixed order: those drawing from the run's shared stream draw in this order.
    let mut actors = Actors::default();
    let pushes = pushes::draw(&stage);
    let leader_changes = leader_scaling::draw_leader_changes(&stage);
    pushes::start(&stage, pushes, &leader_changes, &mut actors);
    force::start_on_follower(&stage, &mut actors);
    force::start_on_plain(&stage, &mut actors);
    leader_scaling::start(&stage, leader_changes, &mut actors);
    no_downscale::start(&stage, &mut actors);
    faults::start(&stage, &mut actors);
    faults::start_crashes_after_deletions(&stage, crash_rx, &mut actors);
    mirror::start(&stage, &mut actors);
    mirror::start_delay_fixes(&stage, &mut actors);
    record::start_corruptions(&stage, &mut actors);
    record::start_reapplies(&stage, &mut actors);
    pod_users::start_sidecar_crashes(&stage, &mut actors);
    pod_users::start_relabels(&stage, &mut actors);
    pod_users::start_evictions(&stage, &mut actors);
    drains::start(&stage, &mut actors);
    if stage.sc.lost_answers {
        stage.knobs.lock().unwrap().lost_answer_chance = 0.1;
    }
    if stage.sc.faults.never_ready {
        stage.kube.lock().unwrap().never_ready_chance = 0.1;
    }
    ha_faults::start(&stage, ha_rng, pause_rx, &mut actors);

    // The fault phase ends: heal everything.
    tokio::time::sleep_until(fault_end).await;
    for t in actors.tasks {
        t.abort();
    }
    heal(&stage);
    for u in actors.users {
        let _ = u.await;
    }
    // Restarting a node that is running restarts it too: only bring back the ones that are down.
    let (apiserver_down, controllers_down) = stage.nodes.killed.lock().unwrap().clone();
    if apiserver_down {
        restart(stage.nodes.apiserver);
    }
    for (i, down) in controllers_down.into_iter().enumerate() {
        if down {
            restart(stage.nodes.controllers[i]);
        }
    }

    let converged_at = await_convergence(&stage.store, start, fault_end + stage.sc.settle_deadline).await;
    let slow_observations = stage.kube.lock().unwrap().slow_observations;
    judge(&stage.store, &stage.sc, seed, start, converged_at, slow_observations, stage.prometheus.as_ref())
}

/// The end of the fault phase: the network healed, frozen replicas resumed, the kubelet healed, every sidecar up,
/// every paused StatefulSet unpaused.
fn heal(stage: &Stage) {
    let (store, nodes) = (&stage.store, &stage.nodes);
    *stage.knobs.lock().unwrap() = Knobs::default();
    if let Some(prometheus) = &stage.prometheus {
        prometheus.heal();
    }
    let net = NetSim::current();
    for (i, node) in nodes.controllers.iter().enumerate() {
        net.unclog_node(*node);
        let frozen_since = nodes.paused.lock().unwrap()[i].take();
        if let Some(from) = frozen_since {
            Handle::current().resume(*node);
            let mut st = store.lock().unwrap();
            let to = st.elapsed();
            st.oracle.ha.frozen(identity(i as u32), from, to);
        }
    }
    net.unclog_node(nodes.apiserver);
    st_ha_faults_over(store);
    net.update_config(|c| *c = madsim::net::Config::default());
    stage.kube.lock().unwrap().heal();
    let mut st = store.lock().unwrap();
    let pods: Vec<String> = st.pods.keys().cloned().collect();
    for pod in pods {
        set_sidecar(&mut st, &pod, true);
    }
    // The kubelet sleeps until its next deadline; the heal moved deadlines earlier.
    st.wake_followers();
    let names: Vec<String> = st.statefulsets.keys().cloned().collect();
    for name in names {
        let paused = st.statefulsets[&name]
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(rollout_core::keys::ROLLOUT_PAUSED));
        if paused {
            kube::set_paused(&mut st, &name, false);
        }
    }
    st.trace("sim", "fault phase over: network healed, nodes restarted, pods heal; checking liveness");
}

/// Restarts a node from its init task. Killing first resets its sockets: madsim's `restart` alone leaves the old
/// process's bound addresses in place until its tasks are dropped, so the new process could not bind them.
pub(crate) fn restart(id: madsim::task::NodeId) {
    let handle = Handle::current();
    handle.kill(id);
    handle.restart(id);
}
