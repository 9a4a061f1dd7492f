//! The safety judgement: a decision that answers "allowed" judged on the truth plus the disruptions allowed and
//! not committed yet; convergence and quiescence; and a state and a path told for people.

use super::*;

impl ZpdbModel {
    /// Disruptions allowed and not committed yet, by incarnation.
    fn outstanding(s: &ZpdbState) -> Vec<(u8, u8, u8)> {
        let mut out: Vec<(u8, u8, u8)> = s
            .drains
            .iter()
            .filter_map(|d| match d {
                Drain::Committing { zone, pod, generation } => Some((*zone, *pod, *generation)),
                _ => None,
            })
            .collect();
        if let Some(Op::Delete { zone, pod, generation }) = s.ctrl.cleared() {
            out.push((zone, pod, generation));
        }
        out
    }

    /// Whether disrupting the pod now (the truth, plus the disruptions allowed and not committed yet) exceeds the
    /// budget `max` (see the module docs).
    fn exceeds(&self, s: &ZpdbState, zone: u8, pod: u8, max: u32) -> bool {
        let mut unavailable: Vec<Vec<bool>> =
            s.truth.zones.iter().map(|z| z.pods.iter().map(|p| !p.available()).collect()).collect();
        for (z, i, generation) in Self::outstanding(s) {
            if s.truth.zones[z as usize].pods[i as usize].generation == generation {
                unavailable[z as usize][i as usize] = true;
            }
        }
        let (zone, pod) = (zone as usize, pod as usize);
        if unavailable[zone][pod] {
            return false;
        }
        match self.config.mode {
            BudgetMode::Zones => {
                let others = unavailable.iter().enumerate().any(|(z, pods)| z != zone && pods.contains(&true));
                let own = unavailable[zone].iter().filter(|u| **u).count() as u32;
                others || own + 1 > max
            }
            BudgetMode::Partitions => {
                let partition = unavailable.iter().enumerate().filter(|(z, pods)| *z != zone && pods[pod]).count();
                partition as u32 + 1 > max
            }
        }
    }

    /// Judges a decision that has just answered "allowed" for `who`.
    pub(super) fn judge(&self, s: &mut ZpdbState, zone: u8, pod: u8, who: Who) {
        let budget = u32::from(self.config.max_unavailable);
        let (max, bit) = match who {
            Who::Drain(_) => (budget, violation::BUDGET_EXCEEDED_BY_EVICTION),
            Who::Controller if budget == 0 => (self.controller_override(), violation::BUDGET_EXCEEDED_BY_CONTROLLER),
            Who::Controller => (budget, violation::BUDGET_EXCEEDED_BY_CONTROLLER),
        };
        if self.exceeds(s, zone, pod, max) {
            s.violations |= bit;
        }
        if matches!(who, Who::Drain(_)) && s.truth.zones[zone as usize].pods[pod as usize].available() {
            s.evicted = true;
        }
    }

    /// Whether some decision (in flight, or allowed and not committed) is about this pod: its intent may be relied
    /// on, so it does not expire (the lifetime assumption).
    pub(super) fn intent_relied_on(s: &ZpdbState, zone: u8, pod: u8) -> bool {
        let drains = s.drains.iter().any(|d| match d {
            Drain::Deciding(d) => d.is_about(zone, pod),
            Drain::Committing { zone: z, pod: p, .. } => (*z, *p) == (zone, pod),
            Drain::Idle => false,
        });
        let ctrl = match &s.ctrl {
            Ctrl::Acting { deciding: Some(d), .. } => d.is_about(zone, pod),
            ctrl => matches!(ctrl.cleared(), Some(Op::Delete { zone: z, pod: p, .. }) if (z, p) == (zone, pod)),
        };
        drains || ctrl
    }

    /// How many times one pod may be recreated: once for the rollout and once per eviction. More means pods are
    /// replaced in a loop (and keeps the state space finite).
    pub fn max_generation(&self) -> u8 {
        self.config.evictions.saturating_add(u8::from(self.config.rollout))
    }

