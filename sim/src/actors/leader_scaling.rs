//! The user (or HPA) changing the leader's replicas: each change sent through the real prepare-downscale webhook
//! ([`webhook_users`]), or, where no webhook serves the leader ([`Admission::Direct`]), applied as asked; and the
//! boundary probes of the min time.

use crate::actors::webhook_users;
use crate::environment::store::SharedStore;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::scaling::{Admission, ScalingScenario};
use crate::scenario::{Scenario, zone_name};
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
const PROBES_STREAM: u64 = 0x7072_6f62_6573_2121;
/// How far before and after the min time's boundary the probes reach.
const PROBE_REACH: Duration = Duration::from_millis(1_500);
const PROBE_EVERY: Duration = Duration::from_millis(250);

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
/// downscale of the leader from that commit plus the min time less 1.5 s (and up to 0.3 s more), again every
/// 250 ms until one is admitted or 1.5 s past the boundary, so the webhook's min-time check is asked again and again
/// right at its boundary and the first admission comes as soon as the check lets it.
#[derive(Debug, Clone)]
pub(crate) struct Probes {
    min_time: Duration,
    /// No probe is sent after this (the fault phase's scaling window).
    until: Instant,
    rng: SimRng,
    /// The controller downscales already probed after (a prefix of the checker's list).
    seen: usize,
    /// The probes not sent yet, earliest first.
    due: Vec<Instant>,
}

impl Probes {
    /// The scenario's probes (with `boundary_probes`), drawing from a stream of their own.
    pub(crate) fn of(stage: &Stage, scaling: &ScalingScenario) -> Option<Probes> {
        scaling.boundary_probes.then(|| Probes {
            min_time: scaling.min_time,
            until: stage.start + stage.sc.fault_phase * 9 / 10,
            rng: SimRng::new(stage.seed ^ PROBES_STREAM),
            seen: 0,
            due: Vec::new(),
        })
    }

    /// The next probe's time, after taking in the controller's downscales committed since the last look.
    pub(crate) fn next(&mut self, store: &SharedStore, start: Instant) -> Option<Instant> {
        let st = store.lock().unwrap();
        for d in &st.oracle.checker.downscales[self.seen..] {
            if d.by.starts_with("controller") {
                let first = (start + d.at + self.min_time + self.rng.millis(0, 300)) - PROBE_REACH;
                let series = (0..).map(|i| first + PROBE_EVERY * i).take_while(|at| *at < first + PROBE_REACH * 2);
                self.due.extend(series.filter(|at| *at < self.until));
            }
        }
        self.seen = st.oracle.checker.downscales.len();
        self.due.sort_unstable();
        self.due.first().copied()
    }

    /// The earliest probe is sent.
    pub(crate) fn sent(&mut self) {
        self.due.remove(0);
    }

    /// A probe was admitted at `now`: the rest of its series is not sent.
    pub(crate) fn admitted(&mut self, now: Instant) {
        self.due.retain(|at| *at >= now + PROBE_REACH * 2);
    }

    /// Whether probes may still come (the controller's downscales are watched until then).
    pub(crate) fn watching(&self, now: Instant) -> bool {
        now < self.until
    }
}

/// The leader's replica changes the scaling scenario's user asks for (with a recent downscale of zone-b in reach),
/// from the run's shared stream; none without scaling.
pub fn draw_leader_changes(stage: &Stage) -> Vec<(Duration, u32)> {
    with_recent_downscale(&stage.sc, stage.seed, scaling_changes(&stage.sc, &stage.rng))
}

/// The user (or HPA) scaling the leader: through the real webhook router ([`webhook_users`]), or
/// (`Admission::Direct`) as asked.
pub fn start(stage: &Stage, changes: Vec<(Duration, u32)>, actors: &mut Actors) {
    let Some(scaling) = &stage.sc.scaling else { return };
    match scaling.admission {
        Admission::Webhook => webhook_users::start(stage, scaling, changes, actors),
        Admission::Direct => actors.users.push(tokio::spawn(apply_directly(stage.store.clone(), changes, stage.start))),
    }
}

/// Each change of the leader applied as asked, at its time: nothing admits it.
async fn apply_directly(store: SharedStore, changes: Vec<(Duration, u32)>, start: Instant) {
    let leader = zone_name(0);
    for (at, to) in changes {
        tokio::time::sleep_until(start + at).await;
        let mut st = store.lock().unwrap();
        let from = st.statefulsets[&leader].spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32;
        if to != from {
            crate::environment::kube::set_replicas(&mut st, &leader, to, crate::oracle::checker::scaling::UNADMITTED);
        }
    }
}
