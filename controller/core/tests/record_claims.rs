//! The zone tracker's record claims as transitions, without I/O: what each claim and end writes on the record it
//! replaces.

use jiff::Timestamp;
use rollout_core::downscale::{
    ClaimEnd, Claimant, DownscaleInProgress, DownscaleRecord, MarkedClaim, RolloutStepInProgress,
};
use rollout_core::execution::StepClaimed;
use rollout_core::fixture::statefulset;
use rollout_core::record_claims::{Transition, claim_marked, claim_step, finish_marked, finish_step};
use rollout_core::{Defences, GroupSnapshot};

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn group() -> GroupSnapshot {
    GroupSnapshot::assemble(
        "g",
        vec![statefulset("g", "a", 3, "r1"), statefulset("g", "b", 3, "r1")],
        std::iter::empty(),
    )
}

fn marker(statefulset: &str, until: &str) -> DownscaleInProgress {
    DownscaleInProgress { statefulset: statefulset.into(), group: "g".into(), until: ts(until) }
}

fn step(until: &str) -> RolloutStepInProgress {
    RolloutStepInProgress { group: "g".into(), until: ts(until) }
}

const NOW: &str = "2026-01-01T12:00:00Z";
const UNTIL: &str = "2026-01-01T12:01:30.2Z";

fn claim(markers: &[DownscaleInProgress], steps: &[RolloutStepInProgress]) -> Transition<MarkedClaim> {
    claim_marked(None, markers, steps, &group(), "b", Claimant::Admission, ts(NOW), ts(UNTIL), Defences::ALL)
}

#[test]
fn a_claim_is_dated_at_its_deadline_rounded_up_and_drops_expired_markers() {
    let expired = marker("a", "2026-01-01T11:59:00Z");
    let Transition::Write { record: Some(record), markers: Some(markers), steps: None, answer } =
        claim(&[expired], &[])
    else {
        panic!("a write");
    };
    assert_eq!(answer, MarkedClaim::Claimed { previous: None });
    assert_eq!(record.last_downscaled["b"], ts("2026-01-01T12:01:31Z"));
    assert_eq!(markers, [marker("b", "2026-01-01T12:01:31Z")]);
}

#[test]
fn a_live_downscale_or_rollout_step_of_the_group_refuses_the_claim_without_a_write() {
    let live = marker("a", "2026-01-01T12:00:30Z");
    assert_eq!(claim(std::slice::from_ref(&live), &[]), Transition::Answer(MarkedClaim::Busy(live)));
    let stepping = step("2026-01-01T12:00:30Z");
    assert_eq!(claim(&[], std::slice::from_ref(&stepping)), Transition::Answer(MarkedClaim::Stepping(stepping)));
}

#[test]
fn a_committed_claim_is_dated_at_its_commit_and_an_undone_one_gets_its_previous_date_back() {
    let until = ts("2026-01-01T12:01:31Z");
    let mut record = DownscaleRecord::default();
    record.record_downscale("b", until);
    let markers = [marker("b", "2026-01-01T12:01:31Z")];
    let committed = ClaimEnd::Committed { at: ts("2026-01-01T12:00:10Z") };
    let Transition::Write { record: Some(dated), markers: Some(kept), .. } =
        finish_marked(&record, &markers, "b", until, &[until], committed, Defences::ALL)
    else {
        panic!("a write");
    };
    assert_eq!(dated.last_downscaled["b"], ts("2026-01-01T12:00:10Z"));
    assert_eq!(kept, [marker("b", "2026-01-01T12:00:10Z")], "kept until the commit is surely done");
    let previous = ts("2025-12-31T00:00:00Z");
    let undone = ClaimEnd::Undone { previous: Some(previous) };
    let Transition::Write { record: Some(restored), markers: Some(kept), .. } =
        finish_marked(&record, &markers, "b", until, &[until], undone, Defences::ALL)
    else {
        panic!("a write");
    };
    assert_eq!(restored.last_downscaled["b"], previous);
    assert!(kept.is_empty());
}

#[test]
fn a_later_claim_of_the_same_statefulset_is_never_touched_by_an_earlier_ones_end() {
    let ours = ts("2026-01-01T12:01:31Z");
    let later = ts("2026-01-01T12:05:00Z");
    let mut record = DownscaleRecord::default();
    record.record_downscale("b", later);
    let markers = [marker("b", "2026-01-01T12:05:00Z")];
    let undone = ClaimEnd::Undone { previous: None };
    assert_eq!(finish_marked(&record, &markers, "b", ours, &[ours], undone, Defences::ALL), Transition::Answer(()));
}

#[test]
fn a_rollout_step_is_not_taken_over_while_live_and_its_end_removes_only_its_own_entry() {
    let g = group();
    let live = step("2026-01-01T12:00:30Z");
    assert_eq!(
        claim_step(std::slice::from_ref(&live), true, &g, ts(NOW), ts(UNTIL)),
        Transition::Answer(StepClaimed::Stale)
    );
    let Transition::Write { record, steps: Some(steps), answer, .. } =
        claim_step(&[step("2026-01-01T11:00:00Z")], false, &g, ts(NOW), ts(UNTIL))
    else {
        panic!("a write");
    };
    assert!(record.is_some(), "a new record starts from the group's annotations");
    assert_eq!(answer, StepClaimed::Claimed { until: ts("2026-01-01T12:01:31Z") });
    assert_eq!(steps, [step("2026-01-01T12:01:31Z")], "the expired step is dropped");
    assert_eq!(finish_step(&steps, "g", ts("2026-01-01T12:09:00Z")), Transition::Answer(()));
    assert!(
        matches!(finish_step(&steps, "g", ts("2026-01-01T12:01:31Z")), Transition::Write { steps: Some(s), .. } if s.is_empty())
    );
}
