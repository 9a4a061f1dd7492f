//! Leader/follower scaling: the min time between zone downscales (judged by commit times, at its boundary too),
//! lost replies around the record's claims, followers rolled while scaled, and the scaling known bugs. Built only
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

// Leader/follower scaling (the min time between zone downscales): zone-a leads, zone-b and zone-c follow, 30 s between
// zone downscales, a user scaling the leader through the real prepare-downscale webhook.

#[test]
fn scaling_real_controller_keeps_min_time_between_zone_downscales_over_40_seeds() {
    let sc = Scenario::scaling();
    let outcomes: Vec<Outcome> = (0..40).map(|s| rollout_sim::harness::run(s, &sc, false)).collect();
    if let Some(o) = outcomes.iter().find(|o| !o.passed()) {
        panic!("seed {} failed: {:#?}", o.seed, o.violations);
    }
    // The scenario must actually exercise the rule: several downscales per run, followers' included (fewer than the
    // user asks for: the webhook denies the leader's while another zone has a pod not Ready).
    let downscales: u64 = outcomes.iter().map(|o| o.downscales).sum();
    assert!(downscales >= 80, "only {downscales} downscales over 40 seeds");
    let follower_downscales: usize = outcomes.iter().map(|o| o.activity.downscales("ingester-zone-b", true)).sum();
    assert!(follower_downscales >= 20, "only {follower_downscales} follower downscales by the controller");
    let denied: u64 = outcomes.iter().map(|o| o.scale_requests.denied).sum();
    assert!(denied >= 8, "the webhook should deny some of the user's downscales; denied {denied}");
    let min_time: usize = outcomes.iter().map(|o| o.activity.denied_for("between zone downscales")).sum();
    assert!(min_time >= 3, "the min time should deny some of the user's downscales; denied {min_time}");
    // The webhook prepares the pods under its marker, and faults reach it.
    let prepared = world(&outcomes, |e| matches!(e, WorldEvent::DownscalePrepared { .. }));
    assert!(prepared >= 30, "only {prepared} downscales were prepared by the webhook");
    let failed =
        |o: &Outcome| o.failed_needs.iter().filter(|((machine, ..), _)| machine == "prepare-downscale").count();
    let failed: usize = outcomes.iter().map(failed).sum();
    assert!(failed > 0, "no need of the prepare-downscale webhook failed: the faults did not reach it");
}

