//! The gate as `plan` sees it on a dump: the RolloutHealthChecks of the dump, resolved for the StatefulSet the gate
//! sits before, and evaluated against `--prometheus-url` when one is given (the resource's own URL is usually
//! reachable in-cluster only). Without it, a gated group waits on an evaluation that did not happen here.

use jiff::Timestamp;
use rollout_core::GroupSnapshot;
use rollout_core::health_check::config::{self, ConfigError, HealthCheckConfig};
use rollout_core::health_check::{GateState, HealthGate, gate_target, resolve};
use serde_json::Value;
use std::collections::BTreeMap;

/// Why `--prometheus-url` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum OfflineGateError {
    #[error("invalid --prometheus-url: {0}")]
    Client(#[from] super::prometheus::QueryError),
    #[error("cannot query Prometheus from this build: {0}")]
    Unavailable(String),
}

/// The RolloutHealthChecks among a dump's objects, by name (invalid ones kept with their error).
pub fn health_checks<'v>(
    objects: impl IntoIterator<Item = &'v Value>,
) -> BTreeMap<String, Result<HealthCheckConfig, ConfigError>> {
    objects
        .into_iter()
        .filter(|o| o.get("kind").and_then(Value::as_str) == Some(config::KIND))
        .filter_map(|o| {
            let name = o.pointer("/metadata/name").and_then(Value::as_str)?;
            Some((name.to_string(), config::parse(o)))
        })
        .collect()
}

/// Evaluates gates for `plan`: against one Prometheus, or not at all.
pub struct OfflineGates {
    #[cfg(not(madsim))]
    prometheus: Option<(super::prometheus::PrometheusClient<super::http::HyperTransport>, tokio::runtime::Runtime)>,
}

impl OfflineGates {
    /// Gates are resolved, not evaluated.
    pub fn unevaluated() -> Self {
        OfflineGates {
            #[cfg(not(madsim))]
            prometheus: None,
        }
    }

    pub fn new(prometheus_url: Option<&str>) -> Result<Self, OfflineGateError> {
        #[cfg(not(madsim))]
        {
            let prometheus = match prometheus_url {
                None => None,
                Some(url) => {
                    let transport =
                        super::http::HyperTransport::new().map_err(|e| OfflineGateError::Unavailable(e.to_string()))?;
                    let client = super::prometheus::PrometheusClient::new(transport, url)?;
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| OfflineGateError::Unavailable(e.to_string()))?;
                    Some((client, runtime))
                }
            };
            Ok(OfflineGates { prometheus })
        }
        #[cfg(madsim)]
        match prometheus_url {
            None => Ok(OfflineGates::unevaluated()),
            Some(_) => Err(OfflineGateError::Unavailable("the simulation build has no network".to_string())),
        }
    }

    /// The gate of `group` (in `namespace`, whose RolloutHealthChecks are `checks`) as of `now`; `None` when no gate
    /// sits before the group's next zone.
    pub fn gate(
        &self,
        namespace: &str,
        group: &GroupSnapshot,
        checks: &BTreeMap<String, Result<HealthCheckConfig, ConfigError>>,
        now: Timestamp,
    ) -> Option<HealthGate> {
        let target = gate_target(group, now)?;
        let name = target.health_check.clone();
        let config = match resolve(group, &target.statefulset, &name, checks.get(&name)) {
            Ok(config) => config,
            Err(why) => return Some(HealthGate { health_check: name, state: GateState::Misconfigured(why) }),
        };
        #[cfg(not(madsim))]
        if let Some((client, runtime)) = &self.prometheus {
            let run = runtime.block_on(super::evaluate::evaluate_gate(client, config, group, namespace, now));
            return Some(HealthGate {
                health_check: name,
                state: GateState::Evaluated { at: now, verdict: run.verdict },
            });
        }
        let _ = namespace;
        let why = format!(
            "not evaluated here; give --prometheus-url URL to evaluate it (its own is {})",
            config.prometheus_url
        );
        Some(HealthGate { health_check: name, state: GateState::NotEvaluated(why) })
    }
}
