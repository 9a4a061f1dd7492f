//! Kubernetes objects as a cluster would hold them: StatefulSets, their pods, and a three-zone rollout group.

use super::FakeCluster;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStatus, Pod, PodCondition, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference, Time};
use std::collections::BTreeMap;

pub fn sts(group: &str, name: &str, replicas: i32, current: &str, update: &str) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            labels: Some(BTreeMap::from([("rollout-group".into(), group.into())])),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("name".into(), name.into())])),
                ..Default::default()
            },
            service_name: Some(name.into()),
            update_strategy: Some(StatefulSetUpdateStrategy { type_: Some("OnDelete".into()), ..Default::default() }),
            ..Default::default()
        }),
        status: Some(StatefulSetStatus {
            replicas,
            ready_replicas: Some(replicas),
            current_revision: Some(current.into()),
            update_revision: Some(update.into()),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

pub fn pod(sts_name: &str, ordinal: u32, revision: &str, ready: bool, generation: u32) -> Pod {
    let name = format!("{sts_name}-{ordinal}");
    let t = Time("2026-01-01T00:00:00Z".parse().unwrap());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("ns".into()),
            uid: Some(format!("uid-{name}-{generation}")),
            labels: Some(BTreeMap::from([
                ("name".into(), sts_name.into()),
                ("controller-revision-hash".into(), revision.into()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: "apps/v1".into(),
                kind: "StatefulSet".into(),
                name: sts_name.into(),
                uid: format!("uid-{sts_name}"),
                controller: Some(true),
                ..Default::default()
            }]),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus {
            phase: Some("Running".into()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: if ready { "True" } else { "False" }.into(),
                last_transition_time: Some(t),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "main".into(),
                ready,
                state: Some(ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time("2026-01-01T00:00:00Z".parse().unwrap())),
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

pub(super) fn set_ready(pod: &mut Pod, ready: bool) {
    let status = pod.status.as_mut().unwrap();
    for c in status.conditions.iter_mut().flatten() {
        c.status = if ready { "True" } else { "False" }.into();
    }
    for c in status.container_statuses.iter_mut().flatten() {
        c.ready = ready;
    }
}

/// A rollout group `ingester` of three zones of three ready pods, zone a done on `rev-new`, zones b and c still on
/// `rev-old`, every StatefulSet with `rollout-max-unavailable: <max_unavailable>`, every pod labelled with its
/// rollout group (as ZoneAwarePodDisruptionBudgets select them).
pub fn three_zones(max_unavailable: &str) -> FakeCluster {
    let (old, new) = ("rev-old", "rev-new");
    let mut pods = Vec::new();
    for (zone, rev) in [("a", new), ("b", old), ("c", old)] {
        for i in 0..3 {
            let mut p = pod(&format!("ingester-zone-{zone}"), i, rev, true, 0);
            p.metadata.labels.get_or_insert_default().insert("rollout-group".into(), "ingester".into());
            pods.push(p);
        }
    }
    let with_max_unavailable = |mut s: StatefulSet| {
        s.metadata.annotations.get_or_insert_default().insert("rollout-max-unavailable".into(), max_unavailable.into());
        s
    };
    FakeCluster::new(
        vec![
            with_max_unavailable(sts("ingester", "ingester-zone-a", 3, new, new)),
            with_max_unavailable(sts("ingester", "ingester-zone-b", 3, old, new)),
            with_max_unavailable(sts("ingester", "ingester-zone-c", 3, old, new)),
        ],
        pods,
    )
}
