//! Which needs of each step machine were seen failing (the drivers' "need failed" lines, counted per run by the
//! harness): the failure branches of the machines are where an injected mistake goes unseen unless some seed takes
//! them. A need whose failure the machine never observes (logged only, or in-process) is not listed.

use crate::harness::pass_log::FailedNeeds;
use std::collections::BTreeSet;

/// Every step machine, with the needs whose failure it observes.
pub fn machines() -> [(&'static str, &'static [&'static str]); 5] {
    [
        ("execution", rollout_core::execution::Need::FALLIBLE),
        ("prepare-downscale", rollout_core::admission::prepare_flow::Need::FALLIBLE),
        ("eviction", rollout_core::zpdb::Need::FALLIBLE),
        ("mirror", rollout_core::mirror_flow::MirrorNeed::<()>::FALLIBLE),
        ("election", rollout_core::election::Need::FALLIBLE),
    ]
}

/// Per machine, the needs never seen failing in `failed`.
pub fn never_failed(failed: &FailedNeeds) -> Vec<(&'static str, Vec<&'static str>)> {
    let seen: BTreeSet<(&str, &str)> = failed.keys().map(|(m, n, _)| (m.as_str(), n.as_str())).collect();
    machines()
        .into_iter()
        .map(|(machine, needs)| (machine, needs.iter().copied().filter(|n| !seen.contains(&(machine, *n))).collect()))
        .collect()
}

/// One line per machine: how many of its needs were seen failing, and which were not.
pub fn describe(failed: &FailedNeeds) -> String {
    let lines: Vec<String> = never_failed(failed)
        .into_iter()
        .zip(machines())
        .map(|((machine, never), (_, needs))| {
            let seen = needs.len() - never.len();
            match never.is_empty() {
                true => format!("{machine} {seen}/{}", needs.len()),
                false => format!("{machine} {seen}/{} (never: {})", needs.len(), never.join(", ")),
            }
        })
        .collect();
    format!("needs seen failing: {}", lines.join("; "))
}
