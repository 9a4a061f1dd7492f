//! Scaling coordination on hand-made groups: settings parsing, leader/follower and force replicas in the planner,
//! mirror and delayed-downscale arithmetic (every unit example of the reference's section 3.5), pod endpoints.

use jiff::{SignedDuration, Timestamp};
use rollout_core::fixture::{annotate, label, pod, statefulset};
use rollout_core::keys;
use rollout_core::scaling::{
    DelayedDownscaleError, MirrorStep, PodUrl, PrepareAnswerError, ReferenceScale, ScalingSettings, api_group_of,
    delayed_downscale_target, plan_mirror, plan_scaling, pod_endpoint, prepare_response_timestamp, rollout_in_progress,
};
use rollout_core::view::{PodView, StatefulSetView};
use rollout_core::{Action, DownscaleRecord, GroupPlan, GroupSnapshot, GroupState, PlanContext, plan_group};
use std::collections::BTreeMap;
use std::time::Duration;

const REV: &str = "rev-1";

fn now() -> Timestamp {
    "2026-11-20T12:00:00Z".parse().unwrap()
}

fn ago(minutes: i64) -> Timestamp {
    now() - SignedDuration::from_mins(minutes)
}

fn zone(name: &str, replicas: u32) -> StatefulSetView {
    statefulset("ingester", name, replicas, REV)
}

fn follower(name: &str, replicas: u32, leader: &str) -> StatefulSetView {
    annotate(zone(name, replicas), keys::ROLLOUT_DOWNSCALE_LEADER, leader)
}

fn group(stss: Vec<StatefulSetView>) -> GroupSnapshot {
    let pods: Vec<PodView> =
        stss.iter().flat_map(|s| (0..s.replicas).map(move |i| pod(s, i, REV)).collect::<Vec<_>>()).collect();
    GroupSnapshot::assemble("ingester", stss, &pods)
}

fn plan(g: &GroupSnapshot) -> GroupPlan {
    plan_group(g, &PlanContext::new(now(), &[]))
}

fn scales(plan: &GroupPlan) -> Vec<(&str, u32, u32)> {
    plan.actions
        .iter()
        .filter_map(|a| match a {
            Action::Scale { statefulset, from, to, .. } => Some((statefulset.as_str(), *from, *to)),
            _ => None,
        })
        .collect()
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

// ----- settings -----

#[test]
fn settings_parse_every_annotation() {
    let s = ScalingSettings::from_annotations(
        "b",
        &annotations(&[
            (keys::ROLLOUT_DOWNSCALE_LEADER, "a"),
            (keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY, "true"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "ingester"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "ReplicaTemplate"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, "rollout-operator.grafana.com/v1"),
            (keys::ROLLOUT_DELAYED_DOWNSCALE, "1d"),
            (keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, "http://pod:8080/prepare"),
            (keys::ROLLOUT_FORCE_REPLICAS, "7"),
        ]),
    );
    assert_eq!(s.leader.as_deref(), Some("a"));
    assert!(s.upscale_only_when_leader_ready);
    let mirror = s.mirror.unwrap().unwrap();
    assert_eq!((mirror.name.as_str(), mirror.kind.as_str()), ("ingester", "ReplicaTemplate"));
    assert_eq!(mirror.api_group, "rollout-operator.grafana.com");
    assert!(mirror.write_back);
    let delayed = s.delayed_downscale.unwrap().unwrap();
    assert_eq!(delayed.delay, Duration::from_secs(86_400), "Prometheus durations accept days");
    assert_eq!(delayed.url.port, Some(8080));
    assert_eq!(s.force_replicas, Some(7));
}

#[test]
fn upscale_gate_and_mirror_need_exact_values() {
    let gate = |v: &str| {
        ScalingSettings::from_annotations("b", &annotations(&[(keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY, v)]))
            .upscale_only_when_leader_ready
    };
    assert!(gate("true"));
    assert!(!gate("True"));
    // Name and kind are both needed.
    let only_name = annotations(&[(keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "x")]);
    assert!(ScalingSettings::from_annotations("b", &only_name).mirror.is_none());
    let write_back = |v: Option<&str>| {
        let mut a = annotations(&[
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "x"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "K"),
        ]);
        if let Some(v) = v {
            a.insert(keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK.to_string(), v.to_string());
        }
        ScalingSettings::from_annotations("b", &a).mirror.unwrap().unwrap().write_back
    };
    assert!(write_back(None), "absent: write back");
    assert!(write_back(Some("T")));
    assert!(write_back(Some("1")));
    assert!(!write_back(Some("false")));
    assert!(!write_back(Some("no")), "unparsable: don't write back (reference)");
}

