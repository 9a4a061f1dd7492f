//! The no-downscale world's user: changes the replicas of labelled and unlabelled Deployments, StatefulSets and
//! ReplicaSets through the real no-downscale webhook, and what its answers are judged on.

use crate::environment::client::SimCluster;
use crate::environment::store::{SharedStore, Store};
use crate::harness::populate::{FOREIGN_NAMESPACE, NO_DOWNSCALE_OBJECTS};
use crate::harness::{Actors, Stage};
use crate::oracle::activity::{ObjectAdmission, Webhook};
use crate::rng::SimRng;
use madsim::runtime::Handle;
use rollout_operator::admission::no_downscale::{NO_DOWNSCALE_PATH, ParentLookups};
use rollout_operator::admission::prepare_downscale::PREPARE_DOWNSCALE_PATH;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router, system_clock};
use rollout_operator::pods::client::NoPodClient;
use std::net::IpAddr;
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

/// A denial of `what` (a change to `sts`) must name only StatefulSets of `sts`'s own rollout group: one that names
/// a StatefulSet of another group (the worlds' second group) judged on the wrong group, a violation of `invariant`.
/// The names are read as the message's words, not through the core.
pub(crate) fn judge_denial_scope(st: &mut Store, sts: &str, message: &str, invariant: &'static str, what: &str) {
    let group = st.group_of_statefulset(sts);
    judge_denial_scope_of(st, group, message, invariant, what);
}

/// [`judge_denial_scope`] for a denial of an object of `group`.
pub(crate) fn judge_denial_scope_of(
    st: &mut Store,
    group: Option<String>,
    message: &str,
    invariant: &'static str,
    what: &str,
) {
    let named: Vec<&str> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|word| st.statefulsets.contains_key(*word) && st.group_of_statefulset(word) != group)
        .collect();
    if !named.is_empty() {
        let at = st.elapsed();
        let detail = format!("{what} was denied for {} of another rollout group: {message}", named.join(", "));
        st.oracle.checker.violate(at, invariant, detail);
    }
}

/// Seeds the no-downscale user's own generator.
pub(crate) const NO_DOWNSCALE_STREAM: u64 = 0x6e6f_2d64_6f77_6e73;

/// The replicas of a no-downscale world object, and the object as an admission carries it.
pub(crate) fn no_downscale_object(st: &Store, kind: &str, name: &str) -> Option<(u32, serde_json::Value)> {
    let (replicas, mut value) = match kind {
        "Deployment" => {
            let d = st.deployments.get(name)?;
            (d.spec.as_ref()?.replicas?, serde_json::to_value(d).ok()?)
        }
        "ReplicaSet" => {
            let r = st.replicasets.get(name)?;
            (r.spec.as_ref()?.replicas?, serde_json::to_value(r).ok()?)
        }
        _ => {
            let s = st.statefulsets.get(name)?;
            (s.spec.as_ref()?.replicas?, serde_json::to_value(s).ok()?)
        }
    };
    value["apiVersion"] = serde_json::json!("apps/v1");
    value["kind"] = serde_json::json!(kind);
    Some((replicas.max(0) as u32, value))
}

/// Sends `review` to the operator's webhook at `path` (its real router, reading through `api`, with the process's
/// memory of refused parent kinds `lookups`) as the API server does: the answer's `response` once it passes
/// kube-apiserver's checks (an error otherwise: the failure policy applies), and the parent objects the webhook read
/// by name meanwhile, as (asked, answered).
pub(crate) async fn ask_webhook(
    path: &str,
    review: &serde_json::Value,
    api: &SimCluster,
    lookups: ParentLookups,
) -> (Result<serde_json::Value, String>, (u32, u32)) {
    let before = api.parent_reads();
    let app = router(Webhooks {
        api: api.clone(),
        pods: NoPodClient,
        settings: WebhookSettings::new(
            crate::environment::objects::NAMESPACE,
            "cluster.local.",
            None,
            Duration::from_secs(10),
        )
        .with_parent_lookups(lookups),
        clock: system_clock(),
    });
    let answer = async {
        let request = http::Request::post(path)
            .header("content-type", "application/json")
            .body(axum::body::Body::from(serde_json::to_vec(review).map_err(|e| e.to_string())?))
            .map_err(|e| e.to_string())?;
        let response = app.oneshot(request).await.map_err(|e| e.to_string())?;
        let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.map_err(|e| e.to_string())?;
        crate::environment::objects::admission_response(review, &body)
    }
    .await;
    let after = api.parent_reads();
    (answer, (after.0 - before.0, after.1 - before.1))
}

