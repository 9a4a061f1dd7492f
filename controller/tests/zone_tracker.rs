//! The zone tracker over the cluster port: claims by compare-and-swap, bootstrap, giving a claim back, and many
//! simultaneous claims against one store.

mod support;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use rollout_core::downscale::{ClaimEnd, Claimant, DownscaleRecord, MarkedClaim, MinTimeVerdict};
use rollout_core::execution::StepClaimed;
use rollout_core::fixture::{annotate, statefulset};
use rollout_core::keys::{LAST_DOWNSCALE, MIN_TIME_BETWEEN_ZONES_DOWNSCALE};
use rollout_core::{Defences, GroupSnapshot, StatefulSetView};
use rollout_operator::cluster::ApiError;
use rollout_operator::cluster::zone_tracker::{
    MAX_ATTEMPTS, ZoneTrackerError, claim_downscale_marked, claim_rollout_step, finish_marked_claim,
    finish_rollout_step, read_record, read_rollout_steps,
};
use std::collections::BTreeMap;
use support::{Call, FakeCluster};

const CM: &str = "rollout-operator-zone-tracker";
const T0: &str = "2026-01-01T12:00:00Z";

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn zone(group: &str, name: &str, min_time: &str) -> StatefulSetView {
    annotate(statefulset(group, name, 3, "r1"), MIN_TIME_BETWEEN_ZONES_DOWNSCALE, min_time)
}

fn group(name: &str, members: Vec<StatefulSetView>) -> GroupSnapshot {
    GroupSnapshot::assemble(name, members, std::iter::empty())
}

fn zones(group_name: &str) -> GroupSnapshot {
    group(
        group_name,
        ["a", "b", "c"].iter().map(|z| zone(group_name, &format!("{group_name}-zone-{z}"), "1h")).collect(),
    )
}

/// The admission's claim of a downscale whose replica change commits at once: its in-progress marker ends at `now`.
async fn claim_at(
    api: &FakeCluster,
    group: &GroupSnapshot,
    statefulset: &str,
    now: Timestamp,
) -> Result<MarkedClaim, ZoneTrackerError> {
    claim_downscale_marked(api, CM, group, statefulset, Claimant::Admission, now, now, Defences::ALL).await
}

/// Gives back a claim made at `claimed_at` whose replica change will not happen.
async fn undo(api: &FakeCluster, statefulset: &str, previous: Option<Timestamp>, claimed_at: Timestamp) {
    let end = ClaimEnd::Undone { previous };
    finish_marked_claim(api, CM, statefulset, claimed_at, &[claimed_at], end, Defences::ALL).await.expect("undo");
}

fn stored(cluster: &FakeCluster) -> DownscaleRecord {
    let cm = cluster.config_map(CM).expect("record exists");
    DownscaleRecord::from_config_map_data(&cm.data.unwrap_or_default()).expect("readable")
}

#[tokio::test]
async fn first_claim_creates_the_record_from_annotations_without_stamping_now() {
    let cluster = FakeCluster::default();
    let a = annotate(zone("g", "a", "1h"), LAST_DOWNSCALE, "2026-01-01T10:00:00Z");
    let g = group("g", vec![a, zone("g", "b", "1h"), zone("g", "c", "1h")]);

    let claim = claim_at(&cluster, &g, "b", ts(T0)).await.expect("claim");
    assert_eq!(claim, MarkedClaim::Claimed { previous: None });
    let record = stored(&cluster);
    assert_eq!(
        record.last_downscaled,
        BTreeMap::from([("a".to_string(), ts("2026-01-01T10:00:00Z")), ("b".to_string(), ts(T0))])
    );
    assert_eq!(cluster.calls(), [Call::CreateConfigMap { name: CM.into() }]);
}

