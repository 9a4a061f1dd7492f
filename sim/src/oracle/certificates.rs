//! The certificate world's judgement: once a CA bundle has been injected, no webhook call fails for a certificate
//! reason (the served certificate does not verify against the configuration's CA bundle), across renewals,
//! replica restarts and replicas serving at once. Also the figures a report gives of it.
//!
//! Owns the rule and its counters only; the check itself is the API server's (`crate::environment::tls`).

use crate::oracle::checker::Checker;
use std::time::Duration;

/// The invariant's name, as reports and tests name it.
pub const WEBHOOK_TLS: &str = "no webhook call fails for a certificate reason";

/// What the API server's TLS checks saw over a run.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CertificateLedger {
    /// When a CA bundle was first injected: calls before it fail for want of one, as on a fresh install, and are
    /// not judged.
    pub first_injection: Option<Duration>,
    /// CA bundle patches committed.
    pub injections: u64,
    /// Writes of the certificate Secret committed (its creation and each renewal).
    pub secret_writes: u64,
    /// Webhook calls whose TLS was checked, and of those, the ones refused for a certificate reason after the first
    /// injection.
    pub calls: u64,
    pub refused: u64,
}

impl CertificateLedger {
    pub fn add(&mut self, other: &CertificateLedger) {
        self.injections += other.injections;
        self.secret_writes += other.secret_writes;
        self.calls += other.calls;
        self.refused += other.refused;
    }

    /// The batch report's line.
    pub fn describe(&self) -> String {
        format!(
            "certificates: {} Secret writes (creations and renewals), {} CA bundle patches, {} webhook calls' TLS \
             checked, {} refused for a certificate reason",
            self.secret_writes, self.injections, self.calls, self.refused
        )
    }

    pub fn ca_injected(&mut self, at: Duration) {
        self.injections += 1;
        self.first_injection.get_or_insert(at);
    }

    /// Records one call's TLS check; a refusal after the first injection is a violation.
    pub fn judge_call(&mut self, checker: &mut Checker, at: Duration, replica: &str, refusal: Option<&str>) {
        self.calls += 1;
        let Some(reason) = refusal else { return };
        if self.first_injection.is_none() {
            return;
        }
        self.refused += 1;
        checker.violate(at, WEBHOOK_TLS, format!("the API server's call to {replica} failed its TLS check: {reason}"));
    }
}
