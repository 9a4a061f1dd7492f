//! Carrying out a pass's plan, as an explicit step machine: which write comes next, and what each outcome means for
//! the rest of the pass.
//!
//! Owns the execution policy: the rollout step claimed before any deletion and finished after them unless a
//! deletion's outcome is unknown; each deletion judged by the budgets first, and once one is held back the pass's
//! other deletions wait; deletions sent only while the step's claim outlives the request; a coordinated downscale
//! claimed in the record (zone tracker) or dated in its own annotation (without), its claim given back after a
//! definite failure and kept after an unknown one; the first failed write ends the pass; a refused permission turns
//! its feature off; the expectation each write leaves. Must not do I/O or read a clock: the shell carries out each
//! [`Need`] (and checks its leadership before every write) and feeds back what it saw with the `now` of the answer.
//! The reconciler drives it; so does the model.

use crate::actions::Action;
use crate::defences::{Defences, Layer};
use crate::downscale::{ClaimEnd, downscale_committed_by, time_after};
use crate::expectations::PendingExpectation;
use crate::failure::Failure;
use crate::pass::{ExpectationLifetimes, WriteOutcome, expectation_after, may_send_step_deletion};
use crate::zpdb::BudgetHold;
use jiff::Timestamp;
use std::time::Duration;

/// The outcome of claiming the rollout step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StepClaimed {
    /// Recorded as in progress until `until` (as stored).
    Claimed { until: Timestamp },
    /// The record moved since the pass read it: nothing was written; plan again on a fresh read.
    Stale,
}

/// The outcome of claiming a coordinated downscale in the record.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum DownscaleClaimed {
    /// Recorded with its in-progress marker until `until`; `previous` is the entry before the claim.
    Claimed { previous: Option<Timestamp>, until: Timestamp },
    /// Another downscale or a rollout step holds it, or the min time has not elapsed: not scaled this pass.
    Refused(String),
}

/// An optional feature whose permission was refused while executing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusedFeature {
    /// The zone tracker's ConfigMap.
    ZoneTracker,
    /// Changing replicas (`patch` on StatefulSets).
    Scaling,
}

/// The execution's settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExecutionSettings {
    pub defences: Defences,
    /// The zone tracker's record may be written: coordinated downscales are claimed in it.
    pub zone_tracker: bool,
    /// The controller honours ZoneAwarePodDisruptionBudgets: each deletion is judged live first.
    pub budgets: bool,
    /// How long a claim (of a step or a downscale) holds.
    pub claim_ttl: Duration,
    /// How long after its answer a replica change is taken to have committed.
    pub commit_margin: Duration,
    /// The longest a request may be in flight.
    pub request_bound: Duration,
    pub lifetimes: ExpectationLifetimes,
}

/// What the execution needs next.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Need {
    /// Claim the rollout step in the record, conditional on the version the pass read, until `until`.
    ClaimStep {
        until: Timestamp,
    },
    /// Judge the deletion of `pod` by the budgets, live.
    JudgeDeletion {
        statefulset: String,
        pod: String,
    },
    /// Delete the pod, with its uid as precondition when given.
    DeletePod {
        statefulset: String,
        pod: String,
        uid: Option<String>,
    },
    /// Update the StatefulSet's status, conditional on the resourceVersion the plan was made from.
    SetCurrentRevision {
        statefulset: String,
        revision: String,
        resource_version: String,
    },
    /// Claim the downscale of `statefulset` in the record at `now`, holding until `until`.
    ClaimDownscale {
        statefulset: String,
        now: Timestamp,
        until: Timestamp,
    },
    /// Patch `spec.replicas` (and `grafana.com/last-downscale` when given, in the same write), conditional on the
    /// resourceVersion the plan was made from.
    PatchReplicas {
        statefulset: String,
        to: u32,
        resource_version: String,
        last_downscale: Option<Timestamp>,
    },
    /// End the downscale claim made until `until` (a failure is only logged: the marker expires by itself).
    EndClaim {
        statefulset: String,
        until: Timestamp,
        end: ClaimEnd,
    },
    /// Turn the feature off: its permission was refused (one log line, the metric, tried again later).
    TurnOff {
        feature: RefusedFeature,
        failure: Failure,
    },
    /// End the rollout step claimed until `until` (a failure is only logged: it expires by itself).
    FinishStep {
        until: Timestamp,
    },
    Done(Finished),
}

