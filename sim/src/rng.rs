//! The scenario's own random numbers: a small splitmix64 generator seeded from the run's seed, so fault schedules
//! and pod fates depend on the seed alone (madsim's generator drives only the network and the runtime).

use std::ops::Range;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct SimRng(u64);

impl SimRng {
    pub fn new(seed: u64) -> Self {
        SimRng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `range` (empty ranges give `range.start`).
    pub fn range(&mut self, range: Range<u64>) -> u64 {
        if range.end <= range.start {
            return range.start;
        }
        range.start + self.next_u64() % (range.end - range.start)
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }

    /// A duration uniform in `[lo, hi)` milliseconds.
    pub fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo..hi))
    }

    pub fn secs(&mut self, lo: u64, hi: u64) -> Duration {
        self.millis(lo * 1000, hi * 1000)
    }
}
