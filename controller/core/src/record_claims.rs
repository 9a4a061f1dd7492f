//! The zone tracker's record claims as transitions: what claiming a downscale (with its in-progress marker), ending
//! that claim, claiming a rollout step and ending it write, each decided on the record it replaces.
//!
//! Owns the claim rules: busy while another downscale's marker is live, stepping while a rollout step is live, the
//! follower's min-time rule, the entry dated at the claim's deadline (not its start), expired markers and steps
//! dropped on the way, and "the entry is the claimant's while it holds a date the claimant wrote, or while its marker
//! is in the record". Must not read or write anything: the shell's read-check-swap loop carries out a
//! [`Transition`] and starts over from a fresh read when its swap loses; the model calls the same functions.

use crate::defences::{Defences, Layer};
use crate::downscale::{
    ClaimEnd, Claimant, DownscaleInProgress, DownscaleRecord, MarkedClaim, MinTimeVerdict, RolloutStepInProgress,
    check_min_time, live_in_progress, live_rollout_step, round_up_to_second,
};
use crate::execution::StepClaimed;
use crate::group::GroupSnapshot;
use jiff::Timestamp;

/// What a claim decided on the record as read: answer without writing, or write the parts given (`None`: left as
/// stored) and answer once the swap lands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transition<T> {
    Answer(T),
    Write {
        record: Option<DownscaleRecord>,
        markers: Option<Vec<DownscaleInProgress>>,
        steps: Option<Vec<RolloutStepInProgress>>,
        answer: T,
    },
}

/// A downscale of `statefulset` claimed at `now` until `until` (the latest its replica change can commit under the
/// claim), by `claimant`, on the record as read (`record`: `None` when there is none yet; it starts from the group's
/// `grafana.com/last-downscale` annotations) with its live markers and rollout steps.
///
/// Refused while any downscale of the group is live (this StatefulSet's own included: a second claim would take over
/// the first one's marker and date while the first is still preparing) and while a rollout step of the group is
/// live (both claims are swaps of the same object, so one always sees the other). The entry is dated `until`, not
/// `now`: the min time runs from the commit, and a claimant that dies midway leaves a date that is still late
/// enough; [`finish_marked`] moves it back once the commit is known.
// One argument per fact the claim is decided on; a struct of them would only be unpacked again here.
#[allow(clippy::too_many_arguments)]
pub fn claim_marked(
    record: Option<&DownscaleRecord>,
    markers: &[DownscaleInProgress],
    steps: &[RolloutStepInProgress],
    group: &GroupSnapshot,
    statefulset: &str,
    claimant: Claimant,
    now: Timestamp,
    until: Timestamp,
    defences: Defences,
) -> Transition<MarkedClaim> {
    let mut record = record.cloned().unwrap_or_else(|| DownscaleRecord::bootstrap(group));
    if let Some(holder) = live_in_progress(markers, &group.name, None, now) {
        return Transition::Answer(MarkedClaim::Busy(holder.clone()));
    }
    if let Some(step) = live_rollout_step(steps, &group.name, now) {
        return Transition::Answer(MarkedClaim::Stepping(step.clone()));
    }
    if claimant == Claimant::FollowerScaling
        && let Some(error) = crate::scaling::follower_without_min_time(group, Some(&record), statefulset)
    {
        return Transition::Answer(MarkedClaim::Refused(MinTimeVerdict::Invalid(error)));
    }
    match check_min_time(group, Some(&record), statefulset, now) {
        MinTimeVerdict::Elapsed => {}
        refused => return Transition::Answer(MarkedClaim::Refused(refused)),
    }
    let previous = record.last_downscaled.get(statefulset).copied();
    // Stored rounded up (never expiring early); `finish_marked` finds marker and entry again by it.
    let until = round_up_to_second(until);
    let dated = if defences.has(Layer::ClaimDatedAtDeadline) { until } else { now };
    record.record_downscale(statefulset, dated);
    let mut markers: Vec<DownscaleInProgress> =
        markers.iter().filter(|m| m.is_live(now) && m.statefulset != statefulset).cloned().collect();
    markers.push(DownscaleInProgress { statefulset: statefulset.to_string(), group: group.name.clone(), until });
    Transition::Write {
        record: Some(record),
        markers: Some(markers),
        steps: None,
        answer: MarkedClaim::Claimed { previous },
    }
}

