//! The prepare-downscale webhook as an actor: an HPA per zone changing replicas through the real router during
//! one-zone rollouts, `/scale` requests, rollout-step claims, and the execution's known bugs around them. Built only
//! with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::outcome::Outcome;
use rollout_sim::harness::run_passing;
use rollout_sim::oracle::activity::WorldEvent;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::faults::FaultMix;
use rollout_sim::scenario::planner::PlannerKind;
use support::*;

mod support;

// The real prepare-downscale webhook as an actor (the min time between zone downscales, no downscale during a
// rollout, no rollout step while a downscale is prepared): the user's (HPA's) replica changes
// are AdmissionReviews sent to the admission router of one of two simulated operator replicas, applied only if
// allowed; the pods answer the prepare calls, sometimes slowly or with errors; the controller runs as usual.

/// Template pushes (one zone each) mixed with downscales of every zone admitted by the real webhook, concurrently
/// with each other and with the controller's passes: no pod replaced while a downscale of the group is being
/// prepared, no downscale admitted while another zone is rolling, min time between zone downscales.
#[test]
fn webhook_rollouts_with_admitted_downscales_keep_invariants_3_and_5_over_25_seeds() {
    let outcomes = run_passing(&Scenario::rollout_with_admitted_downscales(), 0..25);
    let prepared = world(&outcomes, |e| matches!(e, WorldEvent::DownscalePrepared { .. }));
    assert!(prepared >= 25, "only {prepared} downscales were prepared by the webhook");
    let rolling: usize = outcomes.iter().map(|o| o.activity.denied_for("non-updated replicas")).sum();
    assert!(rolling >= 40, "the webhook should deny downscales during rollouts; denied {rolling}");
    let writes: u64 = outcomes.iter().map(|o| o.writes_judged).sum();
    assert!(writes >= 25 * 10, "only {writes} controller writes judged");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_webhook_rollouts_with_admitted_downscales_keep_invariants_3_and_5_over_seeds_25_to_60() {
    run_passing(&Scenario::rollout_with_admitted_downscales(), 25..60);
}

#[test]
fn webhook_runs_are_a_pure_function_of_their_seed() {
    for sc in [Scenario::scaling(), Scenario::rollout_with_admitted_downscales()] {
        for seed in [0, 3, 23] {
            let a = rollout_sim::harness::run(seed, &sc, false);
            let b = rollout_sim::harness::run(seed, &sc, false);
            assert_eq!(a.trace.lines, b.trace.lines, "seed {seed}: traces differ");
        }
    }
}

#[test]
fn webhook_known_bug_ignores_downscales_in_progress_is_caught() {
    let sc =
        Scenario { planner: PlannerKind::IgnoresDownscalesInProgress, ..Scenario::rollout_with_admitted_downscales() };
    let (seed, o) = (0..60)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false)))
        .find(|(_, o)| {
            o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT)
        })
        .expect("ignores-downscales-in-progress not caught in 60 seeds");
    println!("ignores-downscales-in-progress first caught at seed {seed}: {}", o.violations[0].detail);
}

/// Seed 7 of the mixed scenario with the known-bug planner: zone-b's template is pushed alone (its own deploy) at
/// 14.6 s, its HPA's downscale is admitted (zone-a and zone-c are updated), the webhook's marker commits at 14.9 s and
/// its pods are slow to prepare (the downscale commits at 16.8 s), and the planner deletes ingester-zone-b-0 at 15.4 s
/// meanwhile. The real controller waits for the marker.
#[test]
fn regression_seed_7_pod_replaced_while_a_downscale_is_prepared() {
    let sc = Scenario::rollout_with_admitted_downscales();
    let buggy = Scenario { planner: PlannerKind::IgnoresDownscalesInProgress, ..sc.clone() };
    let o = rollout_sim::harness::run(7, &buggy, false);
    let v = o
        .violations
        .iter()
        .find(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT)
        .expect("seed 7 should be caught");
    assert!(
        v.detail.contains("deleted ingester-zone-b-0") && v.detail.contains("ingester-zone-b was being prepared"),
        "{}",
        v.detail
    );
    let real = rollout_sim::harness::run(7, &sc, false);
    assert!(real.passed(), "{:#?}", real.violations);
}

/// The controller's own downscales are judged for invariant 5 (they once were not, only admissions were): a
/// planner that scales followers down while another zone is rolling or unready is caught.
#[test]
fn scaling_known_bug_downscales_during_rollouts_is_caught() {
    let sc = Scenario { planner: PlannerKind::DownscalesDuringRollouts, ..Scenario::scaling_during_rollout() };
    let (seed, o) = (0..60)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false)))
        .find(|(_, o)| {
            o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT)
        })
        .expect("downscales-during-rollouts not caught in 60 seeds");
    let v =
        o.violations.iter().find(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT).unwrap();
    assert!(v.detail.starts_with("scaled "), "{}", v.detail);
    println!("downscales-during-rollouts first caught at seed {seed}: {}", v.detail);
}

