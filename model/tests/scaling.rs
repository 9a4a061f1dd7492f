//! The min time between zone downscales with leader/follower scaling in play: the production planner (with the
//! reconcile loop's record claims) keeps zone downscales apart by the min time under concurrent controllers and a user
//! changing the leader through the webhook; a planner that skips the min-time check is caught.

use rollout_core::{Planner, RolloutPlanner};
use rollout_known_bugs::SkipsMinTimeCheck;
use rollout_model::scaling::{ScalingModel, ScalingModelConfig};
use stateright::{Checker, Model};
use std::sync::Arc;

fn check(config: ScalingModelConfig, planner: Arc<dyn Planner + Send + Sync>) -> (bool, bool, usize) {
    let model = ScalingModel::new(config, planner);
    let checker = model.checker().threads(2).spawn_bfs().join();
    let violated = checker.discovery("min time between zone downscales").is_some();
    let follower_downscaled = checker.discovery("a follower is downscaled").is_some();
    (violated, follower_downscaled, checker.unique_state_count())
}

#[test]
fn production_planner_keeps_zone_downscales_apart() {
    for chain in [false, true] {
        let config = ScalingModelConfig { chain, ..ScalingModelConfig::default() };
        let (violated, follower_downscaled, states) = check(config, Arc::new(RolloutPlanner));
        eprintln!("chain={chain}: {states} states");
        assert!(!violated, "chain={chain}: invariant 3 violated");
        assert!(follower_downscaled, "chain={chain}: vacuous: no follower was ever downscaled ({states} states)");
    }
}

#[test]
fn a_planner_that_skips_the_min_time_check_is_caught() {
    let (violated, _, _) = check(ScalingModelConfig::default(), Arc::new(SkipsMinTimeCheck));
    assert!(violated, "the model must find two zone downscales closer than the min time");
}

/// Checks the min time on its own view but never claims the downscale in the record: two controller replicas (or
/// the controller and the webhook) pass the check at the same time for different zones.
struct ChecksButDoesNotClaim;

impl Planner for ChecksButDoesNotClaim {
    fn plan(
        &self,
        group: &rollout_core::GroupSnapshot,
        ctx: &rollout_core::PlanContext<'_>,
    ) -> rollout_core::GroupPlan {
        let mut plan = RolloutPlanner.plan(group, ctx);
        for a in &mut plan.actions {
            if let rollout_core::Action::Scale { coordinated_downscale, .. } = a {
                *coordinated_downscale = false;
            }
        }
        plan
    }
}

#[test]
fn the_record_claim_is_what_serialises_concurrent_actors() {
    let two = ScalingModelConfig::default();
    let (violated, _, states) = check(two.clone(), Arc::new(ChecksButDoesNotClaim));
    assert!(violated, "without claims two actors downscale two zones at once ({states} states)");
    let (violated, _, states) = check(two, Arc::new(RolloutPlanner));
    assert!(!violated, "{states} states");
    assert!(states > 1000, "the model explores a meaningful space: {states} states");
}

/// The execution machine's known bugs, checked through the same machine the controller runs: a refused claim taken
/// as made, and a claim given back while its patch may still commit.
#[test]
fn the_execution_of_a_downscale_claim_is_checked() {
    use rollout_known_bugs::{GivesBackAClaimWhoseOutcomeIsUnknown, PatchesOnARefusedDownscaleClaim};
    let model = ScalingModel::new(ScalingModelConfig::default(), Arc::new(RolloutPlanner));
    let checker = model.checker().threads(2).spawn_bfs().join();
    assert!(checker.discovery("a claim is given back").is_some(), "vacuous: no claim was ever given back");
    let bugs: [(&str, Arc<dyn Planner + Send + Sync>); 2] = [
        ("patches-on-a-refused-downscale-claim", Arc::new(PatchesOnARefusedDownscaleClaim)),
        ("gives-back-a-claim-whose-outcome-is-unknown", Arc::new(GivesBackAClaimWhoseOutcomeIsUnknown)),
    ];
    for (name, planner) in bugs {
        let (violated, _, states) = check(ScalingModelConfig::default(), planner.clone());
        assert!(violated, "{name} not caught ({states} states)");
    }
    // Without lost answers the second bug has nothing to act on: the lost answer is what the model must vary.
    let no_lost = ScalingModelConfig { lost_answers: 0, ..ScalingModelConfig::default() };
    let (violated, _, _) = check(no_lost, Arc::new(GivesBackAClaimWhoseOutcomeIsUnknown));
    assert!(!violated, "gives-back-a-claim-whose-outcome-is-unknown caught without a lost answer");
}
