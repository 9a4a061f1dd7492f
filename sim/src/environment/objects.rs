//! Kubernetes objects as the simulated cluster holds them (built with k8s-openapi, so the controller parses exactly
//! what a real API server would send), and the lean summaries the checker keeps in its history.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetSpec, StatefulSetStatus, StatefulSetUpdateStrategy};
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateWaiting, ContainerStatus, Pod, PodCondition, PodStatus,
    PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta, OwnerReference, Time,
};
use rollout_core::keys;
use std::collections::BTreeMap;

pub const NAMESPACE: &str = "sim";
/// Annotation on the pod template carrying the template's revision (stands in for the template hash).
pub const TEMPLATE_REVISION: &str = "sim.grafana.com/revision";

pub fn revision_name(sts: &str, n: u32) -> String {
    format!("{sts}-r{n}")
}

/// A `metav1.Time` as the API server stores it: whole seconds (RFC 3339 without fractions), so the controller and
/// the checker read the same times a real cluster would give them.
fn time(t: Timestamp) -> Time {
    Time(Timestamp::from_second(t.as_second()).unwrap_or(t))
}

/// A managed OnDelete StatefulSet with `replicas` pods, fully rolled out at revision 0.
pub fn statefulset(group: &str, name: &str, replicas: u32, max_unavailable: u32) -> StatefulSet {
    let rev = revision_name(name, 0);
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NAMESPACE.into()),
            uid: Some(format!("uid-{name}")),
            generation: Some(1),
            labels: Some(BTreeMap::from([(keys::ROLLOUT_GROUP.into(), group.into())])),
            annotations: Some(BTreeMap::from([(keys::ROLLOUT_MAX_UNAVAILABLE.into(), max_unavailable.to_string())])),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas as i32),
            // Every operator of a label selector, each satisfied by the StatefulSet's pods (as a selector written
            // with expressions is): an operator the controller reads wrongly as false leaves the StatefulSet without
            // pods. (One read wrongly as true would need pods that must not match; the simulation has none.)
            selector: LabelSelector {
                match_labels: Some(BTreeMap::from([("name".into(), name.into())])),
                match_expressions: Some(vec![
                    requirement("name", "In", &[name]),
                    requirement("name", "NotIn", &[&format!("{name}-canary")]),
                    requirement(keys::CONTROLLER_REVISION_HASH, "Exists", &[]),
                    requirement("track", "DoesNotExist", &[]),
                ]),
            },
            service_name: Some(name.into()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some(keys::ON_DELETE.into()),
                ..Default::default()
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    annotations: Some(BTreeMap::from([(TEMPLATE_REVISION.into(), rev.clone())])),
                    ..Default::default()
                }),
                spec: None,
            },
            ..Default::default()
        }),
        status: Some(StatefulSetStatus {
            replicas: replicas as i32,
            ready_replicas: Some(replicas as i32),
            current_replicas: Some(replicas as i32),
            updated_replicas: Some(replicas as i32),
            current_revision: Some(rev.clone()),
            update_revision: Some(rev),
            observed_generation: Some(1),
            ..Default::default()
        }),
    }
}

fn requirement(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
    LabelSelectorRequirement {
        key: key.into(),
        operator: operator.into(),
        values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
    }
}

/// Sets an annotation of a StatefulSet (scaling settings: leader, min time between zone downscales).
pub fn annotate(sts: &mut StatefulSet, key: &str, value: &str) {
    sts.metadata.annotations.get_or_insert_with(Default::default).insert(key.into(), value.into());
}

pub fn template_revision(sts: &StatefulSet) -> String {
    sts.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(TEMPLATE_REVISION).cloned())
        .unwrap_or_default()
}

/// Pod `<sts>-<ordinal>` at `revision`, running; Ready as given.
pub fn pod(sts: &str, ordinal: u32, revision: &str, uid: String, ready: bool, now: Timestamp) -> Pod {
    let mut p = Pod {
        metadata: ObjectMeta {
            name: Some(format!("{sts}-{ordinal}")),
            namespace: Some(NAMESPACE.into()),
            uid: Some(uid),
            labels: Some(BTreeMap::from([
                ("name".into(), sts.into()),
                (keys::CONTROLLER_REVISION_HASH.into(), revision.into()),
            ])),
            owner_references: Some(vec![statefulset_owner(sts)]),
            ..Default::default()
        },
        spec: None,
        status: Some(PodStatus { phase: Some("Running".into()), ..Default::default() }),
    };
    set_ready(&mut p, ready, now);
    p
}

/// The controller reference of a pod of StatefulSet `sts` (as the StatefulSet controller sets it, on creation or
/// adoption).
pub fn statefulset_owner(sts: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: "StatefulSet".into(),
        name: sts.into(),
        uid: format!("uid-{sts}"),
        controller: Some(true),
        ..Default::default()
    }
}

/// A label the worlds' StatefulSet selectors exclude (`track DoesNotExist`): a user sets it to take a pod out of
/// service for debugging (`Scenario::relabels`).
pub const DEBUG_LABEL: &str = "track";

