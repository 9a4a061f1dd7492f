#![cfg(not(madsim))]
//! End-to-end scenarios against the operator deployed in the cluster `KUBECONFIG` points at (deploy/overlays/e2e,
//! namespace `rollout-operator`), with mock pods from the `mock-pod` image. `e2e/run.sh` sets all of this up and
//! runs `cargo test -p rollout-e2e --test e2e -- --ignored --test-threads=1`.
//!
//! Every scenario is `#[ignore]`d with the reason, so a plain `cargo test` never counts them as passed; run with
//! `--ignored` and no cluster, each fails with how to get one. Scenarios run one at a time (they share the
//! operator, and some restart or reconfigure it) and use their own StatefulSet names and rollout groups.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use rollout_e2e::harness::{
    CERT_SECRET, Cluster, MockPod, MockZone, OPERATOR, WAIT, denial, dry_run, scenario, wait_for,
};
use serde_json::json;
use std::time::{Duration, Instant};

const NEEDS_CLUSTER: &str = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh";

/// Creates the zones of a group at VERSION=1, ready, and waits until every pod is ready.
async fn group_at_v1(c: &Cluster, zones: &[&str], group: &str, replicas: i32) {
    for z in zones {
        c.create_zone(&MockZone::new(z, replicas, MockPod::version("1")).group(group)).await;
    }
    wait_for(&format!("group {group} ready at version 1"), WAIT, || async {
        Ok(c.observe(zones).await?.all_ready_at("1").then_some(()))
    })
    .await;
}

