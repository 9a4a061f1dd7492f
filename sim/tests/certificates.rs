//! The webhook certificate's lifecycle as the operator runs it (self-signed in the Secret, renewed at two thirds of
//! its lifetime, its CA injected into the webhook configurations) on the two replicas serving the prepare-downscale
//! webhook and on the drains worlds' eviction replicas, which restart now and then; the API server calls a replica
//! only through TLS that verifies against its configuration's CA bundle. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::run_passing;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::certificates::Certificates;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::drains::Drains;

mod support;
use support::{Request, Sender};

/// Admitted downscales during one-zone rollouts, with certificates valid 300 s (renewed every 200 s).
fn certificate_world() -> Scenario {
    Scenario { certificates: Some(Certificates::default()), ..Scenario::rollout_with_admitted_downscales() }
}

/// Seed 18: operator-0 renewed the Secret at 205 s, during an API latency spike, and served the renewed certificate
/// at once, while its CA injection, slowed by the spike and then refused with a conflict (operator-1 had patched the
/// configuration meanwhile), came seconds later: the API server's call to operator-0 at 207 s failed its TLS check
/// (the bundle held only the earlier CA). Served only once every configuration trusts its CA, beside the earlier
/// CA the other replica may still serve, the renewed certificate never fails a call.
#[test]
fn regression_seed_18_a_renewed_certificate_is_not_served_before_its_ca_is_in_the_bundle() {
    run_passing(&certificate_world(), 18..19);
}

/// Every call verifies, across renewals, restarts and two replicas serving at once; the figures show the lifecycle
/// was exercised (the Secret renewed several times a run, the CA injected, calls checked).
#[test]
fn webhook_calls_verify_across_renewals_restarts_and_replicas_over_30_seeds() {
    let outcomes = run_passing(&certificate_world(), 0..30);
    for o in &outcomes {
        let c = &o.certificates;
        // Created, then renewed at least twice.
        assert!(c.secret_writes >= 3, "seed {}: the Secret was written {} times", o.seed, c.secret_writes);
        assert!(c.injections >= 3, "seed {}: the CA was injected {} times", o.seed, c.injections);
        assert!(c.first_injection.is_some_and(|at| at.as_secs() < 5), "seed {}: {c:?}", o.seed);
    }
    let calls: u64 = outcomes.iter().map(|o| o.certificates.calls).sum();
    assert!(calls >= 30 * 20, "only {calls} webhook calls had their TLS checked");
}

/// Under the Helm chart's RBAC (the Secret `certificate` by name, the webhook configurations patched cluster-wide)
/// and the jsonnet's (the default Secret name): the operator's flags for each name the Secret the Role grants.
#[test]
fn under_the_deployments_rbac_the_certificate_lifecycle_is_granted_over_2_by_10_seeds() {
    for deployment in [ReferenceDeployment::HelmChart, ReferenceDeployment::Jsonnet] {
        let sc = Scenario { deployment: Some(deployment), ..certificate_world() };
        let outcomes = run_passing(&sc, 0..10);
        let writes: u64 = outcomes.iter().map(|o| o.certificates.secret_writes).sum();
        assert!(writes >= 10 * 3, "{deployment:?}: the Secret was written {writes} times");
    }
}

