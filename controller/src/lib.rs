//! `rollout-operator`: the async shell around `rollout-core`.
//!
//! The shell owns I/O only: reading the cluster through watches into a local cache, executing the core's plans
//! through the cluster port with preconditions, serving `/ready` and `/metrics`, and the command line. It makes no
//! rollout decision of its own. It is written against `tokio` from madsim-tokio, so the simulator can run it.

pub mod cache;
pub mod cli;
pub mod cluster;
pub mod cluster_validation;
pub mod downscale_record;
pub mod failure_policy;
pub mod health;
pub mod http_metrics;
pub mod http_server;
#[cfg(not(madsim))]
pub mod kube_adapter;
#[cfg(not(madsim))]
pub mod kube_layers;
pub mod logging;
pub mod metrics;
pub mod plan_cmd;
pub mod pod_client;
pub mod prom_duration;
pub mod rbac;
pub mod rbac_cmd;
pub mod reconciler;
pub mod reference_deployments;
#[cfg(not(madsim))]
pub mod review_cmd;
pub mod scaling;
#[cfg(not(madsim))]
pub mod tls;
#[cfg(not(madsim))]
pub mod webhook_server;
pub mod webhooks;
