//! The actors that play against the operator during the fault phase: users, HPAs, drains, budget editors and the
//! fault injector. Each draws from a random stream of its own (seeded from the run's seed and the actor's stream
//! constant) where it can, so that adding an actor does not move another's draws.

pub mod budget_editors;
pub mod drains;
pub mod faults;
pub mod force;
pub mod ha_faults;
pub mod leader_scaling;
pub mod mirror;
pub mod no_downscale;
pub mod pod_users;
pub mod pods;
pub mod pushes;
pub mod record;
pub mod webhook_users;
pub mod world_record;
