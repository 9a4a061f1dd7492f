//! The mirror worlds' user (an HPA) changing the reference resource's replicas.

use crate::environment::store::Store;
use crate::harness::populate::IPV6_DELAY_URL;
use crate::harness::populate::VALID_DELAY;
use crate::harness::populate::VALID_DELAY_URL;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::GROUP;
use std::time::Duration;

/// Seeds the reference user's own generator, and the delayed-downscale pods'.
pub(crate) const MIRROR_STREAM: u64 = 0x6d69_7272_6f72_7321;

/// Seeds the user who corrects malformed delayed-downscale annotations.
pub(crate) const DELAY_FIX_STREAM: u64 = 0x6465_6c61_7966_6978;

/// Sets the mirror worlds' reference resource's `spec.replicas` (the user's, or an HPA's, change).
pub(crate) fn set_reference(st: &mut Store, replicas: u32) {
    let key = ("replicatemplates".to_string(), GROUP.to_string());
    let at = st.elapsed();
    let object = st.scale_targets.entry(key).or_insert_with(|| serde_json::json!({"spec": {}, "status": {}}));
    object["spec"]["replicas"] = serde_json::json!(replicas);
    st.world.reference_history.push((at, replicas));
    st.trace("user", format!("ReplicaTemplate {GROUP}: spec.replicas = {replicas}"));
    st.oracle.activity.happened(crate::oracle::activity::WorldEvent::ReferenceScaled { replicas });
}

/// The reference resource's `spec.replicas` and `status.replicas`, in the mirror worlds.
pub(crate) fn reference_replicas(st: &Store) -> Option<(Option<i64>, Option<i64>)> {
    let object = st.scale_targets.get(&("replicatemplates".to_string(), GROUP.to_string()))?;
    Some((object.pointer("/spec/replicas")?.as_i64(), object.pointer("/status/replicas").and_then(|v| v.as_i64())))
}

/// The mirror worlds' HPA: changes the reference resource's replicas 6-14 times in the fault phase.
pub fn start(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.mirror {
        return;
    }
    let (store, fault_phase, start) = (stage.store.clone(), stage.sc.fault_phase, stage.start);
    let mut r = SimRng::new(stage.seed ^ MIRROR_STREAM);
    actors.tasks.push(tokio::spawn(async move {
        let count = r.range(6..15);
        let mut changes: Vec<(Duration, u32)> = (0..count)
            .map(|_| (r.millis(5_000, fault_phase.as_millis() as u64 * 9 / 10), r.range(1..6) as u32))
            .collect();
        changes.sort_unstable();
        for (at, to) in changes {
            tokio::time::sleep_until(start + at).await;
            set_reference(&mut store.lock().unwrap(), to);
        }
    }));
}

/// A user who notices the StatefulSets the operator refuses to scale and corrects their delayed-downscale
/// annotations, 20-120 s in.
pub fn start_delay_fixes(stage: &Stage, actors: &mut Actors) {
    let sc = &stage.sc;
    if !(sc.delay_annotations || sc.long_delays) {
        return;
    }
    let (store, start) = (stage.store.clone(), stage.start);
    let mut r = SimRng::new(stage.seed ^ DELAY_FIX_STREAM);
    let at = r.millis(20_000, 120_000);
    let url = if sc.long_delays { IPV6_DELAY_URL } else { VALID_DELAY_URL };
    actors.tasks.push(tokio::spawn(async move {
        tokio::time::sleep_until(start + at).await;
        let mut st = store.lock().unwrap();
        for name in st.world.delayed_downscale_malformed.clone() {
            let changes = std::collections::BTreeMap::from([
                (rollout_core::keys::ROLLOUT_DELAYED_DOWNSCALE.to_string(), Some(VALID_DELAY.to_string())),
                (rollout_core::keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL.to_string(), Some(url.to_string())),
            ]);
            if st.api_merge_statefulset_annotations(&name, &changes).is_ok() {
                st.world.delayed_downscale_malformed.remove(&name);
                st.world.delayed_downscale_delays.insert(name.clone(), Duration::from_secs(20));
                st.trace("user", format!("{name}: corrects its delayed-downscale annotations"));
                let corrected =
                    crate::oracle::activity::WorldEvent::DelayAnnotationsCorrected { statefulset: name.clone() };
                st.oracle.activity.happened(corrected);
            }
        }
    }));
}
