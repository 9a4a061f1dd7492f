//! A rollout group whose StatefulSets and pods carry fuzzer-chosen labels and annotations (every key the operator
//! reads, with valid values and near misses: max-unavailable, min time, last downscale, mirror references,
//! delayed-downscale URLs, force replicas, leaders, eviction intents, ready times) and a budget with any partition
//! regex: the views built from them (`StatefulSetView::from_k8s`, `BudgetPod::from_k8s`), the controller's pass
//! over the group with the record read as the input says and the budgets judging its deletions, then the mirror
//! and delayed-downscale decisions and the pod endpoints.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rollout_core::downscale::{DownscaleRecord, parse_in_progress};
use rollout_core::pass::{MirrorFindings, PassInput, RecordRead, ZoneTracker, plan_pass};
use rollout_core::scaling::{ReferenceScale, delayed_downscale_target, downscale_held, plan_mirror, pod_endpoints};
use rollout_core::zpdb::{BudgetPod, BudgetScope, Budgets, KnownBudgets};
use rollout_core::{PodView, StatefulSetView, build_groups};
use rollout_fuzz::text::Text;
use rollout_fuzz::world::{NAMESPACE, WorldSpec, now};
use std::collections::BTreeMap;

#[derive(Arbitrary, Debug)]
enum Record {
    NotRead,
    Absent,
    Read,
    Forbidden,
    Unreadable,
}

#[derive(Arbitrary, Debug)]
struct Input {
    world: WorldSpec,
    zone_tracker: u8,
    record: Record,
    budgets: bool,
    scale: (Option<i64>, Option<i64>),
    prepared: Vec<(u8, Text)>,
    seconds_later: i32,
}

fuzz_target!(|input: Input| {
    let objects = input.world.objects();
    let now = now().checked_add(jiff::SignedDuration::from_secs(i64::from(input.seconds_later))).unwrap_or(now());
    let statefulsets: Vec<StatefulSetView> =
        objects.statefulsets.iter().map(|s| StatefulSetView::from_k8s(s).expect("named")).collect();
    let budget_pods: Vec<BudgetPod> = objects.pods.iter().map(|p| BudgetPod::from_k8s(p).expect("named")).collect();
    let pods: Vec<PodView> = objects.pods.iter().map(|p| PodView::from_k8s(p).expect("named")).collect();
    let (budgets, _invalid) = Budgets::from_objects(objects.others.iter());
    let known = KnownBudgets::Known(budgets.all());

    let config_map = objects.others.iter().find(|o| o["kind"] == "ConfigMap");
    let data: BTreeMap<String, String> =
        config_map.and_then(|c| serde_json::from_value(c["data"].clone()).ok()).unwrap_or_default();
    let record = DownscaleRecord::from_config_map_data(&data);
    let markers = config_map
        .and_then(|c| c["metadata"]["annotations"][rollout_core::keys::DOWNSCALES_IN_PROGRESS].as_str())
        .map_or(Ok(Vec::new()), |raw| parse_in_progress(Some(raw)));
    let error = match (&record, &markers) {
        (Err(e), _) => e.to_string(),
        (_, Err(e)) => e.clone(),
        _ => "connection refused".to_string(),
    };
    let record_read = match (&input.record, &record, &markers) {
        (Record::NotRead, ..) => RecordRead::NotRead,
        (Record::Absent, ..) => RecordRead::Absent,
        (Record::Read, Ok(record), Ok(markers)) => RecordRead::Read { record, markers },
        (Record::Forbidden, ..) => RecordRead::Forbidden,
        (Record::Read | Record::Unreadable, ..) => RecordRead::Unreadable { error: &error },
    };
    let zone_tracker = match input.zone_tracker % 3 {
        0 => ZoneTracker::Off,
        1 => ZoneTracker::On,
        _ => ZoneTracker::Forbidden,
    };
    let scope = BudgetScope { known: &known, namespace: NAMESPACE, statefulsets: &statefulsets, pods: &budget_pods };
    let pass_input = PassInput {
        zone_tracker,
        record: record_read,
        budgets: input.budgets.then_some(scope),
        ..PassInput::new(now, &[])
    };
    let scale = ReferenceScale { spec_replicas: input.scale.0, status_replicas: input.scale.1 };
    let prepared: BTreeMap<u32, jiff::Timestamp> = input
        .prepared
        .iter()
        .take(8)
        .filter_map(|(ordinal, at)| Some((u32::from(*ordinal % 8), at.get().parse().ok()?)))
        .collect();
    for group in build_groups(statefulsets.clone(), &pods) {
        let pass = plan_pass(&group, &pass_input);
        serde_json::to_string(&pass.plan).expect("a plan serialises");
        if pass.mirror_due {
            pass.clone().with_mirror(MirrorFindings { waits: vec!["offline".to_string()], ..Default::default() });
        }
        for member in &group.members {
            let sts = &member.sts;
            let held = downscale_held(&group, &sts.name, now);
            let _ = plan_mirror(sts, &sts.scaling, &scale, held.as_deref());
            if let Some(Ok(delayed)) = &sts.scaling.delayed_downscale {
                let desired = u32::try_from(scale.spec_replicas.unwrap_or(0).clamp(0, 8)).unwrap_or(0);
                let _ = delayed_downscale_target(sts.replicas.min(8), desired, delayed.delay, &prepared, now);
                let _ = pod_endpoints(sts, &delayed.url, 0..sts.replicas.min(8), NAMESPACE, "cluster.local.");
            }
        }
    }
});
