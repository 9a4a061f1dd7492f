#![cfg(not(madsim))]
//! Local checks of what users deploy (no cluster needed): every manifest under `deploy/` and `kind-configs/` parses
//! into its typed object with no unknown field, each overlay builds with `kubectl kustomize`, and the built overlays
//! are consistent (namespace, webhook labels and selectors, Service ports, security settings, flags).

use k8s_openapi::api::apps::v1::Deployment;
use rollout_e2e::manifests::{
    JsonPatchOp, KindCluster, KindRole, KubeObject, Kustomization, kustomize_build, overlays, parse_kube_object,
    read_yaml, repo_root, type_of, yaml_files,
};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

fn rel(path: &Path) -> String {
    path.strip_prefix(repo_root()).unwrap_or(path).display().to_string()
}

#[test]
fn every_file_under_deploy_parses_into_its_typed_object() {
    let files = yaml_files(&repo_root().join("deploy")).expect("list deploy/");
    assert!(files.len() >= 10, "deploy/ looks empty: {files:?}");
    let mut problems = Vec::new();
    let mut kinds = BTreeSet::new();
    for file in &files {
        let docs = read_yaml(file).unwrap_or_else(|e| panic!("{e}"));
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        // `promtool test rules` files (deploy/monitoring/tests/, run by controller/tests/monitoring.rs), not objects.
        let rule_tests = file.parent().is_some_and(|d| d.ends_with("monitoring/tests"));
        for (i, doc) in docs.iter().enumerate() {
            let outcome = if rule_tests {
                (doc["rule_files"].is_array() && doc["tests"].is_array())
                    .then_some(())
                    .ok_or_else(|| "a promtool rule test needs rule_files and tests".to_string())
            } else if name == "kustomization.yaml" {
                serde_json::from_value::<Kustomization>(doc.clone()).map(|_| ()).map_err(|e| e.to_string())
            } else if name.ends_with("-patch.yaml") {
                serde_json::from_value::<Vec<JsonPatchOp>>(doc.clone()).map(|_| ()).map_err(|e| e.to_string())
            } else {
                parse_kube_object(doc).map(|o| {
                    kinds.insert(format!("{o:?}").split('(').next().unwrap_or_default().to_string());
                })
            };
            if let Err(e) = outcome {
                problems.push(format!("{} document {i} ({}): {e}", rel(file), type_of(doc)));
            }
        }
    }
    assert!(problems.is_empty(), "manifests that do not parse:\n{}", problems.join("\n"));
    for kind in [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
        "Service",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "CustomResourceDefinition",
    ] {
        assert!(kinds.contains(kind), "no {kind} under deploy/ (found {kinds:?})");
    }
}

#[test]
fn a_misspelt_field_is_caught() {
    // The check above relies on this: k8s-openapi ignores unknown fields, the round trip does not.
    let doc: Value = serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"},
        "spec": {"ports": [{"port": 443, "targetPort": "https"}], "publishNotReadyAdresses": true}
    });
    let err = parse_kube_object(&doc).expect_err("misspelt field accepted");
    assert!(err.contains(".spec.publishNotReadyAdresses"), "{err}");
}

#[test]
fn kind_configs_parse_and_label_the_zones() {
    let dir = repo_root().join("kind-configs");
    let single = kind_config(&dir.join("single-node.yaml"));
    assert_eq!(single.nodes.len(), 1);
    assert_eq!(single.nodes[0].role, KindRole::ControlPlane);

    let multi = kind_config(&dir.join("multi-node.yaml"));
    let zones: Vec<&str> = multi
        .nodes
        .iter()
        .filter(|n| n.role == KindRole::Worker)
        .filter_map(|n| n.labels.get("topology.kubernetes.io/zone").map(String::as_str))
        .collect();
    assert_eq!(zones, ["a", "b", "c"], "one worker per zone");
    assert_eq!(multi.nodes.iter().filter(|n| n.role == KindRole::ControlPlane).count(), 1);

    // Every file in the folder is a kind config.
    for file in yaml_files(&dir).expect("list kind-configs/") {
        kind_config(&file);
    }
}