/// Drives a rollout to `version` like the reference's happy case: whenever a pod of the new version is not
/// ready, makes it ready. Checks one zone at a time on every observation, and that zones go in name order.
/// `on_progress` runs after every observation (e.g. to restart the operator at some point).
async fn drive_rollout<F, Fut>(c: &Cluster, zones: &[&str], version: &str, mut on_progress: F)
where
    F: FnMut(rollout_e2e::harness::GroupView) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let start = Instant::now();
    loop {
        let view = c.observe(zones).await.expect("observe the group");
        view.assert_one_zone_at_a_time();
        // Name order: a zone has new-version pods only once every earlier zone is fully at the new version.
        for (i, z) in view.zones.iter().enumerate() {
            if z.pods.iter().any(|p| p.version == version) {
                for earlier in &view.zones[..i] {
                    assert!(
                        earlier.all_ready_at(version),
                        "{} started before {} finished:\n{view:#?}",
                        z.name,
                        earlier.name
                    );
                }
            }
        }
        if view.all_ready_at(version) {
            return;
        }
        for z in &view.zones {
            for p in &z.pods {
                if p.version == version && !p.ready && !p.terminating && p.restarts == 0 {
                    c.make_ready(&p.name).await;
                }
            }
        }
        on_progress(view).await;
        assert!(start.elapsed() < WAIT * 2, "rollout to version {version} did not finish");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every StatefulSet of the group eventually reports currentRevision == updateRevision.
async fn revisions_converge(c: &Cluster, zones: &[&str]) {
    for z in zones {
        wait_for(&format!("{z}: currentRevision == updateRevision"), WAIT, || async {
            let sts = c.statefulsets().get(z).await?;
            let st = sts.status.unwrap_or_default();
            Ok((st.current_revision.is_some() && st.current_revision == st.update_revision).then_some(()))
        })
        .await;
    }
}

/// Watches the group for `period` and asserts `check` on every observation (the operator must leave it alone).
async fn stays_for(
    c: &Cluster,
    zones: &[&str],
    period: Duration,
    what: &str,
    check: impl Fn(&rollout_e2e::harness::GroupView) -> bool,
) {
    let start = Instant::now();
    while start.elapsed() < period {
        let view = c.observe(zones).await.expect("observe");
        view.assert_one_zone_at_a_time();
        assert!(check(&view), "{what}:\n{view:#?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn operator_is_running_ready_and_serves_metrics() {
    scenario(async {
        let c = Cluster::connect().await;
        let pod = c.operator_pod().await;
        let name = pod.metadata.name.unwrap_or_default();
        let metrics = c.pod_http(&name, 8001, http::Method::GET, "/metrics").await.expect("GET /metrics");
        assert!(metrics.contains("rollout_operator_"), "no operator metric in /metrics:\n{metrics}");
        c.pod_http(&name, 8001, http::Method::GET, "/ready").await.expect("GET /ready answers 200");
    });
}

/// Reference scenario 1 (TestRolloutHappyCase): three zones of one pod, updated together, replaced one zone at a
/// time as each new pod is made ready.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn rollout_happy_case_one_zone_at_a_time() {
    scenario(async {
        let c = Cluster::connect().await;
        let zones = ["happy-zone-a", "happy-zone-b", "happy-zone-c"];
        group_at_v1(&c, &zones, "happy", 1).await;
        for z in zones {
            c.set_template(z, &MockPod::version("2").not_ready()).await;
        }
        // Zone by zone: the zone's pod is replaced and not ready; the later zones stay ready on version 1 while
        // it is not ready; making it ready moves the rollout to the next zone.
        for (i, z) in zones.iter().enumerate() {
            let pod = format!("{z}-0");
            wait_for(&format!("{pod} at version 2, not ready"), WAIT, || async {
                let v = c.observe(&zones).await?;
                v.assert_one_zone_at_a_time();
                let p = v.zone(z).pod(0).cloned();
                Ok(p.filter(|p| p.version == "2" && !p.ready && !p.terminating).map(|_| v))
            })
            .await;
            stays_for(&c, &zones, Duration::from_secs(5), "later zones must stay ready on version 1", |v| {
                zones[..i].iter().all(|e| v.zone(e).all_ready_at("2"))
                    && zones[i + 1..].iter().all(|l| v.zone(l).all_ready_at("1"))
            })
            .await;
            c.make_ready(&pod).await;
        }
        wait_for("all zones ready at version 2", WAIT, || async {
            Ok(c.observe(&zones).await?.all_ready_at("2").then_some(()))
        })
        .await;
        revisions_converge(&c, &zones).await;
        for z in zones {
            c.delete_zone(z).await;
        }
    });
}

/// The operator pod is deleted while the second zone is being replaced; the new operator finishes the rollout
/// without ever disrupting two zones.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn operator_restarted_mid_rollout() {
    scenario(async {
        let c = Cluster::connect().await;
        let zones = ["restart-zone-a", "restart-zone-b", "restart-zone-c"];
        group_at_v1(&c, &zones, "restart", 2).await;
        let before = c.operator_pod().await.metadata.uid;
        for z in zones {
            c.set_template(z, &MockPod::version("2").not_ready()).await;
        }
        let mut restarted = false;
        drive_rollout(&c, &zones, "2", |view| {
            let restart_now = !restarted
                && view.zone("restart-zone-a").all_ready_at("2")
                && view.zone("restart-zone-b").pods.iter().any(|p| p.version == "2");
            restarted |= restart_now;
            let c = c.clone();
            async move {
                if restart_now {
                    c.restart_operator().await;
                }
            }
        })
        .await;
        assert!(restarted, "the operator was never restarted mid-rollout");
        assert_ne!(c.operator_pod().await.metadata.uid, before, "a new operator pod finished the rollout");
        revisions_converge(&c, &zones).await;
        for z in zones {
            c.delete_zone(z).await;
        }
    });
}

/// A bad template makes the first zone crash-loop: the rollout must stop there (the other zones stay ready on the
/// old version). After the template is fixed, the crash-looping pods are replaced first and the rollout completes
/// (the reference stalls forever here: its unavailability budget is spent by the crash-looping pod).
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn crash_looping_zone_recovers_after_template_fix() {
    scenario(async {
        let c = Cluster::connect().await;
        let zones = ["crash-zone-a", "crash-zone-b", "crash-zone-c"];
        group_at_v1(&c, &zones, "crash", 2).await;
        for z in zones {
            c.set_template(z, &MockPod::version("2").crashing()).await;
        }
        wait_for("a crash-looping version-2 pod in crash-zone-a", WAIT, || async {
            let v = c.observe(&zones).await?;
            v.assert_one_zone_at_a_time();
            Ok(v.zone("crash-zone-a").pods.iter().any(|p| p.version == "2" && p.restarts > 0).then_some(()))
        })
        .await;
        stays_for(
            &c,
            &zones,
            Duration::from_secs(15),
            "the rollout must not spread past the crash-looping zone",
            |v| v.zone("crash-zone-b").all_ready_at("1") && v.zone("crash-zone-c").all_ready_at("1"),
        )
        .await;
        // The fix: version 3 starts ready.
        for z in zones {
            c.set_template(z, &MockPod::version("3")).await;
        }
        drive_rollout(&c, &zones, "3", |_| async {}).await;
        revisions_converge(&c, &zones).await;
        for z in zones {
            c.delete_zone(z).await;
        }
    });
}

/// Reference scenario 4 (TestWebHookInformer): the operator injects its CA into labelled webhook configurations
/// created before it starts and after, re-injects a removed caBundle, and leaves configurations of another
/// namespace alone.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn ca_injection_into_webhook_configurations_before_and_after_start() {
    scenario(async {
        let c = Cluster::connect().await;
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(c.client.clone());
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(c.client.clone());
        // A configuration that can never match a request: it only carries a CA.
        let config = |name: &str, ns_label: &str| {
            json!({
                "metadata": {"name": name, "labels": {
                    "grafana.com/inject-rollout-operator-ca": "true", "grafana.com/namespace": ns_label}},
                "webhooks": [{
                    "name": format!("{name}.e2e.example.com"),
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {"service": {"name": OPERATOR, "namespace": c.ns, "path": "/admission/no-downscale", "port": 443}},
                    "rules": [{"apiGroups": ["e2e.example.com"], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nothings"]}],
                    "failurePolicy": "Ignore",
                    "sideEffects": "None",
                }],
            })
        };
        let v_bundle = |name: String| {
            let api = validating.clone();
            async move {
                let cfg = api.get(&name).await?;
                Ok::<_, kube::Error>(
                    cfg.webhooks
                        .unwrap_or_default()
                        .first()
                        .and_then(|w| w.client_config.ca_bundle.clone())
                        .map(|b| String::from_utf8_lossy(&b.0).into_owned()),
                )
            }
        };
        for name in ["e2e-ca-before", "e2e-ca-after", "e2e-ca-other-namespace"] {
            let _ = validating.delete(name, &DeleteParams::default()).await;
        }
        let _ = mutating.delete("e2e-ca-after-mutating", &DeleteParams::default()).await;

        // The shipped configurations were applied together with the operator.
        let ca = c.operator_ca().await;
        for name in ["no-downscale", "prepare-downscale"] {
            let full = format!("{name}-{}", c.ns);
            wait_for(&format!("CA injected into {full}"), WAIT, || async {
                let bundles: Vec<Option<String>> = if name == "no-downscale" {
                    validating
                        .get(&full)
                        .await?
                        .webhooks
                        .unwrap_or_default()
                        .iter()
                        .map(|w| w.client_config.ca_bundle.as_ref().map(|b| String::from_utf8_lossy(&b.0).into_owned()))
                        .collect()
                } else {
                    mutating
                        .get(&full)
                        .await?
                        .webhooks
                        .unwrap_or_default()
                        .iter()
                        .map(|w| w.client_config.ca_bundle.as_ref().map(|b| String::from_utf8_lossy(&b.0).into_owned()))
                        .collect()
                };
                Ok((!bundles.is_empty() && bundles.iter().all(|b| b.as_deref() == Some(ca.as_str()))).then_some(()))
            })
            .await;
        }

        // Created while the operator is down, injected when it starts.
        c.scale_operator(0).await;
        let before: ValidatingWebhookConfiguration =
            serde_json::from_value(config("e2e-ca-before", &c.ns)).expect("config");
        validating.create(&PostParams::default(), &before).await.expect("create e2e-ca-before");
        c.scale_operator(1).await;
        let ca = c.operator_ca().await;
        wait_for("CA injected into e2e-ca-before", WAIT, || async {
            Ok(v_bundle("e2e-ca-before".into()).await?.filter(|b| *b == ca).map(|_| ()))
        })
        .await;

        // Created after start, for another namespace first (must stay untouched), then for ours.
        let other: ValidatingWebhookConfiguration =
            serde_json::from_value(config("e2e-ca-other-namespace", "not-this-one")).expect("config");
        validating.create(&PostParams::default(), &other).await.expect("create e2e-ca-other-namespace");
        let after: ValidatingWebhookConfiguration =
            serde_json::from_value(config("e2e-ca-after", &c.ns)).expect("config");
        validating.create(&PostParams::default(), &after).await.expect("create e2e-ca-after");
        let after_m: MutatingWebhookConfiguration =
            serde_json::from_value(config("e2e-ca-after-mutating", &c.ns)).expect("config");
        mutating.create(&PostParams::default(), &after_m).await.expect("create e2e-ca-after-mutating");
        let ca = c.operator_ca().await;
        wait_for("CA injected into e2e-ca-after", WAIT, || async {
            Ok(v_bundle("e2e-ca-after".into()).await?.filter(|b| *b == ca).map(|_| ()))
        })
        .await;
        wait_for("CA injected into e2e-ca-after-mutating", WAIT, || async {
            let cfg = mutating.get("e2e-ca-after-mutating").await?;
            Ok(cfg
                .webhooks
                .unwrap_or_default()
                .first()
                .and_then(|w| w.client_config.ca_bundle.clone())
                .filter(|b| b.0 == ca.as_bytes())
                .map(|_| ()))
        })
        .await;
        assert_eq!(
            v_bundle("e2e-ca-other-namespace".into()).await.expect("get"),
            None,
            "another namespace's configuration was injected"
        );

        // A removed caBundle is put back.
        let remove = json!([{"op": "remove", "path": "/webhooks/0/clientConfig/caBundle"}]);
        validating
            .patch(
                "e2e-ca-after",
                &PatchParams::default(),
                &Patch::Json::<()>(serde_json::from_value(remove).expect("json patch")),
            )
            .await
            .expect("remove the caBundle");
        wait_for("CA re-injected into e2e-ca-after", WAIT, || async {
            Ok(v_bundle("e2e-ca-after".into()).await?.filter(|b| *b == ca).map(|_| ()))
        })
        .await;

        for name in ["e2e-ca-before", "e2e-ca-after", "e2e-ca-other-namespace"] {
            let _ = validating.delete(name, &DeleteParams::default()).await;
        }
        let _ = mutating.delete("e2e-ca-after-mutating", &DeleteParams::default()).await;
    });
}

/// Reference scenario 9: StatefulSets without the label are downscaled freely, by update and through /scale.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn no_downscale_allows_an_unlabelled_statefulset() {
    scenario(async {
        let c = Cluster::connect().await;
        let name = "nd-unrelated";
        c.create_zone(&MockZone::new(name, 2, MockPod::version("1"))).await;
        set_replicas_by_update(&c, name, 1).await.expect("downscale by update allowed");
        wait_pods(&c, name, 1).await;
        set_replicas_by_update(&c, name, 2).await.expect("upscale allowed");
        c.statefulsets()
            .patch_scale(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}})))
            .await
            .expect("downscale through /scale allowed");
        wait_pods(&c, name, 1).await;
        c.delete_zone(name).await;
    });
}

