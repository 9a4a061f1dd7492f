//! HTTP calls to pods (prepare-downscale, delayed downscale): the client port and the bounded-concurrency fan-out
//! (`client`), and its hyper implementation (`hyper_client`, not under `--cfg madsim`).
//!
//! Owns timeouts and concurrency of pod calls. Must not decide what a pod's answer means: the core does.

pub mod client;
#[cfg(not(madsim))]
pub mod hyper_client;
