//! Which guarantees a world judges: the invariant names of [`crate::oracle::checker`] and the Lease rule of
//! [`crate::oracle::election`] that the world's actors and operator processes can put to the test, so that a report
//! lists what was judged and nothing the world never exercised. Any invariant a run violated is listed too.

use crate::oracle::checker::*;
use crate::oracle::election::ONE_LEADER;
use crate::scenario::Scenario;
use crate::scenario::scaling::Admission;

/// The guarantees `sc` puts to the test, rollout ones first.
pub fn judged_in(sc: &Scenario) -> Vec<&'static str> {
    let mut judged = vec![ONE_ZONE, MAX_UNAVAILABLE, NO_ZERO_POD_READY, ONLY_SEEN_PODS, ONLY_MEMBER_PODS];
    let mut add = |on: bool, names: &[&'static str]| {
        if on {
            judged.extend_from_slice(names);
        }
    };
    add(sc.faults.pauses, &[PAUSED]);
    let webhook = sc.scaling.as_ref().is_some_and(|s| s.admission == Admission::Webhook);
    let tracker = sc.zone_tracker_config_map().is_some();
    add(sc.scaling.is_some(), &[MIN_TIME, NO_DOWNSCALE_DURING_ROLLOUT]);
    add(sc.scaling.is_some() && tracker, &[RECORD_MARKERS_READABLE]);
    add(webhook, &[PREPARE_SCOPE, PREPARED_FOR_SHUTDOWN, PREPARE_UNDONE, PREPARE_RECORDED_ALLOWED, OWN_WRITE_CONFLICT]);
    add(webhook && tracker, &[ROLLOUT_STEP_CLAIMED]);
    add(sc.follower_without_min_time, &[FOLLOWER_WITHOUT_MIN_TIME]);
    add(sc.leader_ready_upscales, &[LEADER_READY_UPSCALE]);
    add(sc.no_downscale, &[NO_DOWNSCALE_LABEL, PREPARE_FOREIGN]);
    add(sc.mirror, &[MIRROR]);
    add(sc.delayed_downscale, &[DELAYED_DOWNSCALE]);
    add(sc.force_plain, &[FORCE_IGNORED]);
    add(
        sc.drains.is_some(),
        &[
            ZPDB_EVICTIONS,
            ZPDB_CONTROLLER,
            ZPDB_SCOPE,
            ZPDB_TERMINATING,
            ZPDB_INTENT_STORE,
            ZPDB_ZERO_BUDGET,
            ZPDB_CROSS_ZONE_DELAY,
            ZPDB_READY_TIME_SCOPE,
            DRY_RUN_WRITES,
        ],
    );
    add(sc.drains.as_ref().is_some_and(|d| d.budget_edits), &[ZPDB_OUT_OF_SCOPE, ZPDB_VALIDATION]);
    add(sc.deployment.is_some(), &[FORBIDDEN]);
    add(sc.ha.is_some(), &[ONE_LEADER]);
    add(sc.certificates.is_some() && (webhook || sc.drains.is_some()), &[crate::oracle::certificates::WEBHOOK_TLS]);
    judged.push(LIVENESS);
    judged
}

/// Each guarantee judged in `sc`, and any other that `violations` name, with its count of violations.
pub fn verdicts(sc: &Scenario, violations: &[Violation]) -> Vec<(&'static str, usize)> {
    let mut names = judged_in(sc);
    for v in violations {
        if !names.contains(&v.invariant) {
            names.push(v.invariant);
        }
    }
    names.into_iter().map(|name| (name, violations.iter().filter(|v| v.invariant == name).count())).collect()
}
