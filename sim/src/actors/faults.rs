//! The fault injector: partitions, message loss, latency and watch-delay spikes, API server restarts, controller
//! crashes (also right after a deletion), watch expiry, pod crash loops, pods that never become ready, refused pod
//! creation and pauses. Each injected fault reports its window to the oracle's reactions (and, in the HA world, a
//! replica cut off or killed to the Lease ledger); the reports draw nothing and wake no one.

use crate::actors::ha_faults::{leader_lost, writer_node};
use crate::environment::apiserver::Knobs;
use crate::environment::store::SharedStore;
use crate::harness::{Actors, Nodes, Stage, restart};
use crate::oracle::election::LeaderLoss;
use crate::scenario::faults::FaultMix;
use crate::scenario::zone_name;
use madsim::net::NetSim;
use madsim::runtime::Handle;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FaultKind {
    Partition,
    MessageLoss,
    LatencySpike,
    WatchDelaySpike,
    ApiServerRestart,
    ControllerCrash,
    WatchExpiry,
    PodCrash,
    Quota,
    Pause,
}

pub(crate) fn fault_kinds(m: &FaultMix) -> Vec<FaultKind> {
    let mut v = Vec::new();
    let table = [
        (m.partitions, FaultKind::Partition),
        (m.message_loss, FaultKind::MessageLoss),
        (m.latency_spikes, FaultKind::LatencySpike),
        (m.watch_delay_spikes, FaultKind::WatchDelaySpike),
        (m.apiserver_restarts, FaultKind::ApiServerRestart),
        (m.controller_crashes, FaultKind::ControllerCrash),
        (m.watch_expiry, FaultKind::WatchExpiry),
        (m.pod_crashes, FaultKind::PodCrash),
        (m.quota, FaultKind::Quota),
        (m.pauses, FaultKind::Pause),
    ];
    for (on, k) in table {
        if on {
            v.push(k);
        }
    }
    v
}

pub(crate) struct FaultCtx {
    store: SharedStore,
    knobs: Arc<Mutex<Knobs>>,
    kube: crate::environment::kube::SharedKube,
    nodes: Arc<Nodes>,
    zones: u32,
    replicas: u32,
    slow_commits: bool,
    fault_end: Instant,
}

impl FaultCtx {
    fn trace(&self, what: String) {
        self.store.lock().unwrap().trace("fault", what);
    }

    /// Reports a fault injected now that heals after `dur` (by the end of the fault phase at the latest).
    fn window(&self, what: String, dur: Duration) {
        let mut st = self.store.lock().unwrap();
        let from = st.elapsed();
        let to = st.since_start((Instant::now() + dur).min(self.fault_end));
        st.oracle.reactions.fault(what, from, to);
    }

    /// In the HA world: replica node `i` lost as `how` (the Lease ledger measures a failover if it led).
    fn replica_lost(&self, i: usize, how: LeaderLoss, dur: Duration) {
        if self.nodes.controllers.len() < 2 {
            return;
        }
        let identity = crate::harness::replicas::identity(i as u32);
        let mut st = self.store.lock().unwrap();
        if how == LeaderLoss::CutOff {
            let from = st.elapsed();
            st.oracle.ha.cut_off(identity.clone(), from, from + dur);
        }
        leader_lost(&mut st, &identity, how);
    }
}