#[test]
fn api_version_gives_the_group_and_bad_ones_are_errors() {
    assert_eq!(api_group_of(""), Ok(String::new()));
    assert_eq!(api_group_of("v1"), Ok(String::new()));
    assert_eq!(api_group_of("apps/v1"), Ok("apps".to_string()));
    // As Go's schema.ParseGroupVersion: an empty version after the group, or nothing around the `/`, is accepted.
    assert_eq!(api_group_of("rollout-operator.grafana.com/"), Ok("rollout-operator.grafana.com".to_string()));
    assert_eq!(api_group_of("/"), Ok(String::new()));
    assert!(api_group_of("a/b/c").is_err());
    assert!(api_group_of("a//").is_err());
    let s = ScalingSettings::from_annotations(
        "zone-b",
        &annotations(&[
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "x"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "K"),
            (keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, "a/b/c"),
        ]),
    );
    let err = s.mirror.unwrap().unwrap_err().to_string();
    assert!(err.contains("zone-b") && err.contains("invalid API version") && err.contains("a/b/c"), "{err}");
}

#[test]
fn delayed_downscale_needs_both_annotations_and_a_nonzero_prometheus_duration() {
    let delayed = |d: &str, url: &str| {
        ScalingSettings::from_annotations(
            "b",
            &annotations(&[(keys::ROLLOUT_DELAYED_DOWNSCALE, d), (keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, url)]),
        )
        .delayed_downscale
    };
    assert!(delayed("", "http://x/").is_none());
    assert!(delayed("1h", "").is_none());
    assert!(delayed("0", "http://x/").is_none(), "0 turns it off");
    assert_eq!(delayed("1h0m0s", "http://x/").unwrap().unwrap().delay, Duration::from_secs(3600));
    let err = delayed("1.5h", "http://x/").unwrap().unwrap_err().to_string();
    assert!(err.contains("failed to parse as duration") && err.contains(keys::ROLLOUT_DELAYED_DOWNSCALE), "{err}");
    let err = delayed("1h", "not a url").unwrap().unwrap_err().to_string();
    assert!(err.contains("failed to parse as URL"), "{err}");
}

#[test]
fn force_replicas_accepts_only_int32_at_least_zero() {
    let force = |v: &str| {
        ScalingSettings::from_annotations("b", &annotations(&[(keys::ROLLOUT_FORCE_REPLICAS, v)])).force_replicas
    };
    assert_eq!(force("0"), Some(0));
    assert_eq!(force("2147483647"), Some(2_147_483_647));
    for ignored in ["", "-1", "abc", "2147483648", "1.5"] {
        assert_eq!(force(ignored), None, "{ignored:?}");
    }
}

// ----- leader/follower and force replicas in the planner -----

#[test]
fn follower_scales_up_to_the_leader_at_once_and_the_pass_deletes_nothing() {
    let g = group(vec![zone("zone-a", 5), follower("zone-b", 3, "zone-a")]);
    let p = plan(&g);
    assert_eq!(scales(&p), [("zone-b", 3, 5)]);
    assert_eq!(p.state, GroupState::Progressing);
    assert!(p.reason.contains("no pod deletions"), "{}", p.reason);
    let json = serde_json::to_value(&p.actions[0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"action": "scale", "statefulSet": "zone-b", "from": 3, "to": 5,
                           "reason": "scaling up statefulset to match leader zone-a"})
    );
}

#[test]
fn upscale_only_when_leader_ready_waits_for_every_leader_replica() {
    let mut leader = zone("zone-a", 5);
    leader.status.as_mut().unwrap().ready_replicas = 4;
    let f = annotate(follower("zone-b", 3, "zone-a"), keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY, "true");
    let p = plan(&group(vec![leader.clone(), f.clone()]));
    assert!(scales(&p).is_empty(), "{p:?}");
    assert!(p.reason.contains("not all leader replicas are ready"), "{}", p.reason);
    leader.status.as_mut().unwrap().ready_replicas = 5;
    assert_eq!(scales(&plan(&group(vec![leader, f]))), [("zone-b", 3, 5)]);
}