fn kind_config(path: &Path) -> KindCluster {
    let docs = read_yaml(path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(docs.len(), 1, "{}: one document", rel(path));
    let config: KindCluster =
        serde_json::from_value(docs[0].clone()).unwrap_or_else(|e| panic!("{}: not a kind config: {e}", rel(path)));
    assert_eq!((config.kind.as_str(), config.api_version.as_str()), ("Cluster", "kind.x-k8s.io/v1alpha4"));
    config
}

/// The objects an overlay deploys, typed.
fn build(overlay: &str) -> Vec<KubeObject> {
    let dir = repo_root().join("deploy/overlays").join(overlay);
    let docs = kustomize_build(&dir).unwrap_or_else(|e| panic!("{e}"));
    docs.iter()
        .map(|d| parse_kube_object(d).unwrap_or_else(|e| panic!("overlay {overlay}: {}: {e}", type_of(d))))
        .collect()
}

fn deployment(objects: &[KubeObject]) -> &Deployment {
    let found: Vec<&Deployment> =
        objects.iter().filter_map(|o| if let KubeObject::Deployment(d) = o { Some(&**d) } else { None }).collect();
    assert_eq!(found.len(), 1, "one Deployment per overlay");
    found[0]
}

fn args(d: &Deployment) -> Vec<String> {
    let spec = d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod spec");
    spec.containers[0].args.clone().unwrap_or_default()
}

#[test]
fn every_overlay_builds_with_kubectl_kustomize() {
    let all = overlays().expect("list overlays");
    let names: Vec<&str> = all.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["controller", "e2e", "ha", "webhooks"]);
    for (name, _) in &all {
        let objects = build(name);
        assert!(objects.len() >= 6, "overlay {name} builds only {} objects", objects.len());
    }
}

#[test]
fn the_deployment_is_locked_down_and_probed_on_ready() {
    for overlay in ["controller", "webhooks", "e2e"] {
        let objects = build(overlay);
        let d = deployment(&objects);
        let spec = d.spec.as_ref().expect("spec");
        assert_eq!(spec.replicas, Some(1), "{overlay}: a single replica");
        let rolling = spec.strategy.as_ref().and_then(|s| s.rolling_update.as_ref()).expect("rolling update");
        assert_eq!(
            rolling.max_surge,
            Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(0)),
            "{overlay}: never two operators at once"
        );
        let pod = spec.template.spec.as_ref().expect("pod spec");
        assert_eq!(pod.service_account_name.as_deref(), Some("rollout-operator"));
        let c = &pod.containers[0];
        let probe = c.readiness_probe.as_ref().and_then(|p| p.http_get.as_ref()).expect("readiness probe");
        assert_eq!(probe.path.as_deref(), Some("/ready"), "{overlay}");
        let sc = c.security_context.as_ref().expect("container securityContext");
        assert_eq!(sc.read_only_root_filesystem, Some(true), "{overlay}");
        assert_eq!(sc.allow_privilege_escalation, Some(false), "{overlay}");
        assert_eq!(sc.run_as_non_root, Some(true), "{overlay}");
        let requests = c.resources.as_ref().and_then(|r| r.requests.as_ref()).expect("resource requests");
        assert!(requests.contains_key("cpu") && requests.contains_key("memory"), "{overlay}");
        let a = args(d);
        assert!(a.contains(&"-kubernetes.namespace=$(POD_NAMESPACE)".to_string()), "{overlay}: {a:?}");
        let env = c.env.as_ref().expect("env");
        let ns = env.iter().find(|e| e.name == "POD_NAMESPACE").expect("POD_NAMESPACE env");
        let field = ns.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).expect("downward API");
        assert_eq!(field.field_path, "metadata.namespace");
        let tls = a.contains(&"-server-tls.enabled=true".to_string());
        assert_eq!(tls, overlay != "controller", "{overlay}: TLS only with the webhooks: {a:?}");
        // Every flag the overlays pass is one the binary knows (cli/mod.rs parses them; a typo would stop the pod).
        let known = flag_names();
        for arg in &a {
            let name = arg.trim_start_matches('-').split('=').next().unwrap_or_default();
            assert!(known.contains(name), "{overlay}: unknown flag {arg}");
        }
    }
}

/// Flag names the operator accepts, read from its command-line definition.
fn flag_names() -> BTreeSet<String> {
    let text = std::fs::read_to_string(repo_root().join("controller/src/cli/mod.rs")).expect("read cli/mod.rs");
    text.split("long = \"").skip(1).filter_map(|s| s.split('"').next()).map(str::to_string).collect()
}

