//! Every failure branch of every step machine is taken: over a few seeds of the worlds below, each need whose
//! failure a machine observes (the execution of a plan, the prepare-downscale webhook, the eviction decision, the
//! mirror step, the leader election) is seen failing at least once while the rest of the world goes on, and every
//! seed still passes. A need no world fails any more leaves its branch unexercised: this test says which. Built only
//! with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::harness::pass_log::FailedNeeds;
use rollout_sim::harness::run_passing;
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::drains::Drains;
use rollout_sim::scenario::ha::{ElectionVariant, Ha};

/// The worlds that fail the needs between them, and their seeds: admitted downscales during rollouts (the step
/// claims, the webhook's reads, claims and pod calls), the same with `/scale` requests under the Helm chart (the
/// parent read, the annotation record), scaling during rollouts (the controller's deletions, status writes, claims
/// and patches), drains under the old chart (intents on pods and on StatefulSets), the delayed-downscale mirror and
/// three replicas electing a leader.
fn worlds() -> Vec<(&'static str, Scenario, std::ops::Range<u64>)> {
    let webhook = Scenario::rollout_with_admitted_downscales();
    let scale_requests = Scenario {
        scale_requests: true,
        deployment: Some(ReferenceDeployment::HelmChart),
        ..Scenario::rollout_with_admitted_downscales()
    };
    let drains = Scenario {
        drains: Some(Drains::default()),
        deployment: Some(ReferenceDeployment::HelmOld),
        ..Scenario::default()
    };
    let mirror = Scenario { mirror: true, delayed_downscale: true, ..Scenario::default() };
    let ha = Scenario {
        ha: Some(Ha { replicas: 3, election: ElectionVariant::Real, ..Ha::default() }),
        ..Scenario::default()
    };
    vec![
        ("admitted downscales", webhook, 0..20),
        ("scale requests under the Helm chart", scale_requests, 0..20),
        ("scaling during rollouts", Scenario::scaling_during_rollout(), 0..30),
        ("drains under the old chart", drains, 0..20),
        ("delayed-downscale mirror", mirror, 0..10),
        ("three replicas", ha, 0..10),
    ]
}

#[test]
fn every_need_of_every_step_machine_is_seen_failing() {
    let mut failed = FailedNeeds::new();
    for (_, sc, seeds) in worlds() {
        for o in run_passing(&sc, seeds) {
            for (need, n) in o.failed_needs {
                *failed.entry(need).or_default() += n;
            }
        }
    }
    let never: Vec<_> =
        rollout_sim::oracle::needs::never_failed(&failed).into_iter().filter(|(_, n)| !n.is_empty()).collect();
    assert!(never.is_empty(), "never seen failing: {never:?}\n{}", rollout_sim::oracle::needs::describe(&failed));
    // Not only one kind of failure: answers that never came, deadlines passed, conflicts and refusals.
    let kinds: std::collections::BTreeSet<&str> = failed.keys().map(|(_, _, kind)| kind.as_str()).collect();
    for kind in ["unavailable", "deadline", "conflict", "forbidden"] {
        assert!(kinds.contains(kind), "no need failed as {kind}: {kinds:?}");
    }
}
