//! The prepare-downscale step machine: the needs it names, in order, and its policy at each step.

use super::*;
use rollout_core::admission::prepare_flow::{FlowSettings, Need, Observed, PrepareDownscale, StatefulSetLookup};
use rollout_core::downscale::MarkedClaim;
use std::time::Duration;

fn settings(zone_tracker: bool) -> FlowSettings {
    FlowSettings {
        namespace: "ns".into(),
        cluster_domain: "cluster.local.".into(),
        zone_tracker,
        marker_lifetime: Duration::from_secs(20),
        commit_margin: Duration::from_secs(10),
        defences: rollout_core::Defences::ALL,
    }
}

fn downscale(dry_run: Option<bool>) -> AdmissionRequest {
    let old = sts_object("ingester-zone-a", Some(3), prepare_labels(), prepare_annotations());
    let new = sts_object("ingester-zone-a", Some(2), prepare_labels(), prepare_annotations());
    parse(review("admission.k8s.io/v1", "statefulsets", "ingester-zone-a", old, new, dry_run))
}

/// The live group: zone-a (the one downscaled) and zone-b, both healthy.
fn members_and_pods() -> (Vec<StatefulSetView>, Vec<rollout_core::PodView>) {
    let (a, mut pods) = healthy(zone("ingester-zone-a"));
    let (b, b_pods) = healthy(zone("ingester-zone-b"));
    pods.extend(b_pods);
    (vec![a, b], pods)
}

/// A flow with the zone tracker, stepped through its live reads (the healthy group) and a granted claim: what
/// it asks next is the re-read of the group under the marker.
fn claimed(now: Timestamp) -> PrepareDownscale {
    let mut flow = PrepareDownscale::new(downscale(None), settings(true));
    flow.step(Observed::Start, now);
    let (members, pods) = members_and_pods();
    flow.step(Observed::GroupStatefulSets(Ok(members)), now);
    flow.step(Observed::Pods(Ok(pods)), now);
    flow.step(Observed::Record(Ok(None)), now);
    let again = flow.step(Observed::Claim(Ok(MarkedClaim::Claimed { previous: None })), now);
    assert_eq!(again, Need::GroupAgain { selector: "rollout-group=ingester".into() });
    flow
}

fn answer(need: Need) -> Verdict {
    match need {
        Need::Answer(verdict) => verdict,
        other => panic!("expected an answer, got {other:?}"),
    }
}

#[test]
fn with_the_zone_tracker_every_step_is_named_in_order_and_the_downscale_is_dated_after_the_pods() {
    let now = ts(NOW);
    let mut flow = PrepareDownscale::new(downscale(None), settings(true));
    assert_eq!(flow.step(Observed::Start, now), Need::GroupStatefulSets { selector: "rollout-group=ingester".into() });
    let (members, pods) = members_and_pods();
    assert_eq!(flow.step(Observed::GroupStatefulSets(Ok(members.clone())), now), Need::Pods);
    assert_eq!(flow.step(Observed::Pods(Ok(pods.clone())), now), Need::Record);
    let Need::Claim { statefulset, until, .. } = flow.step(Observed::Record(Ok(None)), now) else {
        panic!("a claim comes next")
    };
    assert_eq!((statefulset.as_str(), until), ("ingester-zone-a", ts("2026-01-01T12:00:20Z")));
    let again = flow.step(Observed::Claim(Ok(MarkedClaim::Claimed { previous: None })), now);
    assert_eq!(again, Need::GroupAgain { selector: "rollout-group=ingester".into() });
    let Need::PreparePods { plan } = flow.step(Observed::GroupAgain(Ok((members, pods))), now) else {
        panic!("pods are prepared next")
    };
    assert_eq!(plan.endpoints.len(), 1, "{plan:?}");
    let later = ts("2026-01-01T12:00:03.2Z");
    let dated = flow.step(Observed::PodsPrepared(Vec::new()), later);
    assert_eq!(
        dated,
        Need::DateInRecord {
            statefulset: "ingester-zone-a".into(),
            until: ts("2026-01-01T12:00:20Z"),
            committed_by: ts("2026-01-01T12:00:14Z"),
        },
        "dated at the pods' answer plus the commit margin, rounded up"
    );
    assert!(answer(flow.step(Observed::DatedInRecord(Ok(())), later)).allowed);
}

/// The test-only switch of the re-read (a defence in depth the harness shows alone): without it the flow goes
/// from the claim straight to the pods, so a rollout step committed before the marker goes unseen.
#[test]
fn without_the_reread_layer_the_flow_prepares_pods_right_after_the_claim() {
    let now = ts(NOW);
    let defences = rollout_core::Defences::ALL.without(&[rollout_core::Layer::RereadAfterClaim]);
    let mut flow = PrepareDownscale::new(downscale(None), FlowSettings { defences, ..settings(true) });
    flow.step(Observed::Start, now);
    let (members, pods) = members_and_pods();
    flow.step(Observed::GroupStatefulSets(Ok(members)), now);
    flow.step(Observed::Pods(Ok(pods)), now);
    flow.step(Observed::Record(Ok(None)), now);
    let next = flow.step(Observed::Claim(Ok(MarkedClaim::Claimed { previous: None })), now);
    assert!(matches!(next, Need::PreparePods { .. }), "{next:?}");
}

