//! The HA ledger of the Lease's truth, by which the oracle judges every committed write of a replica's controller
//! ([`Ledger::judge_write`]): it must come from the process of the Lease's holder, while the Lease is unexpired by
//! the API server's own clock. What the replicas believe plays no part. Also the failover figures: a leader killed
//! while the group has work, to the first controller write committed by another process; and any loss of the leader
//! (killed, frozen or cut off from the API server, while the group has work) to the first write committed by
//! another term's controller, told apart by whether the new leader had itself been cut off around the loss.

use crate::oracle::checker::Violation;
use k8s_openapi::api::coordination::v1::Lease;
use std::collections::BTreeMap;
use std::time::Duration;

/// The invariant: every committed controller write comes from the Lease's true holder, within its lease.
pub const ONE_LEADER: &str = "one leader writes";

/// The Lease the replicas compete for (`-leader-election.lease-name` of `deploy/overlays/ha`).
pub const LEASE: &str = "rollout-operator-leader";

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

/// How the leader was lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderLoss {
    /// Its process killed (a leader kill, a controller crash, a crash right after its deletion).
    Killed,
    /// Its process frozen (any freeze of the Lease's holder).
    Frozen,
    /// Its node cut off from the API server by a partition.
    CutOff,
}

impl LeaderLoss {
    pub fn as_str(self) -> &'static str {
        match self {
            LeaderLoss::Killed => "killed",
            LeaderLoss::Frozen => "frozen",
            LeaderLoss::CutOff => "cut off",
        }
    }
}

/// A partition of the new leader's node ending this long before the loss (or later) counts as the new leader having
/// been cut off: its watches were then resuming or relisting when it took over.
pub const CUT_OFF_BEFORE_LOSS: Duration = Duration::from_secs(60);

/// One failover: how the leader was lost, from its loss to the first write another term's controller committed, and
/// whether that new leader's node had been cut off from [`CUT_OFF_BEFORE_LOSS`] before the loss to its write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failover {
    pub loss: LeaderLoss,
    pub took: Duration,
    pub new_leader_cut_off: bool,
}

/// A loss of the leader being measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loss {
    at: Duration,
    /// The lost leader's term (its controller's incarnation).
    term: u64,
    how: LeaderLoss,
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
    /// Leader lost (killed, frozen or cut off) while the group had work -> first write by another term's controller.
    pub failovers_after_loss: Vec<Failover>,
    /// Losses after which the lost leader's own term wrote first (a freeze or cut shorter than its lease).
    pub losses_outlived: u64,
    /// Losses that saw no controller write before the fault phase ended.
    pub losses_unfinished: u64,
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
        self.failovers_after_loss.extend(&other.failovers_after_loss);
        self.losses_outlived += other.losses_outlived;
        self.losses_unfinished += other.losses_unfinished;
        self.long_pauses += other.long_pauses;
        self.paused_mid_pass += other.paused_mid_pass;
        self.frozen_in_flight += other.frozen_in_flight;
    }

    /// The `q` quantile of the failover times (nearest rank).
    pub fn failover_quantile(&self, q: f64) -> Option<Duration> {
        crate::oracle::reaction::quantile(&self.failovers, q)
    }

    /// The failovers after a loss whose new leader had (`true`) or had not been cut off.
    pub fn failovers_after_loss(&self, new_leader_cut_off: bool) -> Vec<Duration> {
        let of = self.failovers_after_loss.iter().filter(|f| f.new_leader_cut_off == new_leader_cut_off);
        of.map(|f| f.took).collect()
    }

    /// The failovers after a loss, as `n samples: p50 .., p99 ..` for the new leader cut off or not.
    pub fn describe_losses(&self) -> String {
        let s = |d: Option<Duration>| d.map_or("-".to_string(), |d| format!("{:.1} s", d.as_secs_f64()));
        let part = |cut: bool| {
            let took = self.failovers_after_loss(cut);
            let q = |q| s(crate::oracle::reaction::quantile(&took, q));
            format!("{} samples: p50 {}, p99 {}", took.len(), q(0.5), q(0.99))
        };
        let count = |how: LeaderLoss| self.failovers_after_loss.iter().filter(|f| f.loss == how).count();
        format!(
            "HA failover from a leader's loss (killed {}, frozen {}, cut off {}; while the group had work) to the new \
             leader's first committed write: new leader not cut off before, {}; new leader cut off within {} s before \
             the loss or since, {}; {} losses outlived by the old leader's own term, {} saw no write before the faults \
             stopped",
            count(LeaderLoss::Killed),
            count(LeaderLoss::Frozen),
            count(LeaderLoss::CutOff),
            part(false),
            CUT_OFF_BEFORE_LOSS.as_secs(),
            part(true),
            self.losses_outlived,
            self.losses_unfinished
        )
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
    /// A loss of the leader being measured.
    loss: Option<Loss>,
    /// Partitions of replica nodes: (identity, from, to).
    cut_offs: Vec<(String, Duration, Duration)>,
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
        if let Some(loss) = self.loss.take() {
            if loss.term == incarnation {
                self.stats.losses_outlived += 1;
            } else {
                let since = loss.at.saturating_sub(CUT_OFF_BEFORE_LOSS);
                let new_leader_cut_off =
                    self.cut_offs.iter().any(|(id, from, to)| *id == identity && *to >= since && *from <= at);
                let took = at.saturating_sub(loss.at);
                self.stats.failovers_after_loss.push(Failover { loss: loss.how, took, new_leader_cut_off });
            }
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

    /// Replica `identity`'s node is cut off from the API server from `from` to `to`.
    pub fn cut_off(&mut self, identity: String, from: Duration, to: Duration) {
        self.cut_offs.push((identity, from, to));
    }

    /// Replica `identity` was killed, frozen or cut off at `at`: if it holds the Lease and its group has work
    /// (`work`), the failover is measured (a loss already being measured goes on from its own start).
    pub fn leader_lost(&mut self, at: Duration, identity: &str, how: LeaderLoss, work: bool) {
        if !work || self.loss.is_some() || self.holder() != Some(identity) {
            return;
        }
        if let Some(term) = self.holder_process() {
            self.loss = Some(Loss { at, term, how });
        }
    }

    /// The faults stopped: a failover still unmeasured is counted as such (the liveness check covers the rest).
    pub fn faults_over(&mut self) {
        if self.failover.take().is_some() {
            self.stats.failovers_unfinished += 1;
        }
        if self.loss.take().is_some() {
            self.stats.losses_unfinished += 1;
        }
    }
}
