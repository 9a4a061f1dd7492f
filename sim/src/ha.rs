//! High availability: several operator replicas, each on a node of its own, each running the real
//! leader-elected wiring (`rollout_operator::election::run_elected`: the election loop, the gate, one controller
//! per term), against the simulated API server's Lease.
//!
//! Owns: the HA world's settings ([`Ha`], the test-only [`ElectionVariant`]s), each replica's process (its clock
//! offset and rate, its election config), and the ledger the API server keeps of the Lease's truth, by which the
//! checker judges every committed write of a replica's controller ([`Ledger::judge_write`]): it must come from the
//! process of the Lease's holder, while the Lease is unexpired by the API server's own clock (the commit of the
//! holder's last Lease write plus its `leaseDurationSeconds`). What the replicas believe plays no part. Also the
//! failover figure: a leader killed while the group has work, to the first controller write committed by another
//! process.
//!
//! Must not decide anything the operator decides: the election, the gate and the controller are production code.

use crate::checker::Violation;
use crate::rng::SimRng;
use crate::store::SharedStore;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use rollout_core::election::ElectionConfig;
use rollout_operator::election::MonotonicClock;
use rollout_operator::operator::ElectionSetup;
use rollout_operator::ops::metrics::LeaderMetrics;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

/// The invariant: every committed controller write comes from the Lease's true holder, within its lease.
pub const ONE_LEADER: &str = "one leader writes";

/// The Lease the replicas compete for (`-leader-election.lease-name` of `deploy/overlays/ha`).
pub const LEASE: &str = "rollout-operator-leader";

/// Seeds the HA world's own generator (clocks, replica faults), so its draws move nothing else.
pub const HA_STREAM: u64 = 0x6861_2d72_6570_6c73;

/// How the replicas elect their leader: the production wiring, or a test-only variant with a known bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionVariant {
    /// `run_elected` with the flags' defaults (15 s lease, 10 s renew deadline, 2 s retry, 1 s skew), the
    /// controller asking the gate before every write: as `main` runs it.
    Real,
    /// Test-only: each term's controller never asks the gate (it writes whenever its term has started, until the
    /// supervisor stops it).
    NoGate,
    /// Test-only: the renew deadline equal to the lease duration and no skew margin (a config `validate` refuses):
    /// a leader writes until the very moment the others may count its Lease as expired.
    NoMargin,
    /// Test-only: the real election, but each term's controller stops [`LATE_STOP`] after its term ends, as a pass
    /// held up by slow requests finishes after the supervisor's stop signal: only the gate asked before each write
    /// keeps a deposed leader's controller from writing under the next leader.
    LateStop,
    /// Test-only: `LateStop` without the gate (a known bug: a deposed leader's controller writes on after its term).
    LateStopNoGate,
}

/// How long after its term ends a `LateStop` term's controller stops: longer than the Lease outlives the end of its
/// holder's write window (the lease duration less the window, `min(renew deadline, lease - skew)`: 5 s with the
/// defaults) and the next leader's first retry, so that the late controller runs on under the next leader.
pub const LATE_STOP: Duration = Duration::from_secs(20);

impl ElectionVariant {
    pub const ALL: [ElectionVariant; 5] = [
        ElectionVariant::Real,
        ElectionVariant::NoGate,
        ElectionVariant::NoMargin,
        ElectionVariant::LateStop,
        ElectionVariant::LateStopNoGate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ElectionVariant::Real => "real",
            ElectionVariant::NoGate => "no-gate",
            ElectionVariant::NoMargin => "no-margin",
            ElectionVariant::LateStop => "late-stop",
            ElectionVariant::LateStopNoGate => "late-stop-no-gate",
        }
    }

    /// Whether each term's controller asks the gate before every write.
    pub fn gated(self) -> bool {
        !matches!(self, ElectionVariant::NoGate | ElectionVariant::LateStopNoGate)
    }

    /// How long after its term ends each term's controller stops (none: at once).
    pub fn late_stop(self) -> Option<Duration> {
        matches!(self, ElectionVariant::LateStop | ElectionVariant::LateStopNoGate).then_some(LATE_STOP)
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.name() == s)
    }

    /// The election config of replica `identity` under this variant.
    pub fn config(self, identity: &str) -> ElectionConfig {
        let config = ElectionConfig::new(identity);
        match self {
            ElectionVariant::Real
            | ElectionVariant::NoGate
            | ElectionVariant::LateStop
            | ElectionVariant::LateStopNoGate => config,
            ElectionVariant::NoMargin => {
                ElectionConfig { renew_deadline: config.lease_duration, clock_skew: Duration::ZERO, ..config }
            }
        }
    }
}

