//! Tests of the requirement table and of the rules it gives for sets of flags.

use super::*;
use crate::cli::{self, Command};

fn flags(args: &[&str]) -> RbacSettings {
    let argv = ["rollout-operator", "rbac", "-kubernetes.namespace=ns"].into_iter().chain(args.iter().copied());
    match cli::parse(argv) {
        Ok(Command::Rbac(args)) => args.flags.rbac_settings(),
        other => panic!("{args:?}: expected the rbac subcommand, got {other:?}"),
    }
}

fn rules(args: &[&str]) -> Rules {
    rules_for(&flags(args)).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

fn rule(group: &str, resource: &str, names: Option<&[&str]>, verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(vec![resource.to_string()]),
        resource_names: names.map(|names| names.iter().map(|n| n.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        non_resource_urls: None,
    }
}

/// The resources a list of rules mentions.
fn resources(rules: &[PolicyRule]) -> BTreeSet<String> {
    rules.iter().flat_map(|r| r.resources.iter().flatten().cloned()).collect()
}

#[test]
fn default_flags_need_rollouts_mirroring_and_budgets_only() {
    let rules = rules(&[]);
    assert_eq!(
        rules.role,
        [
            rule("", "pods", None, &["get", "list", "watch", "patch", "delete"]),
            rule("apps", "statefulsets", None, &["get", "list", "watch", "patch"]),
            rule("apps", "statefulsets/status", None, &["update"]),
            rule("rollout-operator.grafana.com", "replicatemplates/scale", None, &["get"]),
            rule("rollout-operator.grafana.com", "replicatemplates/status", None, &["patch"]),
            rule("rollout-operator.grafana.com", "rollouthealthchecks", None, &["list", "watch"]),
            rule("rollout-operator.grafana.com", "zoneawarepoddisruptionbudgets", None, &["list", "watch"]),
        ]
    );
    // Budgets and pod annotations are optional: a deployment that grants neither (Loki's) loses only them.
    let required = required_rules_for(&flags(&[])).expect("rules");
    assert_eq!(required.role[0], rule("", "pods", None, &["list", "watch", "delete"]));
    assert!(!resources(&required.role).contains("zoneawarepoddisruptionbudgets"), "{:?}", required.role);
    assert!(rules.cluster_role.is_empty(), "{:?}", rules.cluster_role);
}

#[test]
fn events_only_when_enabled_and_then_optional() {
    let events = |rules: &Rules| -> Vec<PolicyRule> {
        rules.role.iter().filter(|r| r.resources == Some(vec!["events".into()])).cloned().collect()
    };
    assert!(events(&rules(&[])).is_empty());
    assert!(events(&rules(&["-events.enabled=false", "-server-tls.enabled"])).is_empty());
    assert_eq!(events(&rules(&["-events.enabled"])), [rule("events.k8s.io", "events", None, &["create", "patch"])]);
    // A deployment may leave them out: what it must grant is unchanged.
    let on = flags(&["-events.enabled"]);
    assert_eq!(required_rules_for(&on), required_rules_for(&flags(&[])));
}

#[test]
fn leases_only_with_leader_election_named_where_rbac_allows_and_required() {
    let leases = |rules: &Rules| -> Vec<PolicyRule> {
        rules.role.iter().filter(|r| r.resources == Some(vec!["leases".into()])).cloned().collect()
    };
    assert!(leases(&rules(&[])).is_empty(), "election off (the default) needs no Lease");
    assert!(leases(&rules(&["-leader-election.enabled=false", "-server-tls.enabled"])).is_empty());
    let on = ["-leader-election.enabled", "-leader-election.lease-name=ops-leader"];
    assert_eq!(
        leases(&rules(&on)),
        [
            rule("coordination.k8s.io", "leases", None, &["create"]),
            rule("coordination.k8s.io", "leases", Some(&["ops-leader"]), &["get", "update"]),
        ]
    );
    // Not optional: without the Lease no replica leads.
    assert_eq!(leases(&required_rules_for(&flags(&on)).expect("rules")), leases(&rules(&on)));
    // Nothing else changes.
    let mut without = rules(&on);
    without.role.retain(|r| r.resources != Some(vec!["leases".into()]));
    assert_eq!(without, rules(&[]));
}

#[test]
fn no_configmaps_without_the_zone_tracker() {
    for args in [&[][..], &["-server-tls.enabled=true"], &["-use-zone-tracker=false", "-server-tls.enabled"]] {
        let rules = rules(args);
        assert!(!resources(&rules.role).contains("configmaps"), "{args:?}: {:?}", rules.role);
    }
}

#[test]
fn the_zone_tracker_needs_its_configmap_by_name_and_create() {
    let rules = rules(&["-use-zone-tracker=true", "-zone-tracker.config-map-name=record"]);
    let configmaps: Vec<_> = rules.role.iter().filter(|r| r.resources == Some(vec!["configmaps".into()])).collect();
    assert_eq!(
        configmaps,
        [&rule("", "configmaps", None, &["create"]), &rule("", "configmaps", Some(&["record"]), &["get", "update"])]
    );
    // The default name, as the controller resolves it.
    let rules = rules_for(&flags(&["-use-zone-tracker"])).expect("rules");
    assert!(rules.role.contains(&rule("", "configmaps", Some(&["rollout-operator-zone-tracker"]), &["get", "update"])));
}

#[test]
fn nothing_of_tls_without_tls() {
    for args in [&[][..], &["-use-zone-tracker=true"], &["-webhooks.update-ca-bundle=true"]] {
        let rules = rules(args);
        let role = resources(&rules.role);
        for resource in ["secrets", "deployments", "replicasets"] {
            assert!(!role.contains(resource), "{args:?}: {resource} in {:?}", rules.role);
        }
        assert!(rules.cluster_role.is_empty(), "{args:?}: {:?}", rules.cluster_role);
    }
}

#[test]
fn tls_needs_the_webhooks_reads_the_certificate_secret_by_name_and_ca_injection() {
    let rules = rules(&["-server-tls.enabled=true", "-server-tls.self-signed-cert.secret-name=certificate"]);
    for expected in [
        rule("", "pods", None, &["get", "list", "watch", "patch", "delete"]),
        rule("apps", "deployments", None, &["get"]),
        rule("apps", "replicasets", None, &["get"]),
        rule("apps", "statefulsets", None, &["get", "list", "watch", "patch"]),
        rule("", "secrets", None, &["create"]),
        rule("", "secrets", Some(&["certificate"]), &["get", "update"]),
    ] {
        assert!(rules.role.contains(&expected), "{expected:?} not in {:?}", rules.role);
    }
    assert_eq!(
        rules.cluster_role,
        [
            rule("admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, &["list", "watch", "patch"]),
            rule("admissionregistration.k8s.io", "validatingwebhookconfigurations", None, &["list", "watch", "patch"]),
        ]
    );
}

#[test]
fn ca_injection_off_drops_the_patch_of_webhook_configurations() {
    // The failure-policy gauge still watches them whenever the TLS server runs.
    for args in [
        &["-server-tls.enabled", "-webhooks.update-ca-bundle=false"][..],
        &[
            "-server-tls.enabled",
            "-server-tls.self-signed-cert.enabled=false",
            "-server-tls.cert-file=c",
            "-server-tls.key-file=k",
            "-webhooks.update-ca-bundle=false",
        ],
    ] {
        let rules = rules(args);
        assert_eq!(
            rules.cluster_role,
            [
                rule("admissionregistration.k8s.io", "mutatingwebhookconfigurations", None, &["list", "watch"]),
                rule("admissionregistration.k8s.io", "validatingwebhookconfigurations", None, &["list", "watch"]),
            ],
            "{args:?}"
        );
    }
}

#[test]
fn certificate_files_need_no_secret() {
    let rules = rules(&[
        "-server-tls.enabled",
        "-server-tls.self-signed-cert.enabled=false",
        "-server-tls.cert-file=c",
        "-server-tls.key-file=k",
        "-webhooks.update-ca-bundle=false",
    ]);
    assert!(!resources(&rules.role).contains("secrets"), "{:?}", rules.role);
    assert!(resources(&rules.role).contains("deployments"), "the webhooks still run: {:?}", rules.role);
}

#[test]
fn an_empty_secret_name_is_an_error_naming_the_flag() {
    let err = rules_for(&flags(&["-server-tls.enabled", "-server-tls.self-signed-cert.secret-name="]))
        .expect_err("no rule can name an empty object");
    assert_eq!(err, RbacError::EmptyResourceName { flag: "-server-tls.self-signed-cert.secret-name" });
    assert!(err.to_string().contains("-server-tls.self-signed-cert.secret-name"), "{err}");
    // Without TLS the Secret is not used, so its name does not matter.
    assert!(rules_for(&flags(&["-server-tls.self-signed-cert.secret-name="])).is_ok());
}

#[test]
fn the_same_flags_give_the_same_rules_and_every_rule_is_well_formed() {
    let all = ["-server-tls.enabled", "-use-zone-tracker"];
    assert_eq!(rules(&all), rules(&all));
    let rules = rules(&all);
    for rule in rules.role.iter().chain(&rules.cluster_role) {
        assert!(!rule.verbs.is_empty(), "{rule:?}");
        let mut sorted = rule.verbs.clone();
        sorted.sort_by_key(|v| verb_rank(v).0);
        sorted.dedup();
        assert_eq!(sorted, rule.verbs, "verbs once each, in Kubernetes' order");
        if rule.resource_names.is_some() {
            assert!(!rule.verbs.iter().any(|v| ["create", "list", "watch"].contains(&v.as_str())), "{rule:?}");
        }
    }
    let keys: Vec<_> = rules.role.iter().map(|r| (&r.api_groups, &r.resources, &r.resource_names)).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(keys, sorted, "one rule per (group, resource, names), sorted");
}

#[test]
fn every_feature_is_used_by_the_table_and_every_row_by_a_feature() {
    let table: Vec<&ApiPermission> =
        RBAC_REQUIREMENTS.iter().chain(REPLICA_TEMPLATE_PERMISSIONS).chain(MIRROR_TARGET_PERMISSIONS).collect();
    for feature in Feature::ALL {
        assert!(table.iter().any(|p| p.features.contains(&feature)), "{feature:?} uses nothing");
    }
    for p in &table {
        assert!(!p.features.is_empty(), "{p:?} is used by no feature");
        if p.resource_name.is_some() {
            assert!(!["create", "list", "watch", "deletecollection"].contains(&p.verb), "{p:?}: RBAC cannot");
        }
    }
    // All on: every row is needed.
    let all = flags(&["-server-tls.enabled", "-use-zone-tracker", "-events.enabled", "-leader-election.enabled"]);
    assert!(table.iter().all(|p| p.needed(&all)));
}

#[test]
fn a_verb_granted_everywhere_is_not_repeated_by_name() {
    let merged = Merged::from([
        (("", "configmaps", None), BTreeSet::from([verb_rank("get")])),
        (("", "configmaps", Some("x")), BTreeSet::from([verb_rank("get"), verb_rank("update")])),
        (("", "secrets", Some("y")), BTreeSet::from([verb_rank("get")])),
        (("", "secrets", None), BTreeSet::from([verb_rank("get")])),
    ]);
    assert_eq!(
        to_rules(merged),
        [
            rule("", "configmaps", None, &["get"]),
            rule("", "configmaps", Some(&["x"]), &["update"]),
            rule("", "secrets", None, &["get"]),
        ]
    );
}

#[test]
fn grants_by_name_cover_only_that_name_and_unrestricted_grants_cover_any() {
    let needed = [rule("", "secrets", Some(&["cert"]), &["get", "update"]), rule("", "secrets", None, &["create"])];
    assert!(not_granted(&needed, &[rule("", "secrets", None, &["get", "update", "create"])]).is_empty());
    assert!(
        not_granted(
            &needed,
            &[
                rule("", "secrets", None, &["create"]),
                rule("", "secrets", Some(&["other", "cert"]), &["get", "update"])
            ]
        )
        .is_empty()
    );
    let missing = not_granted(
        &needed,
        &[
            rule("", "secrets", Some(&["certificate"]), &["get", "update"]),
            rule("", "secrets", Some(&["cert"]), &["create"]),
        ],
    );
    let shown: Vec<String> = missing.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "create secrets (apiGroup \"\")",
            "get secrets (apiGroup \"\") resourceNames [cert]",
            "update secrets (apiGroup \"\") resourceNames [cert]",
        ]
    );
}

#[test]
fn wildcard_grants_cover_what_they_match() {
    let needed = [rule("example.com", "widgets/scale", None, &["get"]), rule("apps", "statefulsets", None, &["patch"])];
    assert!(not_granted(&needed, &[rule("*", "*", None, &["*"])]).is_empty());
    assert!(
        not_granted(&needed, &[rule("*", "*/scale", None, &["get"]), rule("apps", "statefulsets", None, &["*"])])
            .is_empty()
    );
    assert_eq!(not_granted(&needed, &[rule("*", "*/status", None, &["get"])]).len(), 2);
}

/// Flag sets that switch every feature on and off in turn.
const FLAG_SETS: [&[&str]; 8] = [
    &[],
    &["-server-tls.enabled"],
    &["-server-tls.enabled", "-use-zone-tracker", "-events.enabled", "-leader-election.enabled"],
    &["-server-tls.enabled", "-webhooks.update-ca-bundle=false"],
    &[
        "-server-tls.enabled",
        "-server-tls.self-signed-cert.enabled=false",
        "-server-tls.cert-file=c",
        "-server-tls.key-file=k",
    ],
    &["-use-zone-tracker", "-zone-tracker.config-map-name=record"],
    &["-events.enabled"],
    &["-leader-election.enabled", "-leader-election.lease-name=ops-leader"],
];

#[test]
fn marked_rules_are_the_required_rules_then_the_optional_rest_and_grant_what_rules_for_grants() {
    for args in FLAG_SETS {
        let flags = flags(args);
        let marked = marked_rules_for(&flags).expect("rules");
        let required = required_rules_for(&flags).expect("rules");
        let all = rules_for(&flags).expect("rules");
        for (marked, required, all) in [
            (&marked.role, &required.role, &all.role),
            (&marked.cluster_role, &required.cluster_role, &all.cluster_role),
        ] {
            let first: Vec<PolicyRule> = marked.iter().take_while(|m| m.required).map(|m| m.rule.clone()).collect();
            assert_eq!(&first, required, "{args:?}: the required rules come first, exactly");
            assert!(marked.iter().skip(first.len()).all(|m| !m.required), "{args:?}: {marked:#?}");
            let printed: Vec<PolicyRule> = marked.iter().map(|m| m.rule.clone()).collect();
            assert!(not_granted(all, &printed).is_empty(), "{args:?}: something of rules_for is missing");
            assert!(not_granted(&printed, all).is_empty(), "{args:?}: something beyond rules_for");
            for m in marked {
                assert!(!m.features.is_empty(), "{args:?}: {m:?} is for no feature");
                assert!(m.features.iter().all(|f| f.enabled(&flags)), "{args:?}: {m:?}");
                if m.required {
                    assert!(m.features.iter().any(|f| !f.is_optional()), "{args:?}: {m:?}");
                } else {
                    assert!(m.features.iter().all(|f| f.is_optional()), "{args:?}: {m:?}");
                }
            }
        }
    }
}

#[test]
fn optional_rules_say_which_feature_uses_which_verb() {
    let marked = marked_rules_for(&flags(&[])).expect("rules");
    let shown: Vec<(bool, Vec<Feature>, PolicyRule)> =
        marked.role.into_iter().map(|m| (m.required, m.features, m.rule)).collect();
    let grafana = "rollout-operator.grafana.com";
    assert_eq!(
        shown,
        [
            (true, vec![Rollout], rule("", "pods", None, &["list", "watch", "delete"])),
            (true, vec![Rollout], rule("apps", "statefulsets", None, &["get", "list", "watch"])),
            (true, vec![Rollout], rule("apps", "statefulsets/status", None, &["update"])),
            (false, vec![DisruptionBudgets], rule("", "pods", None, &["get"])),
            (false, vec![PodAnnotations], rule("", "pods", None, &["patch"])),
            (false, vec![Scaling, PodAnnotations, HealthChecks], rule("apps", "statefulsets", None, &["patch"])),
            (false, vec![MirrorTargets], rule(grafana, "replicatemplates/scale", None, &["get"])),
            (false, vec![MirrorTargets], rule(grafana, "replicatemplates/status", None, &["patch"])),
            (false, vec![HealthChecks], rule(grafana, "rollouthealthchecks", None, &["list", "watch"])),
            (false, vec![DisruptionBudgets], rule(grafana, "zoneawarepoddisruptionbudgets", None, &["list", "watch"])),
        ]
    );
    // With the webhooks, their live pod reads make `get` required; budgets still use it.
    let marked = marked_rules_for(&flags(&["-server-tls.enabled"])).expect("rules");
    let get = marked.role.iter().find(|m| m.rule.resources == Some(vec!["pods".into()]) && m.required);
    assert_eq!(get.map(|m| m.features.clone()), Some(vec![Rollout, Webhooks, DisruptionBudgets]));
}

#[test]
fn every_feature_has_a_name_and_says_what_switches_it_on() {
    let names: BTreeSet<&str> = Feature::ALL.iter().map(|f| f.name()).collect();
    assert_eq!(names.len(), Feature::ALL.len(), "names are unique");
    for feature in Feature::ALL {
        assert!(!feature.name().is_empty() && !feature.switched_on_by().is_empty(), "{feature:?}");
        // Those always on say so; the others name a flag the parser knows.
        let always = feature.enabled(&flags(&["-server-tls.enabled=false"]));
        assert_eq!(feature.switched_on_by() == "always on", always, "{feature:?}");
        for flag in feature.switched_on_by().split(", ").filter(|_| !always) {
            assert!(cli::parse(["rollout-operator", "rbac", "-kubernetes.namespace=ns", flag]).is_ok(), "{flag}");
        }
    }
}