#[test]
fn follower_downscale_waits_until_strictly_after_the_min_time() {
    let a = zone("zone-a", 3);
    let b = label(follower("zone-b", 5, "zone-a"), keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
    let at = |t: Timestamp| annotate(a.clone(), keys::LAST_DOWNSCALE, &t.to_string());
    // Exactly one hour ago: not yet (strictly greater).
    let p = plan(&group(vec![at(ago(60)), b.clone()]));
    assert!(scales(&p).is_empty(), "{p:?}");
    assert!(p.reason.contains("downscale to 3 waits"), "{}", p.reason);
    assert_eq!(p.state, GroupState::Waiting, "a due replica change is not done");
    let p = plan(&group(vec![at(ago(61)), b]));
    assert_eq!(scales(&p), [("zone-b", 5, 3)]);
    assert!(matches!(&p.actions[0], Action::Scale { coordinated_downscale: true, .. }), "claimed by the shell");
}

#[test]
fn follower_downscale_also_honours_the_group_downscale_record() {
    let g = group(vec![
        zone("zone-a", 3),
        annotate(follower("zone-b", 5, "zone-a"), keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "2h"),
    ]);
    let mut record = DownscaleRecord::default();
    record.record_downscale("zone-a", ago(30));
    let p = plan_group(&g, &PlanContext::new(now(), &[]).with_downscale_record(Some(&record)));
    assert!(scales(&p).is_empty(), "{p:?}");
    assert!(p.reason.contains("zone-a was downscaled"), "{}", p.reason);
    assert_eq!(scales(&plan(&g)), [("zone-b", 5, 3)], "without the record nothing blocks it");
}

#[test]
fn force_replicas_scales_a_follower_immediately_even_within_the_min_time() {
    let a = annotate(zone("zone-a", 3), keys::LAST_DOWNSCALE, &ago(1).to_string());
    let b = annotate(
        label(follower("zone-b", 5, "zone-a"), keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h"),
        keys::ROLLOUT_FORCE_REPLICAS,
        "1",
    );
    let p = plan(&group(vec![a, b]));
    assert_eq!(scales(&p), [("zone-b", 5, 1)]);
    assert!(matches!(&p.actions[0], Action::Scale { coordinated_downscale: false, .. }));
}

/// As in the reference, force replicas is read on followers and mirrors only: a stale annotation on a plain zone
/// (left over from an earlier setup) must not resize it when the operator takes over. It is reported as a warning,
/// which neither holds the group nor counts as a scaling error.
#[test]
fn force_replicas_without_leader_or_mirror_is_ignored_as_in_the_reference() {
    let p = plan(&group(vec![annotate(zone("zone-a", 3), keys::ROLLOUT_FORCE_REPLICAS, "4"), zone("zone-b", 3)]));
    assert_eq!(scales(&p), [], "{p:?}");
    assert_eq!((p.state, &p.scaling_errors), (GroupState::Done, &Vec::new()), "{p:?}");
    assert_eq!(
        p.warnings,
        [format!(
            "{}=4 on StatefulSet zone-a is ignored: it applies only to a follower ({}) or a mirror \
             (grafana.com/rollout-mirror-replicas-from-resource-*)",
            keys::ROLLOUT_FORCE_REPLICAS,
            keys::ROLLOUT_DOWNSCALE_LEADER
        )]
    );
    // A follower's and a mirror's are not ignored, so not reported.
    let b = annotate(follower("zone-b", 3, "zone-a"), keys::ROLLOUT_FORCE_REPLICAS, "4");
    let p = plan(&group(vec![zone("zone-a", 3), b]));
    assert_eq!((scales(&p), p.warnings.len()), (vec![("zone-b", 3, 4)], 0), "{p:?}");
    let p = plan(&group(vec![annotate(mirror_sts(3, false), keys::ROLLOUT_FORCE_REPLICAS, "4")]));
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn one_bad_statefulset_does_not_stop_the_others() {
    let g = group(vec![zone("zone-a", 5), follower("zone-b", 5, "zone-missing"), follower("zone-c", 3, "zone-a")]);
    let p = plan(&g);
    assert_eq!(scales(&p), [("zone-c", 3, 5)]);
    assert_eq!(p.scaling_errors.len(), 1);
    assert_eq!(p.scaling_errors[0].statefulset, "zone-b");
    assert!(p.reason.contains("could not find leader for zone-b"), "{}", p.reason);
    // And the rollout still runs when nothing scales.
    let g = group(vec![zone("zone-a", 5), follower("zone-b", 5, "zone-missing")]);
    let p = plan(&g);
    assert_eq!(p.state, GroupState::Done);
    assert!(p.reason.contains("scaling errors: zone-b: could not find leader"), "{}", p.reason);
}

#[test]
fn unparsable_min_time_is_an_error_for_that_follower_only() {
    let a = annotate(zone("zone-a", 3), keys::LAST_DOWNSCALE, &ago(600).to_string());
    let b = label(follower("zone-b", 5, "zone-a"), keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1d");
    let c = annotate(follower("zone-c", 3, "zone-a"), keys::ROLLOUT_FORCE_REPLICAS, "2");
    let p = plan(&group(vec![a, b, c]));
    assert_eq!(scales(&p), [("zone-c", 3, 2)]);
    assert!(p.scaling_errors.iter().any(|e| e.statefulset == "zone-b" && e.message.contains("min time")), "{p:?}");
}

#[test]
fn one_statefulset_is_scaled_per_pass_and_chains_step_by_step() {
    let g = group(vec![zone("zone-a", 6), follower("zone-b", 3, "zone-a"), follower("zone-c", 3, "zone-b")]);
    let p = plan(&g);
    assert_eq!(scales(&p), [("zone-b", 3, 6)], "zone-c follows zone-b's current replicas, which did not change yet");
    let g = group(vec![zone("zone-a", 6), follower("zone-b", 6, "zone-a"), follower("zone-c", 3, "zone-b")]);
    assert_eq!(scales(&plan(&g)), [("zone-c", 3, 6)]);
    let g = group(vec![zone("zone-a", 6), follower("zone-b", 3, "zone-a"), follower("zone-c", 3, "zone-a")]);
    let p = plan(&g);
    assert_eq!(scales(&p), [("zone-b", 3, 6)]);
    assert!(p.reason.contains("zone-c: scaling from 3 to 6 waits for a later pass"), "{}", p.reason);
}

#[test]
fn no_downscale_while_a_rollout_of_the_group_is_in_progress_but_upscales_go_ahead() {
    let mut a = zone("zone-a", 3);
    a.status.as_mut().unwrap().update_revision = "rev-2".to_string();
    let b = follower("zone-b", 5, "zone-a");
    let p = plan(&group(vec![a.clone(), b]));
    assert!(scales(&p).is_empty());
    assert!(p.reason.contains("a rollout of StatefulSet zone-a is in progress"), "{}", p.reason);
    assert!(p.actions.iter().any(|a| matches!(a, Action::DeletePod { .. })), "the rollout goes on: {p:?}");
    // An upscale replaces the rollout step for this pass.
    let p = plan(&group(vec![a, follower("zone-b", 2, "zone-a")]));
    assert_eq!(scales(&p), [("zone-b", 2, 3)]);
    assert!(!p.actions.iter().any(|a| matches!(a, Action::DeletePod { .. })));
}

/// Right after a template push, before the StatefulSet controller has observed it (status older
/// than the spec), a rollout may be starting: no follower downscale yet. Same for a member with no status.
#[test]
fn no_downscale_while_a_member_status_does_not_describe_its_latest_spec() {
    let mut a = zone("zone-a", 3);
    a.generation = Some(2);
    let b = follower("zone-b", 5, "zone-a");
    let p = plan(&group(vec![a.clone(), b.clone()]));
    assert!(scales(&p).is_empty(), "{p:?}");
    assert!(p.reason.contains("does not describe its latest spec"), "{}", p.reason);
    a.status.as_mut().unwrap().observed_generation = Some(2);
    assert_eq!(scales(&plan(&group(vec![a.clone(), b.clone()]))), [("zone-b", 5, 3)]);
    a.status = None;
    assert!(rollout_in_progress(&group(vec![a, b])).unwrap().contains("has not reported a status"));
}

#[test]
fn scaling_is_planned_even_when_the_group_is_blocked_by_its_update_strategy() {
    let mut b = follower("zone-b", 2, "zone-a");
    b.update_strategy = "RollingUpdate".to_string();
    let p = plan(&group(vec![zone("zone-a", 3), b.clone()]));
    assert_eq!(scales(&p), [("zone-b", 2, 3)]);
    b.replicas = 3;
    assert_eq!(plan(&group(vec![zone("zone-a", 3), b])).state, GroupState::Blocked);
}

#[test]
fn mirror_members_are_left_to_the_shell_and_both_modes_are_reported() {
    let m = annotate(
        annotate(follower("zone-b", 3, "zone-a"), keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "ingester"),
        keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND,
        "ReplicaTemplate",
    );
    let g = group(vec![zone("zone-a", 5), m]);
    let pass = plan_scaling(&g, &PlanContext::new(now(), &[]));
    assert!(pass.scale.is_none());
    assert_eq!(pass.mirrors, ["zone-b"]);
    assert!(pass.errors[0].message.contains("reference resource only"), "{:?}", pass.errors);
}

// ----- mirror and delayed downscale (reference 3.3-3.5) -----

const URL: &str = "http://pod:8080/prepare-delayed-downscale";

fn mirror_sts(replicas: u32, delayed: bool) -> StatefulSetView {
    let mut s = annotate(
        annotate(statefulset("ingester", "b", replicas, REV), keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "rt"),
        keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND,
        "ReplicaTemplate",
    );
    if delayed {
        s = annotate(
            annotate(s, keys::ROLLOUT_DELAYED_DOWNSCALE, "1h"),
            keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL,
            URL,
        );
    }
    s
}

fn mirror(sts: &StatefulSetView, spec: Option<i64>, status: Option<i64>) -> MirrorStep {
    plan_mirror(sts, &sts.scaling, &ReferenceScale { spec_replicas: spec, status_replicas: status }, None).unwrap()
}

fn stamps(pairs: &[(u32, i64)]) -> BTreeMap<u32, Timestamp> {
    pairs.iter().map(|(i, m)| (*i, ago(*m))).collect()
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn missing_scale_spec_replicas_never_means_one() {
    let step = mirror(&mirror_sts(5, true), None, Some(5));
    let MirrorStep::Wait { reason, write_back } = step else { panic!("{step:?}") };
    assert!(reason.contains("no spec.replicas") && reason.contains("never read as 1"), "{reason}");
    assert_eq!(write_back, None);
}

#[test]
fn steady_mirror_cancels_on_every_replica_and_writes_back() {
    assert_eq!(
        mirror(&mirror_sts(5, true), Some(5), Some(4)),
        MirrorStep::Steady { replicas: 5, cancel: 0..5, write_back: Some(5) }
    );
    assert_eq!(
        mirror(&mirror_sts(5, false), Some(5), Some(5)),
        MirrorStep::Steady { replicas: 5, cancel: 0..0, write_back: None }
    );
}

#[test]
fn upscale_cancels_first_and_downscale_without_delay_is_immediate() {
    let MirrorStep::Scale { from, to, cancel, .. } = mirror(&mirror_sts(3, true), Some(5), Some(3)) else { panic!() };
    assert_eq!((from, to, cancel), (3, 5, 0..3));
    let MirrorStep::Scale { from, to, .. } = mirror(&mirror_sts(5, false), Some(3), Some(5)) else { panic!() };
    assert_eq!((from, to), (5, 3));
}

#[test]
fn delayed_downscale_cancels_the_kept_replicas_and_prepares_the_rest() {
    assert_eq!(
        mirror(&mirror_sts(5, true), Some(3), Some(5)),
        MirrorStep::DelayedDownscale { from: 5, desired: 3, cancel: 0..3, prepare: 3..5, delay: HOUR }
    );
}

#[test]
fn reference_examples_of_delayed_downscale() {
    // 5 replicas -> desired 3, delay 1h.
    assert_eq!(delayed_downscale_target(5, 3, HOUR, &stamps(&[(3, 70), (4, 70)]), now()), Ok(3));
    let not_reached = Err(DelayedDownscaleError::NotReached { delay: HOUR });
    assert_eq!(delayed_downscale_target(5, 3, HOUR, &stamps(&[(3, 70), (4, 30)]), now()), not_reached);
    assert_eq!(delayed_downscale_target(5, 3, HOUR, &stamps(&[(3, 70), (4, 0)]), now()), not_reached, "tail first");
    // Desired 1: b-4/b-3 ready, b-2 not yet, b-1 ready: only the tail down to 3 goes.
    assert_eq!(delayed_downscale_target(5, 1, HOUR, &stamps(&[(4, 70), (3, 75), (2, 30), (1, 75)]), now()), Ok(3));
    // A replica without a timestamp stops the walk.
    assert_eq!(delayed_downscale_target(5, 3, HOUR, &stamps(&[(3, 70)]), now()), not_reached);
    // Exactly the delay counts as reached (the reference stops only when elapsed < delay).
    assert_eq!(delayed_downscale_target(5, 4, HOUR, &stamps(&[(4, 60)]), now()), Ok(4));
    let msg = DelayedDownscaleError::NotReached { delay: HOUR }.to_string();
    assert!(msg.contains("configured downscale delay 1h0m0s has not been reached for any pods"), "{msg}");
}

#[test]
fn force_replicas_on_a_mirror_still_honours_delayed_downscale() {
    // Force 2 with scale spec 10 on 5 replicas: DELETE b-0, b-1; POST b-2..b-4; all 70 min old -> 2.
    let s = annotate(mirror_sts(5, true), keys::ROLLOUT_FORCE_REPLICAS, "2");
    let step = mirror(&s, Some(10), Some(5));
    assert_eq!(step, MirrorStep::DelayedDownscale { from: 5, desired: 2, cancel: 0..2, prepare: 2..5, delay: HOUR });
    assert_eq!(delayed_downscale_target(5, 2, HOUR, &stamps(&[(2, 70), (3, 70), (4, 70)]), now()), Ok(2));
    // Force 0 on 3 replicas, timestamps 30 min old: POST all three, no patch.
    let s = annotate(mirror_sts(3, true), keys::ROLLOUT_FORCE_REPLICAS, "0");
    let step = mirror(&s, Some(3), Some(3));
    assert_eq!(step, MirrorStep::DelayedDownscale { from: 3, desired: 0, cancel: 0..0, prepare: 0..3, delay: HOUR });
    assert!(delayed_downscale_target(3, 0, HOUR, &stamps(&[(0, 30), (1, 30), (2, 30)]), now()).is_err());
}

#[test]
fn pod_answers_must_be_2xx_json_with_a_timestamp() {
    let t = now().as_second();
    assert_eq!(prepare_response_timestamp(200, format!(r#"{{"timestamp":{t}}}"#).as_bytes()), Ok(now()));
    for (status, body, expect) in [
        (500, "boom", "HTTP status 500"),
        (200, "not json", "not JSON"),
        (200, "{}", "no timestamp in response"),
        (200, r#"{"timestamp":0}"#, "no timestamp in response"),
        (200, r#"{"timestamp":"x"}"#, "not JSON"),
    ] {
        let err = prepare_response_timestamp(status, body.as_bytes()).unwrap_err().to_string();
        assert!(err.contains(expect), "{status} {body}: {err}");
    }
    assert_eq!(
        prepare_response_timestamp(503, b"busy"),
        Err(PrepareAnswerError::Status { status: 503, body: "busy".to_string() })
    );
    assert_eq!(prepare_response_timestamp(200, br#"{"timestamp":0}"#), Err(PrepareAnswerError::NoTimestamp));
}

#[test]
fn mirror_downscale_waits_during_a_rollout() {
    let step = plan_mirror(
        &mirror_sts(5, true),
        &mirror_sts(5, true).scaling,
        &ReferenceScale { spec_replicas: Some(3), status_replicas: Some(5) },
        Some("a rollout of StatefulSet x is in progress"),
    )
    .unwrap();
    assert!(matches!(step, MirrorStep::Wait { .. }), "{step:?}");
    let mut rolling = zone("zone-a", 2);
    rolling.status.as_mut().unwrap().current_revision = "rev-0".to_string();
    assert!(rollout_in_progress(&group(vec![rolling])).is_some());
    assert!(rollout_in_progress(&group(vec![zone("zone-a", 2)])).is_none());
}

#[test]
fn invalid_delayed_downscale_settings_block_only_a_change() {
    let s = annotate(
        annotate(mirror_sts(5, false), keys::ROLLOUT_DELAYED_DOWNSCALE, "soon"),
        keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL,
        URL,
    );
    let settings = &s.scaling;
    let scale = |n| ReferenceScale { spec_replicas: Some(n), status_replicas: Some(5) };
    let err = plan_mirror(&s, settings, &scale(3), None).unwrap_err();
    assert!(err.message.contains("failed scaling delay check"), "{err}");
    assert!(matches!(plan_mirror(&s, settings, &scale(5), None), Ok(MirrorStep::Steady { .. })));
}

// ----- pod endpoints -----

#[test]
fn pod_endpoints_replace_the_host_and_keep_port_path_and_query() {
    let s = statefulset("ingester", "ingester-zone-b", 5, REV);
    let url = PodUrl::parse("http://pod:8080/prepare-delayed-downscale?x=1").unwrap();
    assert_eq!(
        pod_endpoint(&s, &url, 3, "test", "cluster.local.").unwrap(),
        "http://ingester-zone-b-3.ingester-zone-b.test.svc.cluster.local.:8080/prepare-delayed-downscale?x=1"
    );
    let url = PodUrl::parse("https://user@pod/p").unwrap();
    assert_eq!(
        pod_endpoint(&s, &url, 0, "ns", "cluster.local").unwrap(),
        "https://user@ingester-zone-b-0.ingester-zone-b.ns.svc.cluster.local/p"
    );
    let mut headless = s.clone();
    headless.service_name = String::new();
    let err = pod_endpoint(&headless, &url, 0, "ns", "cluster.local").unwrap_err();
    assert!(err.message.contains("spec.serviceName is empty"), "{err}");
    for bad in ["pod:8080/x", "http:///x", "http://pod:port/x", "://x"] {
        assert!(PodUrl::parse(bad).is_err(), "{bad}");
    }
}

/// The Go operator's semantics: a follower whose own pods are outdated is still scaled to its leader (rolling
/// pods that are about to go is wasted work); only another zone mid-rollout or unready holds its downscale.
#[test]
fn a_follower_mid_rollout_is_scaled_down_but_another_zone_mid_rollout_holds_it() {
    let b = follower("zone-b", 5, "zone-a");
    let mut g = group(vec![zone("zone-a", 3), b.clone()]);
    // zone-b's own rollout: a new update revision its pods are not on.
    let member = g.members.iter_mut().find(|m| m.sts.name == "zone-b").unwrap();
    member.sts.status.as_mut().unwrap().update_revision = "rev-2".into();
    let p = plan(&g);
    assert_eq!(scales(&p), [("zone-b", 5, 3)], "{p:?}");

    let mut g = group(vec![zone("zone-a", 3), b, zone("zone-c", 3)]);
    let c = g.members.iter_mut().find(|m| m.sts.name == "zone-c").unwrap();
    c.sts.status.as_mut().unwrap().update_revision = "rev-2".into();
    let p = plan(&g);
    assert!(scales(&p).is_empty(), "{p:?}");
    assert!(p.reason.contains("a rollout of StatefulSet zone-c is in progress"), "{}", p.reason);
}

/// Reference semantics: once another zone has a recorded downscale, a follower without a min time is a scaling
/// error (not scaled), with the reference's message.
#[test]
fn a_follower_without_a_min_time_is_not_scaled_down_once_another_zone_has_a_recorded_downscale() {
    let a = annotate(zone("zone-a", 3), keys::LAST_DOWNSCALE, &ago(600).to_string());
    let p = plan(&group(vec![a, follower("zone-b", 5, "zone-a")]));
    assert!(scales(&p).is_empty(), "{p:?}");
    assert_eq!(p.scaling_errors.len(), 1, "{p:?}");
    assert!(
        p.scaling_errors[0].message.contains("missing label grafana.com/min-time-between-zones-downscale on follower")
    );
    // With no downscale recorded anywhere, nothing is required.
    let p = plan(&group(vec![zone("zone-a", 3), follower("zone-b", 5, "zone-a")]));
    assert_eq!(scales(&p), [("zone-b", 5, 3)]);
}
