//! Faults of the HA world: replicas frozen past their lease, killed while leading, cut off from the API server.
//! Each reports its window to the oracle's reactions and a loss of the leader to the Lease ledger.

use crate::environment::apiserver::Knobs;
use crate::environment::store::{SharedStore, Store};
use crate::harness::{Actors, Nodes, Stage, restart};
use crate::oracle::election::LeaderLoss;
use crate::rng::SimRng;
use madsim::runtime::Handle;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The controller node whose process `writer` (an incarnation) is: the HA replica of that identity, or the one
/// controller node.
pub(crate) fn writer_node(store: &SharedStore, nodes: &Nodes, writer: u64) -> Option<usize> {
    if nodes.controllers.len() == 1 {
        return Some(0);
    }
    let st = store.lock().unwrap();
    let identity = st.oracle.ha.identity_of(writer)?;
    (0..nodes.controllers.len()).find(|i| crate::harness::replicas::identity(*i as u32) == identity)
}

/// Replica `identity` was killed, frozen or cut off: the Lease ledger measures the failover if it led while its group
/// had work.
pub(crate) fn leader_lost(st: &mut Store, identity: &str, how: LeaderLoss) {
    let (at, work) = (st.elapsed(), st.oracle.reactions.has_work());
    st.oracle.ha.leader_lost(at, identity, how, work);
}

/// The HA world's measurements close with the fault phase.
pub(crate) fn st_ha_faults_over(store: &SharedStore) {
    store.lock().unwrap().oracle.ha.faults_over();
}

/// Pauses HA replica `i` for `down` (unless it is down or paused already), then resumes it.
pub(crate) async fn pause_replica(store: &SharedStore, nodes: &Nodes, i: usize, down: Duration, why: &str) {
    let name = nodes.controller_name(i);
    {
        let mut paused = nodes.paused.lock().unwrap();
        if paused[i].is_some() || nodes.killed.lock().unwrap().1[i] {
            return;
        }
        let mut st = store.lock().unwrap();
        st.trace("fault", format!("{name} frozen {why} for {:.1}s", down.as_secs_f64()));
        let from = st.elapsed();
        paused[i] = Some(from);
        st.oracle.reactions.fault(format!("{name} frozen"), from, from + down);
        leader_lost(&mut st, &crate::harness::replicas::identity(i as u32), LeaderLoss::Frozen);
    }
    Handle::current().pause(nodes.controllers[i]);
    tokio::time::sleep(down).await;
    let frozen_since = nodes.paused.lock().unwrap()[i].take();
    if let Some(from) = frozen_since {
        Handle::current().resume(nodes.controllers[i]);
        let mut st = store.lock().unwrap();
        let to = st.elapsed();
        st.oracle.ha.frozen(crate::harness::replicas::identity(i as u32), from, to);
        st.trace("fault", format!("{name} resumes"));
    }
}

