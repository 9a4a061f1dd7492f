//! Users and kubelets acting on single pods: sidecars crashing while the pod stays Ready, pods relabelled out of
//! their StatefulSet and back, pods evicted or deleted by someone else.

use crate::environment::store::Store;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::zone_name;
use jiff::Timestamp;
use std::time::Duration;
use tokio::time::Instant;

/// Seeds the evictions' own generator (with the run's seed), so the world's other draws do not move.
pub(crate) const EVICTIONS_STREAM: u64 = 0x6576_6963_7469_6f6e;

/// Seeds the sidecar crashes' own generator.
pub(crate) const SIDECARS_STREAM: u64 = 0x7369_6465_6361_7273;

/// Seeds the relabelling user's own generator.
pub(crate) const RELABELS_STREAM: u64 = 0x7265_6c61_6265_6c73;

/// Relabels `pod` out of its StatefulSet's selector (`out`) or back; the pod's uid if that changed anything (a
/// running pod, not terminating, is relabelled out).
pub(crate) fn relabel(st: &mut Store, pod: &str, out: bool) -> Option<String> {
    let mut p = st.pods.get(pod).cloned()?;
    if out != crate::environment::objects::in_selector(&p) || (out && p.metadata.deletion_timestamp.is_some()) {
        return None;
    }
    let labels = p.metadata.labels.get_or_insert_default();
    if out {
        labels.insert(crate::environment::objects::DEBUG_LABEL.to_string(), "debug".to_string());
    } else {
        labels.remove(crate::environment::objects::DEBUG_LABEL);
    }
    let uid = p.metadata.uid.clone().unwrap_or_default();
    st.put_pod(p);
    let what = if out { "out of its StatefulSet's selector" } else { "back into its StatefulSet's selector" };
    st.trace("user", format!("relabelled pod {pod} {what}"));
    Some(uid)
}

/// Sets `pod`'s sidecar ready or crashed, leaving its Ready condition; the pod's uid if that changed anything.
pub(crate) fn set_sidecar(st: &mut Store, pod: &str, ready: bool) -> Option<String> {
    let mut p = st.pods.get(pod).cloned()?;
    let ready_now = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.iter().find(|c| c.name == crate::environment::objects::SIDECAR))
        .map(|c| c.ready)?;
    if ready_now == ready
        || p.metadata.deletion_timestamp.is_some()
        || (!ready && !crate::environment::objects::is_ready(&p))
    {
        return None;
    }
    // Pods of odd ordinals keep their sidecar running while its readiness probe fails; the others' crashes.
    let still_running = pod.rsplit('-').next().and_then(|o| o.parse::<u32>().ok()).is_some_and(|o| o % 2 == 1);
    crate::environment::objects::set_sidecar_ready(&mut p, ready, still_running, Timestamp::now());
    let uid = p.metadata.uid.clone().unwrap_or_default();
    st.put_pod(p);
    let what = match (ready, still_running) {
        (true, _) => "recovered",
        (false, false) => "crashed (the pod still reports Ready)",
        (false, true) => "fails its readiness probe, running (the pod still reports Ready)",
    };
    st.trace("kubelet", format!("sidecar of pod {pod} {what}"));
    if !ready {
        let down = crate::oracle::activity::WorldEvent::SidecarDown { pod: pod.to_string(), running: still_running };
        st.oracle.activity.happened(down);
    }
    Some(uid)
}

/// Someone else deletes `pod` (an eviction): it becomes terminating, and the kubelet and the StatefulSet controller
/// replace it as after any deletion. A pod already terminating or gone is left alone.
pub(crate) fn evict(st: &mut Store, pod: &str) {
    let Some(mut p) = st.pods.get(pod).cloned() else { return };
    if p.metadata.deletion_timestamp.is_some() {
        return;
    }
    p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()));
    st.put_pod(p);
    st.trace("user", format!("evicted pod {pod}"));
}

/// Every 10-40 s a pod's sidecar crashes for 5-30 s while the kubelet still reports the pod Ready.
pub fn start_sidecar_crashes(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.sidecars {
        return;
    }
    let (store, zones, replicas) = (stage.store.clone(), stage.sc.zones, stage.sc.replicas);
    let mut r = SimRng::new(stage.seed ^ SIDECARS_STREAM);
    actors.tasks.push(tokio::spawn(async move {
        loop {
            tokio::time::sleep(r.millis(10_000, 40_000)).await;
            let pod = format!("{}-{}", zone_name(r.range(0..u64::from(zones)) as u32), r.range(0..u64::from(replicas)));
            let crashed = set_sidecar(&mut store.lock().unwrap(), &pod, false);
            let Some(uid) = crashed else { continue };
            tokio::time::sleep(r.millis(5_000, 30_000)).await;
            let mut st = store.lock().unwrap();
            if st.pods.get(&pod).and_then(|p| p.metadata.uid.as_ref()) == Some(&uid) {
                set_sidecar(&mut st, &pod, true);
            }
        }
    }));
}

/// Two or three times a user relabels a running pod out of its StatefulSet's selector for 10-40 s and back; not
/// stopped with the fault phase, so every pod relabelled is relabelled back.
pub fn start_relabels(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.relabels {
        return;
    }
    let (store, zones, replicas, phase) =
        (stage.store.clone(), stage.sc.zones, stage.sc.replicas, stage.sc.fault_phase);
    let start = stage.start;
    let mut r = SimRng::new(stage.seed ^ RELABELS_STREAM);
    actors.users.push(tokio::spawn(async move {
        let latest = (phase.as_millis() as u64).saturating_sub(45_000).max(10_001);
        let mut starts: Vec<u64> = (0..r.range(2..4)).map(|_| r.range(10_000..latest)).collect();
        starts.sort_unstable();
        for at in starts {
            tokio::time::sleep_until((start + Duration::from_millis(at)).max(Instant::now())).await;
            let pod = format!("{}-{}", zone_name(r.range(0..u64::from(zones)) as u32), r.range(0..u64::from(replicas)));
            let hold = r.millis(10_000, 40_000);
            let Some(uid) = relabel(&mut store.lock().unwrap(), &pod, true) else { continue };
            tokio::time::sleep(hold).await;
            let mut st = store.lock().unwrap();
            if st.pods.get(&pod).and_then(|p| p.metadata.uid.as_ref()) == Some(&uid) {
                relabel(&mut st, &pod, false);
            }
        }
    }));
}

/// Someone else deletes a pod of a random zone every 5-30 s.
pub fn start_evictions(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.evictions {
        return;
    }
    let (store, zones) = (stage.store.clone(), stage.sc.zones);
    let mut r = SimRng::new(stage.seed ^ EVICTIONS_STREAM);
    actors.tasks.push(tokio::spawn(async move {
        loop {
            tokio::time::sleep(r.millis(5_000, 30_000)).await;
            let sts = zone_name(r.range(0..u64::from(zones)) as u32);
            let mut st = store.lock().unwrap();
            let replicas = st.statefulsets.get(&sts).and_then(|s| s.spec.as_ref()?.replicas).unwrap_or(0).max(0);
            let pod = format!("{sts}-{}", r.range(0..replicas.max(1) as u64));
            evict(&mut st, &pod);
        }
    }));
}
