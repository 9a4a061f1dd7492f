//! What the simulation's test files share: running seeds that must pass, a world with only some faults, a world
//! under a real deployment's RBAC, counting what the worlds did (their activity ledgers; trace lines where the
//! ledger does not record it).

// Each test file is a crate of its own and uses some of these.
#![allow(dead_code)]

use rollout_sim::harness::outcome::Outcome;
pub use rollout_sim::oracle::activity::{Request, Sender};
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::faults::FaultMix;

pub fn failures(sc: &Scenario, seeds: impl IntoIterator<Item = u64>) -> Vec<Outcome> {
    seeds.into_iter().map(|s| rollout_sim::harness::run(s, sc, false)).filter(|o| !o.passed()).collect()
}

pub fn assert_all_pass(sc: &Scenario, seeds: impl IntoIterator<Item = u64>) {
    let failed = failures(sc, seeds);
    if let Some(o) = failed.first() {
        panic!("{} seeds failed; first: seed {} ({}): {:#?}", failed.len(), o.seed, sc.planner.name(), o.violations);
    }
}

/// The default world with only the faults `f` switches on.
pub fn only(f: impl FnOnce(&mut FaultMix)) -> Scenario {
    let mut faults = FaultMix::NONE;
    f(&mut faults);
    Scenario { faults, ..Scenario::default() }
}

/// `sc` under a real deployment's RBAC and zone-tracker setting.
pub fn under(deployment: ReferenceDeployment, sc: Scenario) -> Scenario {
    Scenario { deployment: Some(deployment), ..sc }
}

/// The no-downscale world's admissions (by either webhook) that `matches`, over `outcomes`.
pub fn object_admissions(
    outcomes: &[Outcome],
    matches: impl Fn(&rollout_sim::oracle::activity::ObjectAdmission) -> bool,
) -> usize {
    outcomes.iter().flat_map(|o| &o.activity.object_admissions).filter(|a| matches(a)).count()
}

/// Successful requests of `request` by `sender` about objects named `prefix...`, over `outcomes`.
pub fn served(outcomes: &[Outcome], sender: Sender, request: Request, prefix: &str) -> usize {
    outcomes.iter().map(|o| o.activity.succeeded(sender, request, prefix)).sum()
}

/// Requests of `request` about objects named `prefix...`, whoever sent them, however they ended, over `outcomes`.
pub fn sent(outcomes: &[Outcome], request: Request, prefix: &str) -> usize {
    outcomes.iter().map(|o| o.activity.sent(request, prefix)).sum()
}

/// Requests of `request` refused by RBAC, over `outcomes`.
pub fn forbidden(outcomes: &[Outcome], request: Request) -> usize {
    outcomes.iter().map(|o| o.activity.forbidden(request, "")).sum()
}

/// Requests about ConfigMaps (read, create, replace), whoever sent them, however they ended, over `outcomes`.
pub fn config_map_requests(outcomes: &[Outcome]) -> usize {
    [Request::GetConfigMap, Request::CreateConfigMap, Request::ReplaceConfigMap]
        .into_iter()
        .map(|r| sent(outcomes, r, ""))
        .sum()
}

/// The world's events that `matches`, over `outcomes`.
pub fn world(outcomes: &[Outcome], matches: impl Fn(&rollout_sim::oracle::activity::WorldEvent) -> bool) -> usize {
    outcomes.iter().map(|o| o.activity.count(&matches)).sum()
}

/// Admission decisions about StatefulSets named `prefix...`, admitted or denied, over `outcomes`.
pub fn admissions(outcomes: &[Outcome], prefix: &str, admitted: bool) -> usize {
    outcomes.iter().map(|o| o.activity.admissions(prefix, admitted)).sum()
}

pub fn count_lines(outcomes: &[Outcome], needle: &str) -> usize {
    outcomes.iter().flat_map(|o| o.trace.lines.iter()).filter(|l| l.contains(needle)).count()
}

pub fn sum_sts(name: &str, replicas: u32, update: &str) -> rollout_sim::environment::objects::StsSum {
    rollout_sim::environment::objects::StsSum {
        name: name.into(),
        group: "g".into(),
        replicas,
        max_unavailable: 1,
        paused: false,
        current_revision: update.into(),
        update_revision: update.into(),
        template_revision: update.into(),
        min_ready_seconds: 0,
        ready_replicas: replicas,
        status_replicas: replicas,
        leader: None,
        upscale_only_when_leader_ready: false,
    }
}

pub fn sum_pod(
    sts: &str,
    ordinal: u32,
    uid: &str,
    revision: &str,
    ready: bool,
) -> rollout_sim::environment::objects::PodSum {
    rollout_sim::environment::objects::PodSum {
        sts: sts.into(),
        name: format!("{sts}-{ordinal}"),
        uid: uid.into(),
        revision: revision.into(),
        ready,
        ready_since: None,
        terminating: false,
        in_selector: true,
    }
}