/// The rollout group whose budget covers `pod`: the worlds' budgets select pods by the group's label (which the
/// pods' template carries), so a pod relabelled out of its StatefulSet's selector, even released by it, is still
/// covered.
pub fn budget_group_of(pod: &Pod) -> Option<String> {
    pod.metadata.labels.as_ref()?.get(keys::ROLLOUT_GROUP).cloned()
}

/// Whether the pod's labels match its StatefulSet's selector (as the worlds write them: everything but the debug
/// label is kept).
pub fn in_selector(pod: &Pod) -> bool {
    !pod.metadata.labels.as_ref().is_some_and(|l| l.contains_key(DEBUG_LABEL))
}

/// Sets the Ready condition and every container's readiness (a not-ready container is waiting in a crash loop).
pub fn set_ready(pod: &mut Pod, ready: bool, now: Timestamp) {
    let status = pod.status.get_or_insert_with(Default::default);
    status.conditions = Some(vec![PodCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        last_transition_time: Some(time(now)),
        ..Default::default()
    }]);
    let state = if ready {
        ContainerState { running: Some(ContainerStateRunning { started_at: Some(time(now)) }), ..Default::default() }
    } else {
        ContainerState {
            waiting: Some(ContainerStateWaiting { reason: Some("ContainerCreating".into()), ..Default::default() }),
            ..Default::default()
        }
    };
    let names: Vec<String> = match status.container_statuses.as_deref() {
        Some(containers) if !containers.is_empty() => containers.iter().map(|c| c.name.clone()).collect(),
        _ => vec!["main".into()],
    };
    status.container_statuses = Some(
        names
            .into_iter()
            .map(|name| ContainerStatus { name, ready, state: Some(state.clone()), ..Default::default() })
            .collect(),
    );
}

/// The name of the second container of pods with sidecars.
pub const SIDECAR: &str = "sidecar";

/// Gives the pod a second container, as ready as its first.
pub fn add_sidecar(pod: &mut Pod) {
    let Some(containers) = pod.status.as_mut().and_then(|s| s.container_statuses.as_mut()) else { return };
    if let Some(main) = containers.first().cloned() {
        containers.push(ContainerStatus { name: SIDECAR.into(), ..main });
    }
}

/// Sets the sidecar's readiness alone, leaving the Ready condition as it is (the kubelet's condition lags behind a
/// container that has just crashed). Not ready, it has crashed (waiting to restart) or, with `still_running`, it runs
/// but fails its readiness probe. Whether the pod has a sidecar.
pub fn set_sidecar_ready(pod: &mut Pod, ready: bool, still_running: bool, now: Timestamp) -> bool {
    let Some(containers) = pod.status.as_mut().and_then(|s| s.container_statuses.as_mut()) else { return false };
    let Some(sidecar) = containers.iter_mut().find(|c| c.name == SIDECAR) else { return false };
    sidecar.ready = ready;
    sidecar.state = Some(if ready || still_running {
        ContainerState { running: Some(ContainerStateRunning { started_at: Some(time(now)) }), ..Default::default() }
    } else {
        ContainerState {
            waiting: Some(ContainerStateWaiting { reason: Some("CrashLoopBackOff".into()), ..Default::default() }),
            ..Default::default()
        }
    });
    true
}

/// Every container reported, ready and running.
pub fn containers_ready(pod: &Pod) -> bool {
    let containers = pod.status.as_ref().and_then(|s| s.container_statuses.as_deref()).unwrap_or(&[]);
    !containers.is_empty()
        && containers.iter().all(|c| c.ready && c.state.as_ref().is_some_and(|s| s.running.is_some()))
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

pub fn pod_revision(pod: &Pod) -> String {
    pod.metadata.labels.as_ref().and_then(|l| l.get(keys::CONTROLLER_REVISION_HASH).cloned()).unwrap_or_default()
}

pub fn owner_of(pod: &Pod) -> String {
    pod.metadata.owner_references.as_ref().and_then(|o| o.first()).map(|o| o.name.clone()).unwrap_or_default()
}

/// What the checker needs to know about one version of a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodSum {
    pub sts: String,
    pub name: String,
    pub uid: String,
    pub revision: String,
    pub ready: bool,
    /// When the pod last became Ready (its Ready condition's lastTransitionTime), if it is.
    pub ready_since: Option<jiff::Timestamp>,
    pub terminating: bool,
    /// Its labels match its StatefulSet's selector (a pod relabelled out of it is not the StatefulSet's, even
    /// before the StatefulSet controller releases it).
    pub in_selector: bool,
}

impl PodSum {
    pub fn of(pod: &Pod) -> Self {
        PodSum {
            sts: owner_of(pod),
            name: pod.metadata.name.clone().unwrap_or_default(),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            revision: pod_revision(pod),
            // Serving: the Ready condition and every container (a Ready pod with a crashed sidecar is not).
            ready: is_ready(pod) && containers_ready(pod),
            ready_since: pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|c| c.iter().find(|c| c.type_ == "Ready" && c.status == "True"))
                .and_then(|c| c.last_transition_time.as_ref())
                .map(|t| t.0),
            terminating: pod.metadata.deletion_timestamp.is_some(),
            in_selector: in_selector(pod),
        }
    }

    /// Serving traffic: Ready and not on its way out.
    pub fn available(&self) -> bool {
        self.ready && !self.terminating
    }
}

