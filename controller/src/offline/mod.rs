//! Offline commands over a cluster dump: `plan` (what the controller's pass would do next) and `review` (what the
//! webhooks would answer to an AdmissionReview).
//!
//! Owns loading dumps and rendering results. Runs the same core pass and step machine as the controller and the
//! webhooks; must not reach a cluster.

pub mod plan;
#[cfg(not(madsim))]
pub mod review;