/// Liveness in time, not only in the end (what catches `retry_with_backoff` emptied): a failed pass (its requests cut
/// off, refused or in conflict) is tried again after its backoff (5 s doubling to 60 s), not only at the next watch
/// event or the 300 s resync. Every reaction of the controller to work it has (reaction.rs: from the commit that gave
/// it work to its next committed write in the group) stays under `LONGEST_REACTION` over these seeds: at most 113 s
/// with the retries, the slowest a 60 s partition followed by a write of unknown outcome waited out. Without them,
/// seeds 24 and 70 wait for the resync (248 s and 214 s) and every seed still converges, so no end-of-run check sees
/// it. The bound is an observation over a fixed range of deterministic runs, not a derived one: a change to the worlds'
/// draws that moves it needs a look at the slowest seed's trace.
#[test]
fn scaling_a_failed_pass_is_retried_after_its_backoff_not_at_the_resync_over_120_seeds() {
    const LONGEST_REACTION: std::time::Duration = std::time::Duration::from_secs(150);
    let sc = Scenario::scaling();
    let mut slowest = (std::time::Duration::ZERO, 0);
    for seed in 0..120 {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
        if let Some(&longest) = o.reactions.samples.iter().max() {
            slowest = slowest.max((longest, seed));
        }
    }
    assert!(slowest.0 <= LONGEST_REACTION, "seed {} waited {:?} to act on work it had", slowest.1, slowest.0);
    // Not vacuous: some reaction waits out a fault (the retries are what ends it).
    assert!(slowest.0 >= std::time::Duration::from_secs(60), "no reaction waited out a fault: {slowest:?}");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_scaling_real_controller_keeps_min_time_between_zone_downscales_over_seeds_40_to_100() {
    assert_all_pass(&Scenario::scaling(), 40..100);
}

/// Scale-downs interleaved with a rollout, every fault on: every invariant holds (this batch found the readiness bug
/// pinned below as seeds 62 and 112; 400 seeds pass since the fix).
#[test]
fn scaling_during_a_rollout_keeps_every_invariant_over_25_seeds() {
    assert_all_pass(&Scenario::scaling_during_rollout(), 200..225);
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_scaling_during_a_rollout_keeps_every_invariant_over_seeds_225_to_260() {
    assert_all_pass(&Scenario::scaling_during_rollout(), 225..260);
}

/// Lost replies and restarts around record claims and replica patches: a claim whose reply is lost stays in the
/// record (the downscale is denied or retried, never doubled up), a replica patch with no answer keeps its claim.
fn lost_replies_while_scaling() -> Scenario {
    let mut faults = FaultMix::NONE;
    faults.message_loss = true;
    faults.latency_spikes = true;
    faults.controller_crashes = true;
    faults.apiserver_restarts = true;
    Scenario { faults, fault_count: (10, 20), ..Scenario::scaling() }
}

#[test]
fn scaling_lost_replies_to_claims_and_replica_patches_keep_the_min_time() {
    let sc = lost_replies_while_scaling();
    let outcomes: Vec<Outcome> = (0..50).map(|s| rollout_sim::harness::run(s, &sc, false)).collect();
    if let Some(o) = outcomes.iter().find(|o| !o.passed()) {
        panic!("seed {} failed: {:#?}", o.seed, o.violations);
    }
    let unanswered: usize = outcomes.iter().map(|o| o.activity.denied_for("loading zones failed")).sum();
    assert!(unanswered > 0, "no record read went unanswered: the faults did not reach the record");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_scaling_lost_replies_to_claims_and_replica_patches_keep_the_min_time_over_seeds_50_to_120() {
    assert_all_pass(&lost_replies_while_scaling(), 50..120);
}

/// The API server losing the answers to the controller's committed writes (`lost_answers`): a replica patch whose
/// outcome is unknown keeps its claim, dated at its deadline. A controller that gives the claim back as after a
/// definite failure (`gives-back-a-claim-whose-outcome-is-unknown`) lets the other follower's downscale through 10 s
/// after the first one committed (seed 27; 3 of seeds 0..100); the real execution passes the same seeds.
#[test]
fn a_claim_given_back_while_its_patch_may_still_commit_is_caught_under_lost_answers() {
    let sc = Scenario { lost_answers: true, ..Scenario::scaling() };
    let buggy = Scenario { planner: PlannerKind::GivesBackAClaimWhoseOutcomeIsUnknown, ..sc.clone() };
    let seed = (0..40)
        .find(|s| {
            let o = rollout_sim::harness::run(*s, &buggy, false);
            o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::MIN_TIME)
        })
        .expect("gives-back-a-claim-whose-outcome-is-unknown not caught in 40 seeds");
    assert_all_pass(&sc, 0..=seed);
}

/// Seed 31 of the lost-replies scenario above (found once passes ran promptly after events): controller#3
/// read the group downscale record to claim zone-b's downscale and was killed with the read in flight (a latency
/// spike held it 1.3 s); controller#4 bound the same address, numbered its requests from the same first tag, and
/// took that late GET reply, which arrived as its own REPLACE of the record was lost (20 % message loss), for the
/// REPLACE's success. It scaled zone-b down at 85.9 s with no claim in the record, and the webhook then admitted a
/// downscale of zone-a 18.5 s later (30 s min time). The simulator's fault, not the controller's: over HTTP a reply
/// never crosses into another process's connection. Replies now name the client they answer, and a client drops
/// one addressed to an earlier process at its address.
#[test]
fn regression_seed_31_a_dead_controllers_late_reply_is_not_taken_by_its_successor() {
    let o = rollout_sim::harness::run(31, &lost_replies_while_scaling(), false);
    assert!(o.passed(), "{:#?}", o.violations);
    let unclaimed =
        o.activity.downscales.iter().filter(|d| d.by.starts_with("controller") && d.recorded_at.is_none()).count();
    assert_eq!(unclaimed, 0, "a follower downscale committed with no entry in the record");
}

#[test]
fn scaling_runs_are_a_pure_function_of_their_seed() {
    for sc in [Scenario::scaling(), Scenario::scaling_during_rollout()] {
        for seed in [0, 2, 5, 13] {
            let a = rollout_sim::harness::run(seed, &sc, false);
            let b = rollout_sim::harness::run(seed, &sc, false);
            assert_eq!(a.trace.lines, b.trace.lines, "seed {seed}: traces differ");
        }
    }
}

#[test]
fn scaling_known_bug_skips_min_time_check_is_caught() {
    let sc = Scenario { planner: PlannerKind::SkipsMinTimeCheck, ..Scenario::scaling() };
    let (seed, o) = (0..50)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false)))
        .find(|(_, o)| o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::MIN_TIME))
        .expect("skips-min-time-check not caught in 50 seeds");
    println!("skips-min-time-check first caught at seed {seed}: {}", o.violations[0].detail);
}

