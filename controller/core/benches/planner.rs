//! Cost of one planner pass over one rollout group mid-rollout: 3 StatefulSets x 100 pods (goal < 50 µs) and
//! 3 x 1000 pods (goal < 1 ms). Inputs are built once, outside the timed loop.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rollout_core::{GroupSnapshot, GroupState, MaxUnavailable, PlanContext, fixture, plan_group};
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
    group.finish();
}

criterion_group!(benches, planner);
criterion_main!(benches);
