//! Node drains: evicting pods through the API server's eviction path as `kubectl drain` does (concurrently per node,
//! retrying 429 with backoff, some as dry runs), replica restarts of the eviction webhook, and intent wipes.

use crate::environment::client::SimCluster;
use crate::environment::store::SharedStore;
use crate::harness::{Actors, Nodes, Stage, restart};
use crate::rng::SimRng;
use crate::scenario::drains::{Drains, NODES_PER_ZONE};
use crate::scenario::{GROUP, SECOND_GROUP, Scenario};
use madsim::runtime::Handle;
use rollout_operator::cluster::ApiError;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The drains world's actors: the operator replicas serving the pod-eviction webhook (restarted now and
/// then during the fault phase; replica 0 is the controller's node when `hosted` names it), and the node-drain actor
/// on a node of its own. Everything is drawn from the drains' own generator.
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_drains(
    handle: &Handle,
    store: &SharedStore,
    seed: u64,
    sc: &Scenario,
    drains: crate::scenario::drains::Drains,
    hosted: Option<Arc<Nodes>>,
    eviction_certificates: Option<&crate::harness::webhook_servers::ServedCertificates>,
    start: Instant,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let mut r = SimRng::new(seed ^ crate::actors::drains::DRAINS_STREAM);
    let tls = crate::harness::eviction_replicas::EvictionTls::of(sc, eviction_certificates);
    if tls.is_some() {
        // The deployments' webhook configurations; the prepare-downscale replicas install them in worlds that run
        // those too.
        let mut st = store.lock().unwrap();
        let webhook_world =
            sc.scaling.as_ref().is_some_and(|s| s.admission == crate::scenario::scaling::Admission::Webhook);
        if !webhook_world {
            for configuration in crate::environment::tls::installed_configurations() {
                st.put_webhook_configuration(configuration);
            }
        }
        st.put_webhook_configuration(crate::environment::tls::installed_pod_eviction_configuration());
    }
    let incarnations = Arc::new(AtomicU64::new(crate::harness::eviction_replicas::REPLICA_INCARNATION_BASE));
    let mut replicas = Vec::new();
    for i in 0..drains.replicas {
        // Replica 0 may be the controller's process (`hosted`): its crashes are that node's.
        if let (0, Some(nodes)) = (i, &hosted) {
            replicas.push(nodes.controllers[0]);
            continue;
        }
        let (store, incarnations, evictor, feed, tls) =
            (store.clone(), incarnations.clone(), drains.evictor, drains.feed(), tls.clone());
        let node = handle
            .create_node()
            .name(format!("operator-replica-{i}"))
            .ip(crate::harness::eviction_replicas::replica_ip(i))
            .init(move || {
                let incarnation = incarnations.fetch_add(1, Ordering::Relaxed);
                crate::harness::eviction_replicas::serve_replica(
                    store.clone(),
                    i,
                    incarnation,
                    evictor,
                    feed,
                    tls.clone(),
                )
            })
            .build();
        replicas.push(node.id());
    }
    for (at, replica, down) in crate::actors::drains::replica_restarts(&mut r, drains.replicas, sc.fault_phase) {
        let (store, id) = (store.clone(), replicas[replica]);
        // The controller's node too: flagged down as its own crashes are, so that the end of the fault phase brings
        // it back if this restart is cut short.
        let controller = hosted.clone().filter(|_| replica == 0);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            {
                let mut st = store.lock().unwrap();
                st.trace("fault", format!("operator-{replica} crashes, restarted in {:.1}s", down.as_secs_f64()));
                st.oracle.activity.happened(crate::oracle::activity::WorldEvent::ReplicaCrashed { replica });
            }
            if let Some(nodes) = &controller {
                nodes.set_controller_killed(0, true);
            }
            Handle::current().kill(id);
            tokio::time::sleep(down).await;
            restart(id);
            if let Some(nodes) = &controller {
                nodes.set_controller_killed(0, false);
            }
        }));
    }
    let node = handle.create_node().name("drain").ip(IpAddr::from([10, 0, 0, 12])).build();
    let (store, zones, phase) = (store.clone(), sc.zones, sc.fault_phase);
    let groups: &'static [&'static str] = if sc.second_group { &[GROUP, SECOND_GROUP] } else { &[GROUP] };
    let drainer = SimRng::new(r.next_u64());
    if drains.intent_wipes {
        let (store, mut wiper, phase) = (store.clone(), SimRng::new(seed ^ INTENT_WIPES_STREAM), sc.fault_phase);
        tasks.push(tokio::spawn(async move {
            while start.elapsed() < phase {
                tokio::time::sleep(wiper.millis(2_000, 10_000)).await;
                let mut st = store.lock().unwrap();
                let carrying: Vec<k8s_openapi::api::apps::v1::StatefulSet> = st
                    .statefulsets
                    .values()
                    .filter(|s| {
                        s.metadata
                            .annotations
                            .as_ref()
                            .is_some_and(|a| a.keys().any(|k| crate::oracle::checker::is_intent_key(k)))
                    })
                    .cloned()
                    .collect();
                for mut sts in carrying {
                    if let Some(a) = sts.metadata.annotations.as_mut() {
                        a.retain(|k, _| !crate::oracle::checker::is_intent_key(k));
                    }
                    let name = sts.metadata.name.clone().unwrap_or_default();
                    st.put_statefulset(sts);
                    st.oracle.checker.drains.intents_wiped += 1;
                    st.trace("user", format!("re-applied {name} from its manifest (its eviction intents dropped)"));
                }
            }
        }));
    }
    if drains.budget_edits {
        // Drawn after everything the world without edits draws, so those draws stay the same.
        let (editor, store, drains, node) = (SimRng::new(r.next_u64()), store.clone(), drains.clone(), node.clone());
        tasks.push(tokio::spawn(async move {
            let _ = node.spawn(crate::actors::budget_editors::edit_budgets(store, editor, drains, start, phase)).await;
        }));
    }
    if drains.chase {
        // Drawn after everything the world without chasing draws, so those draws stay the same.
        let (chaser, store, node) = (SimRng::new(r.next_u64()), store.clone(), node.clone());
        store.lock().unwrap().chase = Some(Default::default());
        tasks.push(tokio::spawn(async move {
            let _ = node.spawn(chase_the_controller(store, chaser, zones, start + phase)).await;
        }));
    }
    tasks.push(tokio::spawn(async move {
        let _ =
            node.spawn(crate::actors::drains::drain_nodes(store, drainer, drains, groups, zones, start, phase)).await;
    }));
}

