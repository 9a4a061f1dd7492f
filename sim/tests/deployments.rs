//! The real deployments' RBAC: the simulated API server answers 403 to anything the deployment does not grant, and
//! every world keeps its invariants under the Helm charts' and the jsonnet's profiles. Built only with
//! `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::run_passing;
use rollout_sim::oracle::activity::Served;
use rollout_sim::scenario::Scenario;
use support::*;

mod support;

// Real deployments' RBAC (the operator is a drop-in replacement, docs/contributing/design.md): the simulated API server
// answers 403 to anything the deployment does not grant, and a request outside the grants is a violation. Grafana's
// Helm chart grants no configmaps and runs without the zone tracker; the reference's jsonnet runs with it.

#[test]
fn under_the_helm_charts_rbac_every_scenario_keeps_its_invariants_and_touches_no_configmap() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    for (name, sc, seeds) in rbac_worlds(0..12, 0..10) {
        let outcomes = run_passing(&under(HelmChart, sc), seeds);
        assert_eq!(config_map_requests(&outcomes), 0, "{name}: a ConfigMap was requested");
        assert!(count_lines(&outcomes, "RBAC of the helm deployment") > 0, "{name}");
    }
}

/// Each scenario under a deployment's RBAC, the rollout (cheaper) over `short` seeds, the webhook's over `long`.
fn rbac_worlds(
    short: std::ops::Range<u64>,
    long: std::ops::Range<u64>,
) -> [(&'static str, Scenario, std::ops::Range<u64>); 3] {
    [
        ("rollout", Scenario::default(), short),
        ("scaling", Scenario::scaling(), long.clone()),
        ("rollouts with admitted downscales", Scenario::rollout_with_admitted_downscales(), long),
    ]
}

#[test]
fn under_the_jsonnet_rbac_every_scenario_keeps_its_invariants() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::Jsonnet;
    let mut used = 0;
    for (_, sc, seeds) in rbac_worlds(0..10, 0..10) {
        let outcomes = run_passing(&under(Jsonnet, sc), seeds);
        used += config_map_requests(&outcomes);
    }
    assert!(used > 0, "the zone tracker is used");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_under_the_helm_charts_and_the_jsonnet_rbac_every_scenario_keeps_its_invariants_over_more_seeds() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::{HelmChart, Jsonnet};
    for (name, sc, seeds) in rbac_worlds(12..40, 10..30) {
        let outcomes = run_passing(&under(HelmChart, sc), seeds);
        assert_eq!(config_map_requests(&outcomes), 0, "{name}: a ConfigMap was requested");
    }
    for (_, sc, seeds) in rbac_worlds(10..30, 10..30) {
        run_passing(&under(Jsonnet, sc), seeds);
    }
}

/// The enforcement is real, and a refused optional feature degrades: the zone tracker switched on where the Helm
/// chart grants no configmaps gets 403s (each reported as a violation of the deployment's RBAC), yet every safety
/// invariant holds and the group converges.
#[test]
fn a_zone_tracker_refused_by_rbac_is_reported_and_rollouts_still_converge() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    let sc = Scenario { zone_tracker: Some(true), ..under(HelmChart, Scenario::rollout_with_admitted_downscales()) };
    let mut forbidden = 0;
    for seed in 0..10 {
        let o = rollout_sim::harness::run(seed, &sc, false);
        let (refused, other): (Vec<_>, Vec<_>) =
            o.violations.iter().partition(|v| v.invariant == rollout_sim::oracle::checker::FORBIDDEN);
        assert!(other.is_empty(), "seed {seed}: {other:#?}");
        assert!(refused.iter().all(|v| v.detail.contains("configmaps")), "seed {seed}: {refused:#?}");
        forbidden += refused.len();
        assert!(o.converged_at.is_some(), "seed {seed} did not converge");
    }
    assert!(forbidden > 10, "the ConfigMap requests were refused: {forbidden}");
}

