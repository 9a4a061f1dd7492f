//! `rollout-e2e`: end-to-end tests of the rollout-operator image in a real cluster, and what they need.
//!
//! - [`mock_pod`]: the HTTP service test StatefulSets run (binary `mock-pod`).
//! - [`manifests`]: reading and checking `deploy/` and `kind-configs/` without a cluster (run in every `cargo test`).
//! - [`harness`]: kube-rs helpers for the scenarios in `tests/e2e.rs`, which run only against a cluster
//!   (`e2e/run.sh` creates one with kind); they are `#[ignore]`d otherwise, so they never pass without running.
//!
//! Nothing here decides anything for the operator; the tests only observe it from outside, like a user.

pub mod manifests;
#[cfg(not(madsim))]
pub mod mock_pod;

#[cfg(not(madsim))]
pub mod harness;