/// Seed 3500 of the default scenario (found in a 5,000-seed batch): the controller deleted ingester-zone-b-0 with
/// no answer (a partition), its pod watch then kept expiring, and after 30 s it gave up on the expectation of its
/// own deletion, planned on a cache 160 s stale that still showed b-0 old and Ready, and deleted ingester-zone-a-0
/// while b-0 was terminating (one zone at a time). An expectation that expires unobserved is now checked against
/// the live object: kept while the write is seen to have happened, dropped only when it is seen not to have.
#[test]
fn regression_seed_3500_expectation_given_up_on_a_stale_cache() {
    let o = rollout_sim::harness::run(3500, &Scenario::default(), false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Seeds 1432 and 1496 of `--webhook --deployment helm` (found in a 2,000-seed batch): without the zone tracker, the
/// controller deleted a pod of zone-b while a downscale of zone-a was being admitted. That mode has no marker and no
/// rollout-step claim to serialise them (the reference's default has neither), so the checker judges an admission
/// there only on what held throughout it; the same seeds with the tracker (the jsonnet) keep the full guarantee.
#[test]
fn regression_seeds_1432_1496_rollout_step_during_an_admission_without_the_zone_tracker() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::{HelmChart, Jsonnet};
    for seed in [1432, 1496] {
        for deployment in [HelmChart, Jsonnet] {
            let o = rollout_sim::harness::run(
                seed,
                &under(deployment, Scenario::rollout_with_admitted_downscales()),
                false,
            );
            assert!(o.passed(), "seed {seed} {deployment:?}: {:#?}", o.violations);
        }
    }
}

/// Seed 2454 of `--webhook --deployment helm` (and seed 239 of `--scaling --webhook --revisions 2`): a pod created
/// just before the faults stopped drew a never-ready delay; healing shortened it, but the simulated kubelet slept
/// until the old deadline (nothing else changed to wake it), so the group converged minutes late and missed the
/// liveness deadline. The simulator's fault, not the controller's: healing now wakes the kubelet.
#[test]
fn regression_seeds_2454_239_healing_wakes_the_kubelet() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    let o = rollout_sim::harness::run(2454, &under(HelmChart, Scenario::rollout_with_admitted_downscales()), false);
    assert!(o.passed(), "{:#?}", o.violations);
    let o = rollout_sim::harness::run(239, &Scenario { revisions: 2, ..Scenario::scaling() }, false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Review finding, found again by the simulation once admitted downscales commit after the admission chain (up to
/// 2 s after the answer) and count as being prepared until then: when the webhook removed its marker at its answer,
/// a controller pass could replace a pod of the group before the downscale committed (seeds 2 and 32 of `--webhook`,
/// among many). The marker now lasts until the date recorded for the commit.
#[test]
fn regression_seeds_2_32_pod_replaced_between_the_answer_and_the_commit() {
    let sc = Scenario::rollout_with_admitted_downscales();
    for seed in [2, 32] {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
    }
}

/// Seeds 124 and 344 of `--webhook`, found by the mutation run: with the controller's rollout step never
/// live for the webhook (`RolloutStepInProgress::is_live` false), a downscale's claim ignored a step already claimed,
/// and the controller replaced a pod of the zone being prepared (zone-b at 129 s, zone-c at 162 s). The step claim's
/// compare-and-swap catches a marker committed before it; these are the two seeds of 1,500 where the marker commits
/// after it, so only the webhook's reading of the live step keeps them apart.
#[test]
fn regression_seeds_124_344_a_downscale_claim_waits_for_the_controllers_live_rollout_step() {
    assert_all_pass(&Scenario::rollout_with_admitted_downscales(), [124, 344]);
}

/// Seed 196 of `--webhook` (found once passes ran promptly after events): under message loss the webhook's
/// write dating a downscale never committed and its deadline passed, so it denied, told the pods to cancel and gave
/// its claim back (marker and all) at 275.7 s; its answer reached the API server only at 285.7 s, and the checker kept
/// the preparation window open until then, so a controller deletion at 284.8 s (after the give-back, on a record
/// with no marker) was judged a rollout step during a preparation. The preparation was over at the give-back: the
/// checker now ends an admission's window when a record write of that same admission takes its marker out (its undo
/// runs after the pods' cancel calls).
#[test]
fn regression_seed_196_a_preparation_ends_when_its_admission_gives_the_claim_back() {
    let o = rollout_sim::harness::run(196, &Scenario::rollout_with_admitted_downscales(), false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// The webhook users also send `/scale` updates: half as `kubectl scale` does (a PATCH, which the API server
/// re-applies and re-admits when the object changed during its admission), half as an HPA does (a PUT carrying the
/// resourceVersion it read, refused with 409 when the object changed, and sent again at the HPA's next sync).
/// Without the zone tracker the webhook records a `/scale` downscale on the parent (a write that moves the
/// resourceVersion under the request); with it, in the record. Both keep every invariant.
#[test]
fn webhook_scale_requests_keep_every_invariant_with_and_without_the_zone_tracker() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::{HelmChart, Jsonnet};
    let base = Scenario { scale_requests: true, ..Scenario::rollout_with_admitted_downscales() };
    let helm = run_passing(&under(HelmChart, base.clone()), 0..15);
    assert!(
        served(&helm, Sender::Webhook, Request::PatchStatefulSetAnnotations, "") > 5,
        "parents annotated for /scale downscales"
    );
    let stats = scale_requests(&helm);
    assert!(stats.scale_patch_readmitted > 0, "no kubectl-style /scale downscale re-admitted: {stats:?}");
    assert_eq!(stats.patch_conflicts, 0, "{stats:?}");
    let jsonnet = run_passing(&under(Jsonnet, base), 0..15);
    assert_eq!(
        sent(&jsonnet, Request::PatchStatefulSetAnnotations, ""),
        0,
        "the record, not annotations, with the tracker"
    );
}

/// The webhook users' downscale requests of `outcomes`, summed.
fn scale_requests(outcomes: &[Outcome]) -> rollout_sim::environment::guaranteed_update::ScaleRequestStats {
    let mut stats = rollout_sim::environment::guaranteed_update::ScaleRequestStats::default();
    for o in outcomes {
        stats.add(&o.scale_requests);
    }
    stats
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_webhook_scale_requests_keep_every_invariant_over_seeds_15_to_40() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::{HelmChart, Jsonnet};
    let base = Scenario { scale_requests: true, ..Scenario::rollout_with_admitted_downscales() };
    run_passing(&under(HelmChart, base.clone()), 15..40);
    let jsonnet = run_passing(&under(Jsonnet, base), 15..40);
    assert_eq!(
        sent(&jsonnet, Request::PatchStatefulSetAnnotations, ""),
        0,
        "the record, not annotations, with the tracker"
    );
}

/// `/scale` downscales of the leader admitted under the Helm chart's RBAC (no zone tracker), while the controller
/// scales the followers after it. A `/scale` downscale of a StatefulSet whose `grafana.com/last-downscale` is not
/// far enough ahead must be re-dated on the parent before it is admitted (a date still ahead of the commit, from an
/// earlier admission, is kept): admitted with the old date, the followers go down within the min time of the
/// leader's commit (the date comparison inverted fails seeds 0, 2, 7, 11 and 19).
#[test]
fn scale_requests_of_a_leader_without_the_zone_tracker_keep_the_followers_min_time() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    let sc = under(HelmChart, Scenario { scale_requests: true, ..Scenario::scaling() });
    let outcomes = run_passing(&sc, 0..24);
    assert!(
        served(&outcomes, Sender::Webhook, Request::PatchStatefulSetAnnotations, "") > 5,
        "parents annotated for /scale downscales"
    );
}

/// The webhook's record of a `/scale` downscale on its parent moves the resourceVersion the request is stored
/// against, and the API server runs the request again. A `kubectl scale` (PATCH) commits on its one request: the
/// API server re-admits it and that admission, finding the date ahead, writes nothing and is allowed (checkers
/// `OWN_WRITE_CONFLICT`, `PREPARE_RECORDED_ALLOWED`). An HPA's PUT is refused with 409 and commits when the HPA
/// sends it again. Every guarantee holds, judged on the commits. (Recorded and then denied, as the webhook once did
/// with every `/scale` downscale, `PREPARE_RECORDED_ALLOWED` fails 18 of these seeds; recorded only a commit
/// margin ahead, the PATCH's re-admissions write again until the API server gives up with 409.)
#[test]
fn without_the_zone_tracker_kubectl_scale_commits_on_its_first_request_and_an_hpa_put_on_its_retry() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    let sc = under(HelmChart, Scenario { scale_requests: true, ..Scenario::scaling() });
    let stats = scale_requests(&run_passing(&sc, 0..30));
    assert!(stats.scale_patch_readmitted >= 10, "kubectl-style /scale downscales committed: {stats:?}");
    assert_eq!(stats.patch_conflicts, 0, "no PATCH refused with 409: {stats:?}");
    assert!(stats.put_after_conflict >= 10, "HPA-style downscales committed on the request after a 409: {stats:?}");
    assert_eq!(stats.put_given_up, 0, "{stats:?}");
}

/// Seed 70 of `--scaling --webhook --scale-requests --deployment helm` (found in a 100-seed batch): the webhook's
/// patch of the parent committed but its answer came after the webhook's deadline, so the webhook denied the
/// downscale as its policy says ("recording the downscale ... failed ...; retry"), not knowing the record was there.
/// The checker took that for a downscale recorded and then denied (`PREPARE_RECORDED_ALLOWED`); a denial saying the
/// record failed is not one.
#[test]
fn regression_seed_70_a_record_whose_answer_was_lost_is_denied_as_failed_not_judged_recorded() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    let sc = under(HelmChart, Scenario { scale_requests: true, ..Scenario::scaling() });
    let o = rollout_sim::harness::run(70, &sc, false);
    assert!(o.passed(), "{:#?}", o.violations);
    let lost = o
        .activity
        .admissions
        .iter()
        .any(|a| !a.admitted && a.message.contains("annotation failed") && a.message.contains("deadline passed"));
    assert!(lost, "the record's answer is no longer lost at seed 70");
}

/// A rollout step finished after a deletion whose answer never came (the request still in flight at a slow API
/// server) lets the deletion commit with no step claimed, while the prepare-downscale webhook may prepare a
/// downscale: caught by the step-claim guarantee; the real execution leaves such a step to expire.
#[test]
fn a_rollout_step_finished_while_a_deletion_is_in_flight_is_caught() {
    let mut faults = FaultMix::NONE;
    faults.latency_spikes = true;
    let sc = Scenario { faults, slow_commits: true, ..Scenario::rollout_with_admitted_downscales() };
    let buggy = Scenario { planner: PlannerKind::FinishesStepWhileOutcomeUnknown, ..sc.clone() };
    let (seed, _) = (0..60)
        .map(|s| (s, rollout_sim::harness::run(s, &buggy, false)))
        .find(|(_, o)| o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::ROLLOUT_STEP_CLAIMED))
        .expect("finishes-step-while-outcome-unknown not caught in 60 seeds");
    let real = rollout_sim::harness::run(seed, &sc, false);
    assert!(real.passed(), "seed {seed}: {:#?}", real.violations);
}