#[tokio::test]
async fn a_claim_within_the_min_time_of_another_zone_is_refused_without_a_write() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    claim_at(&cluster, &g, "g-zone-a", ts(T0)).await.expect("first claim");
    cluster.take_calls();

    let claim = claim_at(&cluster, &g, "g-zone-b", ts("2026-01-01T12:30:00Z")).await.expect("claim");
    match claim {
        MarkedClaim::Refused(MinTimeVerdict::Wait { other, .. }) => assert_eq!(other, "g-zone-a"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(cluster.calls(), []);
    // After the min time the other zone may go, and its write is conditional on the version read.
    let rv = cluster.config_map(CM).unwrap().metadata.resource_version;
    let claim = claim_at(&cluster, &g, "g-zone-b", ts("2026-01-01T13:00:01Z")).await.expect("claim");
    assert_eq!(claim, MarkedClaim::Claimed { previous: None });
    assert_eq!(cluster.calls(), [Call::ReplaceConfigMap { name: CM.into(), resource_version: rv }]);
}

#[tokio::test]
async fn the_same_zone_may_be_downscaled_again() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    claim_at(&cluster, &g, "g-zone-a", ts(T0)).await.expect("claim");
    let claim = claim_at(&cluster, &g, "g-zone-a", ts("2026-01-01T12:10:00Z")).await.expect("claim");
    assert_eq!(claim, MarkedClaim::Claimed { previous: Some(ts(T0)) });
}

#[tokio::test]
async fn a_conflict_makes_the_claim_read_again_and_decide_on_the_new_record() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    claim_at(&cluster, &g, "g-zone-c", ts("2026-01-01T09:00:00Z")).await.expect("claim");
    cluster.fail_next(ApiError::Conflict("the object has been modified".into()));
    let claim = claim_at(&cluster, &g, "g-zone-a", ts(T0)).await.expect("claim");
    assert_eq!(claim, MarkedClaim::Claimed { previous: None });
    let replaces = cluster.calls().iter().filter(|c| matches!(c, Call::ReplaceConfigMap { .. })).count();
    assert_eq!(replaces, 2, "{:?}", cluster.calls());
}

#[tokio::test]
async fn endless_conflicts_end_in_a_typed_error() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    claim_at(&cluster, &g, "g-zone-c", ts("2026-01-01T09:00:00Z")).await.expect("claim");
    for _ in 0..MAX_ATTEMPTS {
        cluster.fail_next(ApiError::Conflict("moved".into()));
    }
    let err = claim_at(&cluster, &g, "g-zone-a", ts(T0)).await.expect_err("gives up");
    assert_eq!(err, ZoneTrackerError::Contended { config_map: CM.into(), attempts: MAX_ATTEMPTS });
    assert!(err.to_string().contains("retry later"), "{err}");
}

#[tokio::test]
async fn other_api_errors_are_reported_not_retried() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    cluster.fail_next(ApiError::Forbidden("configmaps is forbidden".into()));
    let err = claim_at(&cluster, &g, "g-zone-a", ts(T0)).await.expect_err("forbidden");
    assert!(matches!(err, ZoneTrackerError::Api { source: ApiError::Forbidden(_), .. }), "{err:?}");
    assert_eq!(cluster.calls().len(), 1);
}

