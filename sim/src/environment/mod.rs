//! The simulated cluster: the API server (its storage, admission, RBAC and watches), the StatefulSet controller and
//! kubelet, the objects it holds and the cluster port the operator talks to it through.
//!
//! Must not judge: the oracle reads what the environment commits.

pub mod apiserver;
pub mod client;
pub mod eviction;
pub mod guaranteed_update;
pub mod kube;
pub mod objects;
pub mod prometheus;
pub mod store;
pub mod tls;