/// Seed 0 of the scaling scenario with the known-bug planner: the user downscales the leader at 49 s (claimed in the
/// record) and the planner downscales the followers within seconds without a claim. The real controller waits.
#[test]
fn regression_seed_0_follower_downscaled_right_after_the_leader() {
    let buggy = Scenario { planner: PlannerKind::SkipsMinTimeCheck, ..Scenario::scaling() };
    let o = rollout_sim::harness::run(0, &buggy, false);
    let v = o
        .violations
        .iter()
        .find(|v| v.invariant == rollout_sim::oracle::checker::MIN_TIME)
        .expect("seed 0 should be caught");
    let follower = v.detail.contains("ingester-zone-b") || v.detail.contains("ingester-zone-c");
    assert!(follower && v.detail.contains("ingester-zone-a"), "{}", v.detail);
    let real = rollout_sim::harness::run(0, &Scenario::scaling(), false);
    assert!(real.passed(), "{:#?}", real.violations);
    assert!(real.downscales >= 3, "only {} downscales", real.downscales);
}

/// Regression, found by this simulation: scale-downs interleaved with a rollout. Readiness counted pods by number,
/// so a condemned pod above `spec.replicas` that is still Ready (OrderedReady keeps it until every kept pod is
/// Ready) masked a missing kept pod: seed 112 set currentRevision of zone-a while `ingester-zone-a-0` was missing and
/// then deleted in zone-b; seed 62 deleted `ingester-zone-a-1` while a-0 was missing. Fixed in rollout-core
/// readiness (pods are matched to expected ordinals); core test
/// `a_ready_pod_above_the_replica_count_does_not_hide_a_missing_pod`.
#[test]
fn regression_seeds_62_112_condemned_pods_mask_a_missing_pod() {
    let sc = Scenario::scaling_during_rollout();
    for seed in [62, 112] {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
    }
}