/// What the checker needs to know about one version of a StatefulSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsSum {
    pub name: String,
    pub group: String,
    pub replicas: u32,
    pub max_unavailable: u32,
    pub paused: bool,
    pub current_revision: String,
    pub update_revision: String,
    /// The revision of the StatefulSet's current template (what `updateRevision` becomes once the StatefulSet
    /// controller has observed the latest generation): the truth a status may lag behind.
    pub template_revision: String,
    /// `spec.minReadySeconds`.
    pub min_ready_seconds: u32,
    /// `status.readyReplicas`.
    pub ready_replicas: u32,
    /// `status.replicas`.
    pub status_replicas: u32,
    /// `grafana.com/rollout-downscale-leader`.
    pub leader: Option<String>,
    /// `grafana.com/rollout-upscale-only-when-leader-ready: "true"`.
    pub upscale_only_when_leader_ready: bool,
}

impl StsSum {
    pub fn of(sts: &StatefulSet) -> Self {
        let ann = sts.metadata.annotations.clone().unwrap_or_default();
        let status = sts.status.clone().unwrap_or_default();
        StsSum {
            name: sts.metadata.name.clone().unwrap_or_default(),
            group: sts.metadata.labels.as_ref().and_then(|l| l.get(keys::ROLLOUT_GROUP).cloned()).unwrap_or_default(),
            replicas: sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32,
            // The checker's own reading of the documented rule (not the core's): the trimmed value read as Go's
            // `strconv.Atoi` does (an optional sign, 64 bits), a positive count, or a percentage from 1 to 100 of
            // `spec.replicas` rounded down and at least 1; anything else is the reference default of 1.
            max_unavailable: {
                let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u64;
                let written = ann.get(keys::ROLLOUT_MAX_UNAVAILABLE).map(|v| v.trim());
                match written.map(|v| (v.strip_suffix('%'), v)) {
                    Some((Some(pct), _)) => match pct.parse::<i64>() {
                        Ok(pct @ 1..=100) => ((replicas * pct as u64 / 100) as u32).max(1),
                        _ => 1,
                    },
                    Some((None, count)) => match count.parse::<i64>() {
                        Ok(n @ 1..) => u32::try_from(n).unwrap_or(u32::MAX),
                        _ => 1,
                    },
                    None => 1,
                }
            },
            paused: ann.get(keys::ROLLOUT_PAUSED).is_some_and(|v| v == "true"),
            current_revision: status.current_revision.unwrap_or_default(),
            update_revision: status.update_revision.unwrap_or_default(),
            template_revision: template_revision(sts),
            min_ready_seconds: sts.spec.as_ref().and_then(|s| s.min_ready_seconds).unwrap_or(0).max(0) as u32,
            ready_replicas: status.ready_replicas.unwrap_or(0).max(0) as u32,
            status_replicas: status.replicas.max(0) as u32,
            leader: ann.get(keys::ROLLOUT_DOWNSCALE_LEADER).cloned(),
            upscale_only_when_leader_ready: ann
                .get(keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY)
                .is_some_and(|v| v == "true"),
        }
    }
}

/// Whether an AdmissionReview `response` allows the request (`allowed: true`; anything else denies).
pub fn admitted(response: &serde_json::Value) -> bool {
    response.get("allowed") == Some(&serde_json::Value::Bool(true))
}

/// The `response` of a webhook's answer to `review`, checked as kube-apiserver checks it before reading it: an
/// `AdmissionReview` of the request's apiVersion, answering the request's uid. Anything else fails the call (the
/// webhook's failure policy then applies), with kube-apiserver's wording.
pub fn admission_response(review: &serde_json::Value, body: &[u8]) -> Result<serde_json::Value, String> {
    let answer: serde_json::Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let field =
        |v: &serde_json::Value, at: &str| v.pointer(at).and_then(|f| f.as_str()).unwrap_or_default().to_string();
    let (api_version, kind) = (field(&answer, "/apiVersion"), field(&answer, "/kind"));
    if api_version != field(review, "/apiVersion") || kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of {}, Kind=AdmissionReview, got {api_version}, Kind={kind}",
            field(review, "/apiVersion")
        ));
    }
    let response = answer.get("response").cloned().ok_or("webhook response was absent")?;
    let (expected, got) = (field(review, "/request/uid"), field(&response, "/uid"));
    if expected != got {
        return Err(format!("expected response.uid={expected:?}, got {got:?}"));
    }
    // A patch is applied only as a JSONPatch, and a patch type needs a patch.
    match (response.get("patch").is_some(), field(&response, "/patchType").as_str()) {
        (true, "JSONPatch") | (false, "") => {}
        (true, other) => return Err(format!("webhook returned a patch with patchType {other:?}, expected JSONPatch")),
        (false, _) => return Err("webhook returned a patchType without a patch".to_string()),
    }
    Ok(response)
}
