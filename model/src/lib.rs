//! `rollout-model`: stateright models whose deciders are the real `rollout-core` code: the rollout group under the
//! planner ([`rollout`], its names re-exported here), leader/follower scaling ([`scaling`]), mirror scaling
//! ([`mirror`]), ZoneAwarePodDisruptionBudgets ([`zpdb`]) and leader election ([`election`]), with the shared
//! checking helpers in [`checked`].

pub mod checked;
pub mod election;
pub mod mirror;
pub mod rollout;
pub mod scaling;
pub mod zpdb;

/// The controller's execution settings as the operator runs with its flags' defaults (claims held 90 s, requests
/// bounded at 60 s, expectations kept 300 s, or 70 s after an unknown outcome), for a cluster with or without the
/// zone tracker and budgets. Every model's controller carries its plans out with these, so the models check the
/// execution the operator runs.
pub fn execution_settings(
    defences: rollout_core::Defences,
    zone_tracker: bool,
    budgets: bool,
) -> rollout_core::execution::ExecutionSettings {
    use std::time::Duration;
    rollout_core::execution::ExecutionSettings {
        defences,
        zone_tracker,
        budgets,
        claim_ttl: Duration::from_secs(90),
        commit_margin: rollout_core::downscale::COMMIT_MARGIN,
        request_bound: Duration::from_secs(60),
        lifetimes: rollout_core::ExpectationLifetimes {
            applied: Duration::from_secs(300),
            unknown: Duration::from_secs(70),
        },
    }
}

pub use rollout::{
    Answers, Exp, GateShell, Health, ModelConfig, Op, PodState, Record, RolloutModel, State, Step, World, ZONES,
    ZoneState, violation, violation_names,
};