/// The tracker's ConfigMaps readable but not writable (`tracker-read-only`: `get` only, the one read the tracker
/// makes, as a read-only grant such as the built-in `view` ClusterRole's gives it): the record reads succeed, so the
/// tracker stays on until a write is refused.
/// A refused rollout-step claim must switch it off like a refused read (the rollout then goes on unclaimed, the webhook
/// denying downscales it cannot claim); taken for a passing failure instead, every pass retries the claim and the
/// rollout stalls (all 10 seeds then never converge). Only writes are refused: the controller's first in a resync
/// period is the probe the design allows (the checker reports any other), and the webhook's, one per admission it must
/// claim, are each reported as a violation of the deployment's RBAC.
#[test]
fn a_zone_tracker_whose_record_is_read_only_is_switched_off_at_the_first_refused_write_and_rollouts_converge() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::TrackerReadOnly;
    let sc = under(TrackerReadOnly, Scenario::rollout_with_admitted_downscales());
    let mut forbidden = 0;
    for seed in 0..10 {
        let o = rollout_sim::harness::run(seed, &sc, false);
        let (refused, other): (Vec<_>, Vec<_>) =
            o.violations.iter().partition(|v| v.invariant == rollout_sim::oracle::checker::FORBIDDEN);
        assert!(other.is_empty(), "seed {seed}: {other:#?}");
        let webhook_write = |d: &str| d.contains("webhook") && d.contains("create configmaps");
        assert!(refused.iter().all(|v| webhook_write(&v.detail)), "seed {seed}: {refused:#?}");
        forbidden += refused.len();
        // The mechanism under test: the controller's own write of the record was refused (and excused as its probe).
        let probed = |s: &&Served| {
            s.sender == Sender::Operator
                && matches!(s.request, Request::CreateConfigMap | Request::ReplaceConfigMap)
                && s.failure == Some("forbidden")
        };
        assert!(o.activity.served.iter().any(|s| probed(&s)), "seed {seed}: the controller never met a refused write");
        assert!(o.converged_at.is_some(), "seed {seed} did not converge");
    }
    assert!(forbidden >= 10, "the record's writes were refused: {forbidden}");
}

/// The same RBAC with leader/follower scaling, the leader scaled directly (not served by the prepare-downscale
/// webhook): the followers' downscales must be claimed in the record, which cannot be written, so they do not happen
/// and the followers stay at or above the leader, the controller asking again only once a resync period after its last
/// refusal. Letting a coordinated downscale through where claims are refused (the downscale test inverted) makes the
/// controller try to claim at every pass, each refusal after the first reported.
#[test]
fn followers_are_not_scaled_down_while_the_zone_trackers_record_is_read_only_over_20_seeds() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::TrackerReadOnly;
    use rollout_sim::scenario::scaling::Admission;
    use rollout_sim::scenario::scaling::ScalingScenario;
    let direct = ScalingScenario { admission: Admission::Direct, ..ScalingScenario::default() };
    let sc = under(TrackerReadOnly, Scenario { scaling: Some(direct), ..Scenario::scaling() });
    let outcomes = run_passing(&sc, 0..20);
    let downscales = |zone: &str| -> usize {
        outcomes.iter().map(|o| o.activity.downscales(zone, true) + o.activity.downscales(zone, false)).sum()
    };
    let leader_downscales = downscales("ingester-zone-a");
    let refused_claims =
        forbidden(&outcomes, Request::ReplaceConfigMap) + forbidden(&outcomes, Request::CreateConfigMap);
    let follower_downscales = downscales("ingester-zone-b") + downscales("ingester-zone-c");
    assert!(leader_downscales >= 40, "only {leader_downscales} leader downscales");
    assert!(refused_claims >= 10, "only {refused_claims} follower downscales tried to claim");
    assert_eq!(follower_downscales, 0, "followers went down without a claim");
}

