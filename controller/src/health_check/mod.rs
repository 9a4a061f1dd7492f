//! Health-gated zone progression, the shell's part: querying Prometheus for the checks of a RolloutHealthCheck
//! ([`prometheus`], over [`http`] outside the simulator), running an evaluation with the core's step machine
//! ([`evaluate`]), the RolloutHealthChecks the controller watches ([`feed`]), the controller's gates evaluated off the reconcile path with a cache and a cadence ([`gates`]),
//! and the gate as `plan` evaluates it on a dump ([`offline`]). Every decision (which StatefulSet is
//! gated, what is queried, what the answers mean) is the core's (`rollout_core::health_check`).

pub mod evaluate;
pub mod feed;
pub mod gates;
#[cfg(not(madsim))]
pub mod http;
pub mod metrics;
pub mod offline;
pub mod prometheus;
