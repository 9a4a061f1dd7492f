//! `rollout-operator`: the async shell around `rollout-core`.
//!
//! The shell owns I/O only: reading the cluster through watches into a local cache, executing the core's plans
//! through the cluster port with preconditions, serving the admission webhooks, `/ready` and `/metrics`, and the
//! command line. It makes no rollout or admission decision of its own. It is written against `tokio` from
//! madsim-tokio, so the simulator can run it; the folders that need the real network or kube-rs are left out of the
//! `--cfg madsim` build.

pub mod admission;
pub mod cli;
pub mod cluster;
pub mod commands;
pub mod election;
pub mod health_check;
pub mod kube;
pub mod operator;
pub mod ops;
pub mod pods;
pub mod rollout;
pub mod tls;
pub mod zpdb;
