//! Certificate decisions: DNS names, reuse or replace, renewal time, CA bundle patches.

use jiff::Timestamp;
use rollout_core::certificate::{
    BundledCa, CertificateFacts, CertificateVerdict, ca_bundle_patch, judge_self_signed, renew_at, service_dns_names,
    trusted_cas,
};
use serde_json::json;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn facts(not_before: &str, not_after: &str, names: &[&str]) -> CertificateFacts {
    CertificateFacts {
        subject: "CN=rollout-operator".into(),
        not_before: ts(not_before),
        not_after: ts(not_after),
        dns_names: names.iter().map(|n| n.to_string()).collect(),
    }
}

#[test]
fn dns_names_follow_the_service_and_namespace() {
    assert_eq!(
        service_dns_names("rollout-operator", "ns", "cluster.local.", ""),
        ["rollout-operator", "rollout-operator.ns", "rollout-operator.ns.svc", "rollout-operator.ns.svc.cluster.local"]
    );
    assert_eq!(service_dns_names("svc", "ns", "", "extra.example.com").last().unwrap(), "extra.example.com");
    assert_eq!(service_dns_names("svc", "ns", "cluster.local", "svc.ns.svc").len(), 4, "no duplicates");
}

#[test]
fn renewal_is_due_after_two_thirds_of_the_lifetime() {
    assert_eq!(renew_at(ts("2026-01-01T00:00:00Z"), ts("2026-01-01T03:00:00Z")), ts("2026-01-01T02:00:00Z"));
    let names = ["a"];
    let wanted = vec!["a".to_string()];
    let chain = [facts("2026-01-01T00:00:00Z", "2026-01-01T03:00:00Z", &names)];
    assert_eq!(
        judge_self_signed(&chain, &wanted, ts("2026-01-01T01:59:59Z")),
        CertificateVerdict::Reuse { renew_at: ts("2026-01-01T02:00:00Z") }
    );
    assert!(
        matches!(judge_self_signed(&chain, &wanted, ts("2026-01-01T02:00:00Z")), CertificateVerdict::Replace(r) if r.contains("two thirds"))
    );
    assert!(
        matches!(judge_self_signed(&chain, &wanted, ts("2026-01-01T03:00:00Z")), CertificateVerdict::Replace(r) if r.contains("expired"))
    );
    assert!(
        matches!(judge_self_signed(&chain, &wanted, ts("2025-12-31T23:00:00Z")), CertificateVerdict::Replace(r) if r.contains("not valid before"))
    );
    assert!(matches!(judge_self_signed(&[], &wanted, ts("2026-01-01T01:00:00Z")), CertificateVerdict::Replace(_)));
    // The CA's validity counts too.
    let chain = [chain[0].clone(), facts("2025-01-01T00:00:00Z", "2026-01-01T01:00:00Z", &[])];
    assert!(matches!(judge_self_signed(&chain, &wanted, ts("2026-01-01T00:30:00Z")), CertificateVerdict::Replace(_)));
}

#[test]
fn missing_dns_names_replace_the_certificate() {
    let chain = [facts("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z", &["old.ns.svc"])];
    match judge_self_signed(&chain, &["new.ns.svc".to_string()], ts("2026-01-02T00:00:00Z")) {
        CertificateVerdict::Replace(reason) => assert!(reason.contains("new.ns.svc"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn ca_bundle_patch_carries_every_entry_and_the_resource_version() {
    let config = json!({"metadata": {"name": "x", "resourceVersion": "7"}, "webhooks": [
        {"name": "a", "clientConfig": {"service": {"name": "s"}, "caBundle": "Q0E="}, "sideEffects": "None"},
        {"name": "b", "clientConfig": {"service": {"name": "s"}}, "sideEffects": "None"},
    ]});
    let patch = ca_bundle_patch(&config, |_| "Q0E=".into()).expect("b differs");
    assert_eq!(
        patch,
        json!({"metadata": {"resourceVersion": "7"}, "webhooks": [
            {"name": "a", "clientConfig": {"service": {"name": "s"}, "caBundle": "Q0E="}, "sideEffects": "None"},
            {"name": "b", "clientConfig": {"service": {"name": "s"}, "caBundle": "Q0E="}, "sideEffects": "None"},
        ]})
    );
    let patched = json!({"metadata": {"resourceVersion": "8"}, "webhooks": patch["webhooks"]});
    assert_eq!(ca_bundle_patch(&patched, |_| "Q0E=".into()), None, "nothing to do once all match");
    assert_eq!(ca_bundle_patch(&json!({"metadata": {}}), |_| "Q0E=".into()), None, "no webhooks");
}

fn ca(pem: &str, subject: &str, not_after: &str) -> BundledCa {
    BundledCa {
        pem: pem.to_string(),
        facts: Some(CertificateFacts {
            subject: subject.to_string(),
            not_before: ts("2026-01-01T00:00:00Z"),
            not_after: ts(not_after),
            dns_names: Vec::new(),
        }),
    }
}

#[test]
fn the_injected_bundle_keeps_our_earlier_cas_until_they_expire_newest_first() {
    let now = ts("2026-03-01T00:00:00Z");
    let ours = ca("new", "CN=rollout-operator CA", "2026-06-01T00:00:00Z");
    let earlier = ca("old", "CN=rollout-operator CA", "2026-04-01T00:00:00Z");
    let expired = ca("older", "CN=rollout-operator CA", "2026-02-01T00:00:00Z");
    let foreign = ca("theirs", "CN=someone else", "2027-01-01T00:00:00Z");
    let unreadable = BundledCa { pem: "garbage".into(), facts: None };
    let current = [earlier.clone(), expired, foreign, unreadable, ours.clone()];
    assert_eq!(trusted_cas(&ours, &current, now), ["new", "old"]);
    // The replica still holding the earlier CA wants the same bundle: no patching back and forth.
    assert_eq!(trusted_cas(&earlier, &[ours.clone(), earlier.clone()], now), ["new", "old"]);
    // Once the earlier CA has expired it goes.
    assert_eq!(trusted_cas(&ours, &current, ts("2026-05-01T00:00:00Z")), ["new"]);
    assert_eq!(trusted_cas(&ours, &[], now), ["new"]);
}
