//! Prometheus duration syntax for flags; the parser lives in `rollout-core` (delayed downscale reads it too).

pub use rollout_core::prom_duration::{PromDurationError, parse_prom_duration};
