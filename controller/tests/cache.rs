//! The cache on its own: which groups an event touches, relists, ownership index.

mod support;

use rollout_operator::cluster::WatchEvent;
use rollout_operator::rollout::cache::ClusterCache;
use std::collections::BTreeSet;
use support::{pod, sts};

fn groups(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

fn synced_cache() -> ClusterCache {
    let mut c = ClusterCache::new();
    c.apply_statefulset_event(WatchEvent::Init);
    c.apply_statefulset_event(WatchEvent::InitApply(sts("ingester", "ingester-zone-a", 2, "r1", "r1")));
    c.apply_statefulset_event(WatchEvent::InitApply(sts("store-gateway", "store-gateway-zone-a", 1, "r1", "r1")));
    assert!(!c.is_synced());
    c.apply_statefulset_event(WatchEvent::InitDone);
    assert!(!c.is_synced(), "pods not listed yet");
    c.apply_pod_event(WatchEvent::Init);
    c.apply_pod_event(WatchEvent::InitApply(pod("ingester-zone-a", 0, "r1", true, 0)));
    c.apply_pod_event(WatchEvent::InitApply(pod("ingester-zone-a", 1, "r1", true, 0)));
    c.apply_pod_event(WatchEvent::InitDone);
    assert!(c.is_synced());
    c
}

#[test]
fn a_pod_event_touches_only_its_owners_group() {
    let mut c = synced_cache();
    let touched = c.apply_pod_event(WatchEvent::Apply(pod("ingester-zone-a", 0, "r2", false, 1)));
    assert_eq!(touched, groups(&["ingester"]));
    let touched = c.apply_pod_event(WatchEvent::Apply(pod("unmanaged", 0, "r2", false, 1)));
    assert!(touched.is_empty());
    let snapshot = c.group_snapshot("ingester").unwrap();
    assert_eq!(snapshot.members[0].pods.len(), 2);
    assert_eq!(snapshot.members[0].pods[0].revision(), Some("r2"));
}

#[test]
fn moving_a_statefulset_to_another_group_touches_both() {
    let mut c = synced_cache();
    let touched = c.apply_statefulset_event(WatchEvent::Apply(sts("other", "ingester-zone-a", 2, "r1", "r1")));
    assert_eq!(touched, groups(&["ingester", "other"]));
    assert!(c.group_snapshot("ingester").is_none());
    assert_eq!(c.group_snapshot("other").unwrap().members[0].pods.len(), 2);
}

#[test]
fn a_relist_drops_objects_that_disappeared_while_the_watch_was_down() {
    let mut c = synced_cache();
    c.apply_pod_event(WatchEvent::Init);
    c.apply_pod_event(WatchEvent::InitApply(pod("ingester-zone-a", 1, "r1", true, 0)));
    let touched = c.apply_pod_event(WatchEvent::InitDone);
    assert!(touched.contains("ingester"));
    let snapshot = c.group_snapshot("ingester").unwrap();
    assert_eq!(snapshot.members[0].pods.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["ingester-zone-a-1"]);

    c.apply_statefulset_event(WatchEvent::Init);
    c.apply_statefulset_event(WatchEvent::InitApply(sts("ingester", "ingester-zone-a", 2, "r1", "r1")));
    let touched = c.apply_statefulset_event(WatchEvent::InitDone);
    assert!(touched.contains("store-gateway"));
    assert!(c.group_snapshot("store-gateway").is_none());
}

#[test]
fn deleted_pods_leave_the_snapshot() {
    let mut c = synced_cache();
    let touched = c.apply_pod_event(WatchEvent::Delete(pod("ingester-zone-a", 0, "r1", true, 0)));
    assert_eq!(touched, groups(&["ingester"]));
    assert_eq!(c.group_snapshot("ingester").unwrap().members[0].pods.len(), 1);
}
