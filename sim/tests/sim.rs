//! The simulation's own tests: the real controller keeps every invariant over a sample of seeds of the default fault
//! mix, runs are reproducible from their seed, each test-only known-bug planner is caught, and the historical
//! failures each have a named scenario. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::outcome::Outcome;
use rollout_sim::harness::run_passing;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::faults::FaultMix;
use rollout_sim::scenario::planner::PlannerKind;

fn failures(sc: &Scenario, seeds: impl IntoIterator<Item = u64>) -> Vec<Outcome> {
    seeds.into_iter().map(|s| rollout_sim::harness::run(s, sc, false)).filter(|o| !o.passed()).collect()
}

fn assert_all_pass(sc: &Scenario, seeds: impl IntoIterator<Item = u64>) {
    let failed = failures(sc, seeds);
    if let Some(o) = failed.first() {
        panic!("{} seeds failed; first: seed {} ({}): {:#?}", failed.len(), o.seed, sc.planner.name(), o.violations);
    }
}

fn only(f: impl FnOnce(&mut FaultMix)) -> Scenario {
    let mut faults = FaultMix::NONE;
    f(&mut faults);
    Scenario { faults, ..Scenario::default() }
}

#[test]
fn real_controller_keeps_every_invariant_and_converges_over_50_seeds() {
    assert_all_pass(&Scenario::default(), 0..50);
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_real_controller_keeps_every_invariant_and_converges_over_seeds_50_to_200() {
    assert_all_pass(&Scenario::default(), 50..200);
}

#[test]
fn a_run_is_a_pure_function_of_its_seed() {
    let sc = Scenario::default();
    for seed in [0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144] {
        let a = rollout_sim::harness::run(seed, &sc, false);
        let b = rollout_sim::harness::run(seed, &sc, false);
        assert_eq!(a.trace.lines, b.trace.lines, "seed {seed}: traces differ");
        assert_eq!(a.trace.hash(), b.trace.hash());
    }
    let a = rollout_sim::harness::run(1, &sc, false);
    let b = rollout_sim::harness::run(2, &sc, false);
    assert_ne!(a.trace.hash(), b.trace.hash(), "different seeds should give different runs");
}

#[test]
fn a_run_without_faults_rolls_out_zone_by_zone() {
    let o = rollout_sim::harness::run(1, &only(|_| {}), false);
    assert!(o.passed(), "{:#?}", o.violations);
    assert!(o.converged_at.is_some());
    // Two revisions over 3 zones x 3 pods: at least one deletion per pod and one status write per zone.
    assert!(o.writes_judged >= 9 + 3, "only {} writes", o.writes_judged);
}

/// The first seed below 500 at which `planner` breaks a safety invariant (not merely liveness).
fn first_safety_violation(planner: PlannerKind) -> Option<(u64, Vec<rollout_sim::oracle::checker::Violation>)> {
    let sc = Scenario { planner, ..Scenario::default() };
    (0..500).find_map(|seed| {
        let o = rollout_sim::harness::run(seed, &sc, false);
        let safety: Vec<_> =
            o.violations.into_iter().filter(|v| v.invariant != rollout_sim::oracle::checker::LIVENESS).collect();
        (!safety.is_empty()).then_some((seed, safety))
    })
}

fn assert_caught(planner: PlannerKind, expected: &[&str]) {
    let (seed, violations) =
        first_safety_violation(planner).unwrap_or_else(|| panic!("{} not caught in 500 seeds", planner.name()));
    assert!(
        violations.iter().any(|v| expected.contains(&v.invariant)),
        "{} caught at seed {seed}, but not as {expected:?}: {violations:#?}",
        planner.name()
    );
    println!("{} first caught at seed {seed}: {}", planner.name(), violations[0].detail);
}

#[test]
fn known_bug_status_count_readiness_is_caught() {
    assert_caught(
        PlannerKind::StatusCountReadiness,
        &[
            rollout_sim::oracle::checker::MAX_UNAVAILABLE,
            rollout_sim::oracle::checker::ONE_ZONE,
            rollout_sim::oracle::checker::NO_ZERO_POD_READY,
        ],
    );
}

#[test]
fn known_bug_paused_lets_others_proceed_is_caught() {
    assert_caught(PlannerKind::PausedLetsOthersProceed, &[rollout_sim::oracle::checker::ONE_ZONE]);
}

#[test]
fn known_bug_no_expectations_is_caught() {
    // It also drops the uid preconditions, so it may first be caught deleting a pod it never saw.
    assert_caught(
        PlannerKind::NoExpectations,
        &[
            rollout_sim::oracle::checker::MAX_UNAVAILABLE,
            rollout_sim::oracle::checker::ONE_ZONE,
            rollout_sim::oracle::checker::ONLY_SEEN_PODS,
        ],
    );
}

#[test]
fn known_bug_terminating_counts_as_ready_is_caught() {
    assert_caught(
        PlannerKind::TerminatingCountsAsReady,
        &[rollout_sim::oracle::checker::ONE_ZONE, rollout_sim::oracle::checker::MAX_UNAVAILABLE],
    );
}

// Historical failures of the reference, each as a scenario that provokes it: the real controller must pass.

/// All pods of a zone gone (or unready) while the StatefulSet status still says ready: pods crash and are slow
/// to come back while the status counts lag. The status-count planner is fooled; the real one is not.
fn zone_pods_gone_while_status_says_ready() -> Scenario {
    only(|f| {
        f.pod_crashes = true;
        f.never_ready = true;
        f.watch_delay_spikes = true;
    })
}

#[test]
fn regression_zone_pods_gone_while_status_says_ready() {
    let sc = zone_pods_gone_while_status_says_ready();
    assert_all_pass(&sc, 0..30);
    let buggy = Scenario { planner: PlannerKind::StatusCountReadiness, ..sc };
    assert!(
        (0..60).any(|s| !rollout_sim::harness::run(s, &buggy, false).passed()),
        "the status-count planner should be caught here too"
    );
}

/// Pod creation refused for a while (quota): the rollout waits for the missing pod and then finishes.
fn pod_creation_failing() -> Scenario {
    Scenario { fault_count: (8, 16), ..only(|f| f.quota = true) }
}

#[test]
fn regression_pod_creation_failing() {
    assert_all_pass(&pod_creation_failing(), 0..30);
}

/// A pod on the old revision in a crash loop: it is replaced first (it costs no budget) and the rollout completes.
fn crash_looping_pod_on_the_old_revision() -> Scenario {
    Scenario { fault_count: (8, 16), ..only(|f| f.pod_crashes = true) }
}

#[test]
fn regression_crash_looping_pod_on_the_old_revision() {
    assert_all_pass(&crash_looping_pod_on_the_old_revision(), 0..30);
}

/// A stale cache after a watch restart: watches expire, resumes are "too old" and relist, events lag by seconds.
fn stale_cache_after_watch_restart() -> Scenario {
    let sc = only(|f| {
        f.watch_expiry = true;
        f.watch_delay_spikes = true;
        f.apiserver_restarts = true;
    });
    Scenario { fault_count: (8, 16), ..sc }
}

#[test]
fn regression_stale_cache_after_watch_restart() {
    assert_all_pass(&stale_cache_after_watch_restart(), 0..30);
}

/// The controller crashes between deleting a pod and observing the deletion: the new process must recover from
/// the API state alone.
fn controller_crash_between_delete_and_observe() -> Scenario {
    only(|f| {
        f.crash_after_delete = true;
        f.controller_crashes = true;
        f.watch_delay_spikes = true;
    })
}

#[test]
fn regression_controller_crash_between_delete_and_observe() {
    assert_all_pass(&controller_crash_between_delete_and_observe(), 0..30);
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_historical_failures_of_the_reference_over_seeds_30_to_60() {
    for sc in [
        zone_pods_gone_while_status_says_ready(),
        pod_creation_failing(),
        crash_looping_pod_on_the_old_revision(),
        stale_cache_after_watch_restart(),
        controller_crash_between_delete_and_observe(),
    ] {
        assert_all_pass(&sc, 30..60);
    }
}

/// Seed 37 of the default mix once ended unconverged: two deploys overlapped and the older one landed last on one
/// zone (a simulator bug: deploys are now serialised, and convergence is judged against each template).
#[test]
fn regression_seed_37_overlapping_deploys_converge() {
    let o = rollout_sim::harness::run(37, &Scenario::default(), false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Seed 133 without faults once replayed differently (a few ms off after 67 s): the store's change notification was
/// a `tokio::sync::watch`, whose notifier picks internal queues at random outside madsim's control.
#[test]
fn regression_seed_133_replays_identically() {
    let sc = Scenario { faults: FaultMix::NONE, ..Scenario::default() };
    let a = rollout_sim::harness::run(133, &sc, false);
    let b = rollout_sim::harness::run(133, &sc, false);
    assert_eq!(a.trace.lines, b.trace.lines);
}

/// The checker judges against what the controller knew: a pod that became unready after the controller's last read
/// is not held against it; one it had already seen is.
#[test]
fn checker_judges_deletions_against_the_controllers_knowledge() {
    use rollout_sim::environment::objects::PodSum;
    use rollout_sim::environment::objects::StsSum;
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::Knowledge;
    use std::time::Duration;
    let sts = |name: &str| StsSum {
        name: name.into(),
        group: "g".into(),
        replicas: 1,
        max_unavailable: 1,
        paused: false,
        current_revision: "r0".into(),
        update_revision: "r1".into(),
        template_revision: "r1".into(),
        min_ready_seconds: 0,
        ready_replicas: 1,
        status_replicas: 1,
        leader: None,
        upscale_only_when_leader_ready: false,
    };
    let pod = |sts: &str, ready: bool| PodSum {
        sts: sts.into(),
        name: format!("{sts}-0"),
        uid: format!("{sts}-0-1"),
        revision: "r0".into(),
        ready,
        ready_since: None,
        terminating: false,
        in_selector: true,
    };
    let mut c = Checker::default();
    c.record_sts(1, "a", Some(sts("a")));
    c.record_sts(2, "b", Some(sts("b")));
    c.record_pod(3, "a-0", Some(pod("a", true)));
    c.record_pod(4, "b-0", Some(pod("b", true)));
    c.record_pod(5, "b-0", Some(pod("b", false)));
    let before = Knowledge { incarnation: 1, sts_rv: 4, pod_rv: 4 };
    c.judge_delete(Duration::ZERO, before, 6, &pod("a", true));
    assert!(c.violations.is_empty(), "b-0 crashed after the controller's read: {:?}", c.violations);
    let after = Knowledge { incarnation: 1, sts_rv: 5, pod_rv: 5 };
    c.judge_delete(Duration::ZERO, after, 7, &pod("a", true));
    assert_eq!(c.violations.len(), 1, "{:?}", c.violations);
    assert_eq!(c.violations[0].invariant, rollout_sim::oracle::checker::ONE_ZONE);
}

/// Overlapping API server crashes once panicked the simulation ("address already in use"): madsim's `restart`
/// alone left the old process's socket bound. Nodes are now killed before every restart.
#[test]
fn regression_overlapping_apiserver_restarts_rebind() {
    let sc = only(|f| {
        f.apiserver_restarts = true;
        f.controller_crashes = true;
    });
    assert_all_pass(&Scenario { fault_count: (20, 30), ..sc }, 0..20);
}

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
    let follower_downscales = outcomes
        .iter()
        .flat_map(|o| o.trace.lines.iter())
        .filter(|l| l.contains("scaling") && l.contains("downscale ingester-zone-b") && l.contains("by controller#"))
        .count();
    assert!(follower_downscales >= 20, "only {follower_downscales} follower downscales by the controller");
    let denied: u64 = outcomes.iter().map(|o| o.scale_requests.denied).sum();
    assert!(denied >= 8, "the webhook should deny some of the user's downscales; denied {denied}");
    let min_time = count_lines(&outcomes, "between zone downscales");
    assert!(min_time >= 3, "the min time should deny some of the user's downscales; denied {min_time}");
    // The webhook prepares the pods under its marker, and faults reach it.
    let prepared = count_lines(&outcomes, "being prepared (marker committed)");
    assert!(prepared >= 30, "only {prepared} downscales were prepared by the webhook");
    assert!(
        count_lines(&outcomes, "failed") > 0,
        "no prepare call or claim failed: the faults did not reach the webhook"
    );
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
    let unanswered = outcomes
        .iter()
        .flat_map(|o| o.trace.lines.iter())
        .filter(|l| l.contains("denied") && l.contains("loading zones failed"))
        .count();
    assert!(unanswered > 0, "no record read went unanswered: the faults did not reach the record");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_scaling_lost_replies_to_claims_and_replica_patches_keep_the_min_time_over_seeds_50_to_120() {
    assert_all_pass(&lost_replies_while_scaling(), 50..120);
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
        o.trace.lines.iter().filter(|l| l.contains("by controller") && l.contains("(not recorded)")).count();
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

fn sum_sts(name: &str, replicas: u32, update: &str) -> rollout_sim::environment::objects::StsSum {
    rollout_sim::environment::objects::StsSum {
        name: name.into(),
        group: "g".into(),
        replicas,
        max_unavailable: 1,
        paused: false,
        current_revision: update.into(),
        update_revision: update.into(),
        template_revision: update.into(),
        min_ready_seconds: 0,
        ready_replicas: replicas,
        status_replicas: replicas,
        leader: None,
        upscale_only_when_leader_ready: false,
    }
}

fn sum_pod(
    sts: &str,
    ordinal: u32,
    uid: &str,
    revision: &str,
    ready: bool,
) -> rollout_sim::environment::objects::PodSum {
    rollout_sim::environment::objects::PodSum {
        sts: sts.into(),
        name: format!("{sts}-{ordinal}"),
        uid: uid.into(),
        revision: revision.into(),
        ready,
        ready_since: None,
        terminating: false,
        in_selector: true,
    }
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

// The real prepare-downscale webhook as an actor (the min time between zone downscales, no downscale during a
// rollout, no rollout step while a downscale is prepared): the user's (HPA's) replica changes
// are AdmissionReviews sent to the admission router of one of two simulated operator replicas, applied only if
// allowed; the pods answer the prepare calls, sometimes slowly or with errors; the controller runs as usual.

fn count_lines(outcomes: &[Outcome], needle: &str) -> usize {
    outcomes.iter().flat_map(|o| o.trace.lines.iter()).filter(|l| l.contains(needle)).count()
}

/// Template pushes (one zone each) mixed with downscales of every zone admitted by the real webhook, concurrently
/// with each other and with the controller's passes: no pod replaced while a downscale of the group is being
/// prepared, no downscale admitted while another zone is rolling, min time between zone downscales.
#[test]
fn webhook_rollouts_with_admitted_downscales_keep_invariants_3_and_5_over_25_seeds() {
    let outcomes = run_passing(&Scenario::rollout_with_admitted_downscales(), 0..25);
    let prepared = count_lines(&outcomes, "being prepared (marker committed)");
    assert!(prepared >= 25, "only {prepared} downscales were prepared by the webhook");
    let rolling = count_lines(&outcomes, "non-updated replicas");
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

// Real deployments' RBAC (the operator is a drop-in replacement, docs/contributing/design.md): the simulated API server
// answers 403 to anything the deployment does not grant, and a request outside the grants is a violation. Grafana's
// Helm chart grants no configmaps and runs without the zone tracker; the reference's jsonnet runs with it.

fn under(deployment: ReferenceDeployment, sc: Scenario) -> Scenario {
    Scenario { deployment: Some(deployment), ..sc }
}

#[test]
fn under_the_helm_charts_rbac_every_scenario_keeps_its_invariants_and_touches_no_configmap() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart;
    for (name, sc, seeds) in rbac_worlds(0..12, 0..10) {
        let outcomes = run_passing(&under(HelmChart, sc), seeds);
        assert_eq!(count_lines(&outcomes, "configmap"), 0, "{name}: a ConfigMap was requested");
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
        used += count_lines(&outcomes, "configmap");
    }
    assert!(used > 0, "the zone tracker is used");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_under_the_helm_charts_and_the_jsonnet_rbac_every_scenario_keeps_its_invariants_over_more_seeds() {
    use rollout_sim::scenario::deployment::ReferenceDeployment::{HelmChart, Jsonnet};
    for (name, sc, seeds) in rbac_worlds(12..40, 10..30) {
        let outcomes = run_passing(&under(HelmChart, sc), seeds);
        assert_eq!(count_lines(&outcomes, "configmap"), 0, "{name}: a ConfigMap was requested");
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
        let probed =
            |l: &String| l.contains("controller#") && l.contains("configmaps") && l.contains("forbidden (403)");
        assert!(o.trace.lines.iter().any(probed), "seed {seed}: the controller never met a refused write");
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
    let leader_downscales = count_lines(&outcomes, "downscale ingester-zone-a");
    let refused_claims = count_lines(&outcomes, "configmaps (apiGroup \"\") -> forbidden (403)");
    let follower_downscales =
        count_lines(&outcomes, "downscale ingester-zone-b") + count_lines(&outcomes, "downscale ingester-zone-c");
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
        let forced = |l: &&String| l.contains("downscale ingester-zone-b") && l.contains("by controller");
        forced_down += o.trace.lines.iter().filter(forced).count();
        upscales += o.trace.lines.iter().filter(|l| l.contains("PATCH ingester-zone-c replicas=")).count();
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
    let refused = count_lines(&outcomes, "patch statefulsets");
    let deleted = count_lines(&outcomes, "DELETE pod ingester-zone");
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

// Inputs the simulation did not vary before: a percentage `rollout-max-unavailable`. The checker reads it by the
// documented rule on its own (floor of the percentage of spec.replicas, at least 1), not through the core.

#[test]
fn percentage_max_unavailable_keeps_every_invariant_over_40_seeds() {
    let outcomes = run_passing(&Scenario::percentages(), 0..40);
    let parallel = outcomes
        .iter()
        .filter(|o| o.trace.lines.windows(2).any(|w| w[0].contains("DELETE pod") && w[1].contains("DELETE pod")))
        .count();
    assert!(parallel > 4, "40% of five pods means two at a time; seen in only {parallel} runs");
}

/// Seven pods a zone, so 40 % is 2.8 pods, rounded down to two: in `Scenario::percentages` (five pods) the product of
/// replicas and percentage is 200, a multiple of 100, and the percentage's arithmetic could go wrong unseen (the
/// remainder of the division taken for its quotient, 280 % 100 = 80 pods at once, passed every world).
#[test]
fn a_percentage_that_does_not_divide_the_replicas_rounds_down_over_12_seeds() {
    let sc = Scenario { replicas: 7, ..Scenario::percentages() };
    let outcomes = run_passing(&sc, 0..12);
    let parallel = outcomes
        .iter()
        .filter(|o| o.trace.lines.windows(2).any(|w| w[0].contains("DELETE pod") && w[1].contains("DELETE pod")))
        .count();
    assert!(parallel > 2, "40% of seven pods means two at a time; seen in only {parallel} runs");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_percentage_max_unavailable_and_min_ready_seconds_keep_every_invariant_over_seeds_40_to_100() {
    run_passing(&Scenario::percentages(), 40..100);
    run_passing(&Scenario::min_ready(), 40..100);
}

#[test]
fn known_bug_percent_as_count_is_caught() {
    let sc = Scenario { planner: PlannerKind::PercentAsCount, ..Scenario::percentages() };
    let (seed, violations) = (0..100)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false).violations))
        .find(|(_, v)| v.iter().any(|v| v.invariant == rollout_sim::oracle::checker::MAX_UNAVAILABLE))
        .expect("percent-as-count not caught in 100 seeds");
    println!("percent-as-count first caught at seed {seed}: {}", violations[0].detail);
}

// `spec.minReadySeconds`. A pod counts as available only once Ready for that long; the checker reads the
// Ready condition's time itself.

#[test]
fn min_ready_seconds_keeps_every_invariant_over_40_seeds() {
    run_passing(&Scenario::min_ready(), 0..40);
}

#[test]
fn known_bug_ignores_min_ready_seconds_is_caught() {
    let sc = Scenario { planner: PlannerKind::IgnoresMinReadySeconds, ..Scenario::min_ready() };
    let (seed, violations) = (0..50)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false).violations))
        .find(|(_, v)| !v.is_empty())
        .expect("ignores-min-ready-seconds not caught in 50 seeds");
    println!("ignores-min-ready-seconds first caught at seed {seed}: {}", violations[0].detail);
}

/// Seed 9 with `--min-ready-seconds 10` (found at once): the simulated API server kept sub-second Ready times that a
/// real one stores in whole seconds, so the controller (reading the object) and the checker disagreed on when a
/// pod had been Ready ten seconds. Times are stored in whole seconds now, as a real API server does.
#[test]
fn regression_seed_9_min_ready_times_in_whole_seconds() {
    let o = rollout_sim::harness::run(9, &Scenario::min_ready(), false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Seed 1468 with `--min-ready-seconds 10` (found in a 3,000-seed batch): an outdated pod Ready for 9.9 s was taken
/// for "already unavailable" and replaced without spending budget; 26 ms later, when the deletion committed, it had
/// been Ready ten seconds and was serving, so the zone went to two unavailable pods with a max of one. Only pods that
/// are not Ready at all are replaced for free now; one waiting out minReadySeconds waits for the budget.
#[test]
fn regression_seed_1468_a_pod_about_to_be_available_is_not_replaced_for_free() {
    let o = rollout_sim::harness::run(1468, &Scenario::min_ready(), false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Seed 52 of `--webhook --min-ready-seconds 10` (and 113 more of 4,000): still rolling its last zone when the
/// 900 s liveness deadline passed, every pod replacement having waited out the ten seconds once more; not stuck.
/// The deadline grows by 60 s per second of minReadySeconds.
#[test]
fn regression_seed_52_min_ready_seconds_lengthen_the_settle_deadline() {
    let base = Scenario::rollout_with_admitted_downscales();
    let sc = Scenario {
        min_ready_seconds: 10,
        settle_deadline: base.settle_deadline + std::time::Duration::from_secs(600),
        ..base
    };
    let o = rollout_sim::harness::run(52, &sc, false);
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
    assert!(count_lines(&helm, "annotations -> ok") > 5, "parents annotated for /scale downscales");
    let stats = scale_requests(&helm);
    assert!(stats.scale_patch_readmitted > 0, "no kubectl-style /scale downscale re-admitted: {stats:?}");
    assert_eq!(stats.patch_conflicts, 0, "{stats:?}");
    let jsonnet = run_passing(&under(Jsonnet, base), 0..15);
    assert_eq!(count_lines(&jsonnet, "annotations -> ok"), 0, "the record, not annotations, with the tracker");
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
    assert_eq!(count_lines(&jsonnet, "annotations -> ok"), 0, "the record, not annotations, with the tracker");
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
    assert!(count_lines(&outcomes, "annotations -> ok") > 5, "parents annotated for /scale downscales");
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
    let lost = o.trace.lines.iter().any(|l| l.contains("annotation failed") && l.contains("deadline passed"));
    assert!(lost, "the record's answer is no longer lost at seed 70");
}

// `status.observedGeneration` behind `metadata.generation`. The StatefulSet controller acts on a new
// generation only once it has observed it, and half its observations take 5-60 s during the fault phase. The
// checker holds a downscale against a StatefulSet whose pods are not on its template's revision even while its
// status still names the old one (a rollout about to start).

/// The checker's rule: a pod on the status's (stale) update revision but not on the template's is a rollout about to
/// start; scaling another StatefulSet down meanwhile is a violation. Once the pod is on the template's revision it is
/// not.
#[test]
fn checker_judges_the_controllers_downscales_against_unobserved_template_pushes() {
    use rollout_sim::oracle::checker::Checker;
    use rollout_sim::oracle::checker::Knowledge;
    use std::time::Duration;
    let mut c = Checker::default();
    let pushed = rollout_sim::environment::objects::StsSum { template_revision: "r2".into(), ..sum_sts("a", 1, "r1") };
    c.record_sts(1, "a", Some(pushed));
    c.record_sts(2, "b", Some(sum_sts("b", 2, "r1")));
    c.record_pod(3, "a-0", Some(sum_pod("a", 0, "a0", "r1", true)));
    c.judge_controller_downscale(Duration::ZERO, Knowledge { incarnation: 1, sts_rv: 3, pod_rv: 3 }, "b", "g");
    assert_eq!(c.violations.len(), 1, "a's push not yet observed: {:?}", c.violations);
    assert!(c.violations[0].detail.contains("template revision r2"), "{}", c.violations[0].detail);
    c.record_sts(4, "a", Some(sum_sts("a", 1, "r2")));
    c.record_pod(5, "a-0", Some(sum_pod("a", 0, "a1", "r2", true)));
    c.judge_controller_downscale(Duration::ZERO, Knowledge { incarnation: 1, sts_rv: 5, pod_rv: 5 }, "b", "g");
    assert_eq!(c.violations.len(), 1, "a rolled out: {:?}", c.violations);
}

#[test]
fn observe_lag_keeps_every_invariant_over_20_seeds() {
    let outcomes = run_passing(&Scenario::observe_lag(), 0..20);
    let slow: u64 = outcomes.iter().map(|o| o.slow_observations).sum();
    assert!(slow >= 20, "only {slow} slow observations over 20 seeds");
    let waited = count_lines(&outcomes, "observed generation");
    assert!(waited >= 100, "only {waited} generations observed");
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_observe_lag_and_follower_rollouts_while_scaling_keep_every_invariant_over_seeds_20_to_40() {
    run_passing(&Scenario::observe_lag(), 20..40);
    run_passing(&Scenario::follower_rollouts_while_scaling(), 20..40);
}

/// A planner that ignores `observedGeneration` takes a StatefulSet whose push is not observed yet for settled and
/// scales a follower down while that StatefulSet is about to roll (invariant 5); the real one waits.
#[test]
fn known_bug_ignores_observed_generation_is_caught() {
    let sc = Scenario { planner: PlannerKind::IgnoresObservedGeneration, ..Scenario::observe_lag() };
    let (seed, o) = (0..40)
        .map(|s| (s, rollout_sim::harness::run(s, &sc, false)))
        .find(|(_, o)| {
            o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT)
        })
        .expect("ignores-observed-generation not caught in 40 seeds");
    let v =
        o.violations.iter().find(|v| v.invariant == rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT).unwrap();
    assert!(v.detail.contains("not yet observed"), "{}", v.detail);
    println!("ignores-observed-generation first caught at seed {seed}: {}", v.detail);
    let real = rollout_sim::harness::run(seed, &Scenario::observe_lag(), false);
    assert!(real.passed(), "{:#?}", real.violations);
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
    let probes = count_lines(&outcomes, "probes the min time");
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
