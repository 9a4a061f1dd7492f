//! The execution step machine on scripted answers: each test plays the API server's side and checks the needs the
//! machine asks for, in order, and how it ends.

use jiff::Timestamp;
use rollout_core::Failure;
use rollout_core::downscale::ClaimEnd;
use rollout_core::execution::{
    DownscaleClaimed, Execution, ExecutionSettings, Finished, Need, Observed, Outcome, RefusedFeature, StepClaimed,
};
use rollout_core::pass::ExpectationLifetimes;
use rollout_core::zpdb::BudgetHold;
use rollout_core::{Action, Defences};
use std::time::Duration;

fn t(secs: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + secs).unwrap()
}

fn settings() -> ExecutionSettings {
    ExecutionSettings {
        defences: Defences::ALL,
        zone_tracker: false,
        budgets: false,
        claim_ttl: Duration::from_secs(120),
        commit_margin: Duration::from_secs(10),
        request_bound: Duration::from_secs(60),
        lifetimes: ExpectationLifetimes { applied: Duration::from_secs(300), unknown: Duration::from_secs(70) },
    }
}

fn delete(pod: &str) -> Action {
    Action::DeletePod {
        statefulset: pod.rsplit_once('-').unwrap().0.to_string(),
        pod: pod.into(),
        uid: format!("uid-{pod}"),
        reason: String::new(),
    }
}

fn advance(sts: &str) -> Action {
    Action::SetCurrentRevision {
        statefulset: sts.into(),
        revision: "r1".into(),
        resource_version: "7".into(),
        reason: String::new(),
    }
}

fn downscale(sts: &str, coordinated: bool) -> Action {
    Action::Scale {
        statefulset: sts.into(),
        from: 3,
        to: 2,
        reason: String::new(),
        resource_version: "9".into(),
        coordinated_downscale: coordinated,
    }
}

fn hold(pod: &str) -> BudgetHold {
    BudgetHold {
        statefulset: "a".into(),
        pod: pod.into(),
        budget: Some("zpdb".into()),
        message: "1 pod not ready in a".into(),
        unavailable: vec!["a-2".into()],
    }
}

/// Runs `exec` to its end, answering each need with `answer` (at `now`); the needs it asked for, and the end.
fn drive(mut exec: Execution, now: Timestamp, mut answer: impl FnMut(&Need) -> Observed) -> (Vec<Need>, Finished) {
    let mut needs = Vec::new();
    let mut observed = Observed::Start;
    for _ in 0..64 {
        match exec.step(observed, now) {
            Need::Done(finished) => return (needs, finished),
            need => {
                observed = answer(&need);
                needs.push(need);
            }
        }
    }
    panic!("the execution did not end: {needs:?}");
}

fn ok(need: &Need) -> Observed {
    match need {
        Need::ClaimStep { until } => Observed::StepClaimed(Ok(StepClaimed::Claimed { until: *until })),
        Need::JudgeDeletion { .. } => Observed::Judged(None),
        Need::DeletePod { .. } | Need::SetCurrentRevision { .. } | Need::PatchReplicas { .. } => {
            Observed::Written(Ok(()))
        }
        Need::ClaimDownscale { until, .. } => {
            Observed::DownscaleClaimed(Ok(DownscaleClaimed::Claimed { previous: Some(t(-999)), until: *until }))
        }
        Need::EndClaim { .. } | Need::TurnOff { .. } | Need::FinishStep { .. } => Observed::Acknowledged,
        Need::Done(_) => unreachable!(),
    }
}

fn kinds(needs: &[Need]) -> Vec<String> {
    needs
        .iter()
        .map(|n| match n {
            Need::ClaimStep { .. } => "claim-step".to_string(),
            Need::JudgeDeletion { pod, .. } => format!("judge {pod}"),
            Need::DeletePod { pod, .. } => format!("delete {pod}"),
            Need::SetCurrentRevision { statefulset, .. } => format!("advance {statefulset}"),
            Need::ClaimDownscale { statefulset, .. } => format!("claim-downscale {statefulset}"),
            Need::PatchReplicas { statefulset, .. } => format!("patch {statefulset}"),
            Need::EndClaim { end: ClaimEnd::Committed { .. }, .. } => "end-claim committed".to_string(),
            Need::EndClaim { end: ClaimEnd::Undone { .. }, .. } => "end-claim undone".to_string(),
            Need::TurnOff { feature, .. } => format!("turn-off {feature:?}"),
            Need::FinishStep { .. } => "finish-step".to_string(),
            Need::Done(_) => "done".to_string(),
        })
        .collect()
}

