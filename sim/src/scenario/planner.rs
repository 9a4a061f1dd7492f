//! Which planner the controller runs: the production one or a known-bug planner of `rollout-known-bugs`.

/// Which planner the controller runs: the production one, or a test-only one re-introducing a known bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlannerKind {
    Real,
    StatusCountReadiness,
    PausedLetsOthersProceed,
    NoExpectations,
    TerminatingCountsAsReady,
    /// Leader/follower downscales without the min-time check and without claiming them in the downscale record.
    SkipsMinTimeCheck,
    /// Replaces pods while the prepare-downscale webhook's in-progress marker of the group is live.
    IgnoresDownscalesInProgress,
    /// Downscales followers while another StatefulSet of the group is rolling or has unavailable pods.
    DownscalesDuringRollouts,
    /// Reads a percentage `rollout-max-unavailable` as a count.
    PercentAsCount,
    /// Counts a pod as available as soon as it is Ready, ignoring `minReadySeconds`.
    IgnoresMinReadySeconds,
    /// Plans on a status that does not describe the latest spec (`status.observedGeneration` ignored).
    IgnoresObservedGeneration,
    /// The min time between zone downscales checked against last downscales dated a second early (an off-by-one
    /// in rounding to seconds).
    MinTimeSecondEarly,
    /// Missing pods spend no unavailability budget (model/known-bugs).
    MissingPodsSpendNoBudget,
    /// A Ready pod above `spec.replicas` (condemned by a scale-down) stands in for a missing kept pod, as readiness
    /// counted by number once did (sim seeds 62 and 112).
    CondemnedPodFillsMissingSlot,
    /// A pod counts as available on its Ready condition alone, whatever its containers say.
    IgnoresContainerReadiness,
    /// `grafana.com/rollout-upscale-only-when-leader-ready` ignored: followers scale up at once.
    UpscalesBeforeLeaderReady,
    /// The rollout step is finished after a deletion whose answer was lost, while it may still commit.
    FinishesStepWhileOutcomeUnknown,
    /// A rollout step claim refused as stale (the record moved since the pass's read) taken as made.
    DeletesOnAStaleStepClaim,
    /// A follower's downscale claim refused taken as made: the replicas patched with no entry in the record.
    PatchesOnARefusedDownscaleClaim,
    /// A downscale's claim given back after its replica patch's answer was lost, while the patch may have committed.
    GivesBackAClaimWhoseOutcomeIsUnknown,
}

impl PlannerKind {
    pub const ALL: [PlannerKind; 20] = [
        PlannerKind::Real,
        PlannerKind::StatusCountReadiness,
        PlannerKind::PausedLetsOthersProceed,
        PlannerKind::NoExpectations,
        PlannerKind::TerminatingCountsAsReady,
        PlannerKind::SkipsMinTimeCheck,
        PlannerKind::IgnoresDownscalesInProgress,
        PlannerKind::DownscalesDuringRollouts,
        PlannerKind::PercentAsCount,
        PlannerKind::IgnoresMinReadySeconds,
        PlannerKind::IgnoresObservedGeneration,
        PlannerKind::MinTimeSecondEarly,
        PlannerKind::MissingPodsSpendNoBudget,
        PlannerKind::CondemnedPodFillsMissingSlot,
        PlannerKind::IgnoresContainerReadiness,
        PlannerKind::UpscalesBeforeLeaderReady,
        PlannerKind::FinishesStepWhileOutcomeUnknown,
        PlannerKind::DeletesOnAStaleStepClaim,
        PlannerKind::PatchesOnARefusedDownscaleClaim,
        PlannerKind::GivesBackAClaimWhoseOutcomeIsUnknown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PlannerKind::Real => "real",
            PlannerKind::StatusCountReadiness => "status-count-readiness",
            PlannerKind::PausedLetsOthersProceed => "paused-lets-others-proceed",
            PlannerKind::NoExpectations => "no-expectations",
            PlannerKind::TerminatingCountsAsReady => "terminating-counts-as-ready",
            PlannerKind::SkipsMinTimeCheck => "skips-min-time-check",
            PlannerKind::IgnoresDownscalesInProgress => "ignores-downscales-in-progress",
            PlannerKind::DownscalesDuringRollouts => "downscales-during-rollouts",
            PlannerKind::PercentAsCount => "percent-as-count",
            PlannerKind::IgnoresMinReadySeconds => "ignores-min-ready-seconds",
            PlannerKind::IgnoresObservedGeneration => "ignores-observed-generation",
            PlannerKind::MinTimeSecondEarly => "min-time-second-early",
            PlannerKind::MissingPodsSpendNoBudget => "missing-pods-spend-no-budget",
            PlannerKind::CondemnedPodFillsMissingSlot => "condemned-pod-fills-missing-slot",
            PlannerKind::IgnoresContainerReadiness => "ignores-container-readiness",
            PlannerKind::UpscalesBeforeLeaderReady => "upscales-before-leader-ready",
            PlannerKind::FinishesStepWhileOutcomeUnknown => "finishes-step-while-outcome-unknown",
            PlannerKind::DeletesOnAStaleStepClaim => "deletes-on-a-stale-step-claim",
            PlannerKind::PatchesOnARefusedDownscaleClaim => "patches-on-a-refused-downscale-claim",
            PlannerKind::GivesBackAClaimWhoseOutcomeIsUnknown => "gives-back-a-claim-whose-outcome-is-unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}