#[test]
fn the_webhook_overlays_agree_on_the_namespace_and_the_service() {
    for overlay in ["webhooks", "e2e", "ha"] {
        let objects = build(overlay);
        let d = deployment(&objects);
        let ns = d.metadata.namespace.clone().expect("the Deployment has a namespace");
        let mut webhooks = 0;
        for o in &objects {
            let (meta, entries): (_, Vec<(_, _, _)>) = match o {
                KubeObject::ValidatingWebhookConfiguration(v) => (
                    &v.metadata,
                    v.webhooks
                        .iter()
                        .flatten()
                        .map(|w| (&w.client_config, &w.namespace_selector, w.failure_policy.clone()))
                        .collect(),
                ),
                KubeObject::MutatingWebhookConfiguration(m) => (
                    &m.metadata,
                    m.webhooks
                        .iter()
                        .flatten()
                        .map(|w| (&w.client_config, &w.namespace_selector, w.failure_policy.clone()))
                        .collect(),
                ),
                KubeObject::RoleBinding(b) => {
                    for s in b.subjects.iter().flatten() {
                        assert_eq!(s.namespace.as_deref(), Some(ns.as_str()), "{overlay}: RoleBinding subject");
                    }
                    continue;
                }
                KubeObject::ClusterRoleBinding(b) => {
                    for s in b.subjects.iter().flatten() {
                        assert_eq!(s.namespace.as_deref(), Some(ns.as_str()), "{overlay}: ClusterRoleBinding subject");
                    }
                    continue;
                }
                _ => continue,
            };
            let name = meta.name.clone().unwrap_or_default();
            let labels = meta.labels.clone().unwrap_or_default();
            assert_eq!(
                labels.get("grafana.com/inject-rollout-operator-ca").map(String::as_str),
                Some("true"),
                "{name}"
            );
            assert_eq!(labels.get("grafana.com/namespace"), Some(&ns), "{name}: CA injection label");
            assert!(name.ends_with(&format!("-{ns}")), "{name}: configurations are named after the namespace");
            for (client, selector, policy) in entries {
                webhooks += 1;
                let svc = client.service.as_ref().expect("service reference");
                assert_eq!(
                    (svc.name.as_str(), svc.namespace.as_str(), svc.port),
                    ("rollout-operator", ns.as_str(), Some(443))
                );
                assert!(svc.path.as_deref().is_some_and(|p| p.starts_with("/admission/")), "{name}");
                assert!(client.ca_bundle.is_none(), "{name}: the operator injects the CA; none is shipped");
                let sel = selector.as_ref().and_then(|s| s.match_labels.as_ref()).expect("namespaceSelector");
                assert_eq!(sel.get("kubernetes.io/metadata.name"), Some(&ns), "{name}: namespaceSelector");
                assert_eq!(policy.as_deref(), Some("Fail"), "{name}");
            }
        }
        assert_eq!(
            webhooks, 5,
            "{overlay}: no-downscale, prepare-downscale, pod-eviction, zpdb-validation and rollouthealthcheck-validation"
        );
        let svc = objects
            .iter()
            .find_map(|o| if let KubeObject::Service(s) = o { Some(s) } else { None })
            .expect("the webhook Service");
        let port = &svc.spec.as_ref().and_then(|s| s.ports.clone()).expect("ports")[0];
        assert_eq!(port.port, 443);
        let target = port.target_port.clone().expect("targetPort");
        let container = &d.spec.as_ref().and_then(|s| s.template.spec.as_ref()).expect("pod").containers[0];
        let https = container.ports.iter().flatten().find(|p| p.name.as_deref() == Some("https")).expect("https port");
        assert_eq!(https.container_port, 8443);
        assert_eq!(target, k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::String("https".into()));
    }
}

