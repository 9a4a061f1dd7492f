//! One debug line for each need of a step machine whose carrying out failed (target `rollout_operator::needs`): the
//! machine, the need, the kind of failure. For whoever debugs a step that did not happen; the simulation counts
//! them to show that every failure branch of every machine was taken.

/// Logs a failed need, when `failure` names one.
pub fn failed(machine: &'static str, need: &'static str, failure: Option<&'static str>) {
    if let Some(failure) = failure {
        tracing::debug!(target: "rollout_operator::needs", machine, need, failure, "need failed");
    }
}