/// The checker's rule for invariant 3: two decreases of different StatefulSets of a group must commit at least the
/// min time apart, whatever the record says. (The checker once dated a decrease by its claim in the record, the
/// code's own reference point: a's claim at 95 s then excused b committing 26 s after a's commit. That pair is a
/// violation now.) Force-replicas is exempt.
#[test]
fn checker_judges_downscales_by_their_commit_times() {
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::scaling::Downscale;
    use std::time::Duration;
    let d = |sts: &str, at: u64, recorded: Option<u64>| Downscale {
        commit_rv: at,
        basis_rv: None,
        at: Duration::from_secs(at),
        sts: sts.into(),
        group: "g".into(),
        from: 3,
        to: 2,
        by: "test".into(),
        min_time: Some(Duration::from_secs(30)),
        recorded_at: recorded.map(Duration::from_secs),
        exempt: false,
        follower: false,
    };
    let mut c = Checker::default();
    c.record_downscale(d("a", 100, Some(95)));
    c.record_downscale(d("b", 126, Some(126)));
    assert_eq!(c.violations.len(), 1, "b committed 26 s after a, whatever a's claim said: {:?}", c.violations);
    assert_eq!(c.violations[0].invariant, rollout_sim::oracle::checker::MIN_TIME);
    c.record_downscale(d("c", 156, None));
    assert_eq!(c.violations.len(), 1, "c is exactly 30 s after b and 56 s after a: {:?}", c.violations);
    c.record_downscale(Downscale { exempt: true, ..d("a", 157, None) });
    assert_eq!(c.violations.len(), 1, "force replicas is exempt");
    c.record_downscale(d("a", 158, Some(151)));
    assert_eq!(c.violations.len(), 2, "a is within 30 s of c (and 32 s after b): {:?}", c.violations);
    assert_eq!(c.min_commit_gap, Some(Duration::from_secs(2)));
}

/// Deletions are judged on the pod deleted (by uid), not on an earlier pod of the same name: the controller knew
/// a-0 (uid 1) as terminating, a-0 was recreated (uid 2) and became Ready, a-1 is not ready; deleting the new a-0
/// makes two of a's pods unavailable (max 1). The checker once looked a-0 up by name, saw the old terminating pod
/// and skipped the max-unavailable rule.
#[test]
fn checker_judges_a_deletion_on_the_pod_it_deleted_not_on_its_name() {
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::Knowledge;
    use std::time::Duration;
    let mut c = Checker::default();
    c.record_sts(1, "a", Some(sum_sts("a", 2, "r1")));
    c.record_pod(
        2,
        "a-0",
        Some(rollout_sim::environment::objects::PodSum { terminating: true, ..sum_pod("a", 0, "1", "r0", true) }),
    );
    c.record_pod(3, "a-1", Some(sum_pod("a", 1, "3", "r0", false)));
    let known = Knowledge { incarnation: 1, sts_rv: 3, pod_rv: 3 };
    c.record_pod(4, "a-0", None);
    c.record_pod(5, "a-0", Some(sum_pod("a", 0, "2", "r1", true)));
    c.judge_delete(Duration::ZERO, known, 6, &sum_pod("a", 0, "2", "r1", true));
    let v: Vec<_> =
        c.violations.iter().filter(|v| v.invariant == rollout_sim::oracle::checker::MAX_UNAVAILABLE).collect();
    assert_eq!(v.len(), 1, "{:?}", c.violations);
    // The same deletion of the pod the controller knew (uid 1, terminating already) spends nothing.
    let mut c2 = Checker::default();
    c2.record_sts(1, "a", Some(sum_sts("a", 2, "r1")));
    c2.record_pod(
        2,
        "a-0",
        Some(rollout_sim::environment::objects::PodSum { terminating: true, ..sum_pod("a", 0, "1", "r0", true) }),
    );
    c2.record_pod(3, "a-1", Some(sum_pod("a", 1, "3", "r0", false)));
    c2.judge_delete(
        Duration::ZERO,
        known,
        4,
        &rollout_sim::environment::objects::PodSum { terminating: true, ..sum_pod("a", 0, "1", "r0", true) },
    );
    assert!(
        c2.violations.iter().all(|v| v.invariant != rollout_sim::oracle::checker::MAX_UNAVAILABLE),
        "{:?}",
        c2.violations
    );
}

