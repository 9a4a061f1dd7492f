//! Each defence in depth shown on its own: with the layer that backs it up switched off (`rollout_core::defences`,
//! test-only), the layer alone keeps the invariants in a world where it matters, and with it off too the checker finds
//! the violation, pinned as a seed. Where a layer turned out not to be backed up by the layer thought to be its
//! partner, the test says so and shows which one carries the guarantee. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_core::{Defences, Layer};

use rollout_sim::harness::outcome::Outcome;
use rollout_sim::oracle::activity::{Request, Sender, WorldEvent};
use rollout_sim::scenario::Scenario;

fn without(layers: &[Layer]) -> Defences {
    Defences::ALL.without(layers)
}

fn with(sc: &Scenario, defences: Defences) -> Scenario {
    Scenario { defences, ..sc.clone() }
}

fn assert_all_pass(sc: &Scenario, seeds: impl IntoIterator<Item = u64>) {
    for seed in seeds {
        let o = rollout_sim::harness::run(seed, sc, false);
        assert!(o.passed(), "seed {seed} with defences {}: {:#?}", sc.defences.flag(), o.violations);
    }
}

/// The seed's safety violations (liveness aside), which must include one of `expected`.
fn assert_violates(sc: &Scenario, seed: u64, expected: &[&str]) -> Outcome {
    let o = rollout_sim::harness::run(seed, sc, false);
    let safety: Vec<_> =
        o.violations.iter().filter(|v| v.invariant != rollout_sim::oracle::checker::LIVENESS).collect();
    assert!(
        safety.iter().any(|v| expected.contains(&v.invariant)),
        "seed {seed} with defences {}: expected {expected:?}, got {:#?}",
        sc.defences.flag(),
        o.violations
    );
    o
}

// Expectations and the uid precondition (the default world: rollouts on a stale cache, every fault).

/// Seeds of the default world at which the controller, without expectations and without uid preconditions, acts
/// on a cache that has not shown its own deletions yet (found over seeds 0..300; re-found once a plan's deletions
/// went before its status writes and passes ran without a debounce).
const STALE_OWN_WRITES: [u64; 3] = [72, 118, 137];

/// The expectations alone keep a stale cache from replanning the controller's own writes: with the uid
/// precondition off, every invariant holds, at the seeds where both off break them too.
#[test]
fn expectations_alone_keep_every_invariant_on_a_stale_cache() {
    let sc = with(&Scenario::default(), without(&[Layer::UidPreconditions]));
    assert_all_pass(&sc, (0..30).chain(STALE_OWN_WRITES));
}

/// Both off, seed 118: a deletion in zone-b not yet seen, and the next pass deletes in zone-a; seed 114: a second
/// deletion in zone-a beyond its max unavailable.
#[test]
fn without_expectations_and_uid_preconditions_a_stale_cache_deletes_in_a_second_zone() {
    let sc = with(&Scenario::default(), without(&[Layer::UidPreconditions, Layer::Expectations]));
    assert_violates(&sc, 118, &[rollout_sim::oracle::checker::ONE_ZONE]);
    assert_violates(&sc, 114, &[rollout_sim::oracle::checker::MAX_UNAVAILABLE]);
}

/// The uid precondition does not back the expectations up: it refuses a deletion of a pod replaced under the same
/// name, not a deletion of another pod planned on a cache that has not shown the last one (seeds 72, 118 and 137
/// fail with the precondition on). The expectations carry that guarantee alone.
#[test]
fn the_uid_precondition_alone_does_not_stand_in_for_the_expectations() {
    let sc = with(&Scenario::default(), without(&[Layer::Expectations]));
    for seed in STALE_OWN_WRITES {
        assert_violates(&sc, seed, &[rollout_sim::oracle::checker::ONE_ZONE]);
    }
}

/// Seeds of `--evictions` at which, without the uid precondition, the controller deletes a pod someone else had
/// deleted and the StatefulSet controller recreated while its cache still showed the old one (found over seeds
/// 0..4000, re-found once passes ran promptly after events, and again once they ran without a debounce; 90 also
/// takes the zone beyond its max unavailable).
const REPLACED_UNSEEN: [u64; 3] = [90, 100, 118];

/// Pods deleted by someone else (evictions) and recreated under the same name while the cache lags: the
/// expectations cover only the controller's own writes, so the uid precondition alone keeps the deletion from
/// landing on the new pod.
#[test]
fn the_uid_precondition_alone_keeps_pods_replaced_unseen_from_being_deleted() {
    let sc = Scenario { evictions: true, ..Scenario::default() };
    assert_all_pass(&sc, (0..30).chain(REPLACED_UNSEEN));
    let off = with(&sc, without(&[Layer::UidPreconditions]));
    for seed in REPLACED_UNSEEN {
        assert_violates(&off, seed, &[rollout_sim::oracle::checker::ONLY_SEEN_PODS]);
    }
    assert_violates(&off, 90, &[rollout_sim::oracle::checker::MAX_UNAVAILABLE]);
}