/// Creates a two-replica zone labelled `grafana.com/no-downscale: "true"`; returns the webhook's denial message for
/// downscaling it to one replica (the reference's wording).
async fn labelled_no_downscale_zone(c: &Cluster, name: &str) -> String {
    c.create_zone(&MockZone::new(name, 2, MockPod::version("1")).label("grafana.com/no-downscale", "true")).await;
    format!(
        "downscale of statefulsets/{name} in {} from 2 to 1 replicas is not allowed because it has the label 'grafana.com/no-downscale=true'",
        c.ns
    )
}

/// Reference scenario 10: a labelled StatefulSet cannot be downscaled by an update, not even in a dry run; it can
/// be upscaled.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn no_downscale_denies_an_update_of_a_labelled_statefulset() {
    scenario(async {
        let c = Cluster::connect().await;
        let name = "nd-update";
        let expected = labelled_no_downscale_zone(&c, name).await;
        let msg = denial("downscale by update", set_replicas_by_update(&c, name, 1).await);
        assert!(msg.contains(&expected), "{msg}");
        let mut sts = c.statefulsets().get(name).await.expect("get");
        sts.spec.as_mut().expect("spec").replicas = Some(1);
        let dry = c.statefulsets().replace(name, &PostParams { dry_run: true, ..Default::default() }, &sts).await;
        let msg = denial("dry-run downscale by update", dry);
        assert!(msg.contains(&expected), "{msg}");
        assert_eq!(c.replicas(name).await, 2);
        set_replicas_by_update(&c, name, 3).await.expect("upscale allowed");
        wait_pods(&c, name, 3).await;
        c.delete_zone(name).await;
    });
}

