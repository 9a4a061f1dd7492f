//! Cost that must not grow with the namespace: a bench binary printing figures.
//!
//! - start to ready: the watch-fed cache taking a first list of 10,000 pods and 300 StatefulSets (100 rollout groups
//!   of 3 zones x 34 pods) and the first pass of every group (the work between "listed" and "reconciling");
//! - one pod event: the cache update plus its group's whole pass (`plan_pass`), in a namespace of 1 group and of 100
//!   groups of the same size (goal: within 1.5x);
//! - memory: the process's peak RSS (VmHWM) once the 10,000-pod cache is built (goal: under 100 MB). The objects are
//!   built and fed one at a time, as a watch delivers them.
//!
//! Run with `cargo bench -p rollout-operator --bench namespace_scale` (GROUPS / PODS_PER_ZONE override the size).

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodStatus, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};
use rollout_core::{PassInput, plan_pass};
use rollout_operator::cluster::WatchEvent;
use rollout_operator::rollout::cache::ClusterCache;
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

const ZONES: [&str; 3] = ["a", "b", "c"];

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

fn statefulset(group: usize, zone: &str, replicas: i32) -> StatefulSet {
    let name = format!("g{group}-zone-{zone}");
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            generation: Some(1),
            labels: labels(&[("rollout-group", &format!("g{group}"))]),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            service_name: Some(name.clone()),
            selector: LabelSelector { match_labels: labels(&[("name", &name)]), ..Default::default() },
            update_strategy: Some(StatefulSetUpdateStrategy { type_: Some("OnDelete".into()), ..Default::default() }),
            template: PodTemplateSpec::default(),
            ..Default::default()
        }),
        status: Some(StatefulSetStatus {
            replicas,
            ready_replicas: Some(replicas),
            current_revision: Some(format!("{name}-old")),
            update_revision: Some(format!("{name}-new")),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

/// Pod `ordinal` of `sts`, on the old revision, Ready unless `ready` is false.
fn pod(group: usize, zone: &str, ordinal: usize, ready: bool) -> Pod {
    let sts = format!("g{group}-zone-{zone}");
    let name = format!("{sts}-{ordinal}");
    let status = if ready { "True" } else { "False" };
    Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            resource_version: Some("1".into()),
            labels: labels(&[("name", &sts), ("controller-revision-hash", &format!("{sts}-old"))]),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: sts.clone(),
                uid: format!("uid-{sts}"),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition { type_: "Ready".into(), status: status.into(), ..Default::default() }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                ready,
                state: Some(k8s_openapi::api::core::v1::ContainerState {
                    running: Some(Default::default()),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

/// A cache listing `groups` rollout groups of 3 zones x `pods_per_zone` pods, fed as a first list.
fn listed(groups: usize, pods_per_zone: usize) -> ClusterCache {
    let mut cache = ClusterCache::new();
    cache.apply_statefulset_event(WatchEvent::Init);
    for g in 0..groups {
        for zone in ZONES {
            cache.apply_statefulset_event(WatchEvent::InitApply(statefulset(g, zone, pods_per_zone as i32)));
        }
    }
    cache.apply_statefulset_event(WatchEvent::InitDone);
    cache.apply_pod_event(WatchEvent::Init);
    for g in 0..groups {
        for zone in ZONES {
            for i in 0..pods_per_zone {
                cache.apply_pod_event(WatchEvent::InitApply(pod(g, zone, i, true)));
            }
        }
    }
    cache.apply_pod_event(WatchEvent::InitDone);
    cache
}

/// Every touched group's whole pass, as the reconcile loop runs it on each event.
fn passes(cache: &ClusterCache, groups: impl IntoIterator<Item = String>) -> usize {
    let now = jiff::Timestamp::now();
    let mut actions = 0;
    for group in groups {
        if let Some(snapshot) = cache.group_snapshot(&group) {
            actions += plan_pass(&snapshot, &PassInput::new(now, &[])).plan.actions.len();
        }
    }
    actions
}

/// Mean cost of one pod event (a pod of group 0 turning unready, then ready again) plus its group's pass.
fn per_event(cache: &mut ClusterCache, events: usize) -> Duration {
    let started = Instant::now();
    for n in 0..events {
        let ready = n % 2 == 1;
        let touched = cache.apply_pod_event(WatchEvent::Apply(pod(0, "b", n % 7, ready)));
        black_box(passes(cache, touched));
    }
    started.elapsed() / events as u32
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

fn main() {
    let groups = env_or("GROUPS", 100);
    let pods_per_zone = env_or("PODS_PER_ZONE", 34);
    let pods = groups * 3 * pods_per_zone;
    let before = peak_rss_mb();

    let started = Instant::now();
    let cache = listed(groups, pods_per_zone);
    let listed_in = started.elapsed();
    let first_passes = Instant::now();
    black_box(passes(&cache, cache.group_names()));
    let ready_in = started.elapsed();
    println!(
        "start to ready: {pods} pods in {groups} groups cached in {:.1} ms, first pass of every group {:.1} ms, \
         {:.1} ms in all",
        listed_in.as_secs_f64() * 1e3,
        first_passes.elapsed().as_secs_f64() * 1e3,
        ready_in.as_secs_f64() * 1e3
    );
    if let (Some(before), Some(after)) = (before, peak_rss_mb()) {
        println!("peak RSS: {after:.1} MB with the {pods}-pod cache ({before:.1} MB before building it)");
    }

    let events = env_or("EVENTS", 20_000);
    let mut many = cache;
    let mut one = listed(1, pods_per_zone);
    // Warm up both, then measure each twice, alternating, and keep the better run of each (shared, noisy machine).
    per_event(&mut one, 1_000);
    per_event(&mut many, 1_000);
    let mut best = (Duration::MAX, Duration::MAX);
    for _ in 0..2 {
        best.0 = best.0.min(per_event(&mut one, events));
        best.1 = best.1.min(per_event(&mut many, events));
    }
    println!(
        "one pod event (cache update + its group's pass), groups of 3 x {pods_per_zone} pods: {:.1} µs with 1 group, \
         {:.1} µs with {groups} groups in the namespace ({:.2}x)",
        best.0.as_secs_f64() * 1e6,
        best.1.as_secs_f64() * 1e6,
        best.1.as_secs_f64() / best.0.as_secs_f64()
    );
}