pub(crate) async fn inject(kind: FaultKind, dur: Duration, pick: u64, ctx: &FaultCtx) {
    let secs = dur.as_secs_f64();
    let zone = zone_name((pick % u64::from(ctx.zones)) as u32);
    match kind {
        FaultKind::Partition => {
            let i = ctx.nodes.pick_controller(pick);
            let name = ctx.nodes.controller_name(i);
            ctx.trace(format!("partition: {name} cut off from the API server for {secs:.1}s"));
            ctx.window(format!("partition ({name} cut off)"), dur);
            ctx.replica_lost(i, LeaderLoss::CutOff, dur);
            NetSim::current().clog_node(ctx.nodes.controllers[i]);
            tokio::time::sleep(dur).await;
            NetSim::current().unclog_node(ctx.nodes.controllers[i]);
            ctx.trace("partition healed".into());
        }
        FaultKind::MessageLoss => {
            let rate = 0.05 + (pick % 30) as f64 / 100.0;
            ctx.trace(format!("message loss {:.0}% for {secs:.1}s", rate * 100.0));
            ctx.window(format!("message loss {:.0}%", rate * 100.0), dur);
            NetSim::current().update_config(|c| c.packet_loss_rate = rate);
            tokio::time::sleep(dur).await;
            NetSim::current().update_config(|c| c.packet_loss_rate = 0.0);
            ctx.trace("message loss over".into());
        }
        FaultKind::LatencySpike => {
            let delay_ms = if ctx.slow_commits { (500, 20_000) } else { (500, 4_000) };
            ctx.trace(format!(
                "API latency spike ({:.1}-{:.0}s per request) for {secs:.1}s",
                delay_ms.0 as f64 / 1000.0,
                delay_ms.1 as f64 / 1000.0
            ));
            ctx.window("API latency spike".to_string(), dur);
            ctx.knobs.lock().unwrap().api_delay_ms = delay_ms;
            NetSim::current().update_config(|c| c.send_latency = Duration::from_millis(50)..Duration::from_millis(500));
            tokio::time::sleep(dur).await;
            ctx.knobs.lock().unwrap().api_delay_ms = Knobs::default().api_delay_ms;
            NetSim::current().update_config(|c| c.send_latency = madsim::net::Config::default().send_latency);
            ctx.trace("latency back to normal".into());
        }
        FaultKind::WatchDelaySpike => {
            ctx.trace(format!("watch events delayed 2-12s for {secs:.1}s"));
            ctx.window("watch events delayed".to_string(), dur);
            ctx.knobs.lock().unwrap().event_delay_ms = (2_000, 12_000);
            tokio::time::sleep(dur).await;
            ctx.knobs.lock().unwrap().event_delay_ms = Knobs::default().event_delay_ms;
            ctx.trace("watch delay back to normal".into());
        }
        FaultKind::ApiServerRestart => {
            let down = Duration::from_millis(500 + pick % 10_000);
            ctx.trace(format!("API server crashes, back in {:.1}s", down.as_secs_f64()));
            ctx.window("API server crash".to_string(), down);
            ctx.nodes.set_api_killed(true);
            {
                let mut st = ctx.store.lock().unwrap();
                st.apiserver_down = true;
                st.apiserver_crashes += 1;
            }
            Handle::current().kill(ctx.nodes.apiserver);
            tokio::time::sleep(down).await;
            restart(ctx.nodes.apiserver);
            ctx.nodes.set_api_killed(false);
        }
        FaultKind::ControllerCrash => {
            let down = Duration::from_millis(500 + pick % 20_000);
            let i = ctx.nodes.pick_controller(pick);
            let name = ctx.nodes.controller_name(i);
            ctx.trace(format!("{name} process crashes, restarted in {:.1}s", down.as_secs_f64()));
            ctx.window(format!("{name} crash"), down);
            ctx.replica_lost(i, LeaderLoss::Killed, down);
            ctx.nodes.set_controller_killed(i, true);
            Handle::current().kill(ctx.nodes.controllers[i]);
            tokio::time::sleep(down).await;
            restart(ctx.nodes.controllers[i]);
            ctx.nodes.set_controller_killed(i, false);
        }
        FaultKind::WatchExpiry => {
            ctx.trace(format!("watches expire every 1-10s and resumes are often too old, for {secs:.1}s"));
            ctx.window("watch expiry".to_string(), dur);
            {
                let mut k = ctx.knobs.lock().unwrap();
                k.watch_lifetime_s = (1, 10);
                k.gone_chance = 0.5;
            }
            tokio::time::sleep(dur).await;
            let mut k = ctx.knobs.lock().unwrap();
            k.watch_lifetime_s = Knobs::default().watch_lifetime_s;
            k.gone_chance = 0.0;
        }
        FaultKind::PodCrash => {
            let pod = format!("{zone}-{}", (pick >> 8) % u64::from(ctx.replicas));
            let until = Instant::now() + dur * 3;
            let live =
                ctx.store.lock().unwrap().pods.get(&pod).is_some_and(|p| p.metadata.deletion_timestamp.is_none());
            if live {
                ctx.window(format!("pod {pod} crash-looping"), dur * 3);
            }
            let mut st = ctx.store.lock().unwrap();
            ctx.kube.lock().unwrap().crash(&mut st, &pod, until);
        }
        FaultKind::Quota => {
            ctx.trace(format!("pod creation in {zone} refused (quota) for {secs:.1}s"));
            ctx.window(format!("pod creation in {zone} refused (quota)"), dur);
            ctx.kube.lock().unwrap().quota_until.insert(zone, Instant::now() + dur);
        }
        FaultKind::Pause => {
            ctx.window(format!("{zone} paused"), dur);
            crate::environment::kube::set_paused(&mut ctx.store.lock().unwrap(), &zone, true);
            tokio::time::sleep(dur).await;
            crate::environment::kube::set_paused(&mut ctx.store.lock().unwrap(), &zone, false);
        }
    }
}