#[tokio::test]
async fn an_unreadable_record_refuses_every_claim_with_a_clear_error() {
    let cluster = FakeCluster::default();
    cluster.put_config_map(ConfigMap {
        metadata: ObjectMeta { name: Some(CM.into()), ..Default::default() },
        data: Some(BTreeMap::from([("g-zone-a".to_string(), "yesterday".to_string())])),
        ..Default::default()
    });
    let err = claim_at(&cluster, &zones("g"), "g-zone-b", ts(T0)).await.expect_err("unreadable");
    assert!(matches!(err, ZoneTrackerError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains("g-zone-a"), "{err}");
    assert_eq!(cluster.calls(), []);
}

#[tokio::test]
async fn a_replace_keeps_the_config_maps_other_metadata() {
    let cluster = FakeCluster::default();
    cluster.put_config_map(ConfigMap {
        metadata: ObjectMeta {
            name: Some(CM.into()),
            labels: Some(BTreeMap::from([("team".to_string(), "db".to_string())])),
            ..Default::default()
        },
        data: None,
        ..Default::default()
    });
    claim_at(&cluster, &zones("g"), "g-zone-a", ts(T0)).await.expect("claim");
    let cm = cluster.config_map(CM).unwrap();
    assert_eq!(cm.metadata.labels.unwrap()["team"], "db");
    assert!(read_record(&cluster, CM).await.unwrap().unwrap().record.last_downscaled.contains_key("g-zone-a"));
}

#[tokio::test]
async fn undo_restores_the_previous_entry_only_while_it_is_still_ours() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    // No previous entry: undo removes it, and another zone may then go at once.
    claim_at(&cluster, &g, "g-zone-a", ts(T0)).await.expect("claim");
    undo(&cluster, "g-zone-a", None, ts(T0)).await;
    assert!(!stored(&cluster).last_downscaled.contains_key("g-zone-a"));
    let claim = claim_at(&cluster, &g, "g-zone-b", ts(T0)).await.expect("claim");
    assert_eq!(claim, MarkedClaim::Claimed { previous: None });

    // A previous entry is put back.
    let later = ts("2026-01-01T12:05:00Z");
    let MarkedClaim::Claimed { previous } = claim_at(&cluster, &g, "g-zone-b", later).await.unwrap() else {
        panic!("same zone may go again");
    };
    assert_eq!(previous, Some(ts(T0)));
    undo(&cluster, "g-zone-b", previous, later).await;
    assert_eq!(stored(&cluster).last_downscaled["g-zone-b"], ts(T0));

    // A newer claim of the same zone is not rolled back by an old undo.
    let newest = ts("2026-01-01T12:09:00Z");
    claim_at(&cluster, &g, "g-zone-b", newest).await.unwrap();
    undo(&cluster, "g-zone-b", previous, later).await;
    assert_eq!(stored(&cluster).last_downscaled["g-zone-b"], newest);
}

/// Many simultaneous claims for the zones of one group: exactly the claims the min-time rule allows pass. With
/// no history and a 1 h min time, that is every claim of whichever zone committed first, and no other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_claims_for_different_zones_of_one_group_let_exactly_one_zone_through() {
    let mut failed_swaps = 0;
    for round in 0..20 {
        let cluster = FakeCluster::default();
        let api = cluster.clone();
        let g = zones("g");
        let mut tasks = Vec::new();
        for i in 0..12 {
            let zone = ["g-zone-a", "g-zone-b", "g-zone-c"][(i + round) % 3].to_string();
            let (api, g) = (api.clone(), g.clone());
            tasks.push(tokio::spawn(async move {
                let claim = claim_at(&api, &g, &zone, ts(T0)).await.expect("no store error");
                (zone, claim)
            }));
        }
        let mut results = Vec::new();
        for task in tasks {
            results.push(task.await.expect("no panic"));
        }
        let passed: Vec<&String> =
            results.iter().filter(|(_, c)| matches!(c, MarkedClaim::Claimed { .. })).map(|(z, _)| z).collect();
        let winner = passed.first().copied().expect("some claim passes").clone();
        for (zone, claim) in &results {
            if *zone == winner {
                assert!(matches!(claim, MarkedClaim::Claimed { .. }), "round {round}: {zone} {claim:?}");
            } else {
                match claim {
                    MarkedClaim::Refused(MinTimeVerdict::Wait { other, .. }) => assert_eq!(*other, winner),
                    other => panic!("round {round}: {zone} should wait for {winner}, got {other:?}"),
                }
            }
        }
        assert_eq!(stored(&cluster).last_downscaled.keys().collect::<Vec<_>>(), [&winner], "round {round}");
        let writes = cluster
            .calls()
            .iter()
            .filter(|c| matches!(c, Call::CreateConfigMap { .. } | Call::ReplaceConfigMap { .. }))
            .count();
        failed_swaps += writes - passed.len();
    }
    // The claims really raced: some compare-and-swaps lost and were decided again on the winner's record.
    assert!(failed_swaps > 0, "no claim ever lost a compare-and-swap: the test did not interleave");
}

