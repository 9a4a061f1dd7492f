//! `/admission/prepare-downscale` (the Go operator's, with the changes of docs/reference/differences.md): before a
//! StatefulSet labelled `grafana.com/prepare-downscale=true` loses pods, its leaving pods are told to prepare for
//! shutdown.
//!
//! The decision is split into steps the shell drives, each pure:
//! 1. [`evaluate`]: is this a downscale of a StatefulSet (from the old object, or a lookup for `/scale`)?
//! 2. [`precheck`]: the StatefulSet's own settings (label, port, path, serviceName).
//! 3. [`plan`]: on a live snapshot of the group (the StatefulSets with their pods), the downscale record and its
//!    in-progress markers: another downscale of the group in progress, the min time between zone downscales, any
//!    other StatefulSet of the group mid-rollout (non-updated or unavailable pods, by the core readiness rules),
//!    then the pods to call (pods that do not exist yet are skipped: nothing to prepare).
//! 4. The shell claims the downscale in the record by compare-and-swap (authoritative for the min-time rule and for
//!    "already in process"), calls the pods, undoes everything on failure, and answers with the verdicts below.
//!
//! Dry-run requests go through steps 1-3 and get the verdict a real request would get, but the shell makes no
//! claim and no pod call. Nothing is ever written to the object under admission.

use super::{AdmissionRequest, AdmittedObject, ReplicaChange, Verdict, downscale_subject, go_time, replica_change};
use crate::downscale::{
    DownscaleInProgress, DownscaleRecord, MinTimeVerdict, RolloutStepInProgress, check_min_time, live_in_progress,
};
use crate::duration::format_go_duration;
use crate::group::{GroupSnapshot, MemberSnapshot};
use crate::keys;
use crate::natural::pod_ordinal;
use crate::readiness::Readiness;
use crate::view::StatefulSetView;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::StatefulSet;
use serde::Deserialize;

/// Step 1's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    Decided(Verdict),
    /// A downscale of this StatefulSet (read from the old object).
    StatefulSet {
        sts: Box<StatefulSetView>,
        old: i32,
        new: i32,
    },
    /// A `/scale` downscale: read the live StatefulSet `name`, then continue with [`precheck`] (or answer
    /// [`lookup_failed`]).
    LookupStatefulSet {
        name: String,
        old: i32,
        new: i32,
    },
}

pub fn evaluate(request: &AdmissionRequest) -> Target {
    let (old, new, old_object) = match replica_change(request) {
        ReplicaChange::Decided(verdict) => return Target::Decided(verdict),
        ReplicaChange::Downscale { old, new, old_object } => (old, new, old_object),
    };
    match old_object {
        AdmittedObject::StatefulSet(summary) => {
            // Unlabelled StatefulSets (most updates) are allowed without decoding the whole object.
            let labelled = summary.metadata.labels.as_ref().and_then(|l| l.get(keys::PREPARE_DOWNSCALE));
            if labelled.map(String::as_str) != Some("true") {
                return Target::Decided(Verdict::allow());
            }
            let decoded = StatefulSet::deserialize(&request.old_object).map_err(|e| e.to_string());
            match decoded.and_then(|sts| StatefulSetView::from_k8s(&sts).map_err(|e| e.to_string())) {
                Ok(view) => Target::StatefulSet { sts: Box::new(view), old, new },
                Err(err) => Target::Decided(lookup_failed(&err)),
            }
        }
        AdmittedObject::Scale(_) if request.resource == "statefulsets" => {
            Target::LookupStatefulSet { name: request.name.clone(), old, new }
        }
        AdmittedObject::Scale(_) => {
            Target::Decided(lookup_failed(&format!("unsupported resource {}", request.resource)))
        }
        AdmittedObject::Deployment(_) => Target::Decided(lookup_failed("unsupported type apps/v1, Kind=Deployment")),
        AdmittedObject::ReplicaSet(_) => Target::Decided(lookup_failed("unsupported type apps/v1, Kind=ReplicaSet")),
        // replica_change already answered for other types.
        AdmittedObject::Other { api_version, kind } => {
            Target::Decided(lookup_failed(&format!("unsupported type {api_version}, Kind={kind}")))
        }
    }
}