/// Reference scenario 11: the same through the scale subresource (the webhook looks up the parent's label).
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn no_downscale_denies_the_scale_subresource_of_a_labelled_statefulset() {
    scenario(async {
        let c = Cluster::connect().await;
        let name = "nd-scale";
        let expected = labelled_no_downscale_zone(&c, name).await;
        let down = json!({"spec": {"replicas": 1}});
        let msg = denial(
            "downscale through /scale",
            c.statefulsets().patch_scale(name, &PatchParams::default(), &Patch::Merge(&down)).await,
        );
        assert!(msg.contains(&expected), "{msg}");
        let msg = denial(
            "dry-run downscale through /scale",
            c.statefulsets().patch_scale(name, &dry_run(), &Patch::Merge(&down)).await,
        );
        assert!(msg.contains(&expected), "{msg}");
        c.statefulsets()
            .patch_scale(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 3}})))
            .await
            .expect("upscale through /scale allowed");
        wait_pods(&c, name, 3).await;
        c.delete_zone(name).await;
    });
}

/// prepare-downscale with the min time between zones: a dry run has no side effect; the first zone's downscale is
/// allowed and recorded; the second zone's is denied until the min time has passed since the first, then allowed.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn prepare_downscale_enforces_the_min_time_between_zones() {
    scenario(async {
        let c = Cluster::connect().await;
        let min_time = Duration::from_secs(30);
        let zones = ["pd-zone-a", "pd-zone-b"];
        for z in zones {
            let zone = MockZone::new(z, 2, MockPod::version("1"))
                .group("pd")
                .prepare_downscale()
                .label("grafana.com/min-time-between-zones-downscale", "30s");
            c.create_zone(&zone).await;
        }
        wait_for("pd zones ready", WAIT, || async { Ok(c.observe(&zones).await?.all_ready_at("1").then_some(())) })
            .await;
        let down = json!({"spec": {"replicas": 1}});

        // Dry run: allowed, and no pod asked to prepare, nothing recorded.
        c.statefulsets().patch_scale("pd-zone-a", &dry_run(), &Patch::Merge(&down)).await.expect("dry run allowed");
        assert_eq!(prepare_state(&c, "pd-zone-a-1").await.posts, 0, "a dry run called a pod");
        assert!(!c.downscale_record().await.contains_key("pd-zone-a"), "a dry run wrote the downscale record");

        let before_a = jiff::Timestamp::now();
        c.scale_retrying("pd-zone-a", 1).await;
        let record = c.downscale_record().await;
        let a_at = *record.get("pd-zone-a").unwrap_or_else(|| panic!("pd-zone-a's downscale not recorded: {record:?}"));
        assert!(a_at >= before_a.checked_sub(jiff::SignedDuration::from_secs(2)).expect("time"), "stale record {a_at}");

        // Too early for the other zone: denied before any pod is called.
        let early = c.statefulsets().patch_scale("pd-zone-b", &PatchParams::default(), &Patch::Merge(&down)).await;
        if jiff::Timestamp::now().duration_since(a_at) < jiff::SignedDuration::try_from(min_time).expect("duration") {
            let msg = denial("downscale of pd-zone-b right after pd-zone-a", early);
            assert!(
                msg.contains("statefulset pd-zone-a was downscaled at") && msg.contains("between zone downscales"),
                "{msg}"
            );
            assert_eq!(prepare_state(&c, "pd-zone-b-1").await.posts, 0, "a denied downscale called a pod");
            assert_eq!(c.replicas("pd-zone-b").await, 2);
            // After the min time, allowed.
            let allowed_from = a_at
                .checked_add(jiff::SignedDuration::try_from(min_time + Duration::from_secs(1)).expect("d"))
                .expect("t");
            wait_for("the min time to pass and pd-zone-b's downscale to be allowed", WAIT, || async {
                let r = c.statefulsets().patch_scale("pd-zone-b", &PatchParams::default(), &Patch::Merge(&down)).await;
                match r {
                    Ok(_) => {
                        assert!(
                            jiff::Timestamp::now()
                                >= allowed_from.checked_sub(jiff::SignedDuration::from_secs(1)).expect("t"),
                            "allowed before the min time"
                        );
                        Ok(Some(()))
                    }
                    Err(kube::Error::Api(s)) if s.message.contains("between zone downscales") => Ok(None),
                    Err(e) => Err(e),
                }
            })
            .await;
        } else {
            panic!("the cluster took longer than the min time ({min_time:?}) between two requests; cannot judge");
        }
        let record = c.downscale_record().await;
        let b_at = record.get("pd-zone-b").copied().expect("pd-zone-b's downscale recorded");
        assert!(b_at.duration_since(a_at) > jiff::SignedDuration::try_from(min_time).expect("d"), "{a_at} then {b_at}");
        for z in zones {
            c.delete_zone(z).await;
        }
    });
}

