//! `rollout-core`: every decision the rollout operator takes, as pure functions of plain data.
//!
//! This crate owns the rules: which pods to replace, when to advance a StatefulSet's revision, when a group must
//! wait. It does no I/O, reads no clock (callers pass `now`), spawns nothing and uses no randomness, so that the
//! production controller, the model checker and the simulator all run exactly this code.
//!
//! Flow: k8s-openapi objects -> [`view`] (typed, annotations parsed) -> [`group`] (one rollout group) ->
//! [`plan`] (actions with reasons, group state), run inside [`pass`] (one whole pass: the record it needs, mirror
//! findings, the rollout-step claim, the expectation each write leaves). [`scaling`] decides replica changes (leader/follower, force replicas,
//! mirror, delayed downscale); the planner runs its snapshot-only part first. Every wait of a plan has a class
//! ([`wait`]); [`progress`] judges, from a clock the shell keeps, whether a group is stuck. [`zpdb`] decides
//! evictions under ZoneAwarePodDisruptionBudgets. [`health_check`] gates the start of each zone after the first on PromQL
//! checks of the updated pods.

pub mod actions;
pub mod admission;
pub mod certificate;
pub mod defences;
pub mod downscale;
pub mod duration;
pub mod election;
pub mod execution;
pub mod expectations;
pub mod failure;
#[cfg(any(test, feature = "fixtures"))]
pub mod fixture;
pub mod group;
pub mod health_check;
pub mod keys;
pub mod mirror_flow;
pub mod natural;
pub mod pass;
pub mod plan;
pub mod progress;
pub mod prom_duration;
pub mod readiness;
pub mod record_claims;
pub mod scaling;
pub mod settings;
pub mod view;
pub mod wait;
pub mod zpdb;

pub use defences::{Defences, Layer};
pub use downscale::{DownscaleRecord, DownscaleSettings, MinTimeVerdict, check_min_time};
pub use expectations::{Expectation, PendingExpectation};
pub use failure::Failure;
pub use group::{GroupSnapshot, MemberSnapshot, build_groups};
pub use pass::{
    ExpectationLifetimes, LiveCheck, MirrorFindings, MirrorScale, Pass, PassInput, RecordNeed, RecordRead,
    WriteOutcome, ZoneTracker, expectation_after, expectation_after_expiry, plan_pass, plan_pass_with, record_need,
};
pub use plan::{Action, GroupPlan, GroupState, PlanContext, Planner, RolloutPlanner, plan_group};
pub use progress::{ProgressClock, Stuck};
pub use readiness::Readiness;
pub use scaling::{ScalingError, ScalingSettings};
pub use settings::{AnnotationError, MaxUnavailable, RolloutSettings};
pub use view::{PodView, StatefulSetView, ViewError};
pub use wait::{Wait, WaitReason};
