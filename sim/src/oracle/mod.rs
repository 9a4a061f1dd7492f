//! The judge: the invariant checker over the committed write history, the rules run on every commit, the
//! reaction, heal-to-write and Event figures, the webhooks' certificate rule, the HA ledger of the Lease's truth (with its failover figures), and which
//! guarantees a world judges.
//!
//! Must not act on the world: it reads commits and records violations.

pub mod activity;
pub mod certificates;
pub mod checker;
pub mod commit_rules;
pub mod election;
pub mod events;
pub mod guarantees;
pub mod needs;
pub mod reaction;
