//! Users setting `grafana.com/rollout-force-replicas` on a follower, or on a StatefulSet that is neither follower nor
//! mirror.

use crate::environment::objects;
use crate::harness::{Actors, Stage};
use crate::oracle::activity::WorldEvent;
use crate::rng::SimRng;
use crate::scenario::GROUP;
use crate::scenario::group_zone_name;

pub(crate) const FORCE_FOLLOWER_STREAM: u64 = 0x666f_7263_6521_2121;

/// Seeds the user who forces a StatefulSet without scaling annotations.
pub(crate) const FORCE_PLAIN_STREAM: u64 = 0x666f_7263_6570_6c61;

/// With followers: at a random time of the fault phase the user forces zone-b (a follower) to one more or one
/// less than the leader then has.
pub fn start_on_follower(stage: &Stage, actors: &mut Actors) {
    let sc = &stage.sc;
    if !(sc.force_follower && sc.scaling.as_ref().is_some_and(|s| s.followers) && sc.zones > 1) {
        return;
    }
    let (store, phase, start) = (stage.store.clone(), sc.fault_phase, stage.start);
    let mut r = SimRng::new(stage.seed ^ FORCE_FOLLOWER_STREAM);
    actors.tasks.push(tokio::spawn(async move {
        tokio::time::sleep_until(start + r.millis(10_000, phase.as_millis() as u64 * 4 / 5)).await;
        let up = r.chance(0.5);
        let mut st = store.lock().unwrap();
        let replicas = |s: &k8s_openapi::api::apps::v1::StatefulSet| s.spec.as_ref().and_then(|s| s.replicas);
        let leader = st.statefulsets.get(&group_zone_name(GROUP, 0)).and_then(replicas).unwrap_or(1);
        let force = if up || leader <= 1 { leader + 1 } else { leader - 1 };
        let follower = group_zone_name(GROUP, 1);
        let Some(mut sts) = st.statefulsets.get(&follower).cloned() else { return };
        objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_FORCE_REPLICAS, &force.to_string());
        st.put_statefulset(sts);
        st.trace("user", format!("annotated {follower} {}={force}", rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        st.oracle.activity.happened(WorldEvent::ForceReplicasSet { statefulset: follower, replicas: force });
    }));
}

/// Without scaling annotations: at a random time of the fault phase the user forces the last zone to one more or
/// one less than it has, which the operator must ignore.
pub fn start_on_plain(stage: &Stage, actors: &mut Actors) {
    let sc = &stage.sc;
    if !(sc.force_plain && sc.scaling.is_none() && !sc.mirror) {
        return;
    }
    let (store, phase, zones, start) = (stage.store.clone(), sc.fault_phase, sc.zones, stage.start);
    let mut r = SimRng::new(stage.seed ^ FORCE_PLAIN_STREAM);
    actors.tasks.push(tokio::spawn(async move {
        tokio::time::sleep_until(start + r.millis(10_000, phase.as_millis() as u64 * 4 / 5)).await;
        let up = r.chance(0.5);
        let mut st = store.lock().unwrap();
        let name = group_zone_name(GROUP, zones - 1);
        let Some(mut sts) = st.statefulsets.get(&name).cloned() else { return };
        let current = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let force = if up || current <= 1 { current + 1 } else { current - 1 };
        objects::annotate(&mut sts, rollout_core::keys::ROLLOUT_FORCE_REPLICAS, &force.to_string());
        st.world.force_ignored.insert(name.clone(), current);
        st.put_statefulset(sts);
        st.trace("user", format!("annotated {name} {}={force}", rollout_core::keys::ROLLOUT_FORCE_REPLICAS));
        st.oracle.activity.happened(WorldEvent::ForceReplicasSet { statefulset: name, replicas: force });
    }));
}