/// The API server's check itself: a served chain verifies against the bundle holding its CA (alone or beside
/// another), and not against a bundle without it, for another name, past its expiry, or with no bundle at all.
#[test]
fn the_api_servers_tls_check_accepts_only_a_trusted_valid_certificate_for_the_service() {
    use rollout_operator::tls::certificate::{SelfSignedSettings, certified_key, generate};
    use rollout_sim::environment::tls::{service_dns_name, verify_served};
    let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
    let settings = SelfSignedSettings {
        organization: "Grafana Labs".into(),
        dns_names: vec![service_dns_name()],
        required_dns_names: vec![service_dns_name()],
        validity: std::time::Duration::from_secs(300),
    };
    let (ours, other) = (generate(&settings, now).unwrap(), generate(&settings, now).unwrap());
    let chain = certified_key(&ours.cert_pem, &ours.key_pem).unwrap().cert;
    let name = service_dns_name();
    assert_eq!(verify_served(&chain, Some(ours.ca_pem.as_bytes()), &name, now), Ok(()));
    let both = format!("{}{}", other.ca_pem, ours.ca_pem);
    assert_eq!(verify_served(&chain, Some(both.as_bytes()), &name, now), Ok(()));
    let refused = |bundle: Option<&str>, name: &str, at: jiff::Timestamp| {
        verify_served(&chain, bundle.map(str::as_bytes), name, at).expect_err("must not verify")
    };
    assert!(refused(Some(&other.ca_pem), &name, now).contains("BadSignature"));
    let wrong_name = refused(Some(&ours.ca_pem), "elsewhere.sim.svc", now);
    assert!(wrong_name.contains("not valid for name"), "{wrong_name}");
    let later = now.checked_add(jiff::SignedDuration::from_secs(301)).unwrap();
    assert!(refused(Some(&ours.ca_pem), &name, later).contains("expired"));
    assert!(refused(None, &name, now).contains("no caBundle"));
}

/// The drains worlds: the replicas serving the pod-eviction webhook run the same certificate start (the Secret,
/// renewal, CA injection into the pod-eviction configuration), and every eviction's call is checked against that
/// configuration's CA bundle. Under `no-patch` one replica serves the webhook, in the controller's process, as that deployment runs it (no
/// process can see another's decisions without `patch`).
fn eviction_certificate_world(deployment: Option<ReferenceDeployment>) -> Scenario {
    let replicas = if deployment == Some(ReferenceDeployment::NoPatch) { 1 } else { 2 };
    Scenario {
        drains: Some(Drains { replicas, ..Drains::default() }),
        certificates: Some(Certificates::default()),
        deployment,
        ..Scenario::default()
    }
}

/// Every eviction call verifies, across renewals and the replicas' restarts, under no RBAC and under the
/// deployments' (the no-patch one's single operator process serves evictions and runs the controller); the
/// figures show the lifecycle ran on the eviction replicas (the Secret renewed, the CA injected, evictions
/// committed through checked calls).
#[test]
fn eviction_calls_verify_across_renewals_and_replica_restarts_under_each_deployment() {
    let deployments = [None, Some(ReferenceDeployment::Jsonnet), Some(ReferenceDeployment::NoPatch)];
    for deployment in deployments {
        let outcomes = run_passing(&eviction_certificate_world(deployment), 0..8);
        for o in &outcomes {
            let c = &o.certificates;
            assert!(
                c.secret_writes >= 3,
                "{deployment:?} seed {}: the Secret was written {} times",
                o.seed,
                c.secret_writes
            );
            assert!(c.injections >= 3, "{deployment:?} seed {}: the CA was injected {} times", o.seed, c.injections);
        }
        let calls: u64 = outcomes.iter().map(|o| o.certificates.calls).sum();
        assert!(calls >= 8 * 20, "{deployment:?}: only {calls} eviction calls had their TLS checked");
        let evicted = support::served(&outcomes, Sender::Drain, Request::Evict, "");
        assert!(evicted > 0, "{deployment:?}: no eviction committed");
    }
}

/// The rule bites on the eviction replicas: certificates valid 3 s cannot be renewed through the faults that cut a
/// replica off for longer, so some call meets an expired certificate, and the run fails on the rule.
#[test]
fn an_eviction_replica_serving_an_expired_certificate_is_caught() {
    let sc = Scenario {
        certificates: Some(Certificates { validity: std::time::Duration::from_secs(3), restarts: true }),
        ..eviction_certificate_world(None)
    };
    let failing = support::failures(&sc, 0..5);
    let caught = failing
        .iter()
        .filter(|o| o.violations.iter().any(|v| v.invariant == rollout_sim::oracle::certificates::WEBHOOK_TLS));
    assert!(caught.count() > 0, "no run met an expired certificate on an eviction replica");
}