// The date of a claim: dated at its deadline, and dated again once the commit is known (`--boundary-probes`: the
// min time's boundary asked right after each follower downscale's commit).

/// Seeds of `--scaling --boundary-probes` at which claims dated when made and never re-dated let a downscale
/// through less than the min time after another zone's commit (found over seeds 0..200: 38 seeds).
const DATED_TOO_EARLY: [u64; 3] = [0, 3, 6];

#[test]
fn a_claim_dated_at_its_deadline_alone_keeps_the_min_time() {
    let sc = with(&Scenario::min_time_boundary(), without(&[Layer::RedatedAtCommit]));
    assert_all_pass(&sc, (0..20).chain(DATED_TOO_EARLY));
}

#[test]
fn re_dating_at_the_commit_alone_keeps_the_min_time() {
    let sc = with(&Scenario::min_time_boundary(), without(&[Layer::ClaimDatedAtDeadline]));
    assert_all_pass(&sc, (0..20).chain(DATED_TOO_EARLY));
}

/// Seed 101 with the claim dated when made: the webhook's claim was dated at 173 s, the API server crashed during
/// the admission, and the simulated API server still committed the downscale at 182.6 s, after the webhook's re-date
/// had failed: 14.5 s before the next zone's. A real API server's crash ends the requests it is admitting, nothing
/// stored; the simulated one now loses them too, and re-dating alone keeps the min time at this seed.
#[test]
fn regression_seed_101_a_request_in_admission_is_lost_with_the_api_server_that_crashed() {
    let sc = with(&Scenario::min_time_boundary(), without(&[Layer::ClaimDatedAtDeadline]));
    let o = rollout_sim::harness::run(101, &sc, false);
    assert!(o.passed(), "{:#?}", o.violations);
    assert!(o.scale_requests.lost >= 1, "no request was lost to the crash");
}

/// Both off, a claim is dated when it is made and stays so: the patch commits seconds later (API latency), and a
/// downscale of another zone asked at that commit plus the min time passes the check against the earlier date.
#[test]
fn claims_dated_when_made_and_never_re_dated_break_the_min_time() {
    let sc = with(&Scenario::min_time_boundary(), without(&[Layer::ClaimDatedAtDeadline, Layer::RedatedAtCommit]));
    for seed in DATED_TOO_EARLY {
        assert_violates(&sc, seed, &[rollout_sim::oracle::checker::MIN_TIME]);
    }
}

// The prepare-downscale webhook's re-read of the group under its marker (`--webhook --slow-admissions`: admissions
// whose API calls take seconds, so a rollout step fits between the webhook's first read and its claim).

/// Seeds of `--webhook --slow-admissions` at which, without the re-read, a downscale is admitted while a pod of
/// another zone that the controller deleted between the webhook's first read and its claim is still down (found
/// over seeds 0..1000: 10 seeds; re-found once the API server re-admitted a patch whose object changed during its
/// admission: 23 seeds; with the re-read, 3,000 seeds pass).
const STEP_BEFORE_THE_CLAIM: [u64; 3] = [23, 189, 242];

fn slow_admissions() -> Scenario {
    Scenario { slow_admissions: true, ..Scenario::rollout_with_admitted_downscales() }
}

/// The rollout-step claim does not back the re-read up: a step claimed, carried out and ended entirely between the
/// webhook's first read and its claim leaves nothing in the record for the claim to see. The re-read alone catches
/// it: with it, invariant 5 holds at those seeds; without it (the step claim still on), it breaks.
#[test]
fn the_reread_after_the_claim_alone_catches_a_rollout_step_taken_before_the_marker() {
    let sc = slow_admissions();
    assert_all_pass(&sc, (0..8).chain(STEP_BEFORE_THE_CLAIM));
    let off = with(&sc, without(&[Layer::RereadAfterClaim]));
    for seed in STEP_BEFORE_THE_CLAIM {
        let o = assert_violates(&off, seed, &[rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT]);
        assert!(
            o.violations.iter().any(|v| v.detail.contains("deleted by the controller during the admission")),
            "seed {seed}: {:#?}",
            o.violations
        );
    }
}