#[test]
fn the_ha_overlay_runs_two_elected_replicas_kept_apart_and_through_drains() {
    let objects = build("ha");
    let d = deployment(&objects);
    let spec = d.spec.as_ref().expect("spec");
    assert_eq!(spec.replicas, Some(2));
    let a = args(d);
    for flag in ["-leader-election.enabled=true", "-server-tls.enabled=true", "-kubernetes.namespace=$(POD_NAMESPACE)"]
    {
        assert!(a.contains(&flag.to_string()), "{flag} missing: {a:?}");
    }
    let known = flag_names();
    for arg in &a {
        let name = arg.trim_start_matches('-').split('=').next().unwrap_or_default();
        assert!(known.contains(name), "unknown flag {arg}");
    }
    let pod = spec.template.spec.as_ref().expect("pod spec");
    let labels = spec.template.metadata.as_ref().and_then(|m| m.labels.clone()).unwrap_or_default();
    // Each replica's identity in the Lease is its pod name.
    let env = pod.containers[0].env.as_ref().expect("env");
    let name = env.iter().find(|e| e.name == "POD_NAME").expect("POD_NAME env");
    let field = name.value_from.as_ref().and_then(|v| v.field_ref.as_ref()).expect("downward API");
    assert_eq!(field.field_path, "metadata.name");
    // Replicas prefer different zones, and select their own pods.
    let anti = pod.affinity.as_ref().and_then(|a| a.pod_anti_affinity.as_ref()).expect("pod anti-affinity");
    let terms = anti.preferred_during_scheduling_ignored_during_execution.as_ref().expect("preferred terms");
    let zone = terms
        .iter()
        .find(|t| t.pod_affinity_term.topology_key == "topology.kubernetes.io/zone")
        .expect("a zone anti-affinity term");
    let selects = zone.pod_affinity_term.label_selector.as_ref().and_then(|s| s.match_labels.clone()).expect("labels");
    assert!(selects.iter().all(|(k, v)| labels.get(k) == Some(v)), "{selects:?} does not select {labels:?}");
    // A PodDisruptionBudget keeps one replica through drains, selecting the Deployment's pods.
    let pdbs: Vec<_> = objects
        .iter()
        .filter_map(|o| if let KubeObject::PodDisruptionBudget(p) = o { Some(p) } else { None })
        .collect();
    assert_eq!(pdbs.len(), 1);
    let pdb = pdbs[0].spec.as_ref().expect("pdb spec");
    assert_eq!(pdb.min_available, Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1)));
    let selects = pdb.selector.as_ref().and_then(|s| s.match_labels.clone()).expect("pdb selector");
    assert!(selects.iter().all(|(k, v)| labels.get(k) == Some(v)), "{selects:?} does not select {labels:?}");
    assert_eq!(pdbs[0].metadata.namespace, d.metadata.namespace);
    // The Lease is granted by the name the flag gives.
    let lease = a
        .iter()
        .rev()
        .find_map(|x| x.strip_prefix("-leader-election.lease-name="))
        .unwrap_or("rollout-operator-leader")
        .to_string();
    let named = objects.iter().any(|o| match o {
        KubeObject::Role(r) => r.rules.iter().flatten().any(|rule| {
            rule.resources.iter().flatten().any(|res| res == "leases")
                && rule.resource_names.iter().flatten().any(|n| *n == lease)
        }),
        _ => false,
    });
    assert!(named, "no Role grants the Lease {lease} by name");
}

#[test]
fn named_grants_follow_the_flags() {
    // resourceNames in the Roles must name the Secret and ConfigMap the operator is told to use.
    let objects = build("webhooks");
    let a = args(deployment(&objects));
    let flag = |name: &str, default: &str| {
        a.iter().rev().find_map(|x| x.strip_prefix(&format!("-{name}="))).unwrap_or(default).to_string()
    };
    let secret = flag("server-tls.self-signed-cert.secret-name", "rollout-operator-self-signed-certificate");
    let config_map = flag("zone-tracker.config-map-name", "rollout-operator-zone-tracker");
    let mut named = BTreeSet::new();
    for o in &objects {
        if let KubeObject::Role(r) = o {
            for rule in r.rules.iter().flatten() {
                for res in rule.resources.iter().flatten() {
                    for n in rule.resource_names.iter().flatten() {
                        named.insert((res.clone(), n.clone()));
                    }
                }
            }
        }
    }
    assert!(named.contains(&("secrets".to_string(), secret.clone())), "{named:?} lacks secret {secret}");
    assert!(named.contains(&("configmaps".to_string(), config_map.clone())), "{named:?} lacks {config_map}");
}

