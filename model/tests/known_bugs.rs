//! Evidence that the model catches real bugs: test-only planners that re-introduce, one at a time, failures of the
//! reference operator. Each wraps the production planner and changes only what the bug changed; each must yield a
//! counterexample, and the production planner must yield none on the same configuration.

use rollout_core::fixture;
use rollout_core::{GroupPlan, GroupSnapshot, PlanContext, Planner, RolloutPlanner};
use rollout_model::{ModelConfig, RolloutModel, State, Step};
use stateright::{Checker, Model};
use std::sync::Arc;

/// Readiness taken from the StatefulSet's status counts (the reference before v0.13.0): when `readyReplicas`
/// says everything is ready, missing pods and unready pods are not noticed.
struct StatusCountReadiness;

impl Planner for StatusCountReadiness {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in &mut group.members {
            let Some(status) = m.sts.status.clone() else { continue };
            if status.ready_replicas < status.replicas {
                continue;
            }
            // The status says "all ready": present every pod as ready, and the missing ones as ready updated pods.
            for p in &mut m.pods {
                *p = fixture::pod(&m.sts, ordinal(&m.sts.name, &p.name), p.revision().unwrap_or_default());
            }
            for i in 0..m.sts.replicas {
                if !m.pods.iter().any(|p| ordinal(&m.sts.name, &p.name) == i) {
                    m.pods.push(fixture::pod(&m.sts, i, &status.update_revision));
                }
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// A paused StatefulSet is skipped even while it has unavailable pods (reference bug 9.2-F).
struct PausedLetsOthersProceed;

impl Planner for PausedLetsOthersProceed {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for m in group.members.iter_mut().filter(|m| m.sts.settings.paused) {
            let update = m.sts.status.as_ref().map(|s| s.update_revision.clone()).unwrap_or_default();
            let present: Vec<u32> = m.pods.iter().map(|p| ordinal(&m.sts.name, &p.name)).collect();
            for p in &mut m.pods {
                *p = fixture::pod(&m.sts, ordinal(&m.sts.name, &p.name), p.revision().unwrap_or_default());
            }
            for i in (0..m.sts.replicas).filter(|i| !present.contains(i)) {
                m.pods.push(fixture::pod(&m.sts, i, &update));
            }
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

/// No expectations and no uid preconditions (the reference had neither): plans on a stale cache act as if the
/// controller's own recent writes had not happened.
struct NoExpectations;

impl Planner for NoExpectations {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut plan = RolloutPlanner.plan(group, &PlanContext::new(ctx.now, &[]));
        for a in &mut plan.actions {
            if let rollout_core::Action::DeletePod { uid, .. } = a {
                uid.clear();
            }
        }
        plan
    }
}

/// Terminating pods that still report Ready count as ready (the reference before v0.1.2).
struct TerminatingCountsAsReady;

impl Planner for TerminatingCountsAsReady {
    fn plan(&self, group: &GroupSnapshot, ctx: &PlanContext<'_>) -> GroupPlan {
        let mut group = group.clone();
        for p in group.members.iter_mut().flat_map(|m| m.pods.iter_mut()) {
            p.deletion_timestamp = None;
        }
        RolloutPlanner.plan(&group, ctx)
    }
}

fn ordinal(sts: &str, pod: &str) -> u32 {
    rollout_core::natural::pod_ordinal(sts, pod).unwrap_or(u32::MAX)
}

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
