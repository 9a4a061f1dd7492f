//! The demo: one run told for a newcomer. A header with the world and its fault mix; a timeline of what the user,
//! the faults and the controller did (from the run's trace), with the controller's own reason whenever it stops on a
//! wait (its "rollout group" log line, printed when the reason changes) and each violation at the moment the checker
//! recorded it; and a closing summary: each zone's rollout of its last revision with the faults that hit while it
//! rolled, the rollout's span beside the pods' own replacement times, and each guarantee judged.
//!
//! Owns the demo's wording only: everything it prints was recorded by the run (trace, pass reports, oracle).

pub mod header;
pub mod summary;

use crate::harness::outcome::Outcome;
use crate::scenario::Scenario;
use std::time::Duration;

/// Who the demo's own lines are from, in the trace's column.
const WAITS: &str = "controller";

/// The whole demo of `outcome`, a run of `sc`.
pub fn render(sc: &Scenario, outcome: &Outcome) -> String {
    let mut out = vec![format!("rollout-sim demo, seed {}", outcome.seed)];
    out.extend(header::world(sc));
    out.push(String::new());
    out.push(
        "Timeline (simulated seconds since the start; pods by ordinal: r2R = revision 2 Ready, r = not ready, * = \
         terminating, - = missing; \"controller [group] waits\" lines give the controller's own reason for stopping, each time \
         it changes):"
            .to_string(),
    );
    out.extend(timeline(outcome));
    out.push(String::new());
    out.extend(summary::summary(sc, outcome));
    out.join("\n")
}

/// The trace lines a newcomer follows: the user, the faults (crash loops included), the controller's requests, the
/// zones' state after each pod Ready or revision advance, the API server's restarts and Lease, the harness's phases
/// and the checker's closing lines (its violations come from the outcome, at their own times). The pods' other
/// lifecycle steps are left out (the controller's waits name them), but for pod creations refused.
fn shown(who: &str, what: &str) -> bool {
    match who {
        "user" | "fault" | "sim" | "cluster" | "apiserver" => true,
        "checker" => !what.starts_with("VIOLATION"),
        "kubelet" => what.contains("crash-looping"),
        "sts-ctrl" => what.contains("quota"),
        _ => who.starts_with("controller"),
    }
}

/// A trace line's time, actor and text.
fn parse(line: &str) -> Option<(Duration, &str, &str)> {
    let line = line.trim_start();
    let (secs, rest) = line.split_once("s ")?;
    let at = Duration::from_secs_f64(secs.parse::<f64>().ok()?);
    let (who, what) = rest.trim_start().split_once(' ').unwrap_or((rest.trim_start(), ""));
    Some((at, who, what.trim_start()))
}

fn line(at: Duration, who: &str, what: &str) -> String {
    format!("{:>9.3}s {who:<12} {what}", at.as_secs_f64())
}

/// The timeline: the trace lines shown, the controller's waits as it reported them (a group's wait printed when its
/// class or reason changes, and the group's being done), and the violations, each at its time.
pub fn timeline(outcome: &Outcome) -> Vec<String> {
    // (time in ms, rank at equal times, text): a pass's report comes before its writes, a violation after the write.
    let mut entries: Vec<(u128, u8, String)> = Vec::new();
    for l in &outcome.trace.lines {
        if let Some((at, who, what)) = parse(l)
            && shown(who, what)
        {
            entries.push((at.as_millis(), 1, l.clone()));
        }
    }
    // What was last said of each group: its wait (class and reason), or its state when not waiting.
    let mut last: std::collections::BTreeMap<&str, (&str, &str)> = Default::default();
    for r in &outcome.pass_reports {
        let said = if r.waits() { (r.wait.as_str(), r.reason.as_str()) } else { (r.state.as_str(), "") };
        if last.insert(r.group.as_str(), said) == Some(said) {
            continue;
        }
        let what = match (r.waits(), r.state.as_str()) {
            (true, "waiting") => format!("[{}] waits ({}): {}", r.group, r.wait, r.reason),
            (true, state) => format!("[{}] {state} ({}): {}", r.group, r.wait, r.reason),
            (false, "done") => format!("[{}] done: {}", r.group, r.reason),
            (false, _) => continue,
        };
        entries.push((r.at.as_millis(), 0, line(r.at, WAITS, &what)));
    }
    for v in &outcome.violations {
        entries.push((v.at.as_millis(), 2, line(v.at, "checker", &format!("VIOLATION {}: {}", v.invariant, v.detail))));
    }
    entries.sort_by_key(|(at, rank, _)| (*at, *rank));
    entries.into_iter().map(|(_, _, text)| text).collect()
}