/// The StatefulSet could not be determined: fail open (reference 4.3 step 3).
pub fn lookup_failed(err: &str) -> Verdict {
    Verdict::allow_with_warning(format!("{err}, allowing the change"))
}

/// `<subject> is not allowed because <reason>`.
pub fn deny(request: &AdmissionRequest, old: i32, new: i32, reason: &str) -> Verdict {
    Verdict::deny(format!("{} is not allowed because {reason}", downscale_subject(request, old, new)))
}

/// Step 2's outcome.
#[derive(Debug, Clone, PartialEq)]
pub enum Precheck {
    Decided(Verdict),
    /// Read the group (`None`: the StatefulSet has no `rollout-group` label, only its own pods are needed) and
    /// continue with [`plan`].
    Continue {
        group: Option<String>,
    },
}

pub fn precheck(request: &AdmissionRequest, old: i32, new: i32, sts: &StatefulSetView) -> Precheck {
    if sts.labels.get(keys::PREPARE_DOWNSCALE).map(String::as_str) != Some("true") {
        return Precheck::Decided(Verdict::allow());
    }
    let annotation = |key: &str| sts.annotations.get(key).map(|v| v.trim()).unwrap_or_default();
    if annotation(keys::PREPARE_DOWNSCALE_HTTP_PORT).is_empty() {
        return Precheck::Decided(deny(
            request,
            old,
            new,
            &format!("the {} annotation is not set or empty.", keys::PREPARE_DOWNSCALE_HTTP_PORT),
        ));
    }
    if annotation(keys::PREPARE_DOWNSCALE_HTTP_PATH).is_empty() {
        return Precheck::Decided(deny(
            request,
            old,
            new,
            &format!("the {} annotation is not set or empty.", keys::PREPARE_DOWNSCALE_HTTP_PATH),
        ));
    }
    if sts.service_name.trim().is_empty() {
        return Precheck::Decided(deny(request, old, new, "the serviceName is not set or empty."));
    }
    Precheck::Continue { group: sts.group.clone().filter(|g| !g.is_empty()) }
}

/// Everything step 3 decides on.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub request: &'a AdmissionRequest,
    pub old: i32,
    pub new: i32,
    /// The StatefulSet being downscaled (as the request carried it or as read live).
    pub sts: &'a StatefulSetView,
    /// Its pods, as listed live.
    pub target: &'a MemberSnapshot,
    /// The live rollout group (its StatefulSets with their pods), when the StatefulSet has one.
    pub group: Option<&'a GroupSnapshot>,
    /// The downscale record and its in-progress markers as read (`None`: no record yet).
    pub record: Option<&'a DownscaleRecord>,
    pub in_progress: &'a [DownscaleInProgress],
    pub cluster_domain: &'a str,
    pub now: Timestamp,
}

/// One pod to call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Endpoint {
    pub pod: String,
    pub url: String,
}

/// Step 3's outcome when the downscale may go ahead.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct PreparePlan {
    /// The pods to call (POST to prepare, DELETE to undo), highest ordinal first.
    pub endpoints: Vec<Endpoint>,
    /// Leaving pods that do not exist (the StatefulSet is still scaling up): nothing to prepare.
    pub skipped: Vec<String>,
}

/// Above this many leaving ordinals, pods that do not exist are summarised instead of listed.
const MAX_LISTED_SKIPPED: u32 = 1000;

