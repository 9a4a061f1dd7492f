//! HTTP calls to pods (prepare-downscale, delayed downscale): the client port, its hyper implementation, and the
//! bounded-concurrency fan-out.
//!
//! Owns timeouts and concurrency of pod calls. Must not decide what a pod's answer means: the core does.

pub mod client;