/// The execution machine's respect of a refused downscale claim and the webhook's re-read back each other up: a
/// controller that patches a follower's replicas although its claim was refused (`patches-on-a-refused-downscale-
/// claim`, the refusal a marker of the leader's admission in progress) is masked by the re-read, which sees the
/// follower's downscale and denies the leader's. With the re-read off it is caught (`--scaling`, seeds 29 and 286 of
/// 0..300); the real execution keeps the min time in that world.
#[test]
fn a_downscale_patched_on_a_refused_claim_is_caught_once_the_reread_is_off() {
    use rollout_sim::scenario::planner::PlannerKind;
    let off = with(&Scenario::scaling(), without(&[Layer::RereadAfterClaim]));
    let buggy = Scenario { planner: PlannerKind::PatchesOnARefusedDownscaleClaim, ..off.clone() };
    let seed = (0..40)
        .find(|s| {
            let o = rollout_sim::harness::run(*s, &buggy, false);
            o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::checker::MIN_TIME)
        })
        .expect("patches-on-a-refused-downscale-claim not caught in 40 seeds");
    assert_all_pass(&off, 0..=seed);
}

#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_slow_admissions_keep_every_invariant_over_seeds_8_to_20() {
    assert_all_pass(&slow_admissions(), 8..20);
}

// The record failing closed and the rollout-step claim (`--webhook`: admitted downscales during rollouts).

/// Seeds of `--webhook` at which, without the rollout-step claim, a pass planned before a downscale's marker
/// committed deletes a pod after it (found over seeds 0..4000 once passes ran promptly after events: 8 seeds; re-found
/// over 0..3000 once they ran without a debounce: 6 seeds; and over 0..4000 once the API server re-admitted a patch
/// whose object changed during its admission: 7 seeds).
const MARKER_AFTER_THE_READ: [u64; 3] = [636, 747, 2199];

/// The rollout-step claim alone (the record failing open when unreadable): a claim after a failed read is a create,
/// refused because the record exists, so every invariant still holds.
#[test]
fn the_rollout_step_claim_alone_keeps_rollout_steps_off_prepared_downscales() {
    let sc = with(&Scenario::rollout_with_admitted_downscales(), without(&[Layer::RecordFailsClosed]));
    assert_all_pass(&sc, (0..20).chain(MARKER_AFTER_THE_READ));
}

/// Seeds of `--webhook` at which a rollout-step claim fails (a partition, a lost message) before a step, found over
/// seeds 0..60 with any failed claim taken for RBAC refusing the zone tracker (which rolls the group unclaimed for
/// the resync period): every controller deletion is judged to commit under a live step claim of its group
/// (`ROLLOUT_STEP_CLAIMED`), which the webhook's own checks otherwise hide.
const FAILED_STEP_CLAIM: [u64; 3] = [31, 44, 50];

/// A failed step claim is retried, and only a 403 switches the zone tracker off.
#[test]
fn a_failed_rollout_step_claim_is_retried_not_taken_for_a_refusal() {
    let sc = Scenario::rollout_with_admitted_downscales();
    for seed in FAILED_STEP_CLAIM {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
        let deletions = o.activity.sent_by(Sender::Operator, Request::DeletePod, "");
        assert!(deletions >= 3, "seed {seed}: only {deletions} controller deletions judged");
    }
}

/// The record failing closed cannot be shown alone: without the claim, a marker committed between a pass's read
/// and its deletions is missed whatever the read gave, so the same seeds break with the record failing closed
/// (and, alike, failing open).
#[test]
fn without_the_rollout_step_claim_a_pass_deletes_during_a_prepared_downscale_whether_it_fails_closed_or_not() {
    let webhook = Scenario::rollout_with_admitted_downscales();
    for defences in
        [without(&[Layer::RolloutStepClaims]), without(&[Layer::RolloutStepClaims, Layer::RecordFailsClosed])]
    {
        for seed in [636, 747] {
            let o = assert_violates(
                &with(&webhook, defences),
                seed,
                &[rollout_sim::oracle::checker::NO_DOWNSCALE_DURING_ROLLOUT],
            );
            assert!(o.violations.iter().any(|v| v.detail.contains("was being prepared")), "{:#?}", o.violations);
        }
    }
}

/// Seeds 839 and 1458 of `--webhook --slow-admissions` once failed with every defence on: the checker held a
/// downscale "being prepared" until the world received the webhook's answer, but a denied admission gives the
/// downscale up earlier (its undo removes the marker, or the marker expires) and its answer can take seconds more
/// to arrive; the controller, seeing no marker, rightly replaced a pod meanwhile. The window now ends there too (an
/// admitted downscale commits before its marker expires, so no window of a downscale that happens is shortened).
#[test]
fn regression_seeds_839_1458_a_denied_admission_ends_its_window_at_its_undo() {
    assert_all_pass(&slow_admissions(), [839, 1458]);
    let o = rollout_sim::harness::run(839, &slow_admissions(), false);
    assert!(o.activity.count(|e| matches!(e, WorldEvent::DownscaleGivenUp { .. })) > 0);
}
