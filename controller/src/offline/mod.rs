//! The commands people run to see what the operator would do: over a cluster dump, `plan` (what the controller's
//! pass would do next) and `review` (what the webhooks would answer to an AdmissionReview); and `status`, the same
//! pass over a live, read-only view of a namespace (or a dump).
//!
//! Owns loading dumps, the live read of `status`, and rendering results. Runs the same core pass and step machine as
//! the controller and the webhooks; must never write to a cluster (`status` only lists and gets).

pub mod plan;
#[cfg(not(madsim))]
pub mod review;
#[cfg(not(madsim))]
pub mod status;
