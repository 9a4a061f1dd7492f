//! Each HA replica's identity, address, clock (offset and rate) and election settings, and the trace line of its
//! start.

use crate::environment::store::SharedStore;
use crate::oracle::election::LEASE;
use crate::rng::SimRng;
use crate::scenario::ha::ElectionVariant;
use jiff::Timestamp;
use rollout_operator::election::MonotonicClock;
use rollout_operator::operator::ElectionSetup;
use rollout_operator::ops::metrics::LeaderMetrics;
use std::net::IpAddr;

/// Seeds the HA world's own generator (clocks, replica faults), so its draws move nothing else.
pub const HA_STREAM: u64 = 0x6861_2d72_6570_6c73;

/// Replica `i`'s address (the drains world's replicas sit at .20 up; these at .30 up).
pub fn replica_ip(i: u32) -> IpAddr {
    IpAddr::from([10, 0, 0, 30 + i as u8])
}

/// Replica `i`'s identity in the Lease (its pod name).
pub fn identity(i: u32) -> String {
    format!("rollout-operator-{i}")
}

/// How replica `i`'s clock differs from true (simulated) time: a wall-clock offset of up to an hour either way
/// (which the election must ignore: it compares only readings of one replica's clock), and a rate fast or slow
/// (`Ha::max_clock_rate_ppm`; by default 1.5 %, so two replicas' clocks run up to 3 % apart: 0.45 s over a 15 s
/// lease, within the 1 s skew margin).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockDrift {
    pub offset_ms: i64,
    pub rate_ppm: i32,
}

impl ClockDrift {
    /// A drift with a rate within `max_rate_ppm` either way.
    pub fn draw(r: &mut SimRng, max_rate_ppm: u32) -> Self {
        let offset_ms = r.range(0..7_200_000) as i64 - 3_600_000;
        let max = i64::from(max_rate_ppm);
        let rate_ppm = (r.range(0..2 * max as u64 + 1) as i64 - max) as i32;
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

/// Traces a replica process start.
pub fn trace_start(store: &SharedStore, index: u32, incarnation: u64, drift: ClockDrift) {
    let mut st = store.lock().unwrap();
    st.oracle.ha.process_started(incarnation, identity(index));
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
