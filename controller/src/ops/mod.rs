//! Operating the operator: the plain HTTP server (`/ready`, `/metrics`) with its request metrics, the Prometheus
//! registry and the build information it exports, logging, the readiness flag, server-side cluster validation, the
//! webhook failure-policy metric, the feature gates, and the Event recorder.
//!
//! Owns what operators of the operator see. Must not touch the cluster except to watch webhook configurations for
//! the failure-policy metric and to write Events.

pub mod build_info;
pub mod cluster_validation;
pub mod events;
pub mod failure_policy;
pub mod feature_gate;
pub mod health;
pub mod http_metrics;
pub mod http_server;
pub mod logging;
pub mod metrics;
pub mod needs;