pub fn plan(input: &PlanInput<'_>) -> Result<PreparePlan, Verdict> {
    let PlanInput { request, old, new, sts, .. } = *input;
    if let Some(group) = input.group {
        if let Some(holder) = live_in_progress(input.in_progress, &group.name, Some(&sts.name), input.now) {
            return Err(deny_in_progress(request, old, new, holder));
        }
        match check_min_time(group, input.record, &sts.name, input.now) {
            MinTimeVerdict::Elapsed => {}
            verdict => return Err(deny_min_time(request, old, new, &verdict)),
        }
        for member in group.members.iter().filter(|m| m.sts.name != sts.name) {
            if let Some(reason) = rollout_in_progress(member, input.now) {
                return Err(deny(request, old, new, &reason));
            }
        }
    }
    let port = sts.annotations.get(keys::PREPARE_DOWNSCALE_HTTP_PORT).map(|v| v.trim()).unwrap_or_default();
    // The reference always put a '/' before the path, so a path annotation starting with '/' made `//path`.
    let path = sts.annotations.get(keys::PREPARE_DOWNSCALE_HTTP_PATH).map(|v| v.trim()).unwrap_or_default();
    let path = path.trim_start_matches('/');
    // Walk the pods that exist, not the ordinal range: replicas come from the request and may be as large as an
    // int32, which must not turn into billions of iterations inside a handler.
    let low = new.max(0) as u32;
    let high = old.max(0) as u32;
    let mut leaving: Vec<u32> = input
        .target
        .pods
        .iter()
        .filter_map(|p| pod_ordinal(&sts.name, &p.name))
        .filter(|o| (low..high).contains(o))
        .collect();
    leaving.sort_unstable_by(|a, b| b.cmp(a));
    leaving.dedup();
    let missing = (high - low) as usize - leaving.len();
    let skipped = if missing == 0 {
        Vec::new()
    } else if high - low <= MAX_LISTED_SKIPPED {
        (low..high).rev().filter(|o| !leaving.contains(o)).map(|o| format!("{}-{o}", sts.name)).collect()
    } else {
        vec![format!("{missing} pods between {name}-{low} and {name}-{}", high - 1, name = sts.name)]
    };
    let mut endpoints = Vec::new();
    for index in leaving {
        let pod = format!("{}-{index}", sts.name);
        let url = format!(
            "http://{pod}.{}.{}.svc.{}:{port}/{path}",
            sts.service_name.trim(),
            request.namespace,
            input.cluster_domain
        );
        endpoints.push(Endpoint { pod, url });
    }
    Ok(PreparePlan { endpoints, skipped })
}

/// Why `member` (another StatefulSet of the group) blocks a downscale: it has pods not on its update revision, or
/// unavailable or missing pods, or a status that does not describe its latest spec (a rollout may be starting).
pub fn rollout_in_progress(member: &MemberSnapshot, now: Timestamp) -> Option<String> {
    let readiness = Readiness::of(member, now);
    let update_revision = member.sts.status.as_ref().map(|s| s.update_revision.as_str()).unwrap_or_default();
    let non_updated = member.pods.iter().filter(|p| p.revision() != Some(update_revision)).count();
    let non_ready = readiness.unavailable();
    if non_updated == 0 && non_ready == 0 && !readiness.status_stale {
        return None;
    }
    let mut reason = format!(
        "statefulset {} has {non_updated} non-updated replicas and {non_ready} non-ready replicas",
        member.sts.name
    );
    if readiness.status_stale {
        reason.push_str(" (its status does not describe its latest spec yet)");
    }
    Some(reason)
}

/// Without the zone tracker, an admitted downscale of a StatefulSet is recorded in its own
/// `grafana.com/last-downscale` annotation, dated `at`: the JSONPatch that adds it to the object under admission
/// (`object`, as the request carries it). Written by the mutating response, not out of band, so the request
/// itself carries it and nobody else's write conflicts with it.
pub fn last_downscale_patch(object: &serde_json::Value, at: Timestamp) -> serde_json::Value {
    let value = crate::downscale::format_timestamp(at);
    if object.pointer("/metadata/annotations").is_some_and(serde_json::Value::is_object) {
        // `/` in a key is `~1` in a JSON pointer.
        let path = format!("/metadata/annotations/{}", keys::LAST_DOWNSCALE.replace('~', "~0").replace('/', "~1"));
        serde_json::json!([{"op": "add", "path": path, "value": value}])
    } else {
        serde_json::json!([{"op": "add", "path": "/metadata/annotations", "value": {keys::LAST_DOWNSCALE: value}}])
    }
}

