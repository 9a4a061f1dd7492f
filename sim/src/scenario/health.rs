//! The health-gated worlds' settings: every StatefulSet of the group names the world's RolloutHealthCheck
//! (`grafana.com/rollout-health-check`), a simulated Prometheus scrapes the pods, and the user's release is good or
//! bad (its pods fail a share of their requests that readiness cannot see).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthGated {
    /// Every revision the user pushes serves errors: the rollout must stop after its first zone.
    pub bad_release: bool,
    /// Prometheus' answers may be slow (past the check's timeout), refused at the connection or empty.
    pub query_faults: bool,
    /// With a real deployment's RBAC: the user added the Role's rule for RolloutHealthChecks (`list`, `watch`).
    /// Without it the operator's list is refused, its gates are off and gated StatefulSets roll as without one.
    pub rbac_grant: bool,
}

impl Default for HealthGated {
    fn default() -> Self {
        HealthGated { bad_release: false, query_faults: false, rbac_grant: true }
    }
}
