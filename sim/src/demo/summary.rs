//! The demo's closing summary: each zone's rollout of its last revision (first controller deletion to its last
//! replaced pod Ready) with the faults that hit meanwhile, the rollout's span beside the pods' own replacement times,
//! the faults' heal-to-write figures, and every guarantee judged with its verdict.

use crate::harness::outcome::Outcome;
use crate::oracle::guarantees::verdicts;
use crate::oracle::reaction::{FaultWindow, Summary};
use crate::scenario::Scenario;
use std::time::Duration;

/// One zone's rollout of its last revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneRollout {
    pub statefulset: String,
    pub revision: String,
    /// The first controller deletion of a pod replaced on that revision, and the last such replacement's Ready
    /// commit; `None` if no pod was replaced onto it.
    pub span: Option<(Duration, Duration)>,
    pub pods: usize,
}

/// Each StatefulSet's rollout of the revision it ended on.
pub fn zone_rollouts(outcome: &Outcome) -> Vec<ZoneRollout> {
    outcome
        .revisions
        .iter()
        .map(|(sts, revision)| {
            let onto: Vec<(Duration, Duration)> = outcome
                .reactions
                .replacements
                .iter()
                .filter(|r| r.statefulset == *sts)
                .filter_map(|r| r.ready.as_ref().filter(|(_, rev)| rev == revision).map(|(at, _)| (r.deleted_at, *at)))
                .collect();
            let span = onto.iter().map(|(d, _)| *d).min().zip(onto.iter().map(|(_, r)| *r).max());
            ZoneRollout { statefulset: sts.clone(), revision: revision.clone(), span, pods: onto.len() }
        })
        .collect()
}

/// The faults whose window overlaps `from..=to`.
pub fn faults_during(faults: &[FaultWindow], from: Duration, to: Duration) -> Vec<&FaultWindow> {
    faults.iter().filter(|f| f.from <= to && f.to >= from).collect()
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

/// The summary's lines.
pub fn summary(sc: &Scenario, outcome: &Outcome) -> Vec<String> {
    let mut out = vec![
        "Summary".to_string(),
        "  Zones (the rollout of each zone's last revision: its first controller deletion to its last replaced pod \
         Ready):"
            .to_string(),
    ];
    for z in zone_rollouts(outcome) {
        let rev = z.revision.rsplit('-').next().unwrap_or(&z.revision).to_string();
        let Some((from, to)) = z.span else {
            out.push(format!("    {} {rev}: no pod replaced onto it by the controller", z.statefulset));
            continue;
        };
        let hit: Vec<String> = faults_during(&outcome.faults, from, to)
            .into_iter()
            .map(|f| format!("{} {:.1}-{:.1} s", f.what, f.from.as_secs_f64(), f.to.as_secs_f64()))
            .collect();
        let faults =
            if hit.is_empty() { "no fault meanwhile".to_string() } else { format!("faults: {}", hit.join(", ")) };
        out.push(format!(
            "    {} {rev}: {:.1} s -> {:.1} s ({}, {} pod{} replaced); {faults}",
            z.statefulset,
            from.as_secs_f64(),
            to.as_secs_f64(),
            secs(to - from),
            z.pods,
            if z.pods == 1 { "" } else { "s" }
        ));
    }
    if let Some((span, own, share)) = Summary::rollout_share(&outcome.reactions) {
        out.push(format!(
            "  Rollout: {} from the controller's first work to the last replacement Ready; the pods' own replacement \
             times (termination, recreation, readiness) sum to {} over {} pods; the rest, {:.1} %, is time between \
             replacements (faults, waits, the controller's reactions)",
            secs(span),
            secs(own),
            outcome.reactions.restarts.len(),
            share * 100.0
        ));
    }
    let heals = &outcome.heal_to_write;
    let max = heals.iter().max().map_or("-".to_string(), |d| secs(*d));
    out.push(format!(
        "  Faults: {} injected; {} healed while the group had work, the controller's next write answering it came \
         at most {max} after the heal",
        outcome.faults.len(),
        heals.len()
    ));
    out.push("  Guarantees judged:".to_string());
    for (name, count) in verdicts(sc, &outcome.violations) {
        let verdict = if count == 0 { "held".to_string() } else { format!("{count} violation(s)") };
        out.push(format!("    {name}: {verdict}"));
    }
    out
}