/// The HA world's own faults, from its own generator: replicas frozen for longer than the lease (at
/// random moments, and, through the API server, with a pass's live read in flight), and the leader killed while
/// its group has work (kept down 30-45 s, so another replica takes over; the failover is measured from the kill to
/// the first controller write another process commits).
#[allow(clippy::too_many_arguments)]
pub(crate) fn start_ha_faults(
    store: &SharedStore,
    knobs: &Arc<Mutex<Knobs>>,
    nodes: &Arc<Nodes>,
    mut r: SimRng,
    start: Instant,
    fault_phase: Duration,
    mut pause_rx: tokio::sync::mpsc::UnboundedReceiver<u64>,
    tasks: &mut Vec<tokio::task::JoinHandle<()>>,
) {
    let lease = rollout_core::election::ElectionConfig::new("").lease_duration;
    let latest = fault_phase.as_millis() as u64 * 9 / 10;
    knobs.lock().unwrap().pause_in_flight = 0.3;
    // A freeze of the leader with a request of its pass in flight (one at a time, 30 s apart at least), until
    // about when its Lease expires.
    let (s, n, mut pr) = (store.clone(), nodes.clone(), SimRng::new(r.next_u64()));
    tasks.push(tokio::spawn(async move {
        while let Some(writer) = pause_rx.recv().await {
            let Some(i) = writer_node(&s, &n, writer) else { continue };
            // Resumed from 2 s before its Lease expires by the API server's clock to 6 s after (before or after
            // another replica takes over, which takes at least the lease from its last renewal).
            let expires = s.lock().unwrap().oracle.ha.expires_at().unwrap_or_else(|| start.elapsed() + lease);
            let resume_at = (expires + pr.millis(0, 8_000)).saturating_sub(Duration::from_secs(2));
            let down = resume_at.saturating_sub(start.elapsed()).max(Duration::from_secs(1));
            if start.elapsed() + down + Duration::from_secs(5) >= fault_phase {
                continue;
            }
            {
                let mut st = s.lock().unwrap();
                st.oracle.ha.stats.paused_mid_pass += 1;
                st.oracle.ha.stats.long_pauses += u64::from(down > lease);
            }
            pause_replica(&s, &n, i, down, "with a request of its pass in flight").await;
            tokio::time::sleep(Duration::from_secs(30)).await;
        }
    }));
    // The leader frozen, while its group has work, until about when its Lease expires by the API server's clock
    // (from 1 s before to 0.5 s after): it resumes with work to do right at the edge of its lease. 1-2 a run.
    for _ in 0..r.range(1..3) {
        let from = r.millis(5_000, latest);
        let edge = Duration::from_millis(r.range(0..1_500));
        let (s, n) = (store.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + from).await;
            loop {
                if start.elapsed() + lease + Duration::from_secs(5) >= fault_phase {
                    return;
                }
                let (leader, expires) = {
                    let st = s.lock().unwrap();
                    (
                        st.oracle.ha.holder_process().filter(|_| st.oracle.reactions.has_work()),
                        st.oracle.ha.expires_at(),
                    )
                };
                let victim = leader.and_then(|p| writer_node(&s, &n, p));
                if let (Some(i), Some(expires)) = (victim, expires) {
                    // From 1 s before the expiry to 0.5 s after it.
                    let resume_at = (expires + edge).saturating_sub(Duration::from_secs(1));
                    let down = resume_at.saturating_sub(start.elapsed());
                    if !down.is_zero() {
                        pause_replica(&s, &n, i, down, "until the edge of its lease").await;
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
    // Freezes at random moments: 1-3 a run, each of the leader or another replica, some shorter than the lease.
    for _ in 0..r.range(1..4) {
        let at = r.millis(5_000, latest);
        let long = r.chance(0.7);
        let down = if long { lease + r.millis(1_000, 25_000) } else { r.millis(1_000, 10_000) };
        let (of_leader, other) = (r.chance(0.6), r.range(0..nodes.controllers.len() as u64) as usize);
        let (s, n) = (store.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            if Instant::now() + down >= start + fault_phase {
                return;
            }
            let holder = s.lock().unwrap().oracle.ha.holder_process();
            let leader = holder.and_then(|p| writer_node(&s, &n, p));
            let i = leader.filter(|_| of_leader).unwrap_or(other);
            if long {
                s.lock().unwrap().oracle.ha.stats.long_pauses += 1;
            }
            pause_replica(&s, &n, i, down, "(a process pause)").await;
        }));
    }
    // The leader killed while its group has work: 1-2 a run.
    for _ in 0..r.range(1..3) {
        let from = r.millis(5_000, latest);
        let down = r.millis(30_000, 45_000);
        let (s, n) = (store.clone(), nodes.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + from).await;
            loop {
                if start.elapsed() + down >= fault_phase {
                    return;
                }
                let leader = {
                    let st = s.lock().unwrap();
                    st.oracle.ha.holder_process().filter(|_| st.oracle.reactions.has_work())
                };
                let victim = leader.and_then(|p| Some((p, writer_node(&s, &n, p)?)));
                if let Some((process, i)) = victim
                    && !n.killed.lock().unwrap().1[i]
                    && n.paused.lock().unwrap()[i].is_none()
                {
                    let name = n.controller_name(i);
                    {
                        let mut st = s.lock().unwrap();
                        let at = st.elapsed();
                        st.oracle.ha.leader_killed(at, process);
                        st.oracle.reactions.fault(format!("leader {name} killed"), at, at + down);
                        leader_lost(&mut st, &crate::harness::replicas::identity(i as u32), LeaderLoss::Killed);
                        st.trace(
                            "fault",
                            format!(
                                "the leader {name} is killed while its group has work; back in {:.1}s",
                                down.as_secs_f64()
                            ),
                        );
                    }
                    n.set_controller_killed(i, true);
                    Handle::current().kill(n.controllers[i]);
                    tokio::time::sleep(down).await;
                    restart(n.controllers[i]);
                    n.set_controller_killed(i, false);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }));
    }
}

/// The HA world's faults, from the HA stream (`ha_rng`, after the replicas' clocks were drawn from it); the API
/// server asks through `pauses` for a replica to be frozen with a write in flight.
pub fn start(stage: &Stage, ha_rng: SimRng, pauses: tokio::sync::mpsc::UnboundedReceiver<u64>, actors: &mut Actors) {
    if stage.sc.ha.is_none() {
        return;
    }
    let (store, knobs, nodes) = (&stage.store, &stage.knobs, &stage.nodes);
    start_ha_faults(store, knobs, nodes, ha_rng, stage.start, stage.sc.fault_phase, pauses, &mut actors.tasks);
}