/// prepare-downscale undoes what it prepared when a pod fails to prepare, and denies.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn prepare_downscale_undoes_and_denies_when_a_pod_fails_to_prepare() {
    scenario(async {
        let c = Cluster::connect().await;
        let name = "pd-fail";
        c.create_zone(&MockZone::new(name, 3, MockPod::version("1")).group("pd-fail").prepare_downscale()).await;
        wait_pods(&c, name, 3).await;
        // Only the highest pod fails: the webhook must cancel the other one it prepared.
        c.pod_http("pd-fail-2", 8080, http::Method::POST, "/control/prepare-status?code=500")
            .await
            .expect("make pd-fail-2 fail");
        let r = c
            .statefulsets()
            .patch_scale(name, &PatchParams::default(), &Patch::Merge(json!({"spec": {"replicas": 1}})))
            .await;
        let msg = denial("downscale with a failing pod", r);
        assert!(msg.contains("one or more pods failed to prepare for shutdown"), "{msg}");
        assert_eq!(c.replicas(name).await, 3);
        for pod in ["pd-fail-1", "pd-fail-2"] {
            let st = prepare_state(&c, pod).await;
            assert!(!st.prepared, "{pod} left prepared: {st:?}");
        }
        let called_1 = prepare_state(&c, "pd-fail-1").await;
        assert!(called_1.posts == 0 || called_1.deletes >= 1, "pd-fail-1 prepared and never cancelled: {called_1:?}");
        assert!(prepare_state(&c, "pd-fail-2").await.posts >= 1, "the failing pod was never asked");
        assert_eq!(prepare_state(&c, "pd-fail-0").await.posts, 0, "a pod that stays was asked to prepare");
        c.delete_zone(name).await;
    });
}