impl Need {
    /// The need's name, as logs and the simulation's reports give it.
    pub fn kind(&self) -> &'static str {
        match self {
            Need::ClaimStep { .. } => "claim-step",
            Need::JudgeDeletion { .. } => "judge-deletion",
            Need::DeletePod { .. } => "delete-pod",
            Need::SetCurrentRevision { .. } => "set-current-revision",
            Need::ClaimDownscale { .. } => "claim-downscale",
            Need::PatchReplicas { .. } => "patch-replicas",
            Need::EndClaim { .. } => "end-claim",
            Need::TurnOff { .. } => "turn-off",
            Need::FinishStep { .. } => "finish-step",
            Need::Done(_) => "done",
        }
    }

    /// The needs whose failure the machine observes (the others cannot fail, or only get logged).
    pub const FALLIBLE: &[&str] =
        &["claim-step", "delete-pod", "set-current-revision", "claim-downscale", "patch-replicas"];
}

/// What the shell saw when it carried out the last need.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Observed {
    Start,
    StepClaimed(Result<StepClaimed, Failure>),
    /// The budgets' answer: `Some` when they hold the deletion back.
    Judged(Option<BudgetHold>),
    /// A deletion, a status update or a replica patch answered.
    Written(Result<(), Failure>),
    DownscaleClaimed(Result<DownscaleClaimed, Failure>),
    /// An end of claim, a feature turned off or a step finished: done, whatever its own outcome.
    Acknowledged,
}

impl Observed {
    /// The failure it reports, if any.
    pub fn failure(&self) -> Option<&Failure> {
        match self {
            Observed::StepClaimed(Err(f)) | Observed::Written(Err(f)) | Observed::DownscaleClaimed(Err(f)) => Some(f),
            _ => None,
        }
    }
}

