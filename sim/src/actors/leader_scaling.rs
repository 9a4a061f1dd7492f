//! The user (or HPA) changing the leader's replicas without the webhook router: through the zone tracker's claim
//! as the webhook makes it, or applied directly; the boundary probes of the min time.

use crate::actors::webhook_users;
use crate::environment::client::SimCluster;
use crate::environment::store::SharedStore;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::planner::PlannerKind;
use crate::scenario::scaling::{Admission, ScalingScenario};
use crate::scenario::{GROUP, Scenario, zone_name};
use jiff::Timestamp;
use madsim::runtime::Handle;
use rollout_core::downscale::MarkedClaim;
use rollout_core::downscale::{ClaimEnd, Claimant};
use rollout_core::{Defences, GroupSnapshot, StatefulSetView};
use rollout_operator::cluster::zone_tracker::{claim_downscale_marked, finish_marked_claim};
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// With `recent_downscale`: a downscale of zone-a asked between a quarter and three quarters of the min time into
/// the run, from a generator of its own (the run's other draws do not move).
pub(crate) fn with_recent_downscale(
    sc: &Scenario,
    seed: u64,
    mut changes: Vec<(Duration, u32)>,
) -> Vec<(Duration, u32)> {
    let Some(scaling) = sc.scaling.as_ref().filter(|_| sc.recent_downscale) else { return changes };
    let min = scaling.min_time.as_millis() as u64;
    let at = SimRng::new(seed ^ RECENT_DOWNSCALE_STREAM).millis(min / 4, min * 3 / 4);
    changes.insert(0, (at, sc.replicas.saturating_sub(1).max(1)));
    changes.sort_unstable();
    changes
}

pub(crate) const RECENT_DOWNSCALE_STREAM: u64 = 0x7265_6365_6e74_6473;

pub(crate) fn scaling_changes(sc: &Scenario, rng: &Mutex<SimRng>) -> Vec<(Duration, u32)> {
    let Some(scaling) = &sc.scaling else { return Vec::new() };
    let mut changes = draw_changes(sc, scaling, &mut rng.lock().unwrap());
    changes.sort_unstable();
    changes
}

/// One user's replica changes, in the order drawn: how many (within `scaling.changes`), then each one's time in the
/// fault phase and target (within `scaling.replicas`).
pub(crate) fn draw_changes(sc: &Scenario, scaling: &ScalingScenario, r: &mut SimRng) -> Vec<(Duration, u32)> {
    let count = r.range(scaling.changes.0..scaling.changes.1 + 1);
    (0..count)
        .map(|_| {
            let at = r.millis(5_000, sc.fault_phase.as_millis() as u64 * 9 / 10);
            let to = r.range(u64::from(scaling.replicas.0)..u64::from(scaling.replicas.1) + 1) as u32;
            (at, to)
        })
        .collect()
}

/// Probing the min time's boundary: after each follower downscale the controller commits, the user asks for a
/// downscale of the leader at that commit plus the min time, from 1.5 s before to 1.5 s after, so the webhook's
/// min-time check is asked again and again right at its boundary.
#[derive(Debug, Clone)]
pub(crate) struct Probes {
    min_time: Duration,
    /// No probe is sent after this (the fault phase's scaling window).
    until: Instant,
    rng: SimRng,
}

/// How the webhook's stand-in of the record-claim worlds claims: with the zone tracker or not, its min-time check a
/// second late (`min-time-second-early`), and the defences of the record store in force.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StandIn {
    /// The leader's changes are applied as asked ([`Admission::Direct`]).
    direct: bool,
    tracker: bool,
    second_early: bool,
    defences: Defences,
}

