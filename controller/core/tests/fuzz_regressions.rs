//! Inputs that once crashed, hung or misread a parser of `rollout-core`, found by the fuzz targets in `fuzz/` (or
//! while writing their properties), kept here minimised so that they stay fixed without a fuzzer.

use rollout_core::duration::parse_go_duration;
use rollout_core::fixture::{annotate, pod, statefulset};
use rollout_core::mirror_flow::{MirrorFlow, MirrorFlowSettings, MirrorNeed, MirrorObserved};
use rollout_core::scaling::ReferenceScale;
use rollout_core::zpdb::{BudgetPod, BudgetScope, KnownBudgets, ZpdbConfig, hold_of_deletion};
use rollout_core::{GroupSnapshot, PodView, keys};
use std::collections::BTreeSet;

/// The largest `spec.replicas` the API accepts.
const INT32_MAX: u32 = i32::MAX as u32;

fn now() -> jiff::Timestamp {
    "2026-01-01T12:00:00Z".parse().unwrap()
}

/// A fraction on top of the largest whole amount of a unit overflowed the nanosecond sum: a panic where overflow is
/// checked (tests, debug builds), and in a release build a wrapped, tiny duration accepted instead of "too large"
/// (`…211.999us` read as 543 ns). Flags, min times and budgets' `crossZoneEvictionDelay` are read with it.
#[test]
fn a_go_duration_whose_fraction_overflows_is_too_large() {
    for input in [
        "340282366920938463463374607431768211.999us",
        "340282366920938463463374607431768.999999ms",
        "94522879700260684295381835.999999999999h",
        "1h94522879700260684295381835.9h",
    ] {
        let err = parse_go_duration(input).expect_err(input);
        assert_eq!(err.reason, "duration too large", "{input}");
    }
}

/// A StatefulSet may claim as many as 2^31 - 1 replicas. The budgets named every expected pod without one
/// (`<pod> (missing)`) when they held a deletion back: two billion strings for `plan`, `status` or the controller
/// (out of memory), and every eviction decision allocated a bitmap of all expected ordinals (256 MiB). Named now: a
/// bounded number, then one line for the rest.
#[test]
fn a_budget_holding_a_deletion_back_names_a_bounded_number_of_missing_pods() {
    let group = "ingester";
    let a = statefulset(group, "zone-a", 3, "r1");
    let b = statefulset(group, "zone-b", INT32_MAX, "r1");
    let mut pods: Vec<PodView> = (0..3).map(|i| pod(&a, i, "r1")).chain((0..3).map(|i| pod(&b, i, "r1"))).collect();
    for p in &mut pods {
        p.labels.insert(keys::ROLLOUT_GROUP.to_string(), group.to_string());
    }
    let budget = ZpdbConfig::parse(&serde_json::json!({
        "kind": "ZoneAwarePodDisruptionBudget", "metadata": {"name": "ingester-rollout"},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"rollout-group": group}}}
    }))
    .unwrap();
    let known = KnownBudgets::Known(vec![budget]);
    let statefulsets = [a, b];
    let budget_pods: Vec<BudgetPod> = pods.into_iter().map(BudgetPod::plain).collect();
    let scope = BudgetScope { known: &known, namespace: "ns", statefulsets: &statefulsets, pods: &budget_pods };

    let hold = hold_of_deletion(&scope, "zone-a", "zone-a-0", 1, &BTreeSet::new(), now()).expect("held back");

    assert!(hold.message.contains("zone-b"), "{}", hold.message);
    assert!(hold.unavailable.len() <= 1_001, "{} names", hold.unavailable.len());
    assert_eq!(hold.unavailable[0], "zone-b-3 (missing)");
    let rest = hold.unavailable.last().unwrap();
    assert!(rest.contains(&format!("{}", INT32_MAX - 3 - 1_000)) && rest.contains("zone-b"), "{rest}");
}

/// A mirrored StatefulSet with delayed downscale cancels (or prepares) delayed downscale on every replica in a
/// range: with 2^31 - 1 replicas, two billion endpoints were built in one step (out of memory) before a single call.
/// Such a range is refused with an error now, and the replicas are left as they are.
#[test]
fn a_mirror_step_over_two_billion_replicas_builds_no_endpoints_for_each() {
    let mut sts = statefulset("ingester", "zone-a", INT32_MAX, "r1");
    for (key, value) in [
        (keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME, "ingester"),
        (keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND, "Deployment"),
        (keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION, "apps/v1"),
        (keys::ROLLOUT_DELAYED_DOWNSCALE, "1h"),
        (keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL, "http://pod:8080/prepare-delayed-downscale"),
    ] {
        sts = annotate(sts, key, value);
    }
    for desired in [i64::from(INT32_MAX), 7] {
        let group = GroupSnapshot::assemble("ingester", vec![sts.clone()], std::iter::empty());
        let settings = MirrorFlowSettings { namespace: "ns".into(), cluster_domain: "cluster.local.".into() };
        let mut flow = MirrorFlow::<()>::new(group, settings);
        let scale = ReferenceScale { spec_replicas: Some(desired), status_replicas: Some(desired) };
        let mut observed = MirrorObserved::Start;
        let mut errors = Vec::new();
        for _ in 0..16 {
            observed = match flow.step(observed, now()) {
                MirrorNeed::Reference { .. } => MirrorObserved::Reference(Ok(((), scale))),
                MirrorNeed::Cancel { endpoints, .. } => {
                    match endpoints {
                        Ok(endpoints) => assert!(endpoints.len() <= 10_000, "{} endpoints", endpoints.len()),
                        Err(e) => errors.push(e.message),
                    }
                    MirrorObserved::Cancelled
                }
                MirrorNeed::Prepare { endpoints, .. } => panic!("{} replicas asked to prepare", endpoints.len()),
                MirrorNeed::WriteBack { .. } => MirrorObserved::WrittenBack,
                MirrorNeed::Done(result) => {
                    let scale = result.findings.scale;
                    assert!(scale.is_none(), "desired {desired}: scaled {scale:?}");
                    errors.extend(result.findings.errors.into_iter().map(|e| e.message));
                    break;
                }
            };
        }
        assert!(errors.iter().any(|e| e.contains("2147483647")), "desired {desired}: {errors:?}");
    }
}
