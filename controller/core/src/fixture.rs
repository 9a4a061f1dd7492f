//! Builders of views for tests, benchmarks, the model and the simulation: plain data, no I/O.

use crate::keys;
use crate::settings::RolloutSettings;
use crate::view::{OwnerRef, PodView, ReadyCondition, Selector, StatefulSetStatusView, StatefulSetView};
use std::collections::BTreeMap;

/// A managed OnDelete StatefulSet of `group` with `replicas` pods, status fully ready at `revision`.
pub fn statefulset(group: &str, name: &str, replicas: u32, revision: &str) -> StatefulSetView {
    StatefulSetView {
        name: name.to_string(),
        uid: format!("uid-{name}"),
        resource_version: "1".to_string(),
        generation: Some(1),
        group: Some(group.to_string()),
        replicas,
        update_strategy: keys::ON_DELETE.to_string(),
        selector: Selector {
            match_labels: BTreeMap::from([("name".to_string(), name.to_string())]),
            match_expressions: Vec::new(),
        },
        min_ready_seconds: 0,
        service_name: name.to_string(),
        status: Some(StatefulSetStatusView {
            replicas,
            ready_replicas: replicas,
            current_revision: revision.to_string(),
            update_revision: revision.to_string(),
            observed_generation: Some(1),
        }),
        settings: RolloutSettings::default(),
        downscale: Default::default(),
        scaling: Default::default(),
        labels: BTreeMap::from([(keys::ROLLOUT_GROUP.to_string(), group.to_string())]),
        annotations: BTreeMap::new(),
    }
}

/// A running, ready pod `<sts>-<ordinal>` owned by `sts`, at `revision`.
pub fn pod(sts: &StatefulSetView, ordinal: u32, revision: &str) -> PodView {
    let name = format!("{}-{ordinal}", sts.name);
    PodView {
        uid: format!("uid-{name}-{revision}"),
        labels: BTreeMap::from([
            ("name".to_string(), sts.name.clone()),
            (keys::CONTROLLER_REVISION_HASH.to_string(), revision.to_string()),
        ]),
        owner: Some(OwnerRef { kind: "StatefulSet".to_string(), name: sts.name.clone(), uid: sts.uid.clone() }),
        phase: "Running".to_string(),
        deletion_timestamp: None,
        ready_condition: Some(ReadyCondition { ready: true, since: None }),
        container_count: 1,
        containers_ready_and_running: true,
        name,
    }
}

/// Marks a pod not ready (running, Ready condition false, container not ready).
pub fn not_ready(mut pod: PodView) -> PodView {
    pod.ready_condition = Some(ReadyCondition { ready: false, since: None });
    pod.containers_ready_and_running = false;
    pod
}

/// Marks a pod terminating (deletion timestamp set), still reporting Ready.
pub fn terminating(mut pod: PodView) -> PodView {
    pod.deletion_timestamp = Some(jiff::Timestamp::UNIX_EPOCH);
    pod
}

/// Sets an annotation and re-parses the settings that read annotations, as `StatefulSetView::from_k8s` would.
pub fn annotate(mut sts: StatefulSetView, key: &str, value: &str) -> StatefulSetView {
    sts.annotations.insert(key.to_string(), value.to_string());
    reparse(sts)
}

/// Sets a label and re-parses the settings that read labels.
pub fn label(mut sts: StatefulSetView, key: &str, value: &str) -> StatefulSetView {
    sts.labels.insert(key.to_string(), value.to_string());
    reparse(sts)
}

fn reparse(mut sts: StatefulSetView) -> StatefulSetView {
    sts.settings = RolloutSettings::from_annotations(&sts.name, &sts.annotations);
    sts.downscale = crate::settings::DownscaleSettings::from_metadata(&sts.name, &sts.labels, &sts.annotations);
    sts.scaling = crate::settings::ScalingSettings::from_annotations(&sts.name, &sts.annotations);
    sts
}