/// Claims for different groups share the one record object and contend on it, but each group's rule is its own:
/// all of them pass.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simultaneous_claims_for_different_groups_all_pass() {
    let cluster = FakeCluster::default();
    let api = cluster.clone();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let name = format!("group{i}");
        let g = zones(&name);
        let api = api.clone();
        tasks.push(tokio::spawn(async move {
            let zone = format!("{name}-zone-a");
            claim_at(&api, &g, &zone, ts(T0)).await.expect("no store error")
        }));
    }
    for task in tasks {
        assert!(matches!(task.await.expect("no panic"), MarkedClaim::Claimed { .. }));
    }
    assert_eq!(stored(&cluster).last_downscaled.len(), 8);
}

// Rollout steps (no rollout step while a downscale is prepared): the controller's claim of a step and the webhook's
// claim of a downscale are swaps of one object, so whichever commits second sees the first.

#[tokio::test]
async fn a_step_planned_on_a_record_older_than_a_downscale_marker_is_stale_and_writes_nothing() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    // The controller's pass read the record (absent), then the webhook claimed a downscale of zone-b.
    let read_by_the_pass = read_record(&cluster, CM).await.expect("read");
    let until = ts("2026-01-01T12:01:00Z");
    let marked =
        claim_downscale_marked(&cluster, CM, &g, "g-zone-b", Claimant::Admission, ts(T0), until, Defences::ALL)
            .await
            .expect("claim");
    assert_eq!(marked, MarkedClaim::Claimed { previous: None });
    cluster.take_calls();
    let step = claim_rollout_step(&cluster, CM, read_by_the_pass.as_ref(), &g, ts(T0), ts("2026-01-01T12:01:30Z"))
        .await
        .expect("no error");
    assert_eq!(step, StepClaimed::Stale);
    assert_eq!(cluster.calls(), [Call::CreateConfigMap { name: CM.into() }], "one create, refused");
    // Also when the record existed: the swap is conditional on the version the pass read, whatever moved it (here
    // another group's claim: the groups share the one object).
    let read_by_the_pass = read_record(&cluster, CM).await.expect("read");
    let other = claim_at(&cluster, &zones("h"), "h-zone-b", ts("2026-01-01T12:00:05Z")).await.expect("claim");
    assert_eq!(other, MarkedClaim::Claimed { previous: None });
    let step = claim_rollout_step(&cluster, CM, read_by_the_pass.as_ref(), &g, ts(T0), ts("2026-01-01T12:01:30Z"))
        .await
        .expect("no error");
    assert_eq!(step, StepClaimed::Stale);
}

#[tokio::test]
async fn a_downscale_is_refused_while_a_step_of_its_group_is_live_and_allowed_after_it_ends() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    claim_at(&cluster, &g, "g-zone-c", ts("2026-01-01T09:00:00Z")).await.expect("claim");
    let read_by_the_pass = read_record(&cluster, CM).await.expect("read");
    let step = claim_rollout_step(&cluster, CM, read_by_the_pass.as_ref(), &g, ts(T0), ts("2026-01-01T12:01:30.2Z"))
        .await
        .expect("claim step");
    // Stored rounded up, like every record time.
    let until = ts("2026-01-01T12:01:31Z");
    assert_eq!(step, StepClaimed::Claimed { until });
    let steps = read_rollout_steps(&read_record(&cluster, CM).await.unwrap().unwrap()).unwrap();
    assert_eq!(steps.len(), 1);
    assert_eq!((steps[0].group.as_str(), steps[0].until), ("g", until));
    // The record's entries were kept.
    assert!(stored(&cluster).last_downscaled.contains_key("g-zone-c"));

    let later = ts("2026-01-01T12:00:10Z");
    let marked = claim_downscale_marked(
        &cluster,
        CM,
        &g,
        "g-zone-a",
        Claimant::Admission,
        later,
        ts("2026-01-01T12:01:10Z"),
        Defences::ALL,
    )
    .await;
    match marked.expect("no error") {
        MarkedClaim::Stepping(step) => assert_eq!(step.until, until),
        other => panic!("expected a refusal while the step is live, got {other:?}"),
    }
    // Another group is not held.
    let other = zones("h");
    let marked = claim_downscale_marked(
        &cluster,
        CM,
        &other,
        "h-zone-a",
        Claimant::Admission,
        later,
        ts("2026-01-01T12:01:10Z"),
        Defences::ALL,
    )
    .await;
    assert_eq!(marked.expect("no error"), MarkedClaim::Claimed { previous: None });

    finish_rollout_step(&cluster, CM, "g", until).await.expect("finish");
    assert!(read_rollout_steps(&read_record(&cluster, CM).await.unwrap().unwrap()).unwrap().is_empty());
    let marked = claim_downscale_marked(
        &cluster,
        CM,
        &g,
        "g-zone-a",
        Claimant::Admission,
        later,
        ts("2026-01-01T12:01:10Z"),
        Defences::ALL,
    )
    .await;
    assert_eq!(marked.expect("no error"), MarkedClaim::Claimed { previous: None });
}