/// The chasing evictions (`Drains::chase`): at each trigger the API server queues, two evictions of the
/// StatefulSet's other pods (not terminating) and one of the next zone's, each sent once 0-20 ms later, until
/// `until`.
async fn chase_the_controller(store: SharedStore, mut r: SimRng, zones: u32, until: Instant) {
    let Ok(api) = SimCluster::connect(crate::environment::apiserver::DRAIN_INCARNATION_BASE + (1 << 20)).await else {
        return;
    };
    let changes = store.lock().unwrap().subscribe();
    let mut sent = Vec::new();
    while Instant::now() < until {
        let seen = changes.version();
        let due: Vec<String> =
            store.lock().unwrap().chase.as_mut().map(|c| c.queue.drain(..).collect()).unwrap_or_default();
        for sts in due {
            let targets = {
                let st = store.lock().unwrap();
                let candidates = |sts: &str| -> Vec<String> {
                    st.pods
                        .values()
                        .filter(|p| {
                            crate::environment::objects::owner_of(p) == sts && p.metadata.deletion_timestamp.is_none()
                        })
                        .filter_map(|p| p.metadata.name.clone())
                        .collect()
                };
                let mut own = candidates(&sts);
                let mut targets = Vec::new();
                for _ in 0..2 {
                    if !own.is_empty() {
                        targets.push(own.swap_remove(r.range(0..own.len() as u64) as usize));
                    }
                }
                let neighbour = next_zone(&sts, zones);
                let others = candidates(&neighbour);
                if !others.is_empty() {
                    targets.push(others[r.range(0..others.len() as u64) as usize].clone());
                }
                targets
            };
            for pod in targets {
                let (api, store, delay) = (api.clone(), store.clone(), r.millis(0, 20));
                sent.push(tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let allowed = api.evict_pod(&pod, false, false).await.is_ok();
                    let mut st = store.lock().unwrap();
                    st.oracle.checker.drains.chased += 1;
                    st.oracle.checker.drains.chased_allowed += u64::from(allowed);
                }));
            }
        }
        let wait = until.saturating_duration_since(Instant::now());
        let _ = tokio::time::timeout(wait, changes.changed_since(seen)).await;
    }
    for task in sent {
        let _ = task.await;
    }
}

/// The StatefulSet of the zone after `sts`'s in its group (`-zone-a` -> `-zone-b`, the last back to `-zone-a`).
fn next_zone(sts: &str, zones: u32) -> String {
    let Some((group, zone)) = sts.rsplit_once("-zone-") else { return sts.to_string() };
    let index = zone.bytes().next().map_or(0, |b| u32::from(b.saturating_sub(b'a')));
    format!("{group}-zone-{}", (b'a' + ((index + 1) % zones.max(1)) as u8) as char)
}

/// Seeds the user who re-applies the StatefulSets during drains.
pub(crate) const INTENT_WIPES_STREAM: u64 = 0x7769_7065_696e_7473;

/// Seeds the drains world's own generator, so the run's other draws are those of the world without drains.
pub const DRAINS_STREAM: u64 = 0x6472_6169_6e73_2121;

