//! The admission webhooks, one module each: `no_downscale`, `prepare_downscale` (the driver loop of the core's
//! prepare-downscale step machine), `evictions` (the driver loop of the core's eviction step machine and the budget
//! validation) and `health_checks` (the RolloutHealthCheck validation); the router they are served by and what
//! their handlers share (`router`: content checks, the handler deadline); and its HTTPS server (`server`).
//!
//! Owns the I/O of admission. Must not decide: every verdict comes from `rollout_core::admission`; nothing here
//! writes to the object under admission or acts on a dry run.

pub mod evictions;
pub mod health_checks;
pub mod no_downscale;
pub mod prepare_downscale;
pub mod router;
pub mod server;
