//! The model's configuration: the election's settings per replica, the environment's bounds, the assumption the
//! core states for its clock-skew margin, and the test-only faults.

use super::*;

/// A test-only fault, showing that the safety properties catch it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ElectionBug {
    /// The controller writes whenever its replica believes it holds the term it won ([`Elector::is_leader`]: until
    /// its next step notices the term is over), without the shell's check of [`Elector::may_write`] on the clock
    /// right before each write.
    NoPreWriteCheck,
    /// The renew deadline equal to the lease duration and no skew margin (built without
    /// [`ElectionConfig::validate`], which refuses it): the write window lasts as long as the Lease.
    NoMargin,
    /// The tuning taken as configured, without [`ElectionConfig::validate`] or the model's check that the skew
    /// margin covers its drift: shows what a tuning the flag check refuses would do (a lease no longer than the skew
    /// margin leaves an empty write window).
    Unvalidated,
}

/// The environment's bounds and the election's tuning.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElectionModelConfig {
    /// True time per tick.
    pub tick: Duration,
    /// `-leader-election.lease-duration` (whole seconds).
    pub lease_duration: Duration,
    /// `-leader-election.renew-deadline`.
    pub renew_deadline: Duration,
    /// `-leader-election.retry-period`.
    pub retry_period: Duration,
    /// The core's margin for clock rates and write commits.
    pub clock_skew: Duration,
    /// How far each replica's clock rate is off true time, per mille (one slow, one fast).
    pub drift_permille: u16,
    /// Ticks a Lease request and its answer may take together (the round trip, from the send of the request to the
    /// arrival of the answer).
    pub message_delay: u8,
    /// Ticks a controller write may take from its send (and check) to its commit.
    pub write_delay: u8,
    /// Lease requests or answers that may be lost.
    pub losses: u8,
    /// Replica pauses.
    pub pauses: u8,
    /// Graceful shutdowns (at most one: a replica must be left to lead).
    pub releases: u8,
    /// Replicas send controller writes (off: a smaller state space for the liveness check).
    pub writes: bool,
    /// The network becomes stable at some tick up to this one (it must), and the liveness bound is checked; the
    /// horizon must leave the bound's ticks after it.
    pub settle_by: Option<u8>,
    /// Ticks of true time explored.
    pub horizon: u8,
    pub bug: Option<ElectionBug>,
    /// Replica 0's own `-leader-election.lease-duration` and `-leader-election.renew-deadline`, when they differ
    /// from the others' (a flag changed in a rolling update: each replica declares its own duration in the Lease it
    /// holds, and a follower must wait out the holder's, not its own).
    pub replica0_tuning: Option<(Duration, Duration)>,
    /// The run starts with a Lease that names replica 0 and declares this many seconds (left by its previous
    /// incarnation, started with another lease duration), committed at tick 0: replica 0 renews it as its own.
    pub stale_lease_seconds: Option<i32>,
}

impl Default for ElectionModelConfig {
    /// A 2 s lease renewed every 500 ms and written within 1 s of a renewal (the defaults' relations: the window is
    /// capped by the skew margin), 500 ms ticks, clocks 4 % off true time, one loss and one pause, 3 s of true time.
    fn default() -> Self {
        ElectionModelConfig {
            tick: Duration::from_millis(500),
            lease_duration: Duration::from_secs(2),
            renew_deadline: Duration::from_millis(1500),
            retry_period: Duration::from_millis(500),
            clock_skew: Duration::from_secs(1),
            drift_permille: 40,
            message_delay: 1,
            write_delay: 1,
            losses: 1,
            pauses: 1,
            releases: 0,
            writes: true,
            settle_by: None,
            horizon: 6,
            bug: None,
            replica0_tuning: None,
            stale_lease_seconds: None,
        }
    }
}

impl ElectionModelConfig {
    /// Whether the margin covers what the model lets happen: the two clocks' disagreement over one lease plus the
    /// longest controller write fit in `clock_skew`.
    pub fn assumption_holds(&self) -> bool {
        let drift = self.longest_lease().as_millis() * 2 * u128::from(self.drift_permille) / 1000;
        let write = self.tick.as_millis() * u128::from(self.write_delay);
        drift + write <= self.clock_skew.as_millis()
    }

    /// Ticks after the network settles by which some replica may write (the bounded-liveness bound): a Lease left
    /// by a replica that no longer renews is seen within a request timeout (a read lost before the network settled)
    /// and a retry period, expires a lease duration later, and is taken at the next retry, plus a tick for the
    /// answer; each wait measured by the slowest clock and rounded up
    /// to whole ticks (a replica acts only at a tick).
    pub fn lead_within(&self) -> u8 {
        let ticks = |d: Duration| {
            let per_tick = self.tick.as_millis() * u128::from(1000 - self.drift_permille);
            (d.as_millis() * 1000).div_ceil(per_tick)
        };
        let bound = ticks(self.request_timeout()) + 2 * ticks(self.retry_period) + ticks(self.longest_lease()) + 1;
        u8::try_from(bound).unwrap_or(u8::MAX)
    }

    /// How long the shell's loop waits for an answer: long enough for a loaded API server, no longer than a retry
    /// period past half the renew deadline (`controller/src/election`); the longer of the two replicas' when their
    /// tuning differs.
    pub fn request_timeout(&self) -> Duration {
        REPLICAS.iter().map(|identity| self.request_timeout_of(identity)).max().unwrap_or(self.retry_period)
    }

    /// Replica `identity`'s wait for an answer, from its own tuning, as the shell derives it.
    pub(super) fn request_timeout_of(&self, identity: &str) -> Duration {
        (self.election_config(identity).renew_deadline / 2).max(self.retry_period)
    }

    /// The longest lease any replica declares.
    fn longest_lease(&self) -> Duration {
        self.replica0_tuning.map_or(self.lease_duration, |(lease, _)| lease.max(self.lease_duration))
    }

    /// The election's tuning for replica `identity`, as the shell would build it (or, for [`ElectionBug::NoMargin`],
    /// as the flag check would refuse it).
    pub(super) fn election_config(&self, identity: &str) -> ElectionConfig {
        let (lease_duration, renew_deadline) = match self.replica0_tuning {
            Some(tuning) if identity == REPLICAS[0] => tuning,
            _ => (self.lease_duration, self.renew_deadline),
        };
        let mut config = ElectionConfig {
            identity: identity.to_string(),
            lease_duration,
            renew_deadline,
            retry_period: self.retry_period,
            clock_skew: self.clock_skew,
        };
        if self.bug == Some(ElectionBug::NoMargin) {
            config.renew_deadline = config.lease_duration;
            config.clock_skew = Duration::ZERO;
        }
        config
    }
}