/// The fault phase's faults: how many, of which kinds, when and for how long, from the run's shared stream; each
/// injected only if it heals before the phase ends.
pub fn start(stage: &Stage, actors: &mut Actors) {
    let sc = &stage.sc;
    let kinds = fault_kinds(&sc.faults);
    if kinds.is_empty() {
        return;
    }
    let (start, fault_end) = (stage.start, stage.fault_end);
    let count = stage.rng.lock().unwrap().range(sc.fault_count.0..sc.fault_count.1 + 1);
    for _ in 0..count {
        let (kind, at, dur, pick) = {
            let mut r = stage.rng.lock().unwrap();
            let kind = kinds[r.range(0..kinds.len() as u64) as usize];
            let at = r.millis(1_000, sc.fault_phase.as_millis() as u64 * 9 / 10);
            let dur = r.secs(2, 60);
            (kind, at, dur, r.next_u64())
        };
        let ctx = FaultCtx {
            store: stage.store.clone(),
            knobs: stage.knobs.clone(),
            kube: stage.kube.clone(),
            nodes: stage.nodes.clone(),
            zones: sc.zones,
            replicas: sc.replicas,
            slow_commits: sc.slow_commits,
            fault_end,
        };
        actors.tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start + at).await;
            if Instant::now() + dur < fault_end {
                inject(kind, dur, pick, &ctx).await;
            }
        }));
    }
}

/// With `crash-after-delete`: the API server tells which writer's deletion just committed (`crashes`), and that
/// writer's node crashes at once and restarts after a delay drawn once from the run's shared stream.
pub fn start_crashes_after_deletions(
    stage: &Stage,
    mut crashes: tokio::sync::mpsc::UnboundedReceiver<u64>,
    actors: &mut Actors,
) {
    if !stage.sc.faults.crash_after_delete {
        return;
    }
    stage.knobs.lock().unwrap().crash_after_delete = 0.05;
    let (store, nodes, fault_end) = (stage.store.clone(), stage.nodes.clone(), stage.fault_end);
    let delay = stage.rng.lock().unwrap().millis(1_000, 10_000);
    actors.tasks.push(tokio::spawn(async move {
        while let Some(writer) = crashes.recv().await {
            if Instant::now() + delay >= fault_end {
                continue;
            }
            // The writer's node (the one controller node outside the HA world).
            let Some(i) = writer_node(&store, &nodes, writer) else { continue };
            let name = nodes.controller_name(i);
            {
                let mut st = store.lock().unwrap();
                st.trace("fault", format!("{name} crashes right after its deletion committed"));
                let from = st.elapsed();
                st.oracle.reactions.fault(format!("{name} crash after its deletion"), from, from + delay);
                if nodes.controllers.len() > 1 {
                    leader_lost(&mut st, &crate::harness::replicas::identity(i as u32), LeaderLoss::Killed);
                }
            }
            nodes.set_controller_killed(i, true);
            Handle::current().kill(nodes.controllers[i]);
            tokio::time::sleep(delay).await;
            restart(nodes.controllers[i]);
            nodes.set_controller_killed(i, false);
        }
    }));
}
