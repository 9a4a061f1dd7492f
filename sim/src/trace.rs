//! The run's trace: one line per thing that happened, stamped with simulated time. Two runs of the same seed must
//! produce the same trace; its FNV-1a hash is printed at the end of every run.

use std::time::Duration;

#[derive(Debug, Default, Clone)]
pub struct Trace {
    pub lines: Vec<String>,
    hash: u64,
    /// Echo lines to stdout as they are recorded (demo and replay).
    pub echo: bool,
}

impl Trace {
    pub fn new(echo: bool) -> Self {
        Trace { lines: Vec::new(), hash: 0xcbf2_9ce4_8422_2325, echo }
    }

    pub fn record(&mut self, at: Duration, who: &str, what: impl AsRef<str>) {
        let line = format!("{:>9.3}s {who:<12} {}", at.as_secs_f64(), what.as_ref());
        for b in line.bytes().chain(std::iter::once(b'\n')) {
            self.hash ^= u64::from(b);
            self.hash = self.hash.wrapping_mul(0x0100_0000_01b3);
        }
        if self.echo {
            println!("{line}");
        }
        self.lines.push(line);
    }

    pub fn hash(&self) -> u64 {
        self.hash
    }
}