/// The node-drain actor: `count` drains (drawn from `r`) start at random times of the fault phase, each of one node
/// (a zone's pods whose ordinal is the node's index modulo [`NODES_PER_ZONE`]), concurrently with each other. A
/// drain evicts its node's pods concurrently, each retried on 429 (and on errors) with exponential backoff from 1 s
/// to 8 s plus jitter, until it is evicted or the pod is gone; a fifth of the drains are dry runs
/// (`kubectl drain --dry-run=server`), half by the request's `dryRun`, half by the Eviction's `deleteOptions`.
pub async fn drain_nodes(
    store: SharedStore,
    mut r: SimRng,
    drains: Drains,
    groups: &[&str],
    zones: u32,
    start: Instant,
    phase: Duration,
) {
    let until = start + phase;
    let count = r.range(drains.drains.0..drains.drains.1 + 1);
    let mut plan: Vec<(Duration, u32, u32, bool, u64)> = (0..count)
        .map(|_| {
            let at = r.millis(5_000, phase.as_millis() as u64 * 4 / 5);
            let zone = r.range(0..u64::from(zones)) as u32;
            let node = r.range(0..u64::from(NODES_PER_ZONE)) as u32;
            (at, zone, node, r.chance(0.2), r.next_u64())
        })
        .collect();
    plan.sort_unstable();
    // With a second rollout group, a third of the drains are of its nodes (drawn after the plan, so the one-group
    // worlds draw as before).
    let of_group: Vec<&str> =
        plan.iter().map(|_| if groups.len() > 1 && r.chance(0.33) { groups[1] } else { groups[0] }).collect();
    let mut running = Vec::new();
    for (n, ((at, zone, node, dry, seed), group)) in plan.into_iter().zip(of_group).enumerate() {
        tokio::time::sleep_until((start + at).max(Instant::now())).await;
        let sts = format!("{group}-zone-{}", (b'a' + zone as u8) as char);
        let pods: Vec<String> = {
            let mut st = store.lock().unwrap();
            let replicas = st.statefulsets.get(&sts).and_then(|s| s.spec.as_ref()?.replicas).unwrap_or(0).max(0) as u32;
            let pods: Vec<String> =
                (0..replicas).filter(|o| o % NODES_PER_ZONE == node).map(|o| format!("{sts}-{o}")).collect();
            let how = if dry { " (dry run)" } else { "" };
            st.trace("drain", format!("drains node {sts}-node-{node}{how}: {}", pods.join(", ")));
            pods
        };
        let incarnation = crate::environment::apiserver::DRAIN_INCARNATION_BASE + n as u64;
        let Ok(api) = SimCluster::connect(incarnation).await else { continue };
        let mut r = SimRng::new(seed);
        for pod in pods {
            let options = dry && r.chance(0.5);
            let (api, mut r) = (api.clone(), SimRng::new(r.next_u64()));
            running.push(tokio::spawn(async move {
                evict_until_done(&api, &pod, dry && !options, options, &mut r, until).await
            }));
        }
    }
    for task in running {
        let _ = task.await;
    }
}

/// One pod of a drain: evicted, retried with backoff on a denial or an error, until it is evicted or gone (or
/// `until`).
async fn evict_until_done(
    api: &SimCluster,
    pod: &str,
    dry_run: bool,
    options_dry_run: bool,
    r: &mut SimRng,
    until: Instant,
) {
    let mut backoff = Duration::from_secs(1);
    while Instant::now() < until {
        match api.evict_pod(pod, dry_run, options_dry_run).await {
            Ok(()) | Err(ApiError::NotFound(_)) => return,
            // 429 (the budget, or budgets not loaded yet), 500 (the webhook failed), or no answer: retry.
            Err(_) => {}
        }
        tokio::time::sleep(backoff + r.millis(0, 1_000)).await;
        backoff = (backoff * 2).min(Duration::from_secs(8));
    }
}

/// Restarts of the operator replicas during the fault phase (the drains world's own faults): 0-3, each a replica
/// down for 1-15 s; a restarted replica has lost its in-process state and lists the budgets again.
pub fn replica_restarts(r: &mut SimRng, replicas: usize, phase: Duration) -> Vec<(Duration, usize, Duration)> {
    let count = r.range(0..4);
    (0..count)
        .map(|_| {
            let at = r.millis(5_000, phase.as_millis() as u64 * 4 / 5);
            (at, r.range(0..replicas as u64) as usize, r.millis(1_000, 15_000))
        })
        .collect()
}

/// The drains world's actors: node drains, budget editors, replica restarts and intent wipes.
pub fn start(stage: &Stage, actors: &mut Actors) {
    let Some(drains) = stage.sc.drains.clone() else { return };
    let hosted = stage.sc.one_operator_process().then(|| stage.nodes.clone());
    start_drains(
        &Handle::current(),
        &stage.store,
        stage.seed,
        &stage.sc,
        drains,
        hosted,
        stage.eviction_certificates.as_ref(),
        stage.start,
        &mut actors.tasks,
    );
}
