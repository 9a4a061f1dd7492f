//! Evidence that the model catches real bugs: each test-only planner of `rollout-known-bugs` must yield a
//! counterexample, and the production planner must yield none on the same configuration.

use rollout_core::{Planner, RolloutPlanner};
use rollout_known_bugs::{
    MissingPodsSpendNoBudget, NoExpectations, PausedLetsOthersProceed, StatusCountReadiness, TerminatingCountsAsReady,
};
use rollout_model::{ModelConfig, RolloutModel, State, Step};
use stateright::{Checker, Model};
use std::sync::Arc;

/// Checks the configuration with `planner`; returns the names of violated properties and one timeline.
fn violations(
    config: &ModelConfig,
    planner: Arc<dyn Planner + Send + Sync>,
    stop_at_first: bool,
) -> (Vec<&'static str>, String) {
    let model = RolloutModel::new(config.clone(), planner);
    let mut checker = model.clone().checker().threads(2);
    if stop_at_first {
        checker = checker.finish_when(stateright::HasDiscoveries::AnyFailures);
    }
    let checker = checker.spawn_bfs().join();
    let mut violated = Vec::new();
    let mut timeline = String::new();
    for p in model.properties() {
        if p.expectation == stateright::Expectation::Always
            && let Some(path) = checker.discovery(p.name)
        {
            violated.push(p.name);
            if timeline.is_empty() {
                let steps: Vec<(State, Option<Step>)> = path.into_vec();
                timeline = model.timeline(&steps);
            }
        }
    }
    (violated, timeline)
}

fn assert_bug_found(config: ModelConfig, planner: Arc<dyn Planner + Send + Sync>, property: &str) {
    let (bad, timeline) = violations(&config, planner, true);
    assert!(bad.contains(&property), "expected a counterexample to {property:?}, got {bad:?}\n{timeline}");
    // The counterexample reads as a timeline that ends in the violation.
    assert!(timeline.starts_with("  0. initial"), "{timeline}");
    assert!(timeline.contains("controller writes DeletePod") || timeline.contains("controller writes SetCurrent"));
    assert!(timeline.trim_end().lines().last().is_some_and(|l| l.contains("VIOLATION")), "{timeline}");
    let (real, timeline) = violations(&config, Arc::new(RolloutPlanner), false);
    assert!(real.is_empty(), "the production planner violates {real:?}:\n{timeline}");
}

#[test]
fn readiness_from_status_counts_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, status_lag: true, ..ModelConfig::default() };
    assert_bug_found(config, Arc::new(StatusCountReadiness), "no zero-pod ready");
}

#[test]
fn paused_statefulset_with_unavailable_pods_letting_others_proceed_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, pauses: 1, crashes: 1, ..ModelConfig::default() };
    assert_bug_found(config, Arc::new(PausedLetsOthersProceed), "one zone at a time");
}

#[test]
fn no_expectations_with_a_stale_cache_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, stale: 1, crashes: 1, ..ModelConfig::default() };
    assert_bug_found(config, Arc::new(NoExpectations), "one zone at a time");
}

#[test]
fn terminating_but_ready_pods_counting_as_ready_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, evictions: 1, ..ModelConfig::default() };
    assert_bug_found(config, Arc::new(TerminatingCountsAsReady), "one zone at a time");
}

/// The max-unavailable property judges each deletion against the controller's knowledge before that deletion (it
/// once judged it after, when the target already looked terminating, and could never fire). One zone, so no other
/// property can fire first.
#[test]
fn missing_pods_spending_no_budget_is_caught() {
    let config = ModelConfig { zones: 1, pods: 3, max_unavailable: 1, ..ModelConfig::default() };
    assert_bug_found(config, Arc::new(MissingPodsSpendNoBudget), "max unavailable");
}