/// An admitted downscale is judged on the API server's history between the review's arrival and the commit, not on
/// what the webhook read: b-0 on the old revision throughout is a violation even if a webhook read (rv 5) happened
/// to be served from a state where it looked fine; b-0 becoming unready during the admission (a crash) is not; a
/// controller deletion during the admission is.
#[test]
fn checker_judges_admissions_on_the_committed_history() {
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::Knowledge;
    use std::time::Duration;
    let mut c = Checker::default();
    c.record_sts(1, "a", Some(sum_sts("a", 1, "r1")));
    c.record_sts(2, "b", Some(sum_sts("b", 1, "r1")));
    c.record_pod(3, "a-0", Some(sum_pod("a", 0, "a0", "r1", true)));
    c.record_pod(4, "b-0", Some(sum_pod("b", 0, "b0", "r0", true)));
    // Review sent at rv 4, committed at rv 6: b-0 was on r0 all along.
    c.record_pod(6, "a-0", Some(sum_pod("a", 0, "a0", "r1", true)));
    c.judge_admitted(Duration::ZERO, 4, 6, "a", "g");
    assert_eq!(c.violations.len(), 1, "b-0 was not updated throughout: {:?}", c.violations);
    assert_eq!(c.violations[0].invariant, rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT);

    let mut c = Checker::default();
    c.record_sts(1, "a", Some(sum_sts("a", 1, "r1")));
    c.record_sts(2, "b", Some(sum_sts("b", 1, "r1")));
    c.record_pod(3, "a-0", Some(sum_pod("a", 0, "a0", "r1", true)));
    c.record_pod(4, "b-0", Some(sum_pod("b", 0, "b0", "r1", true)));
    c.record_pod(5, "b-0", Some(sum_pod("b", 0, "b0", "r1", false)));
    c.judge_admitted(Duration::ZERO, 4, 6, "a", "g");
    assert!(c.violations.is_empty(), "b-0 crashed during the admission, no actor of ours did it: {:?}", c.violations);
    // The same slot made unready by a controller deletion during the admission is a violation.
    let k = Knowledge { incarnation: 1, sts_rv: 4, pod_rv: 4 };
    c.judge_delete(Duration::ZERO, k, 7, &sum_pod("b", 0, "b0", "r1", false));
    c.record_pod(
        7,
        "b-0",
        Some(rollout_sim::environment::objects::PodSum { terminating: true, ..sum_pod("b", 0, "b0", "r1", false) }),
    );
    c.judge_admitted(Duration::ZERO, 6, 8, "a", "g");
    let v: Vec<_> = c
        .violations
        .iter()
        .filter(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT)
        .collect();
    assert_eq!(v.len(), 1, "{:?}", c.violations);
    assert!(v[0].detail.contains("deleted by the controller"), "{}", v[0].detail);
}

/// The controller's own downscales are judged for invariant 5 on what it knew: scaling b down while a's pod is
/// not ready is a violation; while a is updated and ready it is not.
#[test]
fn checker_judges_the_controllers_downscales_against_rollouts() {
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::Knowledge;
    use std::time::Duration;
    let mut c = Checker::default();
    c.record_sts(1, "a", Some(sum_sts("a", 1, "r1")));
    c.record_sts(2, "b", Some(sum_sts("b", 2, "r1")));
    c.record_pod(3, "a-0", Some(sum_pod("a", 0, "a0", "r1", false)));
    c.record_pod(4, "a-0", Some(sum_pod("a", 0, "a0", "r1", true)));
    c.judge_controller_downscale(Duration::ZERO, Knowledge { incarnation: 1, sts_rv: 4, pod_rv: 4 }, "b", "g");
    assert!(c.violations.is_empty(), "{:?}", c.violations);
    c.judge_controller_downscale(Duration::ZERO, Knowledge { incarnation: 1, sts_rv: 3, pod_rv: 3 }, "b", "g");
    assert_eq!(c.violations.len(), 1, "a-0 not ready as the controller knew it: {:?}", c.violations);
    assert_eq!(c.violations[0].invariant, rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT);
}

