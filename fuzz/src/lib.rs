//! Shared pieces of the fuzz targets in `fuzz_targets/`: structure-aware inputs ([`text`], [`world`], [`review`], [`health_check`])
//! and the webhook harness ([`webhook`]).

pub mod health_check;
pub mod review;
pub mod text;
pub mod webhook;
pub mod world;
