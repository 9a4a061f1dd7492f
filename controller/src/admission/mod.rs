//! The admission webhooks: the HTTP router (`webhooks`: content checks, the handler deadline, the driver loop of the
//! core's prepare-downscale step machine; `evictions`: the driver loop of the core's eviction step machine and the
//! budget validation; `health_checks`: the RolloutHealthCheck validation) and its HTTPS server (`server`).
//!
//! Owns the I/O of admission. Must not decide: every verdict comes from `rollout_core::admission`; nothing here
//! writes to the object under admission or acts on a dry run.

pub mod evictions;
pub mod health_checks;
#[cfg(not(madsim))]
pub mod server;
pub mod webhooks;
