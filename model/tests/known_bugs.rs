//! Evidence that the model catches real bugs: each test-only planner of `rollout-known-bugs` must yield a
//! counterexample, and the production planner must yield none on the same configuration.

use rollout_core::{Defences, Layer, Planner, RolloutPlanner};
use rollout_known_bugs::{
    DeletesOnAStaleStepClaim, FinishesStepWhileOutcomeUnknown, IgnoresDownscalesInProgress, MissingPodsSpendNoBudget,
    NoExpectations, PausedLetsOthersProceed, StatusCountReadiness, TerminatingCountsAsReady,
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

/// No rollout step while a downscale is prepared, controller side: a planner that ignores the webhook's in-progress
/// markers replaces pods while a downscale is being prepared (the rollout-step claim does not save it: the marker was
/// there when the pass read the record, so the claim conditional on that version succeeds).
#[test]
fn ignoring_downscales_in_progress_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, downscales: 1, ..ModelConfig::default() };
    assert_bug_found(
        config,
        Arc::new(IgnoresDownscalesInProgress),
        "no rollout step while a downscale is being prepared",
    );
}

/// The rollout-step claim as a defence of its own: with the planner honouring the markers it reads but no claim,
/// a marker written between the pass's read and its deletions is missed. With the claim the same configuration
/// holds (`assert_bug_found` checks the production pass too).
#[test]
fn without_the_rollout_step_claim_a_marker_written_after_the_read_is_missed() {
    let config = ModelConfig {
        zones: 2,
        pods: 2,
        downscales: 1,
        defences: Defences::ALL.without(&[Layer::RolloutStepClaims]),
        ..ModelConfig::default()
    };
    let (bad, timeline) = violations(&config, Arc::new(RolloutPlanner), true);
    assert_eq!(bad, vec!["no rollout step while a downscale is being prepared"], "{timeline}");
    assert!(timeline.contains("WebhookMarksDownscale"), "{timeline}");
    let claimed = ModelConfig { defences: Defences::ALL, ..config };
    let (bad, timeline) = violations(&claimed, Arc::new(RolloutPlanner), false);
    assert!(bad.is_empty(), "{bad:?}\n{timeline}");
}

#[test]
fn a_rollout_step_finished_while_a_deletion_is_in_flight_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, downscales: 1, lost_answers: 1, ..ModelConfig::default() };
    // The counterexample is the one the step guards against: the deletion commits after the step ended.
    let (_, timeline) = violations(&config, Arc::new(FinishesStepWhileOutcomeUnknown), true);
    assert!(timeline.contains("its answer is lost") && timeline.contains("in flight commits"), "{timeline}");
    assert_bug_found(
        config,
        Arc::new(FinishesStepWhileOutcomeUnknown),
        "no rollout step while a downscale is being prepared",
    );
}

/// The execution machine's refusal of a stale step claim, taken as a claim: the webhook's marker moved the record
/// between the pass's read and its claim, and the pass deletes anyway.
#[test]
fn a_stale_rollout_step_claim_taken_as_made_is_caught() {
    let config = ModelConfig { zones: 2, pods: 2, downscales: 1, ..ModelConfig::default() };
    let (_, timeline) = violations(&config, Arc::new(DeletesOnAStaleStepClaim), true);
    assert!(timeline.contains("WebhookMarksDownscale"), "{timeline}");
    assert_bug_found(config, Arc::new(DeletesOnAStaleStepClaim), "no rollout step while a downscale is being prepared");
}