/// Leader/follower: zone b follows a, c follows b. Upscales follow at once; each downscale of a follower waits for
/// the min time since the previous zone's downscale.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn leader_follower_downscale_waits_the_min_time_between_zones() {
    scenario(async {
        let c = Cluster::connect().await;
        let min_time = jiff::SignedDuration::from_secs(20);
        let zones = ["lf-zone-a", "lf-zone-b", "lf-zone-c"];
        for (i, z) in zones.iter().enumerate() {
            let mut zone = MockZone::new(z, 1, MockPod::version("1"))
                .group("lf")
                .prepare_downscale()
                .label("grafana.com/min-time-between-zones-downscale", "20s");
            if i > 0 {
                zone = zone.annotation("grafana.com/rollout-downscale-leader", zones[i - 1]);
            }
            c.create_zone(&zone).await;
        }
        // Upscale of the leader: the followers follow, one after the other.
        c.scale_retrying("lf-zone-a", 2).await;
        for z in &zones[1..] {
            wait_for(&format!("{z} follows to 2 replicas"), WAIT, || async {
                Ok((c.replicas(z).await == 2).then_some(()))
            })
            .await;
        }
        wait_for("lf zones ready at 2 replicas", WAIT, || async {
            Ok(c.observe(&zones).await?.all_ready_at("1").then_some(()))
        })
        .await;

        // Downscale of the leader; then watch the followers and note when each change is first seen.
        c.scale_retrying("lf-zone-a", 1).await;
        let a_at = jiff::Timestamp::now();
        let mut seen: Vec<jiff::Timestamp> = vec![a_at];
        for z in &zones[1..] {
            let at = wait_for(&format!("{z} follows down to 1 replica"), WAIT, || async {
                Ok((c.replicas(z).await == 1).then(jiff::Timestamp::now))
            })
            .await;
            seen.push(at);
        }
        // An observation is later than the change, so seeing it before the min time proves an early downscale.
        for w in seen.windows(2) {
            assert!(
                w[1].duration_since(w[0]) > min_time - jiff::SignedDuration::from_secs(2),
                "downscales too close: {seen:?}"
            );
        }
        // The record (written as each downscale is admitted) shows the min time between zones too.
        let record = c.downscale_record().await;
        let times: Vec<jiff::Timestamp> = zones.iter().filter_map(|z| record.get(*z).copied()).collect();
        assert_eq!(times.len(), 3, "every zone's downscale recorded: {record:?}");
        for w in times.windows(2) {
            assert!(w[1].duration_since(w[0]) > min_time, "recorded downscales too close: {times:?}");
        }
        for z in zones {
            c.delete_zone(z).await;
        }
    });
}