/// What the API server makes of an answer that failed its checks, under the failure policy Fail: a denial.
pub(crate) fn denied_for_no_usable_answer(st: &mut Store, webhook: &str, what: &str, error: &str) -> serde_json::Value {
    st.trace(webhook, format!("{what}: no usable answer ({error}): denied by the failure policy"));
    serde_json::json!({"allowed": false})
}

pub(crate) fn answer_warnings(response: &serde_json::Value) -> Vec<String> {
    response
        .get("warnings")
        .and_then(|w| w.as_array())
        .map(|w| w.iter().filter_map(|w| w.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// A user (or HPA) changing the no-downscale world's objects through the real no-downscale webhook: 8-20 changes at
/// random times of the fault phase, each an UPDATE of the whole object or (half of them) a `/scale` update, also
/// sent to the prepare-downscale webhook; a change both allow is applied. The checker judges every answer.
pub(crate) async fn no_downscale_user(store: SharedStore, mut r: SimRng, start: Instant, fault_phase: Duration) {
    // The no-downscale webhook runs in one operator process, as in a real deployment: it remembers a parent kind
    // refused by RBAC (none of the real deployments grants `get` on Deployments or ReplicaSets) only to say so once,
    // and still reads every parent (a webhook that stopped asking would answer "can't get" without a failed read,
    // which `NO_DOWNSCALE_LABEL` refuses).
    let webhook = match SimCluster::connect(crate::environment::apiserver::ADMISSION_INCARNATION_BASE + (1 << 20)).await
    {
        Ok(api) => api,
        Err(e) => {
            store.lock().unwrap().trace("no-downscale", format!("no webhook process: {e}"));
            return;
        }
    };
    let lookups = ParentLookups::default();
    let count = r.range(8..21);
    let mut times: Vec<Duration> =
        (0..count).map(|_| r.millis(5_000, fault_phase.as_millis() as u64 * 9 / 10)).collect();
    times.sort_unstable();
    for (n, at) in times.into_iter().enumerate() {
        tokio::time::sleep_until((start + at).max(Instant::now())).await;
        let (kind, name, labelled) = NO_DOWNSCALE_OBJECTS[r.range(0..3) as usize];
        let to = r.range(1..6) as u32;
        let via_scale = r.chance(0.5);
        let Some((from, old)) = no_downscale_object(&store.lock().unwrap(), kind, name) else { continue };
        if to == from {
            continue;
        }
        let resource = format!("{}s", kind.to_lowercase());
        // Every fourth change is of the object of the same name in another team's namespace, unlabelled there
        // (chosen by place, not by a draw: the world's draws stay as they were). A configuration without the
        // shipped `namespaceSelector` sends it; both webhooks must let it through unread, never decide it on the
        // object of that name in the operator's own namespace.
        let foreign = n % 4 == 3;
        let namespace = if foreign { FOREIGN_NAMESPACE } else { crate::environment::objects::NAMESPACE };
        let (labelled, mut old) = (labelled && !foreign, old);
        if foreign {
            old["metadata"]["namespace"] = serde_json::json!(FOREIGN_NAMESPACE);
            old["metadata"]["labels"] = serde_json::json!({"name": "other"});
        }
        // Every third change (by place) comes as an `admission.k8s.io/v1beta1` review, as an API server sends it to
        // a configuration that lists v1beta1 first: the answer must be of the same version, or it fails the call.
        let review_version = if n % 3 == 1 { "admission.k8s.io/v1beta1" } else { "admission.k8s.io/v1" };
        let review = if via_scale {
            let scale = |replicas: u32| {
                serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                    "metadata": {"name": name, "namespace": namespace}, "spec": {"replicas": replicas}})
            };
            serde_json::json!({"apiVersion": review_version, "kind": "AdmissionReview", "request": {
                "uid": format!("no-downscale-{n}"),
                "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                "resource": {"group": "apps", "version": "v1", "resource": resource},
                "subResource": "scale",
                "name": name, "namespace": namespace, "operation": "UPDATE",
                "oldObject": scale(from), "object": scale(to)}})
        } else {
            let mut new = old.clone();
            new["spec"]["replicas"] = serde_json::json!(to);
            serde_json::json!({"apiVersion": review_version, "kind": "AdmissionReview", "request": {
                "uid": format!("no-downscale-{n}"),
                "kind": {"group": "apps", "version": "v1", "kind": kind},
                "resource": {"group": "apps", "version": "v1", "resource": resource},
                "name": name, "namespace": namespace, "operation": "UPDATE",
                "oldObject": old, "object": new}})
        };
        let (answer, (asked, found)) = ask_webhook(NO_DOWNSCALE_PATH, &review, &webhook, lookups.clone()).await;
        // The prepare-downscale webhook reads no parent but a StatefulSet's, which every deployment grants: a process
        // of its own per request, as before.
        let incarnation = crate::environment::apiserver::ADMISSION_INCARNATION_BASE + (1 << 20) + 2 * n as u64 + 1;
        let (prepare_answer, prepare_reads) = match SimCluster::connect(incarnation).await {
            Ok(api) => ask_webhook(PREPARE_DOWNSCALE_PATH, &review, &api, ParentLookups::default()).await,
            Err(e) => (Err(e.to_string()), (0, 0)),
        };
        let how = if via_scale { "/scale" } else { "UPDATE" };
        let mut st = store.lock().unwrap();
        // The object as traced and judged: named with its namespace when it is another team's.
        let shown = if foreign { format!("{FOREIGN_NAMESPACE}/{name}") } else { name.to_string() };
        let beta = if review_version.ends_with("v1beta1") { " [v1beta1]" } else { "" };
        let what = format!("{kind} {shown} {from} -> {to} ({how}){beta}");
        let response = answer.unwrap_or_else(|e| denied_for_no_usable_answer(&mut st, "no-downscale", &what, &e));
        let allowed = crate::environment::objects::admitted(&response);
        let warnings = answer_warnings(&response);
        let verdict = if allowed { "admitted" } else { "denied" };
        st.trace("no-downscale", format!("{verdict} {what} {warnings:?}"));
        let record = |webhook, admitted, response: &serde_json::Value, warnings: &[String]| ObjectAdmission {
            webhook,
            object: format!("{kind} {shown}"),
            from,
            to,
            via_scale,
            v1beta1: !beta.is_empty(),
            admitted,
            message: response.pointer("/status/message").and_then(|m| m.as_str()).unwrap_or_default().to_string(),
            warnings: warnings.to_vec(),
        };
        let admission = record(Webhook::NoDownscale, allowed, &response, &warnings);
        st.oracle.activity.object_admissions.push(admission);
        let at = st.elapsed();
        // Only a `/scale` request has a parent to read: an object's UPDATE carries its labels, so a "can't get"
        // answer to one is wrong whatever the webhook read.
        let read_failed = via_scale && asked > found;
        st.oracle.checker.judge_no_downscale(
            at,
            &format!("{kind} {shown}"),
            labelled,
            from,
            to,
            allowed,
            &warnings,
            read_failed,
        );
        // Both webhooks serve these objects (a hand-written configuration broader than the shipped rules); the API
        // server applies a change only if both allow it.
        let response =
            prepare_answer.unwrap_or_else(|e| denied_for_no_usable_answer(&mut st, "prepare-downscale", &what, &e));
        let prepare_allowed = crate::environment::objects::admitted(&response);
        let warnings = answer_warnings(&response);
        let message = response.pointer("/status/message").and_then(|m| m.as_str()).unwrap_or_default();
        let verdict = if prepare_allowed { "admitted".to_string() } else { format!("denied ({message})") };
        st.trace("prepare-downscale", format!("{verdict} {what} {warnings:?}"));
        let admission = record(Webhook::PrepareDownscale, prepare_allowed, &response, &warnings);
        st.oracle.activity.object_admissions.push(admission);
        match foreign {
            true => st.oracle.checker.judge_foreign_namespace(at, &what, prepare_allowed, &warnings, prepare_reads),
            false => st.oracle.checker.judge_prepare_foreign(
                at,
                &what,
                kind,
                to < from,
                prepare_allowed,
                &warnings,
                prepare_reads,
            ),
        }
        if allowed && prepare_allowed && !foreign {
            match kind {
                "Deployment" => {
                    if let Some(spec) = st.deployments.get_mut(name).and_then(|d| d.spec.as_mut()) {
                        spec.replicas = Some(to as i32);
                    }
                }
                "ReplicaSet" => {
                    if let Some(spec) = st.replicasets.get_mut(name).and_then(|d| d.spec.as_mut()) {
                        spec.replicas = Some(to as i32);
                    }
                }
                _ => crate::environment::kube::set_replicas(
                    &mut st,
                    name,
                    to,
                    crate::oracle::checker::scaling::UNADMITTED,
                ),
            }
        }
    }
}

/// The no-downscale world's user, on a node of its own; not stopped with the fault phase.
pub fn start(stage: &Stage, actors: &mut Actors) {
    if !stage.sc.no_downscale {
        return;
    }
    let node = Handle::current().create_node().name("no-downscale-user").ip(IpAddr::from([10, 0, 0, 8])).build();
    let (store, fault_phase, start) = (stage.store.clone(), stage.sc.fault_phase, stage.start);
    let r = SimRng::new(stage.seed ^ NO_DOWNSCALE_STREAM);
    actors.users.push(tokio::spawn(async move {
        let _ = node.spawn(no_downscale_user(store, r, start, fault_phase)).await;
    }));
}