/// The HA world: `replicas` operator replicas electing a leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ha {
    pub replicas: u32,
    pub election: ElectionVariant,
}

impl Default for Ha {
    fn default() -> Self {
        Ha { replicas: 2, election: ElectionVariant::Real }
    }
}

/// Replica `i`'s address (the drains world's replicas sit at .20 up; these at .30 up).
pub fn replica_ip(i: u32) -> IpAddr {
    IpAddr::from([10, 0, 0, 30 + i as u8])
}

/// Replica `i`'s identity in the Lease (its pod name).
pub fn identity(i: u32) -> String {
    format!("rollout-operator-{i}")
}

/// How replica `i`'s clock differs from true (simulated) time: a wall-clock offset of up to an hour either way
/// (which the election must ignore: it compares only readings of one replica's clock), and a rate of up to
/// 1.5 % fast or slow, so two replicas' clocks run up to 3 % apart: 0.45 s over a 15 s lease, within the 1 s
/// skew margin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockDrift {
    pub offset_ms: i64,
    pub rate_ppm: i32,
}

impl ClockDrift {
    pub fn draw(r: &mut SimRng) -> Self {
        let offset_ms = r.range(0..7_200_000) as i64 - 3_600_000;
        let rate_ppm = r.range(0..30_001) as i32 - 15_000;
        ClockDrift { offset_ms, rate_ppm }
    }

    fn clock(self) -> MonotonicClock {
        let wall = Timestamp::now()
            .checked_add(jiff::SignedDuration::from_millis(self.offset_ms))
            .unwrap_or_else(|_| Timestamp::now());
        MonotonicClock::start(wall).with_rate_ppm(self.rate_ppm)
    }
}

/// Replica `index`'s `-leader-election.*` as the election variant sets them, on its drifting clock.
pub fn election_setup(
    index: u32,
    election: ElectionVariant,
    drift: ClockDrift,
    metrics: LeaderMetrics,
) -> ElectionSetup {
    ElectionSetup {
        lease_name: LEASE.to_string(),
        config: election.config(&identity(index)),
        clock: drift.clock(),
        metrics,
    }
}

/// The Lease as the API server last committed it, on the API server's clock (simulated time since the start).
#[derive(Debug, Clone, PartialEq, Eq)]
struct LeaseTruth {
    holder: Option<String>,
    /// The commit of the last Lease write (an acquisition, renewal or release).
    written_at: Duration,
    duration: Duration,
}

impl LeaseTruth {
    fn expires_at(&self) -> Duration {
        self.written_at + self.duration
    }
}

/// What the HA world came to over one run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaStats {
    /// Controller writes judged against the Lease.
    pub writes_judged: u64,
    /// Lease writes that gave it a new holder.
    pub takeovers: u64,
    /// Leader killed while the group had work -> first controller write committed by another process.
    pub failovers: Vec<Duration>,
    /// Leader kills that saw no write before the fault phase ended.
    pub failovers_unfinished: u64,
    /// Replica pauses longer than the lease, and those that caught a pass with a request in flight.
    pub long_pauses: u64,
    pub paused_mid_pass: u64,
    /// Writes whose request a freeze of their own process held between its hand-off to the network and its
    /// leaving the process (judged as if committed without the freeze, see [`Ledger::judge_write`]).
    pub frozen_in_flight: u64,
}

impl HaStats {
    pub fn add(&mut self, other: &HaStats) {
        self.writes_judged += other.writes_judged;
        self.takeovers += other.takeovers;
        self.failovers.extend(&other.failovers);
        self.failovers_unfinished += other.failovers_unfinished;
        self.long_pauses += other.long_pauses;
        self.paused_mid_pass += other.paused_mid_pass;
        self.frozen_in_flight += other.frozen_in_flight;
    }