#[test]
fn once_a_budget_holds_a_deletion_the_other_deletions_wait_and_the_other_writes_go_on() {
    let exec = Execution::new(
        vec![delete("a-0"), delete("a-1"), advance("b")],
        false,
        ExecutionSettings { budgets: true, ..settings() },
    );
    let (needs, end) = drive(exec, t(0), |need| match need {
        Need::JudgeDeletion { pod, .. } if pod == "a-0" => Observed::Judged(Some(hold(pod))),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["judge a-0", "advance b"]);
    assert_eq!(end.outcome, Outcome::Completed);
    assert_eq!(end.held, Some(hold("a-0")));
}

#[test]
fn a_claim_is_given_back_after_a_definite_failure_and_kept_after_an_unknown_one() {
    let tracked = ExecutionSettings { zone_tracker: true, ..settings() };
    let exec = Execution::new(vec![downscale("b", true)], false, tracked);
    let (needs, end) = drive(exec, t(0), |need| match need {
        Need::PatchReplicas { .. } => Observed::Written(Err(Failure::Conflict("moved".into()))),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["claim-downscale b", "patch b", "end-claim undone"]);
    assert!(matches!(needs[2], Need::EndClaim { end: ClaimEnd::Undone { previous: Some(p) }, .. } if p == t(-999)));
    assert_eq!(end.outcome, Outcome::Failed(Failure::Conflict("moved".into())));

    let mut exec = Execution::new(vec![downscale("b", true)], false, tracked);
    let mut observed = Observed::Start;
    let mut asked = Vec::new();
    let end = loop {
        match exec.step(observed, t(0)) {
            Need::Done(end) => break end,
            Need::PatchReplicas { .. } => observed = Observed::Written(Err(Failure::Unavailable("timeout".into()))),
            need => {
                observed = ok(&need);
                asked.push(need);
            }
        }
    };
    assert_eq!(kinds(&asked), ["claim-downscale b"], "the claim stays to date a write that may still commit");
    assert_eq!(end.outcome, Outcome::Failed(Failure::Unavailable("timeout".into())));
    let expected = exec.take_expectations();
    assert_eq!(expected.len(), 1);
    assert_eq!(expected[0].expires_at, t(70), "an unknown outcome is expected for as long as a request can take");
}

#[test]
fn a_committed_downscale_ends_its_claim_dated_at_the_answer() {
    let exec =
        Execution::new(vec![downscale("b", true)], false, ExecutionSettings { zone_tracker: true, ..settings() });
    let (needs, end) = drive(exec, t(5), ok);
    assert_eq!(kinds(&needs), ["claim-downscale b", "patch b", "end-claim committed"]);
    assert!(matches!(needs[2], Need::EndClaim { end: ClaimEnd::Committed { at }, .. } if at == t(5)));
    assert_eq!(end.outcome, Outcome::Completed);
}

#[test]
fn without_the_zone_tracker_a_coordinated_downscale_is_dated_in_its_own_write() {
    let exec = Execution::new(vec![downscale("b", true), downscale("c", false)], false, settings());
    let at = "2027-01-15T08:00:00.250Z".parse().unwrap();
    let (needs, _) = drive(exec, at, ok);
    let dated = "2027-01-15T08:00:11Z".parse::<Timestamp>().unwrap();
    assert!(matches!(&needs[0], Need::PatchReplicas { last_downscale: Some(d), .. } if *d == dated), "{needs:?}");
    assert!(matches!(&needs[1], Need::PatchReplicas { last_downscale: None, .. }), "{needs:?}");
}

#[test]
fn the_step_is_finished_unless_a_deletions_outcome_is_unknown() {
    let exec = Execution::new(vec![delete("a-0"), delete("a-1")], true, settings());
    let (needs, end) = drive(exec, t(0), ok);
    assert_eq!(kinds(&needs), ["claim-step", "delete a-0", "delete a-1", "finish-step"]);
    assert_eq!(end.outcome, Outcome::Completed);

    let exec = Execution::new(vec![delete("a-0"), delete("a-1")], true, settings());
    let (needs, end) = drive(exec, t(0), |need| match need {
        Need::DeletePod { pod, .. } if pod == "a-0" => Observed::Written(Err(Failure::Unavailable("lost".into()))),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["claim-step", "delete a-0"], "stops at the failure; the step is left to expire");
    assert_eq!(end.outcome, Outcome::Failed(Failure::Unavailable("lost".into())));

    // A definite failure: the step is over.
    let exec = Execution::new(vec![delete("a-0")], true, settings());
    let (needs, _) = drive(exec, t(0), |need| match need {
        Need::DeletePod { .. } => Observed::Written(Err(Failure::Conflict("uid".into()))),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["claim-step", "delete a-0", "finish-step"]);
}

#[test]
fn a_stale_step_claim_replans_and_writes_nothing() {
    let exec = Execution::new(vec![delete("a-0")], true, settings());
    let (needs, end) = drive(exec, t(0), |need| match need {
        Need::ClaimStep { .. } => Observed::StepClaimed(Ok(StepClaimed::Stale)),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["claim-step"]);
    assert_eq!(end.outcome, Outcome::Replan);
}

#[test]
fn deletions_wait_once_the_step_claim_would_expire_while_they_are_in_flight() {
    let exec = Execution::new(vec![delete("a-0")], true, settings());
    let (needs, end) = drive(exec, t(0), |need| match need {
        // Claimed until 30 s from now, but a request may take 60 s.
        Need::ClaimStep { .. } => Observed::StepClaimed(Ok(StepClaimed::Claimed { until: t(30) })),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["claim-step", "finish-step"]);
    assert!(end.step_expiring);
    assert_eq!(end.outcome, Outcome::Completed);
}

#[test]
fn a_refused_step_claim_turns_the_tracker_off_and_the_rollout_goes_on() {
    let exec = Execution::new(vec![delete("a-0")], true, settings());
    let (needs, end) = drive(exec, t(0), |need| match need {
        Need::ClaimStep { .. } => Observed::StepClaimed(Err(Failure::Forbidden("configmaps".into()))),
        other => ok(other),
    });
    assert_eq!(kinds(&needs), ["claim-step", "turn-off ZoneTracker", "delete a-0"]);
    assert_eq!(end.outcome, Outcome::Completed);
}

#[test]
fn rbacs_refusal_of_a_replica_change_turns_scaling_off_but_a_webhooks_denial_does_not() {
    let refused = |failure: Failure| {
        let exec = Execution::new(vec![downscale("b", false)], false, settings());
        drive(exec, t(0), move |need| match need {
            Need::PatchReplicas { .. } => Observed::Written(Err(failure.clone())),
            other => ok(other),
        })
    };
    let (needs, end) = refused(Failure::Forbidden("statefulsets".into()));
    assert_eq!(kinds(&needs), ["patch b", "turn-off Scaling"]);
    assert!(matches!(needs[1], Need::TurnOff { feature: RefusedFeature::Scaling, .. }));
    assert_eq!(end.outcome, Outcome::Failed(Failure::Forbidden("statefulsets".into())));
    let (needs, _) = refused(Failure::Denied("admission webhook said no".into()));
    assert_eq!(kinds(&needs), ["patch b"]);
}

#[test]
fn a_pod_already_gone_is_a_deletion_done_and_uid_preconditions_are_sent() {
    let mut exec = Execution::new(vec![delete("a-0"), advance("a")], false, settings());
    let first = exec.step(Observed::Start, t(0));
    assert_eq!(first, Need::DeletePod { statefulset: "a".into(), pod: "a-0".into(), uid: Some("uid-a-0".into()) });
    let next = exec.step(Observed::Written(Err(Failure::NotFound("gone".into()))), t(0));
    assert!(matches!(next, Need::SetCurrentRevision { .. }), "{next:?}");
    assert_eq!(exec.applied(), [delete("a-0")]);
    assert_eq!(exec.take_expectations().len(), 1);
    let without =
        ExecutionSettings { defences: Defences::ALL.without(&[rollout_core::Layer::UidPreconditions]), ..settings() };
    let mut exec = Execution::new(vec![delete("a-0")], false, without);
    assert!(matches!(exec.step(Observed::Start, t(0)), Need::DeletePod { uid: None, .. }));
}

#[test]
fn an_observation_out_of_order_ends_the_execution_without_writing() {
    let mut exec = Execution::new(vec![delete("a-0")], false, settings());
    let _ = exec.step(Observed::Start, t(0));
    let end = exec.step(Observed::StepClaimed(Ok(StepClaimed::Stale)), t(0));
    assert!(matches!(end, Need::Done(Finished { outcome: Outcome::Failed(Failure::Failed(_)), .. })), "{end:?}");
    assert!(matches!(exec.step(Observed::Written(Ok(())), t(0)), Need::Done(_)), "once done it stays done");
}