#[tokio::test]
async fn a_step_left_behind_expires_and_finishing_leaves_a_newer_step_alone() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    let step = claim_rollout_step(&cluster, CM, None, &g, ts(T0), ts("2026-01-01T12:01:00Z")).await.expect("claim");
    assert_eq!(step, StepClaimed::Claimed { until: ts("2026-01-01T12:01:00Z") });
    // Finishing a step with another `until` (an older pass's) removes nothing.
    finish_rollout_step(&cluster, CM, "g", ts("2026-01-01T12:00:30Z")).await.expect("finish");
    assert_eq!(read_rollout_steps(&read_record(&cluster, CM).await.unwrap().unwrap()).unwrap().len(), 1);
    // Past `until` the step no longer holds downscales.
    let after = ts("2026-01-01T12:01:00Z");
    let marked = claim_downscale_marked(
        &cluster,
        CM,
        &g,
        "g-zone-a",
        Claimant::Admission,
        after,
        ts("2026-01-01T12:02:00Z"),
        Defences::ALL,
    )
    .await;
    assert_eq!(marked.expect("no error"), MarkedClaim::Claimed { previous: None });
}

/// A second claim of the same StatefulSet while its first is being prepared would take over the
/// first one's marker and date (the first then prepares unmarked). It is refused.
#[tokio::test]
async fn a_second_claim_of_a_statefulset_being_prepared_is_refused() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    let until = ts("2026-01-01T12:00:20Z");
    assert_eq!(
        claim_downscale_marked(&cluster, CM, &g, "g-zone-a", Claimant::Admission, ts(T0), until, Defences::ALL)
            .await
            .unwrap(),
        MarkedClaim::Claimed { previous: None }
    );
    match claim_downscale_marked(
        &cluster,
        CM,
        &g,
        "g-zone-a",
        Claimant::Admission,
        ts("2026-01-01T12:00:01Z"),
        until,
        Defences::ALL,
    )
    .await
    .unwrap()
    {
        MarkedClaim::Busy(holder) => assert_eq!(holder.statefulset, "g-zone-a"),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// A step claimed by another controller instance (during a handover) is not taken over; the claim
/// is stale and the pass plans again later.
#[tokio::test]
async fn a_live_step_of_another_holder_is_not_taken_over() {
    let cluster = FakeCluster::default();
    let g = zones("g");
    let first = claim_rollout_step(&cluster, CM, None, &g, ts(T0), ts("2026-01-01T12:01:30Z")).await.unwrap();
    assert!(matches!(first, StepClaimed::Claimed { .. }));
    let read = read_record(&cluster, CM).await.unwrap();
    let second = claim_rollout_step(&cluster, CM, read.as_ref(), &g, ts(T0), ts("2026-01-01T12:01:40Z")).await.unwrap();
    assert_eq!(second, StepClaimed::Stale);
}

/// The zone tracker's two dating defences (`rollout_core::defences`, test-only switches), each alone: a claim is
/// dated at its deadline, and once committed it is dated again at the commit. Without the first the entry holds the
/// claim's own time until it is re-dated; without the second it keeps the deadline; without both it keeps the claim's
/// time, earlier than the commit.
#[tokio::test]
async fn a_claim_is_dated_at_its_deadline_and_again_at_the_commit_each_switchable_alone() {
    use rollout_core::Layer;
    use rollout_core::downscale::ClaimEnd;
    let g = zones("g");
    let (claimed_at, until, committed) = (ts(T0), ts("2026-01-01T12:01:30Z"), ts("2026-01-01T12:00:07Z"));
    let cases = [
        (Defences::ALL, until, committed),
        (Defences::ALL.without(&[Layer::ClaimDatedAtDeadline]), claimed_at, committed),
        (Defences::ALL.without(&[Layer::RedatedAtCommit]), until, until),
        (Defences::ALL.without(&[Layer::ClaimDatedAtDeadline, Layer::RedatedAtCommit]), claimed_at, claimed_at),
    ];
    for (defences, at_claim, at_end) in cases {
        let cluster = FakeCluster::default();
        let marked =
            claim_downscale_marked(&cluster, CM, &g, "g-zone-a", Claimant::Admission, claimed_at, until, defences)
                .await;
        assert_eq!(marked.expect("claim"), MarkedClaim::Claimed { previous: None });
        assert_eq!(stored(&cluster).last_downscaled["g-zone-a"], at_claim, "{}", defences.flag());
        let end = ClaimEnd::Committed { at: committed };
        finish_marked_claim(&cluster, CM, "g-zone-a", until, &[until], end, defences).await.expect("finish");
        assert_eq!(stored(&cluster).last_downscaled["g-zone-a"], at_end, "{}", defences.flag());
    }
}

/// The reference's follower rule on the fresh record (sim seeds 65 and 33 of `--follower-without-min-time`): the
/// controller's claim for a follower without a min time is refused once another zone's downscale is recorded, even
/// when the pass that planned it saw no record yet; an admission's claim of the same StatefulSet is judged by the
/// min time alone, as the reference's webhook skips a StatefulSet without one.
#[tokio::test]
async fn a_followers_claim_without_a_min_time_is_refused_once_another_zone_is_recorded() {
    let cluster = FakeCluster::default();
    let forgotten = statefulset("g", "g-zone-c", 3, "r1");
    let g = group("g", vec![zone("g", "g-zone-a", "1m"), zone("g", "g-zone-b", "1m"), forgotten]);
    let at = |s: &str| (ts(s), ts(s).checked_add(jiff::SignedDuration::from_secs(60)).unwrap());
    // No recorded downscale yet: the follower may go down at once.
    let (now, until) = at(T0);
    let first =
        claim_downscale_marked(&cluster, CM, &g, "g-zone-c", Claimant::FollowerScaling, now, until, Defences::ALL);
    assert_eq!(first.await.expect("claim"), MarkedClaim::Claimed { previous: None });
    // The leader's downscale is recorded: it waits out zone-c's date only (zone-c has no min time, zone-a's 1m).
    let (now, until) = at("2026-01-01T12:05:00Z");
    let leader = claim_downscale_marked(&cluster, CM, &g, "g-zone-a", Claimant::Admission, now, until, Defences::ALL);
    assert!(matches!(leader.await.expect("claim"), MarkedClaim::Claimed { .. }));
    let (now, until) = at("2026-01-01T12:10:00Z");
    let follower =
        claim_downscale_marked(&cluster, CM, &g, "g-zone-c", Claimant::FollowerScaling, now, until, Defences::ALL);
    match follower.await.expect("no error") {
        MarkedClaim::Refused(MinTimeVerdict::Invalid(why)) => assert!(why.contains("missing label"), "{why}"),
        other => panic!("the follower's claim went through: {other:?}"),
    }
    let admitted = claim_downscale_marked(&cluster, CM, &g, "g-zone-c", Claimant::Admission, now, until, Defences::ALL);
    assert!(matches!(admitted.await.expect("claim"), MarkedClaim::Claimed { .. }));
}
