//! Carrying out one request against the store, as the real API server answers it.

use crate::environment::apiserver::rbac::{REPROBE_AFTER, ZONE_TRACKER, access_of, forbidden_reply, optional_probe};
use crate::environment::apiserver::{ADMISSION_INCARNATION_BASE, Op, Reply, Request, ServerEnv, own_part, sender_of};
use crate::oracle::activity::Sender;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use rollout_operator::cluster::ApiError;

pub(crate) fn serve_op(env: &ServerEnv, req: Request) -> Reply {
    let mut store = env.store.lock().unwrap();
    let admission = req.knowledge.incarnation >= ADMISSION_INCARNATION_BASE;
    // The admission whose request this is, for the oracle's rules of its writes.
    let writer = admission.then_some(req.knowledge.incarnation);
    let who = match sender_of(req.knowledge.incarnation) {
        Sender::Webhook => "webhook".to_string(),
        Sender::Drain => "drain".to_string(),
        Sender::Operator => format!("controller#{}", req.knowledge.incarnation),
    };
    let controller = who.starts_with("controller");
    let lease_request = matches!(req.op, Op::GetLease { .. } | Op::CreateLease { .. } | Op::ReplaceLease { .. });
    if controller && !lease_request {
        store.oracle.reactions.controller_requests += 1;
    }
    if let (Some(grants), Some((access, cluster_scoped))) = (&env.grants, access_of(&req.op))
        && !grants.allows(&access, cluster_scoped)
    {
        store.trace(&who, format!("{access} -> forbidden (403)"));
        // The tracker's probes are the controller's alone: the webhook asks at every admission it must claim.
        let feature = optional_probe(&req.op).filter(|feature| *feature != ZONE_TRACKER || controller);
        let probe = feature.is_some_and(|feature| {
            let told = req.log.refusal_received(feature);
            let reprobe =
                req.log.last_refusal_received(feature).is_some_and(|last| req.handed_at >= last + REPROBE_AFTER);
            told.is_none_or(|told| req.handed_at <= told) || reprobe
        });
        // The no-downscale webhook reads the parent of every `/scale` request, as the reference does, and no real
        // deployment grants those reads of Deployments and ReplicaSets: a refusal is its fail-open path (the
        // reference's warning), said once in its log; the checker judges the answer (`NO_DOWNSCALE_LABEL`).
        let parent_lookup = matches!(req.op, Op::GetDeployment { .. } | Op::GetReplicaSet { .. }) && !controller;
        // The RolloutHealthChecks' watch retries with its own back-off whatever the answer; refused, the gates are
        // off (said once: `Gate::HealthChecks`), which the worlds without the grant judge.
        let health_checks = matches!(req.op, Op::ListHealthChecks);
        if !probe && !parent_lookup && !health_checks {
            let feature = optional_probe(&req.op).map(|f| format!(" ({f})")).unwrap_or_default();
            store.oracle.forbidden.push(format!("{who} (process {:#x}): {access}{feature}", req.knowledge.incarnation));
        }
        return forbidden_reply(&req.op, &access);
    }
    match &req.op {
        Op::DeletePod { name, preconditions } => {
            let pod = store.pods.get(name);
            let group = pod.and_then(|p| store.group_of_pod(p)).filter(|_| controller);
            let owner = pod.map(crate::environment::objects::owner_of).unwrap_or_default();
            if let Some(chase) = store.chase.as_mut().filter(|_| controller) {
                chase.controller_deletes(owner.clone());
            }
            let now = store.elapsed();
            let waited = group.as_ref().and_then(|g| store.oracle.reactions.take_wait(g, now));
            let result = store.api_delete_pod(name, preconditions, req.knowledge);
            if let Some(group) = group {
                let at = store.elapsed();
                let own = own_part(&req, waited);
                store.oracle.reactions.write_tried(&group, waited, result.is_ok(), at, own);
                if result.is_ok() {
                    store.oracle.reactions.pod_deleted_by_controller(name, &owner, at);
                }
            }
            let line = match &result {
                Ok(()) => format!("DELETE pod {name} -> ok"),
                Err(e) => format!("DELETE pod {name} -> {}", e.kind()),
            };
            store.trace(&who, line);
            if result.is_ok() {
                let crash = env.knobs.lock().unwrap().crash_after_delete;
                if env.rng.lock().unwrap().chance(crash) {
                    let _ = env.crash_tx.send(req.knowledge.incarnation);
                }
            }
            Reply::Deleted(result)
        }
        Op::UpdateStatus { statefulset } => {
            let result = store.api_update_status(statefulset, req.knowledge).map(Box::new);
            let name = statefulset.metadata.name.clone().unwrap_or_default();
            let rev = statefulset.status.as_ref().and_then(|s| s.current_revision.clone()).unwrap_or_default();
            let line = match &result {
                Ok(_) => format!("PUT {name}/status currentRevision={rev} -> ok"),
                Err(e) => format!("PUT {name}/status currentRevision={rev} -> {}", e.kind()),
            };
            store.trace(&who, line);
            if result.is_ok() {
                let snapshot = store.describe();
                store.trace("cluster", snapshot);
            }
            Reply::Patched(result)
        }
        Op::GetConfigMap { name } => Reply::ConfigMap(Ok(store.config_maps.get(name).cloned().map(Box::new))),
        Op::CreateConfigMap { config_map } => {
            let result = store.writing_as(|w| w.admission = writer, |st| st.api_create_config_map(config_map));
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let line = match &result {
                Ok(_) => format!("CREATE configmap {name} -> ok"),
                Err(e) => format!("CREATE configmap {name} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::ConfigMap(result.map(|cm| Some(Box::new(cm))))
        }
        Op::ReplaceConfigMap { config_map } => {
            let result = store.writing_as(|w| w.admission = writer, |st| st.api_replace_config_map(config_map));
            let name = config_map.metadata.name.clone().unwrap_or_default();
            let line = match &result {
                Ok(_) => format!("REPLACE configmap {name} -> ok"),
                Err(e) => format!("REPLACE configmap {name} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::ConfigMap(result.map(|cm| Some(Box::new(cm))))
        }
        Op::PatchReplicas { name, replicas, resource_version, annotations } => {
            let group = store.group_of_statefulset(name).filter(|_| who.starts_with("controller"));
            let now = store.elapsed();
            let waited = group.as_ref().and_then(|g| store.oracle.reactions.take_wait(g, now));
            let controller = (who != "webhook").then_some(req.knowledge);
            let result = store
                .writing_as(
                    |w| w.name = who.clone(),
                    |st| st.api_patch_replicas(name, *replicas, resource_version, annotations, controller),
                )
                .map(Box::new);
            if let Some(group) = group {
                let at = store.elapsed();
                let own = own_part(&req, waited);
                store.oracle.reactions.write_tried(&group, waited, result.is_ok(), at, own);
            }
            let line = match &result {
                Ok(_) => format!("PATCH {name} replicas={replicas} -> ok"),
                Err(e) => format!("PATCH {name} replicas={replicas} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Patched(result)
        }
        Op::PatchAnnotations { name, resource_version, annotations } => {
            let patch = annotations.iter().map(|(k, v)| (k.clone(), Some(v.clone()))).collect();
            let result = store
                .writing_as(
                    |w| (w.admission, w.annotation_patch) = (writer, Some(patch)),
                    |st| st.api_patch_annotations(name, resource_version, annotations),
                )
                .map(Box::new);
            let line = match &result {
                Ok(_) => format!("PATCH {name} annotations -> ok"),
                Err(e) => format!("PATCH {name} annotations -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Patched(result)
        }
        Op::MergeStatefulSetAnnotations { name, changes } => {
            let result = store
                .writing_as(
                    |w| (w.admission, w.annotation_patch) = (writer, Some(changes.clone())),
                    |st| st.api_merge_statefulset_annotations(name, changes),
                )
                .map(Box::new);
            let line = match &result {
                Ok(_) => format!("PATCH {name} annotations {} -> ok", describe_changes(changes)),
                Err(e) => format!("PATCH {name} annotations -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Patched(result)
        }
        Op::Discover { group, kind } => Reply::Discovered(Ok(store.api_discover(group, kind))),
        Op::GetScale { plural, name } => Reply::Value(store.api_get_scale(plural, name)),
        Op::PatchResourceStatus { plural, name, patch } => {
            let result = store.api_patch_resource_status(plural, name, patch);
            let line = match &result {
                Ok(()) => format!("PATCH {plural}/{name}/status -> ok"),
                Err(e) => format!("PATCH {plural}/{name}/status -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Done(result)
        }
        Op::GetStatefulSet { name } => Reply::StatefulSet(Ok(store.statefulsets.get(name).cloned().map(Box::new))),
        Op::GetDeployment { name } => Reply::Deployment(Ok(store.deployments.get(name).cloned().map(Box::new))),
        Op::GetReplicaSet { name } => Reply::ReplicaSet(Ok(store.replicasets.get(name).cloned().map(Box::new))),
        Op::ListStatefulSets { selector } => Reply::StatefulSets(Ok(list_statefulsets(&store, selector))),
        Op::ListPods { selector } => Reply::Pods(Ok(list_pods(&store, selector))),
        Op::GetPod { name } => Reply::Pod(Ok(store.pods.get(name).cloned().map(Box::new))),
        Op::PatchPodAnnotations { name, uid, changes } => {
            // A refused patch (the pod gone, another uid) commits nothing, and so is not judged.
            let result = store
                .writing_as(
                    |w| (w.admission, w.annotation_patch) = (writer, Some(changes.clone())),
                    |st| st.api_patch_pod_annotations(name, uid, changes),
                )
                .map(|p| Some(Box::new(p)));
            let line = match &result {
                Ok(_) => format!("PATCH pod {name} annotations -> ok"),
                Err(e) => format!("PATCH pod {name} annotations -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Pod(result)
        }
        Op::GetSecret { name } => Reply::Secret(Ok(store.secrets.get(name).cloned().map(Box::new))),
        Op::CreateSecret { secret } | Op::ReplaceSecret { secret } => {
            let (verb, result) = match &req.op {
                Op::CreateSecret { .. } => ("POST", store.api_create_secret(secret)),
                _ => ("PUT", store.api_replace_secret(secret)),
            };
            let name = secret.metadata.name.as_deref().unwrap_or_default();
            let outcome = result.as_ref().map_or_else(|e| e.kind().to_string(), |_| "ok".to_string());
            store.trace(&who, format!("{verb} secret {name} -> {outcome}"));
            store.oracle.certificates.secret_writes += u64::from(result.is_ok());
            Reply::Secret(result.map(|s| Some(Box::new(s))))
        }
        Op::PatchWebhookConfiguration { kind, name, patch } => {
            let result = store.api_patch_webhook_configuration(*kind, name, patch);
            let outcome = result.as_ref().map_or_else(|e| e.kind().to_string(), |_| "ok".to_string());
            store.trace(&who, format!("PATCH {} {name} -> {outcome}", kind.as_str()));
            if result.is_ok() {
                let at = store.elapsed();
                store.oracle.certificates.ca_injected(at);
            }
            Reply::Webhook(result.map(Box::new))
        }
        Op::CreateEvent { event } => {
            let at = store.elapsed();
            let result = store.events.create(at, event);
            let what = format!(
                "EVENT {} {} on {}: {}",
                event.type_.as_deref().unwrap_or_default(),
                event.reason.as_deref().unwrap_or_default(),
                event.regarding.as_ref().and_then(|r| r.name.as_deref()).unwrap_or_default(),
                event.note.as_deref().unwrap_or_default()
            );
            let line = match &result {
                Ok(()) => what,
                Err(e) => format!("{what} -> {}", e.kind()),
            };
            store.trace(&who, line);
            Reply::Done(result)
        }
        Op::PatchEvent { name, patch } => Reply::Done(store.events.patch(name, patch)),
        Op::ListBudgets => Reply::Values(Ok(store.budgets.clone())),
        Op::ListHealthChecks => Reply::Values(Ok(store.health_checks.clone())),
        Op::GetLease { name } => Reply::Lease(Ok(store.leases.get(name).cloned().map(Box::new))),
        Op::CreateLease { lease } => Reply::Lease(store.api_create_lease(lease).map(|l| Some(Box::new(l)))),
        Op::ReplaceLease { lease } => Reply::Lease(store.api_replace_lease(lease).map(|l| Some(Box::new(l)))),
        // Served by `serve` before it gets here.
        Op::Evict { .. } => Reply::Done(Err(ApiError::Unavailable("eviction not served".into()))),
    }
}

pub(crate) fn list_statefulsets(store: &crate::environment::store::Store, selector: &str) -> Vec<StatefulSet> {
    let matching =
        |s: &&StatefulSet| rollout_operator::cluster::memory::selector_matches(selector, s.metadata.labels.as_ref());
    store.statefulsets.values().filter(matching).cloned().collect()
}

pub(crate) fn list_pods(store: &crate::environment::store::Store, selector: &str) -> Vec<Pod> {
    let matching = |p: &&Pod| rollout_operator::cluster::memory::selector_matches(selector, p.metadata.labels.as_ref());
    store.pods.values().filter(matching).cloned().collect()
}

/// `+key` for each annotation set, `-key` for each removed, for the trace.
pub(crate) fn describe_changes(changes: &std::collections::BTreeMap<String, Option<String>>) -> String {
    let each = changes.iter().map(|(k, v)| format!("{}{k}", if v.is_some() { "+" } else { "-" }));
    each.collect::<Vec<_>>().join(" ")
}