#[test]
fn a_dating_that_leaves_less_than_half_the_margin_is_denied_and_undone() {
    let now = ts(NOW);
    let mut flow = claimed(now);
    flow.step(Observed::GroupAgain(Ok(members_and_pods())), now);
    let Need::DateInRecord { committed_by, .. } = flow.step(Observed::PodsPrepared(Vec::new()), now) else {
        panic!("dating comes next")
    };
    let Need::Undo(undo) = flow.step(Observed::DatedInRecord(Ok(())), ts("2026-01-01T12:00:06Z")) else {
        panic!("an undo comes next")
    };
    assert_eq!(undo.dated_since, vec![committed_by]);
    assert_eq!(undo.claim, Some((None, ts("2026-01-01T12:00:20Z"))));
    let verdict = answer(flow.step(Observed::Undone, now));
    assert!(!verdict.allowed);
    assert!(verdict.message.as_deref().unwrap_or_default().contains("took longer than 10s"), "{:?}", verdict.message);
}

#[test]
fn a_rollout_seen_after_the_claim_undoes_the_claim_and_denies() {
    let now = ts(NOW);
    let mut flow = claimed(now);
    let (members, pods) = members_and_pods();
    // zone-b's pod 0 became unready between the claim and the re-read.
    let pods: Vec<_> = pods.into_iter().map(|p| if p.name == "ingester-zone-b-0" { not_ready(p) } else { p }).collect();
    let Need::Undo(undo) = flow.step(Observed::GroupAgain(Ok((members, pods))), now) else {
        panic!("an undo comes next")
    };
    assert!(undo.plan.endpoints.is_empty(), "no pod was prepared yet");
    assert!(undo.claim.is_some());
    assert!(!answer(flow.step(Observed::Undone, now)).allowed);
}

#[test]
fn a_dry_run_ends_at_the_plan_with_no_claim_and_no_pod_call() {
    let now = ts(NOW);
    let mut flow = PrepareDownscale::new(downscale(Some(true)), settings(true));
    flow.step(Observed::Start, now);
    let (members, pods) = members_and_pods();
    flow.step(Observed::GroupStatefulSets(Ok(members)), now);
    flow.step(Observed::Pods(Ok(pods)), now);
    assert!(answer(flow.step(Observed::Record(Ok(None)), now)).allowed);
}

#[test]
fn without_the_tracker_an_update_is_recorded_through_the_json_patch() {
    let now = ts(NOW);
    let mut flow = PrepareDownscale::new(downscale(None), settings(false));
    flow.step(Observed::Start, now);
    let (members, pods) = members_and_pods();
    flow.step(Observed::GroupStatefulSets(Ok(members)), now);
    assert!(matches!(flow.step(Observed::Pods(Ok(pods)), now), Need::PreparePods { .. }), "no record, no claim");
    let verdict = answer(flow.step(Observed::PodsPrepared(Vec::new()), now));
    assert!(verdict.allowed);
    let patch = serde_json::to_string(&verdict.patch).unwrap();
    assert!(patch.contains("2026-01-01T12:00:10Z"), "{patch}");
}

/// A `/scale` downscale of zone-a as an HPA sends it (carrying the resourceVersion it read), stepped through its
/// parent's read at `now` (the parent as given) and the healthy group up to the pods prepared.
fn scale_prepared(parent: StatefulSetView, now: Timestamp) -> (PrepareDownscale, Need) {
    let mut hpa_scale = scale_object("ingester-zone-a", 2);
    hpa_scale["metadata"]["resourceVersion"] = json!(parent.resource_version);
    let old = scale_object("ingester-zone-a", 3);
    let request = parse(review("admission.k8s.io/v1", "statefulsets", "ingester-zone-a", old, hpa_scale, None));
    let mut flow = PrepareDownscale::new(request, settings(false));
    assert_eq!(flow.step(Observed::Start, now), Need::StatefulSet { name: "ingester-zone-a".into() });
    let next = flow.step(Observed::StatefulSet(StatefulSetLookup::Found(Box::new(parent.clone()))), now);
    assert_eq!(next, Need::GroupStatefulSets { selector: "rollout-group=ingester".into() });
    let (mut members, pods) = members_and_pods();
    members[0] = parent;
    flow.step(Observed::GroupStatefulSets(Ok(members)), now);
    assert!(matches!(flow.step(Observed::Pods(Ok(pods)), now), Need::PreparePods { .. }));
    let next = flow.step(Observed::PodsPrepared(Vec::new()), now);
    (flow, next)
}

