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

pub use rollout::{
    Answers, Exp, GateShell, Health, ModelConfig, Op, PodState, Record, RolloutModel, State, Step, World, ZONES,
    ZoneState, violation, violation_names,
};