/// Seed 9 of the slow-commit webhook world: a deletion of ingester-zone-b-0 sent under a step claim waits at the API
/// server past its client's timeout; the buggy execution finishes the step at once and the deletion commits at
/// 89.9 s with no step claimed.
#[test]
fn regression_seed_9_deletion_commits_after_its_step_was_finished() {
    let mut faults = FaultMix::NONE;
    faults.latency_spikes = true;
    let sc = Scenario { faults, slow_commits: true, ..Scenario::rollout_with_admitted_downscales() };
    let buggy = Scenario { planner: PlannerKind::FinishesStepWhileOutcomeUnknown, ..sc.clone() };
    let o = rollout_sim::harness::run(9, &buggy, false);
    assert!(
        o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::ROLLOUT_STEP_CLAIMED),
        "{:#?}",
        o.violations
    );
    assert!(rollout_sim::harness::run(9, &sc, false).passed());
}

/// A stale rollout step claim (the record moved since the pass's read) taken as made (`deletes-on-a-stale-step-
/// claim`): when what moved the record is the webhook's marker, the pass deletes while a downscale is prepared.
/// Slow admissions spread the webhook's writes over seconds, so a marker lands between a pass's read and its claim
/// (first at seed 169 of `--webhook --slow-admissions`); the real execution plans again on a fresh read.
#[test]
fn known_bug_deletes_on_a_stale_step_claim_is_caught() {
    let sc = Scenario { slow_admissions: true, ..Scenario::rollout_with_admitted_downscales() };
    let buggy = Scenario { planner: PlannerKind::DeletesOnAStaleStepClaim, ..sc.clone() };
    let (seed, o) = (150..200)
        .map(|s| (s, rollout_sim::harness::run(s, &buggy, false)))
        .find(|(_, o)| {
            o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT)
        })
        .expect("deletes-on-a-stale-step-claim not caught in seeds 150..200");
    assert!(o.violations.iter().any(|v| v.detail.contains("was being prepared")), "{:#?}", o.violations);
    assert_all_pass(&sc, [seed]);
}
