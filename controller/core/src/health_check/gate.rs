//! The gate in the pass: what the shell tells the pass about a group's gate ([`HealthGating`], [`HealthGate`]), how
//! a RolloutHealthCheck found (or not) for a gated StatefulSet resolves ([`resolve`]), and the pass's hold on the
//! deletions of gated zones ([`hold_by_health_check`]).
//!
//! With gates on, every deletion of a gated StatefulSet ([`gate_of`]: a zone after the first, not cleared yet) is
//! held unless the shell's evaluation for the group's current revisions lets it through: no evaluation is "not
//! evaluated yet", never "no gate". Where the planner starts the zone (between zones, or while another zone is
//! part-way: a crashed pod replaced ahead of its zone, a zone turned to while another is paused) does not matter,
//! nor who replaced a zone's first pods: a zone someone else started is not finished on a revision the gate has not
//! passed.

use super::config::{ConfigError, HealthCheckConfig};
use super::decision::GateVerdict;
use super::targets::{GateTarget, gate_of};
use crate::downscale::format_timestamp;
use crate::group::GroupSnapshot;
use crate::plan::{Action, GroupPlan};
use jiff::Timestamp;
use std::collections::BTreeSet;

/// What the shell tells the pass about a group's gates.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum HealthGating<'a> {
    /// Gates are not evaluated at all (the feature is off, or the RolloutHealthChecks cannot be listed): gated
    /// StatefulSets roll as without a gate.
    #[default]
    Off,
    /// Gates are evaluated: what the shell knows of the group's gates. A gated deletion the pass plans without a
    /// matching gate is held, not evaluated yet.
    On(&'a GroupGates),
}

impl<'a> HealthGating<'a> {
    /// From what a shell found: `None` when gates are off.
    pub fn from_shell(found: &'a Option<GroupGates>) -> Self {
        match found {
            None => HealthGating::Off,
            Some(gates) => HealthGating::On(gates),
        }
    }
}

/// What the shell knows of one group's gates when gates are on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupGates {
    /// The gate of the group's target ([`super::gate_target`]), `None` when it has none (no target in its sight).
    pub gate: Option<HealthGate>,
    /// The StatefulSets a passing evaluation let roll for the group's current revisions ([`super::clearance_key`]),
    /// as the pass reported them ([`crate::Pass::cleared_by_health_check`]): they roll on without the gate.
    pub cleared: BTreeSet<String>,
}

impl GroupGates {
    /// Nothing cleared; `gate` (if any) for the target.
    pub fn of(gate: Option<HealthGate>) -> Self {
        GroupGates { gate, cleared: BTreeSet::new() }
    }
}

/// What the shell knows of a group's gate when it runs the pass.
#[derive(Debug, Clone, PartialEq)]
pub struct HealthGate {
    /// The RolloutHealthCheck this is about (the gated StatefulSet's `grafana.com/rollout-health-check`).
    pub health_check: String,
    pub state: GateState,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GateState {
    /// The resource is missing, invalid or does not select the StatefulSet: the rollout proceeds as without a gate.
    Misconfigured(Misconfiguration),
    /// No evaluation for the group's current revisions yet: why (e.g. "being evaluated").
    NotEvaluated(String),
    /// Evaluated at `at` for the group's current revisions.
    Evaluated { at: Timestamp, verdict: GateVerdict },
}

/// Why a gated StatefulSet's RolloutHealthCheck cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misconfiguration {
    #[error("RolloutHealthCheck {name} not found")]
    Missing { name: String },
    #[error("RolloutHealthCheck {name} is invalid: {error}")]
    Invalid { name: String, error: Box<ConfigError> },
    #[error("RolloutHealthCheck {name} does not select StatefulSet {statefulset} (spec.selector.matchLabels)")]
    NotSelecting { name: String, statefulset: String },
}

/// The RolloutHealthCheck `statefulset` of `group` names, from what was found under that name.
pub fn resolve<'c>(
    group: &GroupSnapshot,
    statefulset: &str,
    name: &str,
    found: Option<&'c Result<HealthCheckConfig, ConfigError>>,
) -> Result<&'c HealthCheckConfig, Misconfiguration> {
    let config = match found {
        None => return Err(Misconfiguration::Missing { name: name.to_string() }),
        Some(Err(error)) => {
            return Err(Misconfiguration::Invalid { name: name.to_string(), error: Box::new(error.clone()) });
        }
        Some(Ok(config)) => config,
    };
    let labels = group.member(statefulset).map(|m| &m.sts.labels);
    if labels.is_some_and(|l| config.selects(l)) {
        Ok(config)
    } else {
        Err(Misconfiguration::NotSelecting { name: name.to_string(), statefulset: statefulset.to_string() })
    }
}

/// The plan once the gate has had its say: the deletions of a gated StatefulSet ([`gate_of`]) are held back unless
/// the gate passes for it. With gates [`HealthGating::Off`] the plan stays as it is. With gates on, a gated
/// deletion without a gate for its RolloutHealthCheck (none handed, or one for another resource) is held as not
/// evaluated yet. A misconfigured gate holds nothing and adds a warning; a `Warn` check's finding is a warning too.
///
/// Returns the gated StatefulSets a passing evaluation let through: the shell keeps them cleared for the group's
/// current revisions, so that a zone the gate let start rolls on as its candidates change.
pub fn hold_by_health_check(plan: &mut GroupPlan, group: &GroupSnapshot, gating: HealthGating<'_>) -> Vec<String> {
    let HealthGating::On(gates) = gating else { return Vec::new() };
    let deleted: BTreeSet<&str> = plan
        .actions
        .iter()
        .filter_map(|a| match a {
            Action::DeletePod { statefulset, .. } => Some(statefulset.as_str()),
            _ => None,
        })
        .collect();
    let mut held: Vec<(GateTarget, String)> = Vec::new();
    let mut cleared = Vec::new();
    let mut warnings = Vec::new();
    for member in group.members.iter().filter(|m| deleted.contains(m.sts.name.as_str())) {
        let Some(target) = gate_of(group, member, &gates.cleared) else { continue };
        let name = &target.health_check;
        let hold = match gates.gate.as_ref().filter(|g| g.health_check == *name) {
            None => Some(format!("RolloutHealthCheck {name} has not been evaluated yet for the update revision")),
            Some(gate) => match &gate.state {
                GateState::Misconfigured(why) => {
                    warnings
                        .push(format!("{why}; StatefulSet {} is rolled without its health check", target.statefulset));
                    None
                }
                GateState::NotEvaluated(why) => Some(format!("RolloutHealthCheck {name}: {why}")),
                GateState::Evaluated { at, verdict } => {
                    warnings.extend(verdict.warnings().iter().map(|w| format!("RolloutHealthCheck {name}: {w}")));
                    let hold = verdict.hold_reason().map(|why| {
                        format!("RolloutHealthCheck {name} (evaluated at {}): {why}", format_timestamp(*at))
                    });
                    if hold.is_none() {
                        cleared.push(target.statefulset.clone());
                    }
                    hold
                }
            },
        };
        if let Some(why) = hold {
            held.push((target, why));
        }
    }
    plan.warnings.extend(warnings);
    // The first held StatefulSet's wait is the one told: held last.
    for (target, why) in held.iter().rev() {
        plan.held_by_health_check(&target.statefulset, target.started, why);
    }
    cleared
}
