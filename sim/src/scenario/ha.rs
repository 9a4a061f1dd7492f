//! The HA world's settings: how many operator replicas elect a leader, and the test-only election variants that
//! re-introduce a known mistake.

use rollout_core::election::ElectionConfig;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How the replicas elect their leader: the production wiring, or a test-only variant with a known bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ha {
    pub replicas: u32,
    pub election: ElectionVariant,
    /// How far each replica's clock rate may be from true time, in parts per million either way (drawn per
    /// replica). The election holds while a leader's slow clock measures its 10 s renew deadline before a fast
    /// follower's measures the 15 s lease: relative rates within about 20 %.
    pub max_clock_rate_ppm: u32,
}

impl Default for Ha {
    fn default() -> Self {
        Ha { replicas: 2, election: ElectionVariant::Real, max_clock_rate_ppm: 15_000 }
    }
}