/// Without the tracker a `/scale` downscale is recorded by a conditional patch of its parent, dated
/// `SCALE_RETRY_WINDOW` ahead, and allowed, though it carries a resourceVersion: the API server admits it again
/// after the conflict that write causes (a PATCH) or the client retries (an HPA's PUT), and that admission finds
/// the date still at least half the commit margin ahead, writes nothing and is allowed.
#[test]
fn without_the_tracker_a_scale_downscale_is_recorded_on_its_parent_and_allowed_and_its_readmission_writes_nothing() {
    use rollout_core::admission::prepare_flow::SCALE_RETRY_WINDOW;
    let now = ts(NOW);
    let mut parent = zone("ingester-zone-a");
    parent.resource_version = "7".into();
    let (mut flow, next) = scale_prepared(parent.clone(), now);
    let Need::PatchLastDownscale { statefulset, resource_version, at } = next else {
        panic!("the parent is patched next, got {next:?}")
    };
    assert_eq!((statefulset.as_str(), resource_version.as_str()), ("ingester-zone-a", "7"));
    let verdict = answer(flow.step(Observed::LastDownscalePatched(Ok(())), now));
    assert!(verdict.allowed, "{:?}", verdict.message);
    assert_eq!(verdict.patch, None, "a Scale cannot carry the annotation");
    assert_eq!((at, SCALE_RETRY_WINDOW), (ts("2026-01-01T12:00:30Z"), Duration::from_secs(30)));
    // Admitted again (the parent now carries the date and a new resourceVersion), up to the last moment that
    // leaves half the commit margin: allowed, nothing written.
    let mut dated = annotate(parent, keys::LAST_DOWNSCALE, "2026-01-01T12:00:30Z");
    dated.resource_version = "8".into();
    for at in ["2026-01-01T12:00:02Z", "2026-01-01T12:00:25Z"] {
        let (_, next) = scale_prepared(dated.clone(), ts(at));
        let verdict = answer(next);
        assert!(verdict.allowed, "at {at}: {:?}", verdict.message);
    }
    // Later, the date could fall before the commit: written again, conditionally.
    let (_, next) = scale_prepared(dated, ts("2026-01-01T12:00:25.5Z"));
    assert_eq!(
        next,
        Need::PatchLastDownscale {
            statefulset: "ingester-zone-a".into(),
            resource_version: "8".into(),
            at: ts("2026-01-01T12:00:56Z"),
        }
    );
}

#[test]
fn failures_deny_with_their_policy() {
    let now = ts(NOW);
    // A /scale request whose parent cannot be read: denied (an HPA's downscale must not skip the checks).
    let scale = parse(review(
        "admission.k8s.io/v1",
        "statefulsets",
        "ingester-zone-a",
        scale_object("ingester-zone-a", 3),
        scale_object("ingester-zone-a", 2),
        None,
    ));
    let mut flow = PrepareDownscale::new(scale.clone(), settings(true));
    assert_eq!(flow.step(Observed::Start, now), Need::StatefulSet { name: "ingester-zone-a".into() });
    let verdict = answer(flow.step(
        Observed::StatefulSet(StatefulSetLookup::Failed(rollout_core::Failure::Deadline("timeout".into()))),
        now,
    ));
    assert!(
        !verdict.allowed && verdict.message.as_deref().unwrap_or_default().contains("timeout"),
        "{:?}",
        verdict.message
    );
    // Gone: nothing to prepare (fail open, as the reference).
    let mut flow = PrepareDownscale::new(scale, settings(true));
    flow.step(Observed::Start, now);
    assert!(answer(flow.step(Observed::StatefulSet(StatefulSetLookup::NotFound), now)).allowed);
    // An unreadable record: denied with the reference's message (the min time cannot be checked).
    let mut flow = PrepareDownscale::new(downscale(None), settings(true));
    flow.step(Observed::Start, now);
    let (members, pods) = members_and_pods();
    flow.step(Observed::GroupStatefulSets(Ok(members.clone())), now);
    flow.step(Observed::Pods(Ok(pods.clone())), now);
    let verdict =
        answer(flow.step(Observed::Record(Err(rollout_core::Failure::Unavailable("connection refused".into()))), now));
    let message = verdict.message.as_deref().unwrap_or_default();
    assert!(!verdict.allowed && message.contains("loading zones failed"), "{message}");
    // An observation the flow did not ask for: denied.
    let mut flow = PrepareDownscale::new(downscale(None), settings(true));
    flow.step(Observed::Start, now);
    flow.step(Observed::GroupStatefulSets(Ok(members)), now);
    let verdict = answer(flow.step(Observed::Undone, now));
    assert!(
        !verdict.allowed && verdict.message.as_deref().unwrap_or_default().contains("internal error"),
        "{:?}",
        verdict.message
    );
    assert_eq!(answer(flow.step(Observed::Pods(Ok(pods)), now)), verdict, "an answered flow keeps its answer");
}
