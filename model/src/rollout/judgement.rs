//! What the properties read of a state: the recreation bound, quiescence and convergence; and a state, a path and
//! the violations told for people.

use super::*;

impl RolloutModel {
    /// How many times one pod name may be recreated: once per rolled-out revision, crash and eviction, plus one.
    /// More means pods are being replaced in a loop (and keeps the state space finite).
    pub fn max_generation(&self) -> u8 {
        self.config.revisions + self.config.crashes + self.config.evictions + 1
    }

    /// No step of any actor can change anything: the gate's re-evaluation, always due, may only repeat its verdict.
    pub fn is_quiescent(&self, s: &State) -> bool {
        let mut steps = Vec::new();
        self.actions(s, &mut steps);
        steps.into_iter().all(|step| {
            matches!(step, Step::GateEvaluated(_)) && self.next_state(s, step).is_some_and(|next| next == *s)
        })
    }

    /// Every zone is on the latest revision, ready, with currentRevision advanced, and the cache has caught up.
    pub fn is_converged(s: &State) -> bool {
        s.pending.is_empty()
            && s.need.is_none()
            && s.in_flight.is_none()
            && s.truth.zones.iter().all(|z| {
                z.update == z.target
                    && z.current == z.update
                    && z.pods.iter().all(|p| p.available() && p.revision == z.update)
            })
    }

    /// One line per zone: `zone-a r1 [1R 1r 0R* -]` (revision + R ready / r not ready, * terminating, - missing).
    pub fn describe(&self, w: &World) -> String {
        let mut out = String::new();
        for (i, z) in w.zones.iter().enumerate() {
            let pods: Vec<String> = z
                .pods
                .iter()
                .map(|p| {
                    if !p.exists {
                        "-".to_string()
                    } else {
                        format!(
                            "{}{}{}",
                            p.revision,
                            if p.ready { "R" } else { "r" },
                            if p.terminating { "*" } else { "" }
                        )
                    }
                })
                .collect();
            let _ = write!(
                out,
                "{}{} spec r{} update r{} current r{}{} [{}]",
                if i > 0 { "; " } else { "" },
                ZONES[i],
                z.target,
                z.update,
                z.current,
                if z.paused { " paused" } else { "" },
                pods.join(" ")
            );
        }
        out
    }

    /// A counterexample path as a timeline for people: each step, then the truth (and the cache, when it differs).
    pub fn timeline(&self, path: &[(State, Option<Step>)]) -> String {
        let mut out = String::new();
        if let Some((first, _)) = path.first() {
            let _ = writeln!(out, "  0. initial\n       truth: {}", self.describe(&first.truth));
        }
        for (i, pair) in path.windows(2).enumerate() {
            let ((state, step), (next, _)) = (&pair[0], &pair[1]);
            let what = match step {
                Some(Step::ControllerPlans) => format!(
                    "controller plans on its cache: {:?}",
                    next.exec.as_ref().map(|e| e.0.actions().to_vec()).unwrap_or_default()
                ),
                Some(Step::ControllerWrites) => match state.need {
                    Some(op) => format!("controller writes {op:?}"),
                    None => "controller writes".to_string(),
                },
                Some(Step::ControllerWritesAnswerLost) => match state.need {
                    Some(op) => format!("controller sends {op:?}; its answer is lost, the request stays in flight"),
                    None => "controller sends a write whose answer is lost".to_string(),
                },
                Some(Step::InFlightDeletionCommits) => match state.in_flight {
                    Some(op) => format!("the request in flight commits: {op:?}"),
                    None => "the request in flight commits".to_string(),
                },
                Some(Step::GateEvaluated(answers)) => match next.gate.as_ref().map(|g| &g.verdict.0) {
                    Some(verdict) => format!(
                        "the shell evaluates the gate ({answers:?} answers): {}",
                        verdict.hold_reason().unwrap_or_else(|| "passes".to_string())
                    ),
                    None => format!("the shell evaluates the gate ({answers:?} answers)"),
                },
                Some(other) => format!("{other:?}"),
                None => "?".to_string(),
            };
            let _ = writeln!(out, "{:>3}. {what}\n       truth: {}", i + 1, self.describe(&next.truth));
            if next.view != next.truth {
                let _ = writeln!(out, "       cache: {}", self.describe(&next.view));
            }
            if next.record != state.record {
                let r = next.record;
                let _ = writeln!(
                    out,
                    "       record: version {}{}{}{}",
                    r.version,
                    if r.marker { ", a downscale being prepared" } else { "" },
                    if r.step { ", a rollout step claimed" } else { "" },
                    if r.unreadable { ", unreadable" } else { "" }
                );
            }
            if next.violations != state.violations {
                let _ = writeln!(out, "       VIOLATION: {}", violation_names(next.violations & !state.violations));
            }
        }
        out
    }
}

pub fn violation_names(bits: u8) -> String {
    let mut names = Vec::new();
    for (bit, name) in [
        (violation::ONE_ZONE_AT_A_TIME, "one zone at a time"),
        (violation::MAX_UNAVAILABLE, "max unavailable"),
        (violation::ONLY_READY_COUNTS_AS_READY, "no zero-pod ready"),
        (violation::PAUSED_IS_LEFT_ALONE, "paused StatefulSet left alone"),
        (violation::NO_REPLACEMENT_LOOP, "no replacement loop"),
        (violation::NO_ROLLOUT_DURING_DOWNSCALE, "no rollout step while a downscale is being prepared"),
        (violation::ONLY_SEEN_PODS_DELETED, "only pods the controller has seen are deleted"),
        (violation::BAD_REVISION_STARTS_A_SECOND_ZONE, "a bad revision starts no second zone"),
    ] {
        if bits & bit != 0 {
            names.push(name);
        }
    }
    names.join(", ")
}