/// Certificate renewal with a short lifetime, without a restart.
///
/// The self-signed certificate's lifetime is the reference's `-server-tls.self-signed-cert.expiration` (Prometheus
/// duration), and the operator renews it once two thirds of its lifetime have passed, stores it in the Secret,
/// re-injects the CA and serves the new certificate without a restart. With 90s, renewal comes about 60 s after issue.
#[test]
#[ignore = "needs a Kubernetes cluster (KUBECONFIG); run e2e/run.sh"]
fn certificate_is_renewed_before_expiry_without_a_restart() {
    scenario(async {
        let c = Cluster::connect().await;
        let flag = "-server-tls.self-signed-cert.expiration=90s";
        let deployment = c.deployments().get(OPERATOR).await.expect("get the operator Deployment");
        let args = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|p| p.containers[0].args.clone())
            .unwrap_or_default();
        let mut short = args.clone();
        short.push(flag.to_string());
        // A fresh, short-lived certificate: drop the stored one and restart with the short lifetime.
        let _ = c.secrets().delete(CERT_SECRET, &DeleteParams::default()).await;
        set_operator_args(&c, &short).await;
        let pod = c.operator_pod().await;
        let restarts = |p: &k8s_openapi::api::core::v1::Pod| rollout_e2e::harness::PodState::of(p).restarts;
        let (uid, restarts_before) = (pod.metadata.uid.clone(), restarts(&pod));
        let first = secret_cert(&c).await;
        wait_for("the first short-lived certificate to be renewed", WAIT, || async {
            Ok(secret_cert_opt(&c).await.filter(|cert| *cert != first).map(|_| ()))
        })
        .await;
        let ca = c.operator_ca().await;
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(c.client.clone());
        wait_for("the renewed CA in the no-downscale configuration", WAIT, || async {
            let cfg = validating.get(&format!("no-downscale-{}", c.ns)).await?;
            Ok(cfg
                .webhooks
                .unwrap_or_default()
                .iter()
                .all(|w| w.client_config.ca_bundle.as_ref().is_some_and(|b| b.0 == ca.as_bytes()))
                .then_some(()))
        })
        .await;
        let now = c.operator_pod().await;
        assert_eq!(now.metadata.uid, uid, "the operator pod was replaced to renew its certificate");
        assert_eq!(restarts(&now), restarts_before, "the operator restarted to renew its certificate");
        // The API server still reaches the webhook over TLS with the renewed certificate.
        let name = "cert-renewal";
        c.create_zone(&MockZone::new(name, 2, MockPod::version("1")).label("grafana.com/no-downscale", "true")).await;
        wait_for("the webhook to deny a downscale over the renewed certificate", WAIT, || async {
            match c.statefulsets().patch_scale(name, &dry_run(), &Patch::Merge(json!({"spec": {"replicas": 1}}))).await
            {
                Err(kube::Error::Api(s)) if s.message.contains("grafana.com/no-downscale=true") => Ok(Some(())),
                _ => Ok(None),
            }
        })
        .await;
        c.delete_zone(name).await;
        set_operator_args(&c, &args).await;
    });
}