#[test]
fn the_replicatemplate_crd_has_scale_and_status_subresources() {
    let objects = build("controller");
    let crd = objects
        .iter()
        .find_map(|o| if let KubeObject::CustomResourceDefinition(c) = o { Some(c) } else { None })
        .expect("the ReplicaTemplate CRD");
    assert_eq!(crd.metadata.name.as_deref(), Some("replicatemplates.rollout-operator.grafana.com"));
    let v = &crd.spec.versions[0];
    let sub = v.subresources.as_ref().expect("subresources");
    let scale = sub.scale.as_ref().expect("scale subresource");
    assert_eq!(scale.spec_replicas_path, ".spec.replicas");
    assert_eq!(scale.status_replicas_path, ".status.replicas");
    assert_eq!(scale.label_selector_path.as_deref(), Some(".spec.labelSelector"));
    assert!(sub.status.is_some(), "status subresource");
}

#[test]
fn the_zpdb_crd_is_the_references() {
    let objects = build("controller");
    let crd = objects
        .iter()
        .find_map(|o| match o {
            KubeObject::CustomResourceDefinition(c)
                if c.metadata.name.as_deref() == Some("zoneawarepoddisruptionbudgets.rollout-operator.grafana.com") =>
            {
                Some(c)
            }
            _ => None,
        })
        .expect("the ZoneAwarePodDisruptionBudget CRD, with the controller");
    assert_eq!(crd.spec.group, "rollout-operator.grafana.com");
    assert_eq!(crd.spec.scope, "Namespaced");
    let names = &crd.spec.names;
    assert_eq!(
        (names.kind.as_str(), names.plural.as_str(), names.singular.as_deref()),
        ("ZoneAwarePodDisruptionBudget", "zoneawarepoddisruptionbudgets", Some("zoneawarepoddisruptionbudget"))
    );
    assert_eq!(names.short_names.as_deref(), Some(&["zpdb".to_string()][..]));
    assert_eq!(crd.spec.versions.len(), 1);
    let v1 = &crd.spec.versions[0];
    assert_eq!((v1.name.as_str(), v1.served, v1.storage), ("v1", true, true));
    // generation moves only on spec changes: the status subresource.
    assert!(v1.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(), "status subresource");
    let schema = serde_json::to_value(v1.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema"))
        .expect("serialisable");
    let spec = &schema["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["selector"]));
    let field = |name: &str| &spec["properties"][name];
    assert_eq!(
        (field("maxUnavailable")["type"].as_str(), field("maxUnavailable")["minimum"].as_f64()),
        (Some("integer"), Some(0.0))
    );
    let pct = field("maxUnavailablePercentage");
    assert_eq!((pct["minimum"].as_f64(), pct["maximum"].as_f64()), (Some(0.0), Some(100.0)));
    assert_eq!(field("podNameRegexGroup")["minimum"].as_f64(), Some(1.0));
    for string in ["podNamePartitionRegex", "crossZoneEvictionDelay"] {
        assert_eq!(field(string)["type"].as_str(), Some("string"), "{string}");
    }
    let labels = &field("selector")["properties"]["matchLabels"];
    assert_eq!(labels["additionalProperties"]["type"].as_str(), Some("string"));
}

#[test]
fn the_zpdb_webhooks_cover_evictions_and_budgets() {
    for overlay in ["webhooks", "e2e"] {
        let objects = build(overlay);
        let validating: Vec<_> = objects
            .iter()
            .filter_map(|o| match o {
                KubeObject::ValidatingWebhookConfiguration(v) => Some(v),
                _ => None,
            })
            .collect();
        let find = |path: &str| {
            validating
                .iter()
                .flat_map(|v| v.webhooks.iter().flatten().map(move |w| (v, w)))
                .find(|(_, w)| w.client_config.service.as_ref().and_then(|s| s.path.as_deref()) == Some(path))
                .unwrap_or_else(|| panic!("{overlay}: no validating webhook calls {path}"))
        };
        let (config, eviction) = find("/admission/pod-eviction");
        assert!(config.metadata.name.as_deref().is_some_and(|n| n.starts_with("pod-eviction-")), "{overlay}");
        let rules = eviction.rules.clone().unwrap_or_default();
        assert_eq!(rules.len(), 1, "{overlay}");
        assert_eq!(rules[0].api_groups.as_deref(), Some(&["".to_string()][..]));
        assert_eq!(rules[0].operations.as_deref(), Some(&["CREATE".to_string()][..]));
        assert_eq!(rules[0].resources.as_deref(), Some(&["pods/eviction".to_string()][..]));
        // Intents are written, but never on a dry run.
        assert_eq!(eviction.side_effects, "NoneOnDryRun", "{overlay}");
        let (config, validation) = find("/admission/zpdb-validation");
        assert!(config.metadata.name.as_deref().is_some_and(|n| n.starts_with("zpdb-validation-")), "{overlay}");
        let rules = validation.rules.clone().unwrap_or_default();
        assert_eq!(rules[0].api_groups.as_deref(), Some(&["rollout-operator.grafana.com".to_string()][..]));
        assert_eq!(rules[0].operations.as_deref(), Some(&["CREATE".to_string(), "UPDATE".to_string()][..]));
        assert_eq!(rules[0].resources.as_deref(), Some(&["zoneawarepoddisruptionbudgets".to_string()][..]));
        assert_eq!(validation.side_effects, "None", "{overlay}");
        let (config, checks) = find("/admission/rollouthealthcheck-validation");
        assert!(config.metadata.name.as_deref().is_some_and(|n| n.starts_with("rollouthealthcheck-validation-")));
        let rules = checks.rules.clone().unwrap_or_default();
        assert_eq!(rules[0].api_groups.as_deref(), Some(&["rollout-operator.grafana.com".to_string()][..]));
        assert_eq!(rules[0].operations.as_deref(), Some(&["CREATE".to_string(), "UPDATE".to_string()][..]));
        assert_eq!(rules[0].resources.as_deref(), Some(&["rollouthealthchecks".to_string()][..]));
        assert_eq!(checks.side_effects, "None", "{overlay}");
        for webhook in [eviction, validation, checks] {
            assert_eq!(webhook.timeout_seconds, Some(10), "{overlay}");
            assert_eq!(webhook.admission_review_versions, ["v1".to_string()], "{overlay}");
        }
    }
}

#[test]
fn the_rollouthealthcheck_crd_has_the_contracts_names_defaults_and_enums() {
    let objects = build("controller");
    let crd = objects
        .iter()
        .find_map(|o| match o {
            KubeObject::CustomResourceDefinition(c)
                if c.metadata.name.as_deref() == Some("rollouthealthchecks.rollout-operator.grafana.com") =>
            {
                Some(c)
            }
            _ => None,
        })
        .expect("the RolloutHealthCheck CRD, with the controller");
    assert_eq!((crd.spec.group.as_str(), crd.spec.scope.as_str()), ("rollout-operator.grafana.com", "Namespaced"));
    let names = &crd.spec.names;
    assert_eq!((names.kind.as_str(), names.plural.as_str()), ("RolloutHealthCheck", "rollouthealthchecks"));
    assert_eq!(names.short_names.as_deref(), Some(&["rhc".to_string()][..]));
    let v1 = &crd.spec.versions[0];
    assert_eq!((v1.name.as_str(), v1.served, v1.storage), ("v1", true, true));
    let schema = serde_json::to_value(v1.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("schema"))
        .expect("serialisable");
    let spec = &schema["properties"]["spec"];
    assert_eq!(spec["required"], serde_json::json!(["selector", "prometheusURL", "checks"]));
    let check = &spec["properties"]["checks"]["items"];
    assert_eq!(check["required"], serde_json::json!(["name", "query", "successQuery"]));
    let field = |name: &str| &check["properties"][name];
    for (name, default) in [
        ("currentRange", serde_json::json!("5m")),
        ("baselineRange", serde_json::json!("10m")),
        ("queryTimeout", serde_json::json!("10s")),
        ("queryRetries", serde_json::json!(3)),
        ("onFailure", serde_json::json!("Pause")),
        ("onNoData", serde_json::json!("Pause")),
        ("disabled", serde_json::json!(false)),
    ] {
        assert_eq!(field(name)["default"], default, "{name}");
    }
    for policy in ["onFailure", "onNoData"] {
        assert_eq!(field(policy)["enum"], serde_json::json!(["Pause", "Warn", "Disabled"]), "{policy}");
    }
}
