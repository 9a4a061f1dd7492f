//! Template pushes (one deploy after the other, each StatefulSet a few seconds apart) and their reverts.

use crate::environment::kube;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::SECOND_GROUP;
use crate::scenario::group_zone_name;
use crate::scenario::zone_name;
use std::time::Duration;
use tokio::time::Instant;

/// Seeds the forced follower's own generator.
/// Seeds the template reverts (`Scenario::reverts`).
pub(crate) const REVERTS_STREAM: u64 = 0x7265_7665_7274_7321;

/// One template push: when it starts (ms after the fault phase began) and, per zone, the pause before that zone's
/// StatefulSet is pushed (`None`: this push leaves the zone alone).
pub type Push = (u64, Vec<Option<Duration>>);

/// The pushes' times and gaps, from the run's shared stream.
pub fn draw(stage: &Stage) -> Vec<Push> {
    let sc = &stage.sc;
    let mut r = stage.rng.lock().unwrap();
    (0..sc.revisions)
        .map(|_| {
            let at = r.range(5_000..(sc.fault_phase.as_millis() as u64 * 4 / 5).max(5_001));
            let only = r.range(0..u64::from(sc.zones)) as usize;
            let gaps: Vec<Option<Duration>> = (0..sc.zones as usize)
                .map(|z| Some(r.millis(0, 3_000)).filter(|_| !sc.one_zone_pushes || z == only))
                .collect();
            (at, gaps)
        })
        .collect()
}

/// The user pushing template revisions one deploy after the other, each StatefulSet a few seconds apart (as a
/// deploy tool would), possibly in the middle of the previous rollout; with `pushes_at_scaling` each push is moved
/// to one of the leader's replica changes; with `reverts` half of them are taken back.
pub fn start(stage: &Stage, mut pushes: Vec<Push>, leader_changes: &[(Duration, u32)], actors: &mut Actors) {
    let (sc, start) = (&stage.sc, stage.start);
    if sc.pushes_at_scaling && !leader_changes.is_empty() {
        let mut r = stage.rng.lock().unwrap();
        for (at, _) in &mut pushes {
            let (change, _) = leader_changes[r.range(0..leader_changes.len() as u64) as usize];
            let offset = r.millis(0, 45_000);
            let latest = sc.fault_phase.as_millis() as u64 - 10_000;
            *at = ((change + offset).saturating_sub(Duration::from_secs(5)).as_millis() as u64).clamp(5_000, latest);
        }
    }
    pushes.sort_unstable();
    // Reverts draw from a stream of their own, so the worlds without them replay as before.
    let mut revert_rng = SimRng::new(stage.seed ^ REVERTS_STREAM);
    let reverts: Vec<Option<Duration>> = (0..pushes.len())
        .map(|_| Some(revert_rng.millis(2_000, 20_000)).filter(|_| sc.reverts && revert_rng.chance(0.5)))
        .collect();
    let (store, second_group) = (stage.store.clone(), sc.second_group);
    actors.tasks.push(tokio::spawn(async move {
        let push_all = async |gaps: &[Option<Duration>], revision: u32| {
            for (z, gap) in gaps.iter().enumerate() {
                let Some(gap) = gap else { continue };
                tokio::time::sleep(*gap).await;
                kube::push_revision(&mut store.lock().unwrap(), &zone_name(z as u32), revision);
                if second_group {
                    kube::push_revision(&mut store.lock().unwrap(), &group_zone_name(SECOND_GROUP, z as u32), revision);
                }
            }
        };
        let mut live = 0;
        for (n, ((at, gaps), revert)) in pushes.into_iter().zip(reverts).enumerate() {
            tokio::time::sleep_until((start + Duration::from_millis(at)).max(Instant::now())).await;
            push_all(&gaps, n as u32 + 1).await;
            match revert {
                // Back to the revision before this push (the same ControllerRevision name: the template is the
                // same again).
                Some(after) => {
                    tokio::time::sleep(after).await;
                    {
                        let mut st = store.lock().unwrap();
                        st.trace("user", format!("reverting the push of r{} to r{live}", n + 1));
                        st.oracle.activity.happened(crate::oracle::activity::WorldEvent::PushReverted);
                    }
                    push_all(&gaps, live).await;
                }
                None => live = n as u32 + 1,
            }
        }
    }));
}
