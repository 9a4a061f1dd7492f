//! The certificate world's settings: the operator replicas serving the prepare-downscale webhook generate their
//! self-signed certificate into the Secret, renew it and inject its CA into the webhook configurations, with a
//! lifetime short enough that renewals happen within a run; the API server calls a replica only through TLS that
//! verifies against the CA bundle the configuration holds.

use crate::scenario::line;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Certificates {
    /// `-server-tls.self-signed-cert.expiration`: renewed at two thirds of it. The last third must outlast a
    /// replica's longest time without the API server (its faults last up to about a minute), as a year's third
    /// does in production: a replica that cannot renew for that long serves an expired certificate.
    #[serde(with = "line::duration")]
    pub validity: Duration,
    /// The replicas restart during the fault phase (each start reads the Secret again), drawn from a generator of
    /// their own.
    pub restarts: bool,
}

impl Default for Certificates {
    fn default() -> Self {
        Certificates { validity: Duration::from_secs(300), restarts: true }
    }
}