/// Seeds 687, 916 (`--webhook`) and 995 (`--scaling`): under the commit-time checker, the code of the time let two
/// zones' downscales commit closer than the min time (the record dated a downscale by its claim, seconds before its
/// pods were prepared and its replica change committed: 7.6 s apart for a 10 s min time), and seed 995 also scaled
/// a follower down while another zone's pod was not ready. Fixed: claims are dated with the latest time their
/// change can commit and re-dated after it; the controller holds a downscale while another zone has unavailable
/// pods, as the webhook does.
#[test]
fn regression_seeds_687_916_995_downscales_committed_closer_than_the_min_time() {
    for (seed, sc) in [
        (687, Scenario::rollout_with_admitted_downscales()),
        (916, Scenario::rollout_with_admitted_downscales()),
        (995, Scenario::scaling()),
    ] {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
    }
}

// The min time between zone downscales with its boundary in reach. In `Scenario::min_time_boundary` (15 s
// min time) the user asks for leader downscales from each follower downscale's commit plus 13.5 s, every 250 ms until
// one is admitted or 16.5 s, so the webhook's min-time check is asked right at its boundary. Few commits land within
// a second of it: the webhook also waits for every other zone to be Ready (a follower just scaled down often is not),
// and the API server commits up to 2 s after the answer.

#[test]
fn min_time_boundary_keeps_the_min_time_over_30_seeds() {
    let outcomes = run_passing(&Scenario::min_time_boundary(), 0..30);
    let near: u64 = outcomes.iter().map(|o| o.near_min_time.1).sum();
    assert!(near >= 1, "none of the user's downscales committed within a second of the min time");
    let probes = world(&outcomes, |e| matches!(e, WorldEvent::MinTimeProbed { .. }));
    assert!(probes >= 30, "only {probes} probes");
}

/// A min-time check a second early (as an off-by-one in rounding dates to seconds would make it) is caught by the
/// commit-time checker. (The planner's half of this bug alone is masked: the controller's shell asks
/// `check_min_time` again when it claims the downscale in the record.)
#[test]
fn known_bug_min_time_second_early_is_caught() {
    let sc = Scenario { planner: PlannerKind::MinTimeSecondEarly, ..Scenario::min_time_boundary() };
    let (seed, o) = (0..30)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false)))
        .find(|(_, o)| o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::MIN_TIME))
        .expect("min-time-second-early not caught in 30 seeds");
    println!("min-time-second-early first caught at seed {seed}: {}", o.violations[0].detail);
}

// Followers rolled while they are scaled. Each template push comes at one of the leader's replica
// changes, so a follower's pods are replaced while its replicas follow the leader's.

#[test]
fn follower_rollouts_while_scaling_keep_every_invariant_over_20_seeds() {
    let outcomes = run_passing(&Scenario::follower_rollouts_while_scaling(), 0..20);
    let rolled: u64 = outcomes.iter().map(|o| o.rolled_while_scaling).sum();
    let scaled: u64 = outcomes.iter().map(|o| o.scaled_while_rolling).sum();
    // 253 and 83 over 40 seeds at the time.
    assert!(rolled >= 50, "only {rolled} controller deletions in a StatefulSet being scaled");
    assert!(scaled >= 20, "only {scaled} controller replica changes of a StatefulSet being rolled");
}

/// The bug this interleaving once found (seeds 62 and 112 of `--scaling --revisions 1`): a Ready pod above
/// `spec.replicas`, condemned by a follower's scale-down, stood in for a missing kept pod. Re-introduced, it is caught.
#[test]
fn known_bug_condemned_pod_fills_missing_slot_is_caught_while_followers_scale() {
    let sc =
        Scenario { planner: PlannerKind::CondemnedPodFillsMissingSlot, ..Scenario::follower_rollouts_while_scaling() };
    let (seed, violations) = (0..40)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false).violations))
        .find(|(_, v)| v.iter().any(|v| v.invariant != rollout_sim::oracle::checker::LIVENESS))
        .expect("condemned-pod-fills-missing-slot not caught in 40 seeds");
    println!("condemned-pod-fills-missing-slot first caught at seed {seed}: {}", violations[0].detail);
}