/// The same misconfiguration with leader/follower scaling and `grafana.com/rollout-force-replicas` on a follower:
/// the leader's downscales cannot be claimed (denied), so the followers only go up with it, uncoordinated; the
/// forced replicas, up or down, are exempt from the min time and need no claim, so they are applied too. Refusing
/// every downscale (not only the coordinated ones) leaves a forced downscale undone.
#[test]
fn a_zone_tracker_refused_by_rbac_still_lets_followers_go_up_and_forced_replicas_apply() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    let sc = Scenario {
        zone_tracker: Some(true),
        force_follower: true,
        ..under(HelmChart, Scenario { revisions: 1, ..Scenario::scaling() })
    };
    let (mut forced_down, mut upscales) = (0, 0);
    for seed in 0..16 {
        let o = rollout_sim::harness::run(seed, &sc, false);
        let (refused, other): (Vec<_>, Vec<_>) =
            o.violations.iter().partition(|v| v.invariant == rollout_sim::oracle::checker::FORBIDDEN);
        assert!(other.is_empty(), "seed {seed}: {other:#?}");
        assert!(refused.iter().all(|v| v.detail.contains("configmaps")), "seed {seed}: {refused:#?}");
        assert!(o.converged_at.is_some(), "seed {seed} did not converge");
        // zone-b is the forced follower; zone-c only follows the leader (up: its downscales cannot be claimed).
        forced_down += o.activity.downscales("ingester-zone-b", true);
        upscales += o.activity.sent(Request::PatchReplicas, "ingester-zone-c");
    }
    assert!(forced_down >= 2 && upscales >= 8, "forced downscales {forced_down}, follower upscales {upscales}");
}

/// Without `patch` on StatefulSets (the `no-patch` profile) the controller's replica changes are refused: it takes
/// the first refusal as coordinated scaling being off, goes on rolling (the followers keep their replicas, so only
/// the rollout must converge), and asks again a resync period (300 s) after its last refusal, not at every pass
/// (each refusal before that is a violation of the deployment's RBAC). Re-planning the refused scaling at every pass
/// stalled the rollout, since a pass that scales does nothing else.
#[test]
fn without_patch_on_statefulsets_scaling_is_refused_and_rollouts_still_converge_over_20_seeds() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::NoPatch;
    let sc = under(NoPatch, Scenario { revisions: 1, ..Scenario::scaling() });
    let outcomes = run_passing(&sc, 0..20);
    let refused = forbidden(&outcomes, Request::PatchReplicas);
    let deleted = served(&outcomes, Sender::Operator, Request::DeletePod, "ingester-zone");
    assert!(refused >= 20, "only {refused} replica changes refused");
    assert!(deleted >= 100, "only {deleted} pods rolled");
}

/// Without the zone tracker two zones' downscales admitted concurrently are not serialised (the promise holds for
/// downscales that do not overlap); with it, every pair is judged. A pair whose later downscale was decided before
/// the earlier one committed is left unjudged only in that mode.
#[test]
fn checker_excuses_overlapping_downscales_only_without_the_zone_tracker() {
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::scaling::Downscale;
    use std::time::Duration;
    let d = |sts: &str, at: u64, commit_rv: u64, basis_rv: u64| Downscale {
        commit_rv,
        basis_rv: Some(basis_rv),
        at: Duration::from_secs(at),
        sts: sts.into(),
        group: "g".into(),
        from: 3,
        to: 2,
        by: "webhook".into(),
        min_time: Some(Duration::from_secs(30)),
        recorded_at: None,
        exempt: false,
        follower: false,
    };
    for tracker in [true, false] {
        let mut c = Checker::default();
        c.concurrent_downscales_excused = !tracker;
        c.record_downscale(d("a", 100, 10, 5));
        // b was decided at rv 8, before a committed at rv 10: overlapping.
        c.record_downscale(d("b", 101, 12, 8));
        // c was decided at rv 11: after a committed (judged in both modes), before b did.
        c.record_downscale(d("c", 102, 13, 11));
        // With the tracker all three pairs are judged; without it b-a and c-b overlap (each decided before the
        // other committed) and only c-a is judged.
        let expected = if tracker { 3 } else { 1 };
        assert_eq!(c.violations.len(), expected, "tracker {tracker}: {:#?}", c.violations);
        assert_eq!(c.concurrent_pairs_not_judged, if tracker { 0 } else { 2 });
    }
}
