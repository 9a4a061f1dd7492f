//! `rollout-sim`: a deterministic simulation of the production rollout controller against a faulty cluster.
//!
//! Everything runs inside madsim (build with `RUSTFLAGS="--cfg madsim"`): an API server node holding the objects
//! (`apiserver`, over the `store`), a node with the StatefulSet controller and kubelet (`kube`), the real
//! `rollout_operator::rollout::reconciler::Controller` on its own node talking to the API server only through the cluster port
//! over the simulated network (`client`), and actors and faults (`world`). The `checker` judges every controller write
//! against what the controller knew, and the run ends with a liveness check. A run is a pure function of its seed.
//! `demo` tells one run for a newcomer from what it recorded.
//!
//! In a normal build this crate is empty and the binary only explains how to build it.

#[cfg(madsim)]
pub mod actors;
#[cfg(madsim)]
pub mod demo;
#[cfg(madsim)]
pub mod environment;
#[cfg(madsim)]
pub mod harness;
#[cfg(madsim)]
pub mod oracle;
#[cfg(madsim)]
pub mod rng;
#[cfg(madsim)]
pub mod scenario;
#[cfg(madsim)]
pub mod trace;

/// The message the binary and the tests print when the crate was built without the simulator.
/// The kinds the controller watches (each its own stream, in resourceVersion order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    StatefulSets,
    Pods,
    /// ZoneAwarePodDisruptionBudgets (watched by the operator replicas of the drains worlds whose budgets change).
    Budgets,
    /// Validating- and MutatingWebhookConfigurations (watched by the CA injector of the certificate world's
    /// replicas).
    ValidatingWebhooks,
    MutatingWebhooks,
}

pub const NEEDS_MADSIM: &str = "rollout-sim must be built with the simulator: RUSTFLAGS=\"--cfg madsim\" cargo run --release -p rollout-sim -- demo";
