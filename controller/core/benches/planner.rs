//! Cost of one planner pass over one rollout group mid-rollout: 3 StatefulSets x 100 pods (goal < 50 µs) and
//! 3 x 1000 pods (goal < 1 ms), and the same 3 x 1000 group with scaling rules (leader/follower chain, min time
//! between zone downscales, a downscale record; goal < 1 ms). Inputs are built once, outside the timed loop.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rollout_core::{
    DownscaleRecord, GroupSnapshot, GroupState, MaxUnavailable, PlanContext, fixture, keys, plan_group,
};
use std::hint::black_box;

/// Zone a done, zone b half replaced, zone c untouched; `rollout-max-unavailable: 10%`, so a pass over zone b
/// deletes a tenth of its pods.
fn mid_rollout(pods_per_zone: u32) -> GroupSnapshot {
    let mut statefulsets = Vec::new();
    let mut pods = Vec::new();
    for (zone, updated) in [("a", pods_per_zone), ("b", pods_per_zone / 2), ("c", 0)] {
        let mut sts = fixture::statefulset("ingester", &format!("ingester-zone-{zone}"), pods_per_zone, "old");
        sts.settings.max_unavailable = MaxUnavailable::Percent(10);
        if let Some(status) = sts.status.as_mut() {
            status.update_revision = "new".to_string();
            if updated == pods_per_zone {
                status.current_revision = "new".to_string();
            }
        }
        for ordinal in 0..pods_per_zone {
            pods.push(fixture::pod(&sts, ordinal, if ordinal < updated { "new" } else { "old" }));
        }
        statefulsets.push(sts);
    }
    GroupSnapshot::assemble("ingester", statefulsets, &pods)
}

/// `mid_rollout` where zone b follows zone a and zone c follows zone b, zone a was just downscaled to 90% (10 min
/// ago, in the record), the followers carry a 1 h min time and mirror-free scaling annotations: the pass checks
/// every scaling rule, finds the downscales must wait (min time, and a rollout in progress), and rolls zone b.
fn mid_rollout_with_scaling(pods_per_zone: u32) -> (GroupSnapshot, DownscaleRecord) {
    let base = mid_rollout(pods_per_zone);
    let now = jiff::Timestamp::UNIX_EPOCH;
    let mut statefulsets = Vec::new();
    let mut pods = Vec::new();
    for member in base.members {
        let mut sts = member.sts;
        match sts.name.as_str() {
            "ingester-zone-a" => sts.replicas = pods_per_zone * 9 / 10,
            "ingester-zone-b" => sts = fixture::annotate(sts, keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-a"),
            _ => sts = fixture::annotate(sts, keys::ROLLOUT_DOWNSCALE_LEADER, "ingester-zone-b"),
        }
        sts = fixture::annotate(sts, keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE, "1h");
        sts = fixture::annotate(sts, keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY, "true");
        sts.settings.max_unavailable = MaxUnavailable::Percent(10);
        pods.extend(member.pods);
        statefulsets.push(sts);
    }
    let mut record = DownscaleRecord::default();
    record.record_downscale("ingester-zone-a", now - jiff::SignedDuration::from_mins(10));
    (GroupSnapshot::assemble("ingester", statefulsets, &pods), record)
}

fn planner(c: &mut Criterion) {
    let now = jiff::Timestamp::UNIX_EPOCH;
    let ctx = PlanContext::new(now, &[]);
    let mut group = c.benchmark_group("plan_group");
    for pods_per_zone in [100u32, 1000] {
        let snapshot = mid_rollout(pods_per_zone);
        // Measure the pass we mean to measure: zone b is being rolled, 10% of its pods at a time.
        let plan = plan_group(&snapshot, &ctx);
        assert_eq!(plan.state, GroupState::Progressing, "{}", plan.reason);
        assert_eq!(plan.actions.len() as u32, pods_per_zone / 10, "{}", plan.reason);
        group.bench_with_input(BenchmarkId::from_parameter(format!("3x{pods_per_zone}")), &snapshot, |b, s| {
            b.iter(|| plan_group(black_box(s), &ctx))
        });
    }
    let (snapshot, record) = mid_rollout_with_scaling(1000);
    let ctx = ctx.with_downscale_record(Some(&record));
    let plan = plan_group(&snapshot, &ctx);
    assert_eq!(plan.state, GroupState::Progressing, "{}", plan.reason);
    assert!(plan.reason.contains("ingester-zone-b: downscale to 900 waits"), "{}", plan.reason);
    assert_eq!(plan.actions.len(), 100, "{}", plan.reason);
    group.bench_with_input(BenchmarkId::from_parameter("3x1000-scaling"), &snapshot, |b, s| {
        b.iter(|| plan_group(black_box(s), &ctx))
    });
    group.finish();
}

criterion_group!(benches, planner);
criterion_main!(benches);