/// Ends a marked claim of `statefulset` made until `until`: its marker is kept until the commit is surely done
/// (committed) or removed (undone), and, while the StatefulSet's entry is still the claimant's (it holds one of the
/// dates in `ours`, `until` among them, or the claimant's marker is still in the record), `end` is applied to it. A
/// later claim of the same StatefulSet has another marker and entry and is never touched. Nothing to change: answered
/// without a write.
pub fn finish_marked(
    record: &DownscaleRecord,
    markers: &[DownscaleInProgress],
    statefulset: &str,
    until: Timestamp,
    ours: &[Timestamp],
    end: ClaimEnd,
    defences: Defences,
) -> Transition<()> {
    // All as stored (see `round_up_to_second`).
    let until = round_up_to_second(until);
    let ours: Vec<Timestamp> = ours.iter().copied().map(round_up_to_second).collect();
    let ours_marker =
        |m: &DownscaleInProgress| m.statefulset == statefulset && (m.until == until || ours.contains(&m.until));
    let mut kept = markers.to_vec();
    match end {
        // Committed (or about to): the marker stays until the commit is surely done, so no rollout step starts
        // between the answer and the commit.
        ClaimEnd::Committed { at } => {
            for m in kept.iter_mut().filter(|m| ours_marker(m)) {
                m.until = round_up_to_second(at);
            }
        }
        ClaimEnd::Undone { .. } => kept.retain(|m| !ours_marker(m)),
    }
    let mut changed = kept != markers;
    let mut dated = record.clone();
    let marker_held = markers.iter().any(ours_marker);
    if record.last_downscaled.get(statefulset).is_some_and(|at| ours.contains(at) || marker_held) {
        match end {
            ClaimEnd::Committed { at } if defences.has(Layer::RedatedAtCommit) => {
                dated.record_downscale(statefulset, at)
            }
            ClaimEnd::Committed { .. } => {}
            ClaimEnd::Undone { previous: Some(at) } => {
                dated.last_downscaled.insert(statefulset.to_string(), at);
            }
            ClaimEnd::Undone { previous: None } => {
                dated.last_downscaled.remove(statefulset);
            }
        }
        changed |= dated != *record;
    }
    if !changed {
        return Transition::Answer(());
    }
    Transition::Write { record: Some(dated), markers: Some(kept), steps: None, answer: () }
}

/// A rollout step of `group` claimed at `now` until `until`, on the steps as the pass that planned it read them
/// (`exists`: whether the record did; a new one starts from the group's annotations). Another holder's live step (a
/// second controller instance, during its handover) is not taken over: stale, plan again. Expired steps are dropped
/// on the way.
pub fn claim_step(
    steps: &[RolloutStepInProgress],
    exists: bool,
    group: &GroupSnapshot,
    now: Timestamp,
    until: Timestamp,
) -> Transition<StepClaimed> {
    let until = round_up_to_second(until);
    if live_rollout_step(steps, &group.name, now).is_some() {
        return Transition::Answer(StepClaimed::Stale);
    }
    let mut kept: Vec<RolloutStepInProgress> =
        steps.iter().filter(|s| s.is_live(now) && s.group != group.name).cloned().collect();
    kept.push(RolloutStepInProgress { group: group.name.clone(), until });
    let record = (!exists).then(|| DownscaleRecord::bootstrap(group));
    Transition::Write { record, markers: None, steps: Some(kept), answer: StepClaimed::Claimed { until } }
}

/// Ends the rollout step of `group` claimed until `until`: removes that entry only (a later step of the group has
/// another `until`). Gone already: nothing to write.
pub fn finish_step(steps: &[RolloutStepInProgress], group: &str, until: Timestamp) -> Transition<()> {
    let kept: Vec<RolloutStepInProgress> =
        steps.iter().filter(|s| !(s.group == group && s.until == until)).cloned().collect();
    if kept.len() == steps.len() {
        return Transition::Answer(());
    }
    Transition::Write { record: None, markers: None, steps: Some(kept), answer: () }
}