/// The user's replica changes of the leader, at their times (and, with `probes`, the boundary probes): upscales are
/// applied; a downscale is first claimed in the group downscale record, as the prepare-downscale webhook does on
/// admission, and denied when the claim is refused or fails (the webhook's failure policy is Fail); with
/// [`Admission::Direct`] every change is applied as asked.
/// `second_early`: the min-time check is asked a second late (as an off-by-one of a second in the check would).
pub(crate) async fn scale_leader(
    store: SharedStore,
    changes: Vec<(Duration, u32)>,
    start: Instant,
    stand_in: StandIn,
    mut probes: Option<Probes>,
) {
    let leader = zone_name(0);
    let api =
        SimCluster::connect(crate::environment::apiserver::WEBHOOK_INCARNATION).await.expect("bind webhook endpoint");
    let mut changes: std::collections::VecDeque<(Instant, u32)> =
        changes.into_iter().map(|(at, to)| (start + at, to)).collect();
    let (mut probe_at, mut seen) = (Vec::<Instant>::new(), 0usize);
    loop {
        let Some(p) = probes.as_mut() else {
            let Some((at, to)) = changes.pop_front() else { break };
            tokio::time::sleep_until(at).await;
            change_leader(&store, &api, &leader, to, stand_in).await;
            continue;
        };
        {
            let st = store.lock().unwrap();
            for d in &st.checker.downscales[seen..] {
                if d.by.starts_with("controller") {
                    let at = (start + d.at + p.min_time + p.rng.millis(0, 3_000)) - Duration::from_millis(1_500);
                    if at < p.until {
                        probe_at.push(at);
                    }
                }
            }
            seen = st.checker.downscales.len();
        }
        probe_at.sort_unstable();
        let now = Instant::now();
        if changes.is_empty() && probe_at.is_empty() && now >= p.until {
            break;
        }
        let next_change = changes.front().map(|(at, _)| *at);
        let next_probe = probe_at.first().copied();
        let next = [next_change, next_probe].into_iter().flatten().min();
        match next {
            Some(at) if at <= now => {
                if next_probe == Some(at) {
                    probe_at.remove(0);
                    let from = {
                        let st = store.lock().unwrap();
                        st.statefulsets[&leader].spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32
                    };
                    if from > 1 {
                        store
                            .lock()
                            .unwrap()
                            .trace("user", format!("probes the min time: {leader} {from} -> {}", from - 1));
                        change_leader(&store, &api, &leader, from - 1, stand_in).await;
                    }
                } else if let Some((_, to)) = changes.pop_front() {
                    change_leader(&store, &api, &leader, to, stand_in).await;
                }
            }
            // Followers' downscales are noticed within a second (a probe comes at least 28 s after one).
            Some(at) => tokio::time::sleep_until(at.min(now + Duration::from_secs(1))).await,
            None => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// One change of the leader's replicas to `to`, as [`scale_leader`] describes.
pub(crate) async fn change_leader(store: &SharedStore, api: &SimCluster, leader: &str, to: u32, stand_in: StandIn) {
    let StandIn { direct, tracker, second_early, defences } = stand_in;
    let leader = leader.to_string();
    // The time the min-time check is asked at.
    let checked = |now: Timestamp| if second_early { now + jiff::SignedDuration::from_secs(1) } else { now };
    {
        let (from, group, record, read_at) = {
            let st = store.lock().unwrap();
            let from = st.statefulsets[&leader].spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32;
            let views = st.statefulsets.values().filter_map(|s| StatefulSetView::from_k8s(s).ok()).collect();
            (from, GroupSnapshot::assemble(GROUP, views, &[]), st.zone_tracker_config_map.clone(), st.rv)
        };
        if to >= from || direct {
            if to != from {
                crate::environment::kube::set_replicas(&mut store.lock().unwrap(), &leader, to, "user");
            }
            return;
        }
        if !tracker {
            // Without the zone tracker, as the webhook does: the min time against the other zones' annotations,
            // the downscale recorded in the leader's own annotation (through the admission's JSONPatch), dated at
            // the answer plus the commit margin.
            let mut st = store.lock().unwrap();
            let now = Timestamp::now();
            match rollout_core::check_min_time(&group, None, &leader, checked(now)) {
                rollout_core::MinTimeVerdict::Elapsed => {
                    let at =
                        rollout_core::downscale::downscale_committed_by(now, rollout_core::downscale::COMMIT_MARGIN);
                    let patch = rollout_core::admission::prepare::last_downscale_patch(&serde_json::json!({}), at);
                    if let Err(e) =
                        crate::environment::guaranteed_update::apply_annotation_patch(&mut st, &leader, &patch)
                    {
                        st.trace("webhook", format!("cannot record the downscale: {e}"));
                        return;
                    }
                    st.writer_basis = Some(read_at);
                    crate::environment::kube::set_replicas(&mut st, &leader, to, "webhook");
                    st.writer_basis = None;
                }
                refused => st.trace("webhook", format!("denied {leader} {from} -> {to}: {}", refused.describe())),
            }
            return;
        }
        let now = Timestamp::now();
        let until = now + jiff::SignedDuration::from_secs(60);
        let claim =
            claim_downscale_marked(api, &record, &group, &leader, Claimant::Admission, checked(now), until, defences)
                .await;
        let committed = {
            let mut st = store.lock().unwrap();
            match claim {
                Ok(MarkedClaim::Claimed { .. }) => {
                    crate::environment::kube::set_replicas(&mut st, &leader, to, "webhook");
                    true
                }
                Ok(refused) => {
                    st.trace("webhook", format!("denied {leader} {from} -> {to}: {refused:?}"));
                    false
                }
                Err(e) => {
                    st.trace("webhook", format!("denied {leader} {from} -> {to}: {e}"));
                    false
                }
            }
        };
        if committed {
            // Dated after the commit, as the webhook does; a failure leaves the later claim date.
            let end = ClaimEnd::Committed { at: Timestamp::now() };
            let _ = finish_marked_claim(api, &record, &leader, until, &[until], end, defences).await;
        }
    }
}

/// The leader's replica changes the scaling scenario's user asks for (with a recent downscale of zone-b in reach),
/// from the run's shared stream; none without scaling.
pub fn draw_leader_changes(stage: &Stage) -> Vec<(Duration, u32)> {
    with_recent_downscale(&stage.sc, stage.seed, scaling_changes(&stage.sc, &stage.rng))
}

/// The user (or HPA) scaling the leader: through the prepare-downscale webhook's record claim, through the real
/// webhook router ([`webhook_users`]), or (`Admission::Direct`) as asked.
pub fn start(stage: &Stage, changes: Vec<(Duration, u32)>, actors: &mut Actors) {
    let (sc, start) = (&stage.sc, stage.start);
    let Some(scaling) = &sc.scaling else { return };
    match scaling.admission {
        Admission::RecordClaim | Admission::Direct => {
            let (s, tracker) = (stage.store.clone(), sc.zone_tracker_config_map().is_some());
            let direct = scaling.admission == Admission::Direct;
            let probes = scaling.boundary_probes.then(|| Probes {
                min_time: scaling.min_time,
                until: start + sc.fault_phase * 9 / 10,
                rng: SimRng::new(stage.rng.lock().unwrap().next_u64()),
            });
            let (second_early, defences) = (sc.planner == PlannerKind::MinTimeSecondEarly, sc.defences);
            Handle::current()
                .create_node()
                .name("webhook")
                .ip(IpAddr::from([10, 0, 0, 4]))
                .init(move || {
                    let stand_in = StandIn { direct, tracker, second_early, defences };
                    scale_leader(s.clone(), changes.clone(), start, stand_in, probes.clone())
                })
                .build();
        }
        Admission::Webhook => webhook_users::start(stage, scaling, changes, actors),
    }
}