    /// The `q` quantile of the failover times (nearest rank).
    pub fn failover_quantile(&self, q: f64) -> Option<Duration> {
        let mut sorted = self.failovers.clone();
        sorted.sort();
        let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len().max(1));
        sorted.get(rank - 1).copied()
    }

    pub fn describe(&self) -> String {
        let s = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.1} s", d.as_secs_f64()));
        format!(
            "HA: {} controller writes judged against the Lease, {} takeovers, {} pauses longer than the lease ({} \
             with a pass's request in flight, about the lease long); failover (leader killed while the group had work -> first write \
             committed by another process), {} samples: p50 {}, p99 {}, max {} ({} kills saw no write before the \
             faults stopped); {} writes held by a freeze of their process after leaving the gate",
            self.writes_judged,
            self.takeovers,
            self.long_pauses,
            self.paused_mid_pass,
            self.failovers.len(),
            s(self.failover_quantile(0.5)),
            s(self.failover_quantile(0.99)),
            s(self.failover_quantile(1.0)),
            self.failovers_unfinished,
            self.frozen_in_flight
        )
    }
}

/// The API server's ledger of the Lease and of the replica processes, kept in the store.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Replica processes by incarnation: their identity.
    processes: BTreeMap<u64, String>,
    /// Every committed Lease write, in commit order: the Lease's truth over the run.
    history: Vec<LeaseTruth>,
    /// Replica freezes that ended: (identity, from, to).
    freezes: Vec<(String, Duration, Duration)>,
    /// A leader kill being measured: when, and the killed process.
    failover: Option<(Duration, u64)>,
    pub stats: HaStats,
}

impl Ledger {
    pub fn process_started(&mut self, incarnation: u64, identity: String) {
        self.processes.insert(incarnation, identity);
    }

    pub fn identity_of(&self, incarnation: u64) -> Option<&str> {
        self.processes.get(&incarnation).map(String::as_str)
    }

    fn lease(&self) -> Option<&LeaseTruth> {
        self.history.last()
    }

    /// The Lease as it stood at `at` (the last write committed by then).
    fn lease_at(&self, at: Duration) -> Option<&LeaseTruth> {
        self.history.iter().rev().find(|l| l.written_at <= at)
    }

    /// The holder the API server's Lease names now, if any.
    pub fn holder(&self) -> Option<&str> {
        self.lease().and_then(|l| l.holder.as_deref())
    }

    /// When the Lease expires by the API server's clock, if it has a holder.
    pub fn expires_at(&self) -> Option<Duration> {
        self.lease().filter(|l| l.holder.is_some()).map(LeaseTruth::expires_at)
    }

    /// The newest process of the Lease's holder (the one a kill or pause of the leader hits).
    pub fn holder_process(&self) -> Option<u64> {
        let holder = self.holder()?;
        self.processes.iter().rev().find(|(_, id)| id.as_str() == holder).map(|(inc, _)| *inc)
    }

    /// Replica `identity` was frozen from `from` to `to` (simulated time since the start).
    pub fn frozen(&mut self, identity: String, from: Duration, to: Duration) {
        self.freezes.push((identity, from, to));
    }

    /// A Lease write committed at `at`; the trace line, for a change of holder (renewals are not traced).
    pub fn lease_committed(&mut self, at: Duration, lease: &Lease) -> Option<String> {
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.filter(|h| !h.is_empty());
        let seconds = spec.lease_duration_seconds.unwrap_or(0).max(0);
        let truth = LeaseTruth { holder, written_at: at, duration: Duration::from_secs(seconds.unsigned_abs().into()) };
        let before = self.lease().and_then(|l| l.holder.clone());
        let line = match (&before, &truth.holder) {
            (b, Some(h)) if b.as_ref() != Some(h) => {
                self.stats.takeovers += 1;
                Some(format!("lease {LEASE} taken by {h} ({seconds}s)"))
            }
            (_, Some(_)) => None,
            (_, None) => Some(format!("lease {LEASE} released")),
        };
        self.history.push(truth);
        line
    }