/// How the execution ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// Every action was carried out, held back or skipped by design.
    Completed,
    /// The step's claim found the record moved: plan again at once.
    Replan,
    /// This write or claim failed, and the rest of the plan was not carried out.
    Failed(Failure),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Finished {
    pub outcome: Outcome,
    /// The deletion the budgets held back, with the rest of the pass's deletions.
    pub held: Option<BudgetHold>,
    /// The step's claim was about to expire: the remaining deletions wait for the next pass.
    pub step_expiring: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Phase {
    Start,
    ClaimingStep,
    Judging,
    Writing,
    ClaimingDownscale,
    /// The replica patch of a claimed downscale: the claim's entry before it and its end.
    Patching {
        claim: Option<(Option<Timestamp>, Timestamp)>,
    },
    /// Acknowledgements owed before going on: the needs still to send, then what comes after them.
    Owing {
        needs: Vec<Need>,
        then: Then,
    },
    FinishingStep(Outcome),
    Done(Finished),
    Stepping,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Then {
    NextAction,
    Fail(Failure),
}

/// One pass's execution, from its plan to its end.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Execution {
    actions: Vec<Action>,
    settings: ExecutionSettings,
    claims_step: bool,
    phase: Phase,
    /// The action being carried out.
    index: usize,
    step_until: Option<Timestamp>,
    held: Option<BudgetHold>,
    step_expiring: bool,
    applied: Vec<Action>,
    expectations: Vec<PendingExpectation>,
}

impl Execution {
    /// The execution of `actions` (a pass's plan, in order); `claims_step`: the rollout step must be claimed first.
    pub fn new(actions: Vec<Action>, claims_step: bool, settings: ExecutionSettings) -> Self {
        Execution {
            actions,
            settings,
            claims_step,
            phase: Phase::Start,
            index: 0,
            step_until: None,
            held: None,
            step_expiring: false,
            applied: Vec::new(),
            expectations: Vec::new(),
        }
    }

    /// The writes the API applied so far.
    pub fn applied(&self) -> &[Action] {
        &self.applied
    }

    /// The plan being carried out.
    pub fn actions(&self) -> &[Action] {
        &self.actions
    }

    /// The action being carried out (none once the plan is through).
    pub fn current_action(&self) -> Option<&Action> {
        self.actions.get(self.index)
    }

    /// Until when the rollout step is claimed, while the execution holds its claim (claimed and not yet finished
    /// or left to expire).
    pub fn step_claimed_until(&self) -> Option<Timestamp> {
        self.step_until
    }

    /// Whether a deletion of the plan may still be sent (the step's claim must then hold).
    pub fn deletions_to_come(&self) -> bool {
        let ended = matches!(self.phase, Phase::Done(_) | Phase::FinishingStep(_));
        !ended
            && self.held.is_none()
            && self.actions.iter().skip(self.index).any(|a| matches!(a, Action::DeletePod { .. }))
    }

    /// The expectations the writes so far left, to keep until the cache shows them (taken: each is given once).
    pub fn take_expectations(&mut self) -> Vec<PendingExpectation> {
        std::mem::take(&mut self.expectations)
    }

    /// Takes what the shell observed for the last need (at `now`) and says what is needed next. Once done, it keeps
    /// answering the same.
    pub fn step(&mut self, observed: Observed, now: Timestamp) -> Need {
        let phase = std::mem::replace(&mut self.phase, Phase::Stepping);
        match (phase, observed) {
            (Phase::Start, Observed::Start) if self.claims_step => {
                self.phase = Phase::ClaimingStep;
                Need::ClaimStep { until: time_after(now, self.settings.claim_ttl) }
            }
            (Phase::Start, Observed::Start) => self.next_action(now),
            (Phase::ClaimingStep, Observed::StepClaimed(claimed)) => match claimed {
                Ok(StepClaimed::Claimed { until }) => {
                    self.step_until = Some(until);
                    self.next_action(now)
                }
                Ok(StepClaimed::Stale) => self.done(Outcome::Replan),
                // Disabled, not failed: the rollout goes on without the step's claim (the webhook, with the same
                // rights, cannot claim downscales either).
                Err(failure @ Failure::Forbidden(_)) => {
                    let turn_off = Need::TurnOff { feature: RefusedFeature::ZoneTracker, failure };
                    self.owe(vec![turn_off], Then::NextAction, now)
                }
                Err(failure) => self.done(Outcome::Failed(failure)),
            },
            (Phase::Judging, Observed::Judged(Some(hold))) => {
                self.held = Some(hold);
                self.index += 1;
                self.next_action(now)
            }
            (Phase::Judging, Observed::Judged(None)) => self.delete(),
            (Phase::Writing, Observed::Written(written)) => self.written(written, now),
            (Phase::ClaimingDownscale, Observed::DownscaleClaimed(claimed)) => match claimed {
                Ok(DownscaleClaimed::Claimed { previous, until }) => self.patch(None, Some((previous, until))),
                // Nothing was written: nothing to expect.
                Ok(DownscaleClaimed::Refused(_)) => {
                    self.index += 1;
                    self.next_action(now)
                }
                Err(failure @ Failure::Forbidden(_)) => {
                    self.index += 1;
                    let turn_off = Need::TurnOff { feature: RefusedFeature::ZoneTracker, failure };
                    self.owe(vec![turn_off], Then::NextAction, now)
                }
                Err(failure) => self.done(Outcome::Failed(failure)),
            },
            (Phase::Patching { claim }, Observed::Written(written)) => self.patched(claim, written, now),
            (Phase::Owing { needs, then }, Observed::Acknowledged) => self.owe(needs, then, now),
            (Phase::FinishingStep(outcome), Observed::Acknowledged) => self.finished(outcome),
            (Phase::Done(finished), _) => {
                self.phase = Phase::Done(finished.clone());
                Need::Done(finished)
            }
            // The shell fed an observation the execution did not ask for: a bug. Nothing more is written.
            (phase, observed) => self.finished(Outcome::Failed(Failure::Failed(format!(
                "internal error: the execution expected {phase:?} but observed {observed:?}"
            )))),
        }
    }

    /// The next action to carry out, from `self.index`.
    fn next_action(&mut self, now: Timestamp) -> Need {
        while let Some(action) = self.actions.get(self.index).cloned() {
            match action {
                // Once the budgets hold a deletion back, the pass's other deletions wait for the next pass too.
                Action::DeletePod { .. } if self.held.is_some() => self.index += 1,
                Action::DeletePod { statefulset, pod, .. } => {
                    // A deletion still in flight after the step's claim expired could commit while a downscale the
                    // claim no longer holds off is being prepared: the rest waits for the next pass.
                    if let Some(until) = self.step_until
                        && !may_send_step_deletion(now, until, self.settings.request_bound)
                    {
                        self.step_expiring = true;
                        return self.done(Outcome::Completed);
                    }
                    if !self.settings.budgets {
                        return self.delete();
                    }
                    self.phase = Phase::Judging;
                    return Need::JudgeDeletion { statefulset, pod };
                }
                Action::SetCurrentRevision { statefulset, revision, resource_version, .. } => {
                    self.phase = Phase::Writing;
                    return Need::SetCurrentRevision { statefulset, revision, resource_version };
                }
                Action::Scale { statefulset, coordinated_downscale: true, .. } if self.settings.zone_tracker => {
                    // Decided when claimed, not when planned: the plan may be seconds old under API latency.
                    self.phase = Phase::ClaimingDownscale;
                    return Need::ClaimDownscale { statefulset, now, until: time_after(now, self.settings.claim_ttl) };
                }
                // Without the zone tracker, recorded as the reference does without one, in the StatefulSet's own
                // annotation, in the same write, dated when it will have committed.
                Action::Scale { coordinated_downscale: true, .. } => {
                    return self.patch(Some(downscale_committed_by(now, self.settings.commit_margin)), None);
                }
                Action::Scale { .. } => return self.patch(None, None),
            }
        }
        self.done(Outcome::Completed)
    }

    fn delete(&mut self) -> Need {
        let Some(Action::DeletePod { statefulset, pod, uid, .. }) = self.actions.get(self.index).cloned() else {
            return self.done(Outcome::Failed(Failure::Failed("internal error: no deletion to send".into())));
        };
        let uid = self.settings.defences.has(Layer::UidPreconditions).then_some(uid);
        self.phase = Phase::Writing;
        Need::DeletePod { statefulset, pod, uid }
    }

    fn patch(&mut self, last_downscale: Option<Timestamp>, claim: Option<(Option<Timestamp>, Timestamp)>) -> Need {
        let Some(Action::Scale { statefulset, to, resource_version, .. }) = self.actions.get(self.index).cloned()
        else {
            return self.done(Outcome::Failed(Failure::Failed("internal error: no replica change to send".into())));
        };
        self.phase = Phase::Patching { claim };
        Need::PatchReplicas { statefulset, to, resource_version, last_downscale }
    }

    /// A deletion or a status update answered.
    fn written(&mut self, written: Result<(), Failure>, now: Timestamp) -> Need {
        // A pod already gone is the outcome a deletion wanted.
        let deletion = matches!(self.actions.get(self.index), Some(Action::DeletePod { .. }));
        let written = match written {
            Err(Failure::NotFound(_)) if deletion => Ok(()),
            other => other,
        };
        self.expect(&written, now);
        match written {
            Ok(()) => {
                self.index += 1;
                self.next_action(now)
            }
            Err(failure) => self.done(Outcome::Failed(failure)),
        }
    }

    /// A replica patch answered; `claim`: the downscale's claim in the record, to end.
    fn patched(
        &mut self,
        claim: Option<(Option<Timestamp>, Timestamp)>,
        written: Result<(), Failure>,
        now: Timestamp,
    ) -> Need {
        self.expect(&written, now);
        let statefulset = self.actions.get(self.index).map(|a| a.statefulset().to_string()).unwrap_or_default();
        let mut needs = Vec::new();
        match written {
            Ok(()) => {
                // The reply comes after the commit: the downscale is dated now.
                if let Some((_, until)) = claim {
                    needs.push(Need::EndClaim { statefulset, until, end: ClaimEnd::Committed { at: now } });
                }
                self.index += 1;
                self.owe(needs, Then::NextAction, now)
            }
            Err(failure) => {
                // Definitely not applied: the claim goes back, so the next pass can try again at once. An unknown
                // outcome may still commit: its claim is left to date it.
                if let (Some((previous, until)), false) = (claim, failure.outcome_unknown()) {
                    needs.push(Need::EndClaim { statefulset, until, end: ClaimEnd::Undone { previous } });
                }
                // RBAC's refusal turns scaling off; a webhook's denial is a judgement of this change only.
                if let Failure::Forbidden(_) = failure {
                    needs.push(Need::TurnOff { feature: RefusedFeature::Scaling, failure: failure.clone() });
                }
                self.owe(needs, Then::Fail(failure), now)
            }
        }
    }

    /// The expectation the current action's write leaves (planning as if a write that may have happened had not
    /// could act twice), and the write counted as applied.
    fn expect(&mut self, written: &Result<(), Failure>, now: Timestamp) {
        let Some(action) = self.actions.get(self.index) else { return };
        let outcome = match written {
            Ok(()) => WriteOutcome::Applied,
            Err(f) if f.outcome_unknown() => WriteOutcome::Unknown,
            Err(_) => WriteOutcome::Refused,
        };
        if outcome == WriteOutcome::Applied {
            self.applied.push(action.clone());
        }
        self.expectations.extend(expectation_after(action, outcome, now, &self.settings.lifetimes));
    }

    /// Sends `needs` one after the other (each acknowledged), then goes on with `then`.
    fn owe(&mut self, mut needs: Vec<Need>, then: Then, now: Timestamp) -> Need {
        if needs.is_empty() {
            return self.then(then, now);
        }
        let first = needs.remove(0);
        self.phase = Phase::Owing { needs, then };
        first
    }

    fn then(&mut self, then: Then, now: Timestamp) -> Need {
        match then {
            Then::NextAction => self.next_action(now),
            Then::Fail(failure) => self.done(Outcome::Failed(failure)),
        }
    }

    /// The pass's writes are over: the step is finished unless a write's outcome is unknown (it may still commit,
    /// so its step is left to expire).
    fn done(&mut self, outcome: Outcome) -> Need {
        let unknown = matches!(&outcome, Outcome::Failed(f) if f.outcome_unknown());
        match self.step_until.take() {
            Some(until) if !unknown => {
                self.phase = Phase::FinishingStep(outcome);
                Need::FinishStep { until }
            }
            _ => self.finished(outcome),
        }
    }

    fn finished(&mut self, outcome: Outcome) -> Need {
        let finished = Finished { outcome, held: self.held.clone(), step_expiring: self.step_expiring };
        self.phase = Phase::Done(finished.clone());
        Need::Done(finished)
    }
}
