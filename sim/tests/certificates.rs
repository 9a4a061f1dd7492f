//! The webhook certificate's lifecycle as the operator runs it (self-signed in the Secret, renewed at two thirds of
//! its lifetime, its CA injected into the webhook configurations) on the two replicas serving the prepare-downscale
//! webhook, which restart now and then; the API server calls a replica only through TLS that verifies against the
//! configuration's CA bundle. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::run_passing;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::certificates::Certificates;
use rollout_sim::scenario::deployment::ReferenceDeployment;

/// Admitted downscales during one-zone rollouts, with certificates valid 300 s (renewed every 200 s).
fn certificate_world() -> Scenario {
    Scenario { certificates: Some(Certificates::default()), ..Scenario::rollout_with_admitted_downscales() }
}

/// Seed 12: operator-1 renewed the Secret at 60 s and served the new certificate at once, while its CA injection,
/// refused with a conflict (operator-0 had patched the same configuration), waited 10 s for its retry: the API
/// server's calls to operator-1 failed their TLS check meanwhile.
#[test]
fn regression_seed_12_a_renewed_certificate_is_not_served_before_its_ca_is_in_the_bundle() {
    run_passing(&certificate_world(), 12..13);
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
