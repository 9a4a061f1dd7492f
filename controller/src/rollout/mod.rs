//! The rollout controller: the reconcile loop with its expectations (`reconciler`), its per-group work queue
//! (`queue`), the watch-fed cache of StatefulSets and pods (`cache`), the scaling I/O (`scaling`: mirror reference
//! resources, delayed-downscale pod calls, the follower claims), and what each pass tells people (`report`: logs,
//! state metrics, stuck detection, Events).
//!
//! Owns the execution of the core's pass (`rollout_core::pass`). Must not decide: what to delete, scale or wait for
//! comes from the core; this folder only reads, writes with preconditions, and schedules.

pub mod cache;
pub mod queue;
pub mod reconciler;
pub mod report;
pub mod scaling;
