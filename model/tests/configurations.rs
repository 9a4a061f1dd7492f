//! The configurations CI checks exhaustively with the production planner: every invariant holds in every
//! reachable state, every quiescent state is converged, and the model is not vacuous (a rollout completes; pods are
//! replaced in parallel where max-unavailable allows it).

use rollout_core::RolloutPlanner;
use rollout_model::{ModelConfig, RolloutModel, State, Step};
use stateright::{Checker, Expectation, Model};
use std::sync::Arc;

fn check(config: ModelConfig) {
    let parallel_possible = config.max_unavailable >= 2;
    let model = RolloutModel::new(config.clone(), Arc::new(RolloutPlanner));
    let checker = model.clone().checker().threads(2).spawn_bfs().join();
    assert!(checker.unique_state_count() > 100, "suspiciously small state space for {config:?}");
    for p in model.properties() {
        let found = checker.discovery(p.name);
        match p.expectation {
            Expectation::Sometimes if p.name == "pods are replaced in parallel" && !parallel_possible => {}
            Expectation::Sometimes => assert!(found.is_some(), "{config:?}: never saw {:?}", p.name),
            _ => {
                if let Some(path) = found {
                    let steps: Vec<(State, Option<Step>)> = path.into_vec();
                    panic!("{config:?}: {:?} violated:\n{}", p.name, model.timeline(&steps));
                }
            }
        }
    }
}

#[test]
fn three_zones_three_pods_stale_cache_a_crash_and_a_superseding_revision() {
    check(ModelConfig { zones: 3, pods: 3, stale: 1, crashes: 1, revisions: 2, ..ModelConfig::default() });
}

#[test]
fn three_zones_parallel_replacement_with_a_controller_restart() {
    check(ModelConfig {
        zones: 3,
        pods: 3,
        max_unavailable: 2,
        stale: 1,
        restarts: 1,
        revisions: 2,
        ..ModelConfig::default()
    });
}

#[test]
fn pause_eviction_and_crash_with_a_stale_cache() {
    check(ModelConfig { zones: 2, pods: 2, pauses: 1, evictions: 1, crashes: 1, stale: 1, ..ModelConfig::default() });
}

#[test]
fn lagging_status_counts_and_a_restart_across_two_revisions() {
    check(ModelConfig { zones: 2, pods: 2, status_lag: true, restarts: 1, revisions: 2, ..ModelConfig::default() });
}

#[test]
fn four_zones_with_a_crash_and_a_stale_cache() {
    check(ModelConfig { zones: 4, pods: 2, crashes: 1, stale: 1, ..ModelConfig::default() });
}

/// The group is served by the prepare-downscale webhook with the zone tracker on: the whole pass reads the record,
/// holds while a downscale is being prepared, fails closed while the record is unreadable, and claims each rollout
/// step conditional on the version it read.
#[test]
fn downscales_prepared_during_the_rollout_with_record_outages_a_stale_cache_and_a_restart() {
    check(ModelConfig {
        zones: 2,
        pods: 2,
        downscales: 2,
        record_outages: 1,
        stale: 1,
        restarts: 1,
        ..ModelConfig::default()
    });
}
