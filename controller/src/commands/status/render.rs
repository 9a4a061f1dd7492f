//! How `status` shows a namespace's view to people: one block per group, and `--watch`'s header.

use super::*;

use crate::commands::count;
use rollout_core::duration::format_go_duration;
use rollout_core::{Action, GroupState};
use std::io::Write;
use std::time::Duration;

/// The widest the StatefulSet column gets: the longest name Kubernetes accepts (a DNS subdomain).
const MAX_NAME_WIDTH: usize = 253;

/// The view for people: one block per group.
pub fn render_text(view: &NamespaceStatus, deadline: Duration, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "namespace {} at {}", view.namespace, view.at)?;
    if view.groups.is_empty() {
        writeln!(out, "no rollout groups (StatefulSets with a rollout-group label)")?;
    }
    for g in &view.groups {
        writeln!(out)?;
        // What holds the group, when it stopped on it (a group that acts waits only after this pass).
        let wait = match (&g.wait, g.state) {
            (Some(w), GroupState::Waiting | GroupState::Blocked) => match &w.statefulset {
                Some(sts) => format!(": {} ({sts})", w.reason),
                None => format!(": {}", w.reason),
            },
            _ => String::new(),
        };
        writeln!(out, "rollout group {}: {}{wait}", g.group, g.state.as_str())?;
        // The column fits the longest name up to the longest a Kubernetes name may be; a longer one (a dump holds
        // anything) overflows its column instead of asking for a width the formatter refuses (over 65535: a panic).
        let name_width =
            g.statefulsets.iter().map(|s| s.name.len()).max().unwrap_or(0).clamp("STATEFULSET".len(), MAX_NAME_WIDTH);
        writeln!(out, "  {:<name_width$}  {:>7}  {:>11}  REVISION", "STATEFULSET", "UPDATED", "UNAVAILABLE")?;
        for s in &g.statefulsets {
            let revision = if s.current_revision == s.update_revision || s.current_revision.is_empty() {
                s.update_revision.clone()
            } else {
                format!("{} -> {}", s.current_revision, s.update_revision)
            };
            let paused = if s.paused { "  (paused)" } else { "" };
            let updated = format!("{}/{}", s.updated, s.replicas);
            writeln!(out, "  {:<name_width$}  {updated:>7}  {:>11}  {revision}{paused}", s.name, s.unavailable)?;
        }
        if g.next.is_empty() {
            writeln!(out, "  next: nothing; {}", g.reason)?;
        } else {
            writeln!(out, "  next: {}", g.reason)?;
            for action in &g.next {
                match action {
                    Action::DeletePod { statefulset, pod, reason, .. } => {
                        writeln!(out, "    delete pod {pod} of {statefulset}: {reason}")?
                    }
                    Action::SetCurrentRevision { statefulset, revision, .. } => {
                        writeln!(out, "    set currentRevision of {statefulset} to {revision}")?
                    }
                    Action::Scale { statefulset, from, to, .. } => {
                        writeln!(out, "    scale {statefulset} from {from} to {}", count(*to, "replica", "replicas"))?
                    }
                }
            }
        }
        if let Some(last) = &g.downscales.last {
            writeln!(out, "  last downscale: {} at {}", last.statefulset, last.at)?;
        }
        for w in &g.downscales.waits {
            let left = format_go_duration(Duration::from_secs(w.seconds_left));
            writeln!(out, "  downscale of {} waits until after {} ({left} left)", w.statefulset, w.after)?;
        }
        if let Some(p) = &g.progress {
            let without = format_go_duration(Duration::from_secs(p.seconds_without_progress));
            let verdict = if p.stuck {
                format!("STUCK (-rollout.progress-deadline={})", format_go_duration(deadline))
            } else if deadline.is_zero() {
                "stuck detection off".to_string()
            } else {
                format!("stuck after {}", format_go_duration(deadline))
            };
            writeln!(out, "  no progress for {without} while watching; {verdict}")?;
        }
        for b in &g.budgets {
            let in_flight = if b.evictions_in_flight.is_empty() {
                String::new()
            } else {
                format!("; evictions in flight: {}", b.evictions_in_flight.join(", "))
            };
            writeln!(out, "  budget {}: {} mode, maxUnavailable {}{in_flight}", b.name, b.mode, b.max_unavailable)?;
        }
        for w in &g.warnings {
            writeln!(out, "  warning: {w}")?;
        }
    }
    if let Some(why) = &view.budgets_unknown {
        writeln!(out)?;
        writeln!(out, "ZoneAwarePodDisruptionBudgets not shown: {why}")?;
    }
    Ok(())
}

/// What `--watch` writes before each view: with text output, a header naming the interval and the namespace; on a
/// terminal, after the codes that clear the screen and home the cursor (as `watch` does); elsewhere (a file, a
/// pipe) after a blank line that separates it from the view before, with no control codes.
pub fn watch_header(text: bool, terminal: bool, first: bool, interval: Duration, namespace: &str) -> String {
    if !text {
        return String::new();
    }
    let clear = match (terminal, first) {
        (true, _) => "\x1b[2J\x1b[H",
        (false, true) => "",
        (false, false) => "\n",
    };
    format!("{clear}every {}: rollout-operator status, namespace {namespace}\n\n", format_go_duration(interval))
}