    /// Whether a decision about the pod is in flight, or allowed and not committed, other than the controller's.
    pub(super) fn being_decided(s: &ZpdbState, zone: u8, pod: u8) -> bool {
        let mut others = s.clone();
        others.ctrl = Ctrl::Idle { blocked: false };
        Self::intent_relied_on(&others, zone, pod)
    }

    pub(super) fn decisions_in_flight(s: &ZpdbState) -> usize {
        let drains = s.drains.iter().filter(|d| matches!(d, Drain::Deciding(_))).count();
        drains + usize::from(matches!(s.ctrl, Ctrl::Acting { deciding: Some(_), .. }))
    }

    /// Every zone on its update revision with currentRevision advanced, every pod there and ready, nobody acting.
    pub fn is_converged(s: &ZpdbState) -> bool {
        s.pending.is_empty()
            && matches!(s.ctrl, Ctrl::Idle { .. })
            && s.drains.iter().all(|d| *d == Drain::Idle)
            && s.truth
                .zones
                .iter()
                .all(|z| z.current == z.update && z.pods.iter().all(|p| p.available() && p.revision == z.update))
    }

    pub fn is_quiescent(&self, s: &ZpdbState) -> bool {
        let mut steps = Vec::new();
        self.actions(s, &mut steps);
        steps.is_empty()
    }

    /// One line of the truth: `ingester-zone-a r1/r0 [1R 0r*! -]`: update/current revision; each pod's revision, R
    /// ready or r not, * terminating, ! an eviction intent; - missing.
    pub fn describe(w: &World) -> String {
        let mut out = String::new();
        for (z, zone) in w.zones.iter().enumerate() {
            let pods: Vec<String> = zone
                .pods
                .iter()
                .map(|p| {
                    if !p.exists {
                        return "-".to_string();
                    }
                    let ready = if p.ready { "R" } else { "r" };
                    let terminating = if p.terminating { "*" } else { "" };
                    let intent = if p.has_intent() { "!" } else { "" };
                    format!("{}{ready}{terminating}{intent}", p.revision)
                })
                .collect();
            let sep = if z > 0 { "; " } else { "" };
            let _ = write!(out, "{sep}{} r{}/r{} [{}]", STATEFULSETS[z], zone.update, zone.current, pods.join(" "));
        }
        out
    }

    /// A counterexample path for people: each step, what the deciders wait on, and the truth after it.
    pub fn timeline(&self, path: &[(ZpdbState, Option<ZpdbStep>)]) -> String {
        let mut out = String::new();
        if let Some((first, _)) = path.first() {
            let _ = writeln!(out, "  0. initial\n       truth: {}", Self::describe(&first.truth));
        }
        for (i, pair) in path.windows(2).enumerate() {
            let ((_, step), (next, _)) = (&pair[0], &pair[1]);
            let step = step.map(|s| format!("{s:?}")).unwrap_or_default();
            let _ = writeln!(out, "{:>3}. {step}\n       truth: {}", i + 1, Self::describe(&next.truth));
            let _ = writeln!(out, "       webhooks: {:?}; controller: {:?}", next.drains, next.ctrl);
            if next.view != next.truth.planner_view() {
                let _ = writeln!(out, "       cache: {}", Self::describe(&next.view));
            }
            if next.violations != pair[0].0.violations {
                let _ = writeln!(out, "       VIOLATION: {}", violation_names(next.violations & !pair[0].0.violations));
            }
        }
        out
    }
}

pub fn violation_names(bits: u8) -> String {
    let mut names = Vec::new();
    for (bit, name) in [
        (violation::BUDGET_EXCEEDED_BY_EVICTION, "an eviction exceeded the budget"),
        (violation::BUDGET_EXCEEDED_BY_CONTROLLER, "a controller deletion exceeded the budget"),
        (violation::REPLACEMENT_LOOP, "pods replaced in a loop"),
    ] {
        if bits & bit != 0 {
            names.push(name);
        }
    }
    names.join(", ")
}
