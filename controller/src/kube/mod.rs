//! Kubernetes through kube-rs: the cluster port's production adapter (`adapter`), its client layers (`layers`: the
//! API server in transport errors, API metrics, the per-API-group rate limiter) and the folding of repeated watch
//! errors (`repeats`), the permission
//! requirement table every request is checked against (`rbac`), and the real deployments' RBAC profiles
//! (`reference_deployments`, which the simulation runs too). The kube-rs parts are not in the `--cfg madsim` build.
//!
//! Owns how requests look on the wire. Must not decide anything about rollouts or admission.

#[cfg(not(madsim))]
pub mod adapter;
#[cfg(not(madsim))]
pub mod layers;
pub mod rbac;
pub mod reference_deployments;
#[cfg(not(madsim))]
pub mod repeats;