async fn set_operator_args(c: &Cluster, args: &[String]) {
    let patch = json!([{"op": "replace", "path": "/spec/template/spec/containers/0/args", "value": args}]);
    c.deployments()
        .patch(
            OPERATOR,
            &PatchParams::default(),
            &Patch::Json::<()>(serde_json::from_value(patch).expect("json patch")),
        )
        .await
        .expect("patch the operator's args");
    wait_for("the operator Deployment rolled out", WAIT, || async {
        let d = c.deployments().get(OPERATOR).await?;
        let gen_ok = d.status.as_ref().and_then(|s| s.observed_generation) >= d.metadata.generation;
        let st = d.status.unwrap_or_default();
        Ok((gen_ok && st.updated_replicas == Some(1) && st.ready_replicas == Some(1) && st.replicas == Some(1))
            .then_some(()))
    })
    .await;
    c.operator_pod().await;
}

async fn secret_cert_opt(c: &Cluster) -> Option<Vec<u8>> {
    c.secrets().get_opt(CERT_SECRET).await.ok().flatten()?.data?.get("cert").map(|b| b.0.clone())
}

async fn secret_cert(c: &Cluster) -> Vec<u8> {
    wait_for("the certificate Secret", WAIT, || async { Ok(secret_cert_opt(c).await) }).await
}

async fn set_replicas_by_update(c: &Cluster, name: &str, replicas: i32) -> Result<(), kube::Error> {
    let mut sts = c.statefulsets().get(name).await?;
    sts.spec.as_mut().expect("spec").replicas = Some(replicas);
    c.statefulsets().replace(name, &PostParams::default(), &sts).await.map(|_| ())
}

async fn wait_pods(c: &Cluster, name: &str, n: usize) {
    wait_for(&format!("{name} to have {n} ready pods"), WAIT, || async {
        let pods = c.pod_states(name).await?;
        Ok((pods.len() == n && pods.iter().all(|p| p.ready && !p.terminating)).then_some(()))
    })
    .await;
}

async fn prepare_state(c: &Cluster, pod: &str) -> rollout_e2e::mock_pod::PrepareState {
    let body = c
        .pod_http(pod, 8080, http::Method::GET, "/prepare-downscale")
        .await
        .unwrap_or_else(|e| panic!("GET state of {pod}: {e}"));
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("state of {pod}: {e}: {body}"))
}

#[test]
fn the_scenarios_are_ignored_with_the_reason() {
    // Guards the property "never passes without running": every scenario in this file carries the ignore reason.
    let text = include_str!("e2e.rs");
    let scenarios = text.matches("\n    scenario(async").count();
    let ignored = text.matches(&format!("#[ignore = \"{NEEDS_CLUSTER}\"]")).count();
    assert!(scenarios >= 10, "found {scenarios} scenarios");
    assert_eq!(scenarios, ignored, "every scenario must be #[ignore = \"{NEEDS_CLUSTER}\"]");
}
