//! A rollout group whose StatefulSets and pods carry fuzzer-chosen labels and annotations (every key the operator
//! reads, with valid values and near misses: max-unavailable, min time, last downscale, mirror references,
//! delayed-downscale URLs, force replicas, leaders, eviction intents, ready times) and a budget with any partition
//! regex: the views built from them (`StatefulSetView::from_k8s`, `BudgetPod::from_k8s`), the controller's pass
//! over the group with the record read as the input says and the budgets judging its deletions, then the mirror
//! step machine (reference reads, delayed-downscale cancel and prepare calls, write-backs) driven to its end with the
//! reference's `scale` and the pods' answers as the input says. Beyond "no crash": the mirror step ends within a
//! bounded number of steps.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use rollout_core::downscale::{DownscaleRecord, parse_in_progress};
use rollout_core::mirror_flow::{MirrorFlow, MirrorFlowSettings, MirrorNeed, MirrorObserved, PodAnswer};
use rollout_core::pass::{PassInput, RecordRead, ZoneTracker, plan_pass};
use rollout_core::scaling::ReferenceScale;
use rollout_core::zpdb::{BudgetPod, BudgetScope, Budgets, KnownBudgets};
use rollout_core::{Failure, PodView, StatefulSetView, build_groups};
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

/// A pod's answer to a delayed-downscale prepare call.
#[derive(Arbitrary, Debug)]
enum Answer {
    /// Preparing since this many seconds before now.
    Since(u32),
    Status(u16, Text),
    Failed,
    Abandoned,
}

impl Answer {
    fn answer(&self, now: jiff::Timestamp) -> PodAnswer {
        match self {
            Answer::Since(secs) => PodAnswer::Response {
                status: 200,
                body: format!("{{\"timestamp\":{}}}", now.as_second() - i64::from(*secs)).into_bytes(),
            },
            Answer::Status(status, body) => PodAnswer::Response { status: *status, body: body.get().into_bytes() },
            Answer::Failed => PodAnswer::Failed("connection refused".to_string()),
            Answer::Abandoned => PodAnswer::Abandoned,
        }
    }
}

/// Why the reference could not be read: each kind of failure the step machine tells apart.
fn failure((kind, why): &(u8, Text)) -> Failure {
    let why = why.get();
    match kind % 8 {
        0 => Failure::Forbidden(why),
        1 => Failure::Denied(why),
        2 => Failure::NotFound(why),
        3 => Failure::Conflict(why),
        4 => Failure::Unavailable(why),
        5 => Failure::Deadline(why),
        6 => Failure::Unreadable(why),
        _ => Failure::Failed(why),
    }
}

#[derive(Arbitrary, Debug)]
struct Input {
    world: WorldSpec,
    zone_tracker: u8,
    record: Record,
    budgets: bool,
    /// The reference's `scale`, or why it could not be read.
    scale: Result<(Option<i64>, Option<i64>), (u8, Text)>,
    answers: Vec<Answer>,
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
        (_, Err(e)) => e.to_string(),
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
    let scale =
        input.scale.as_ref().map(|(spec, status)| ReferenceScale { spec_replicas: *spec, status_replicas: *status });
    let settings =
        MirrorFlowSettings { namespace: NAMESPACE.to_string(), cluster_domain: "cluster.local.".to_string() };
    for group in build_groups(statefulsets.clone(), &pods) {
        let pass = plan_pass(&group, &pass_input);
        serde_json::to_string(&pass.plan).expect("a plan serialises");
        if !pass.mirror_due {
            continue;
        }
        let mut flow = MirrorFlow::<()>::new(group, settings.clone());
        let mut observed = MirrorObserved::Start;
        // A reference read, a cancel, a prepare and a write-back per member at most.
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps <= 32, "the mirror step does not end");
            observed = match flow.step(observed, now) {
                MirrorNeed::Reference { .. } => {
                    MirrorObserved::Reference(scale.map(|scale| ((), scale)).map_err(failure))
                }
                MirrorNeed::Cancel { .. } => MirrorObserved::Cancelled,
                MirrorNeed::Prepare { endpoints, .. } => MirrorObserved::Prepared(
                    endpoints
                        .iter()
                        .enumerate()
                        .map(|(i, (ordinal, _))| {
                            let answer = input.answers.get(i).map_or(PodAnswer::Abandoned, |a| a.answer(now));
                            (*ordinal, answer)
                        })
                        .collect(),
                ),
                MirrorNeed::WriteBack { .. } => MirrorObserved::WrittenBack,
                MirrorNeed::Done(result) => {
                    pass.with_mirror(result.findings);
                    break;
                }
            };
        }
    }
});
