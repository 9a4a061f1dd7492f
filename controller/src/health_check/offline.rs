//! The gate as `plan` and `status -f` see it on a dump: the RolloutHealthChecks of the dump, resolved for the
//! StatefulSet the gate sits before, and evaluated against `--prometheus-url` when one is given (the resource's own
//! URL is usually reachable in-cluster only). Without it, a gated group waits on an evaluation that did not happen
//! here, and says so. The controller's memory of the zones a passing evaluation let start is not in a dump: a zone
//! already started is taken as cleared (as it is when the controller started it), so `plan` answers whether the
//! next zone would start. A dump without `started-at` annotations is judged with a baseline at the time of the
//! evaluation, as the controller does from when it first saw the rollout (the stable pods run the old revision at
//! any time).

use jiff::Timestamp;
use rollout_core::GroupSnapshot;
use rollout_core::health_check::config::{self, ConfigError, HealthCheckConfig};
use rollout_core::health_check::targets::gate_of;
use rollout_core::health_check::{GateState, GroupGates, HealthGate, gate_target, resolve};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// RolloutHealthChecks by name, invalid ones kept with their error.
pub type HealthChecks = BTreeMap<String, Result<HealthCheckConfig, ConfigError>>;

/// Why `--prometheus-url` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OfflineGateError {
    #[error("invalid --prometheus-url: {0}")]
    Client(#[from] super::prometheus::QueryError),
    #[error("cannot query Prometheus from this build: {0}")]
    Unavailable(String),
}

/// The RolloutHealthChecks among a dump's objects.
pub fn health_checks<'v>(objects: impl IntoIterator<Item = &'v Value>) -> HealthChecks {
    objects
        .into_iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some(config::KIND))
        .filter_map(|o| {
            let name = o.pointer("/metadata/name").and_then(Value::as_str)?;
            Some((name.to_string(), config::parse(o)))
        })
        .collect()
}

/// Evaluates gates against one Prometheus, or not at all.
pub struct OfflineGates {
    #[cfg(not(madsim))]
    client: Option<super::prometheus::PrometheusClient<super::http::HyperTransport>>,
    /// For synchronous callers ([`OfflineGates::gate_blocking`]).
    #[cfg(not(madsim))]
    runtime: Option<tokio::runtime::Runtime>,
}

impl OfflineGates {
    /// Gates are resolved, not evaluated.
    pub fn unevaluated() -> Self {
        OfflineGates {
            #[cfg(not(madsim))]
            client: None,
            #[cfg(not(madsim))]
            runtime: None,
        }
    }

    /// Evaluates against `prometheus_url` when given, from an async caller.
    pub fn new(prometheus_url: Option<&str>) -> Result<Self, OfflineGateError> {
        let Some(url) = prometheus_url else { return Ok(OfflineGates::unevaluated()) };
        #[cfg(not(madsim))]
        {
            let transport =
                super::http::HyperTransport::new().map_err(|e| OfflineGateError::Unavailable(e.to_string()))?;
            let client = super::prometheus::PrometheusClient::new(transport, url)?;
            Ok(OfflineGates { client: Some(client), runtime: None })
        }
        #[cfg(madsim)]
        {
            let _ = url;
            Err(OfflineGateError::Unavailable("the simulation build has no network".to_string()))
        }
    }

    /// As [`OfflineGates::new`], for a synchronous caller (it brings its own runtime).
    pub fn blocking(prometheus_url: Option<&str>) -> Result<Self, OfflineGateError> {
        #[cfg_attr(madsim, allow(unused_mut))]
        let mut gates = OfflineGates::new(prometheus_url)?;
        #[cfg(not(madsim))]
        if gates.client.is_some() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| OfflineGateError::Unavailable(e.to_string()))?;
            gates.runtime = Some(runtime);
        }
        Ok(gates)
    }

    /// The gates of `group` (in `namespace`, whose RolloutHealthChecks are `checks`) as of `now`: the zones already
    /// started cleared, and the gate before the group's next zone (if any).
    pub async fn gate(
        &self,
        namespace: &str,
        group: &GroupSnapshot,
        checks: &HealthChecks,
        now: Timestamp,
    ) -> GroupGates {
        let cleared = started_zones(group);
        let gate = self.target_gate(namespace, group, checks, now, &cleared).await;
        GroupGates { gate, cleared }
    }

    async fn target_gate(
        &self,
        namespace: &str,
        group: &GroupSnapshot,
        checks: &HealthChecks,
        now: Timestamp,
        cleared: &BTreeSet<String>,
    ) -> Option<HealthGate> {
        let (name, config) = match self.resolved(group, checks, now, cleared)? {
            Ok(found) => found,
            Err(gate) => return Some(gate),
        };
        #[cfg(not(madsim))]
        if let Some(client) = &self.client {
            let run = super::evaluate::evaluate_gate(client, config, group, namespace, now, Some(now)).await;
            return Some(HealthGate {
                health_check: name,
                state: GateState::Evaluated { at: now, verdict: run.verdict },
            });
        }
        let _ = namespace;
        Some(not_evaluated(name, config))
    }

    /// [`OfflineGates::gate`] from a synchronous caller.
    pub fn gate_blocking(
        &self,
        namespace: &str,
        group: &GroupSnapshot,
        checks: &HealthChecks,
        now: Timestamp,
    ) -> GroupGates {
        #[cfg(not(madsim))]
        if let Some(runtime) = &self.runtime {
            return runtime.block_on(self.gate(namespace, group, checks, now));
        }
        let _ = namespace;
        let cleared = started_zones(group);
        let gate = self.resolved(group, checks, now, &cleared).map(|found| match found {
            Ok((name, config)) => not_evaluated(name, config),
            Err(gate) => gate,
        });
        GroupGates { gate, cleared }
    }

    /// The gated StatefulSet's RolloutHealthCheck, or the misconfigured gate.
    fn resolved<'c>(
        &self,
        group: &GroupSnapshot,
        checks: &'c HealthChecks,
        now: Timestamp,
        cleared: &BTreeSet<String>,
    ) -> Option<Result<(String, &'c HealthCheckConfig), HealthGate>> {
        let target = gate_target(group, now, cleared)?;
        let name = target.health_check.clone();
        Some(match resolve(group, &target.statefulset, &name, checks.get(&name)) {
            Ok(config) => Ok((name, config)),
            Err(why) => Err(HealthGate { health_check: name, state: GateState::Misconfigured(why) }),
        })
    }
}

fn not_evaluated(name: String, config: &HealthCheckConfig) -> HealthGate {
    let why =
        format!("not evaluated here; give --prometheus-url URL to evaluate it (its own is {})", config.prometheus_url);
    HealthGate { health_check: name, state: GateState::NotEvaluated(why) }
}

/// The gated StatefulSets of `group` with some pods replaced already.
fn started_zones(group: &GroupSnapshot) -> BTreeSet<String> {
    let none = BTreeSet::new();
    group.members.iter().filter_map(|m| gate_of(group, m, &none)).filter(|t| t.started).map(|t| t.statefulset).collect()
}
