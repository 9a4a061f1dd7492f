//! Health-gated zone progression: a StatefulSet annotated `grafana.com/rollout-health-check: <name>` does not start
//! rolling, after another zone of its group has, until the PromQL checks of the RolloutHealthCheck `<name>` judge
//! the updated pods (the candidate side) healthy against the others (the stable side). One zone stays the minimum
//! blast radius: a bad revision stops after the first zone instead of reaching every zone.
//!
//! Owns: the resource ([`config`]: serde types, defaults, enums, validation) and the webhook's verdict
//! ([`validation`]); what an evaluation is about ([`targets`]: the gated StatefulSet, the pod sets, matchers and
//! substitutions, the baseline time and the `started-at` bookkeeping); the evaluation itself as a step machine fed
//! with query answers ([`decision`], with the soak rule); and the gate's hold in the pass ([`gate`]). Must not do
//! I/O or read a clock: the shell queries Prometheus, off the reconcile path, and hands the verdict to the pass.
//!
//! Where the gate sits: before the deletions that would start a StatefulSet that names a RolloutHealthCheck, is not
//! paused, has pods to update and none replaced yet, while another StatefulSet of the group already has pods on
//! its update revision, whether the planner starts it between zones or while another zone is part-way. Never before
//! the first zone. A zone the gate let start is cleared for the group's revisions: readiness alone governs it from
//! then on. A zone after the first that someone else started (an evicted pod recreated on the update revision), or
//! that a restarted process has no clearance for, is gated like a start: the controller does not finish it until an
//! evaluation passes. With gates on, a gated deletion without an evaluation is held (not evaluated yet). A missing,
//! invalid or non-selecting resource holds nothing (a warning says so); the operator never reverts a version.

pub mod config;
pub mod decision;
pub mod gate;
pub mod targets;
pub mod validation;

pub use config::{Check, ConfigError, HealthCheckConfig, Policy, parse};
pub use decision::{
    Answer, CheckRecord, CheckResult, Evaluation, GateTimes, GateVerdict, QueryKind, QueryRequest, QueryResult, Step,
    evaluate,
};
pub use gate::{GateState, GroupGates, HealthGate, HealthGating, Misconfiguration, hold_by_health_check, resolve};
pub use targets::{
    GateTarget, Side, Targets, baseline_time, candidates_serving_since, clearance_key, gate_target, revision_key,
    started_at_writes,
};