/// The min-time rule refuses (reference wording; an unusable value is named in a warning).
pub fn deny_min_time(request: &AdmissionRequest, old: i32, new: i32, verdict: &MinTimeVerdict) -> Verdict {
    match verdict {
        MinTimeVerdict::Wait { other, at, min_time, .. } => deny(
            request,
            old,
            new,
            &format!(
                "statefulset {other} was downscaled at {} and is labelled to wait {} between zone downscales",
                go_time(*at),
                format_go_duration(*min_time)
            ),
        ),
        MinTimeVerdict::Invalid(reason) => {
            deny(request, old, new, "parsing downscale annotations failed.").with_warning(reason.clone())
        }
        MinTimeVerdict::Elapsed => deny(request, old, new, "the min time between zone downscales check failed."),
    }
}

pub fn deny_in_progress(request: &AdmissionRequest, old: i32, new: i32, holder: &DownscaleInProgress) -> Verdict {
    deny(request, old, new, &format!("statefulset {} is already in process of updating replicas", holder.statefulset))
}

/// The controller is replacing pods of the group (its rollout step's marker is live in the record): the downscale
/// waits for the step to be over, when the webhook's own check sees the rollout state it left.
pub fn deny_rollout_step(request: &AdmissionRequest, old: i32, new: i32, step: &RolloutStepInProgress) -> Verdict {
    deny(
        request,
        old,
        new,
        &format!(
            "the rollout operator is replacing pods of rollout group {} (until {} at the latest); retry the downscale \
             after that",
            step.group,
            crate::downscale::format_timestamp(step.until)
        ),
    )
}

/// Listing the group's StatefulSets failed.
pub fn deny_list_statefulsets(request: &AdmissionRequest, old: i32, new: i32, err: &str) -> Verdict {
    deny(request, old, new, "finding other statefulsets failed.").with_warning(err.to_string())
}

/// Listing pods failed.
pub fn deny_list_pods(request: &AdmissionRequest, old: i32, new: i32, err: &str) -> Verdict {
    deny(request, old, new, "an error occurred while checking whether StatefulSets have non-updated replicas")
        .with_warning(err.to_string())
}

/// The record could not be read.
pub fn deny_load_record(request: &AdmissionRequest, old: i32, new: i32, err: &str) -> Verdict {
    deny(request, old, new, "loading zones failed.").with_warning(err.to_string())
}

/// The claim could not be written.
pub fn deny_claim_failed(request: &AdmissionRequest, old: i32, new: i32, err: &str) -> Verdict {
    deny(request, old, new, "setting downscale timestamp in the zone ConfigMap failed.").with_warning(err.to_string())
}

/// A pod call failed (the prepare calls were undone).
pub fn deny_prepare_failed(request: &AdmissionRequest, old: i32, new: i32, errors: &[String]) -> Verdict {
    let mut verdict = deny(request, old, new, "one or more pods failed to prepare for shutdown.");
    verdict.warnings.extend(errors.iter().cloned());
    verdict
}

/// The downscale is allowed. A dry run says that nothing was called.
pub fn allowed(request: &AdmissionRequest, old: i32, new: i32, plan: &PreparePlan) -> Verdict {
    let subject = downscale_subject(request, old, new);
    let mut verdict = if request.dry_run {
        Verdict::allow_with_message(format!(
            "{subject} is allowed -- dry run: {} pods would be prepared for shutdown, none was called.",
            plan.endpoints.len()
        ))
    } else {
        Verdict::allow_with_message(format!("{subject} is allowed -- all pods successfully prepared for shutdown."))
    };
    if !plan.skipped.is_empty() {
        verdict.warnings.push(format!("pods that do not exist were not called: {}", plan.skipped.join(", ")));
    }
    verdict
}
