//! The webhook server's TLS: the certificate (self-signed and persisted in a Secret, or read from files), its
//! renewal and hot swap into the running listener, the HTTPS listener itself, and CA bundle injection into the
//! labelled webhook configurations.
//!
//! Owns: generating certificates (rcgen, ECDSA P-256, random serial numbers), reading their validity (x509-parser),
//! the Secret (`ca`, `cert`, `key`, compatible with the reference), the rustls certificate resolver that the
//! renewal task swaps without closing the listener, the accept loop (rustls with the ring provider, HTTP/1.1 with
//! keep-alive, the axum router), and the CA injector's watches and conditional patches with retries.
//!
//! Decisions (reuse or replace a stored certificate, when to renew, which DNS names, which patch) are
//! `rollout_core::certificate`'s. Everything but the accept loop is built under `--cfg madsim`: the simulation runs
//! the same certificate lifecycle and checks the served certificate against the injected CA bundle.

pub mod certificate;
pub mod injector;
pub mod listener;
pub mod secret;
#[cfg(test)]
mod tests;