    /// A controller write of process `incarnation` committed at `at`, its request handed to the network at
    /// `handed_at`: from the Lease's holder, within its lease?
    ///
    /// Judged at its commit, network delay included (the write window's margin must cover a write in flight),
    /// with one exception: a freeze of the writer's own process between the hand-off and the request leaving it
    /// (madsim yields inside a send, so a freeze can fall there) is taken out, and the write judged as if it had
    /// committed that much earlier, against the Lease as it stood then. Nothing the operator can check falls
    /// between its last check and the bytes leaving the process; no Lease fences that (docs/install.md,
    /// "High availability"). Such writes are counted apart ([`HaStats::frozen_in_flight`]). A write decided after the
    /// freeze (no check before it) is handed after it, and is judged at its commit.
    pub fn judge_write(
        &mut self,
        at: Duration,
        incarnation: u64,
        what: &str,
        handed_at: Duration,
    ) -> Option<Violation> {
        let identity = self.processes.get(&incarnation)?.clone();
        self.stats.writes_judged += 1;
        if let Some((killed_at, killed)) = self.failover
            && killed != incarnation
        {
            self.stats.failovers.push(at.saturating_sub(killed_at));
            self.failover = None;
        }
        let frozen: Duration = self
            .freezes
            .iter()
            .filter(|(id, from, to)| *id == identity && *from >= handed_at && *to <= at)
            .map(|(_, from, to)| *to - *from)
            .sum();
        if !frozen.is_zero() {
            self.stats.frozen_in_flight += 1;
        }
        let judged_at = at - frozen;
        let shifted = if frozen.is_zero() {
            String::new()
        } else {
            format!(
                " (judged at {:.3}s: its process was frozen {:.3}s after handing it over)",
                judged_at.as_secs_f64(),
                frozen.as_secs_f64()
            )
        };
        let detail = match self.lease_at(judged_at) {
            None => format!("{what} by {identity} (process #{incarnation}){shifted}: no Lease existed"),
            Some(l) if l.holder.as_deref() != Some(identity.as_str()) => format!(
                "{what} by {identity} (process #{incarnation}) committed while the Lease was held by {} (written at \
                 {:.3}s){shifted}",
                l.holder.as_deref().unwrap_or("nobody"),
                l.written_at.as_secs_f64()
            ),
            Some(l) if judged_at >= l.expires_at() => format!(
                "{what} by {identity} (process #{incarnation}), the Lease's holder, committed after its Lease expired \
                 by the API server's clock (last written at {:.3}s for {}s: expired at {:.3}s){shifted}",
                l.written_at.as_secs_f64(),
                l.duration.as_secs(),
                l.expires_at().as_secs_f64()
            ),
            Some(_) => return None,
        };
        Some(Violation { at, invariant: ONE_LEADER, detail })
    }

    /// The leader's process `incarnation` was killed at `at` while its group had work: measure the failover.
    pub fn leader_killed(&mut self, at: Duration, incarnation: u64) {
        if self.failover.replace((at, incarnation)).is_some() {
            self.stats.failovers_unfinished += 1;
        }
    }

    /// The faults stopped: a failover still unmeasured is counted as such (the liveness check covers the rest).
    pub fn faults_over(&mut self) {
        if self.failover.take().is_some() {
            self.stats.failovers_unfinished += 1;
        }
    }
}

/// The HA world's grants under a real deployment's RBAC: the deployment's own, plus `deploy/overlays/ha`'s Role
/// (Lease `create`, and `get`, `update` on the one Lease by name), which the controller crate's tests check
/// against what the adapter needs.
pub fn with_ha_grants(
    mut grants: rollout_operator::kube::reference_deployments::Grants,
) -> rollout_operator::kube::reference_deployments::Grants {
    use rollout_operator::kube::reference_deployments::{by_name, rule};
    grants.role.push(rule("coordination.k8s.io", &["leases"], &["create"]));
    grants.role.push(by_name("coordination.k8s.io", &["leases"], &[LEASE], &["get", "update"]));
    grants
}

/// Traces a replica process start.
pub fn trace_start(store: &SharedStore, index: u32, incarnation: u64, drift: ClockDrift) {
    let mut st = store.lock().unwrap();
    st.ha.process_started(incarnation, identity(index));
    st.trace(
        &format!("controller#{incarnation}"),
        format!(
            "process of replica {} started (clock {:+.1} s, {:+.2} % rate)",
            identity(index),
            drift.offset_ms as f64 / 1e3,
            f64::from(drift.rate_ppm) / 1e4
        ),
    );
}
