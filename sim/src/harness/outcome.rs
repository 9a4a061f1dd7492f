//! How a run ends: waiting for convergence (and then for quiet), the run's verdict as an [`Outcome`] with its
//! counters, and what "converged" means for the world.

use crate::actors::mirror::reference_replicas;
use crate::environment::store::{SharedStore, Store};
use crate::oracle::checker::Violation;
use crate::oracle::events::EventStats;
use crate::scenario::Scenario;
use crate::trace::Trace;
use std::time::Duration;
use tokio::time::Instant;

/// After converging, the controller must make no write for this long.
pub(crate) const QUIET: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct Outcome {
    pub seed: u64,
    pub violations: Vec<Violation>,
    pub converged_at: Option<Duration>,
    pub sim_time: Duration,
    pub writes_judged: u64,
    pub trace: Trace,
    /// Committed decreases of `spec.replicas` (scaling scenario).
    pub downscales: u64,
    /// The shortest time between commits of decreases of two StatefulSets of the group.
    pub min_downscale_gap: Option<Duration>,
    /// Pairs of two zones' downscales committed less than a second more than the min time apart, by who made the
    /// later one: (the controller, the webhook or user).
    pub near_min_time: (u64, u64),
    /// Controller deletions in a StatefulSet being scaled, controller replica changes of one being rolled.
    pub rolled_while_scaling: u64,
    pub scaled_while_rolling: u64,
    /// Of those, decreases (a StatefulSet scaled down during its own rollout).
    pub downscaled_while_rolling: u64,
    /// Generations the StatefulSet controller took 5-60 s to observe.
    pub slow_observations: u64,
    /// The controller's reaction times and request counts.
    pub reactions: crate::oracle::reaction::Reactions,
    /// The Events the operator wrote.
    pub events: EventStats,
    /// No-downscale webhook answers judged: (denied, allowed).
    pub no_downscale_admissions: (u64, u64),
    /// The prepare-downscale webhook's answers to the no-downscale world's objects judged.
    pub prepare_foreign_admissions: u64,
    /// Pods removed by admitted downscales that the webhook must have prepared for shutdown, judged.
    pub prepared_pods: u64,
    /// How late each delayed downscale of the controller came once its pods had been preparing for the delay.
    pub delayed_downscale_lateness: Vec<Duration>,
    /// Denied downscales that had prepared pods, judged for their cancels.
    pub undos_judged: u64,
    /// How the webhook users' downscale requests ended (PATCH, or an HPA's PUT).
    pub scale_requests: crate::environment::guaranteed_update::ScaleRequestStats,
    /// The drains world's evictions.
    pub drains: crate::oracle::checker::budgets::DrainStats,
    /// The budget-edits worlds' admissions (what each edit was, how it ended), and the cuts of the operator's budget
    /// watches.
    pub budget_edits: Vec<(crate::actors::budget_editors::EditKind, crate::actors::budget_editors::EditResult)>,
    pub budget_watch_cuts: usize,
    /// The HA world's Lease judgements and failovers (the failovers after any loss of the leader, with whether the
    /// new leader had been cut off, in `ha.failovers_after_loss`).
    pub ha: crate::oracle::election::HaStats,
    /// The faults injected, with when each began and healed.
    pub faults: Vec<crate::oracle::reaction::FaultWindow>,
    /// From each fault's heal (while a group had work) to the controller's next committed write answering that work.
    pub heal_to_write: Vec<Duration>,
    /// The controller's own "rollout group" log lines: each change of a group's state or of its pass's reason.
    pub pass_reports: Vec<crate::harness::pass_log::PassReport>,
    /// The step machines' needs seen failing: (machine, need, kind of failure) and how often.
    pub failed_needs: crate::harness::pass_log::FailedNeeds,
    /// Each StatefulSet and the template revision it ended on.
    pub revisions: Vec<(String, String)>,
    /// The health-gated worlds: how far a bad release got and what Prometheus answered.
    pub health: Option<HealthOutcome>,
    /// The certificate world: the Secret's writes, the CA injections and the webhook calls' TLS checks.
    pub certificates: crate::oracle::certificates::CertificateLedger,
    /// What the world did, for tests to count.
    pub activity: crate::oracle::activity::Activity,
}

/// What a health-gated world did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HealthOutcome {
    /// The most StatefulSets the controller rolled one bad push in (0 with a good release).
    pub zones_on_bad_release: usize,
    /// The simulated Prometheus' answers, by kind.
    pub queries: crate::environment::prometheus::QueryStats,
}

impl Outcome {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// The replica changes of the leader (or, without followers, of zone-a) the scaling scenario's user asks for, at
/// their times; none without scaling.
/// Liveness: waits until the group converges or `deadline` passes; a converged group must then stay quiet (no
/// controller write for a while). When it converged, counted from `start`.
pub(crate) async fn await_convergence(store: &SharedStore, start: Instant, deadline: Instant) -> Option<Duration> {
    let mut converged_at = None;
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        if converged(&store.lock().unwrap()) {
            converged_at = Some(start.elapsed());
            break;
        }
    }
    // Converged: the controller must also go quiet (no further writes for a while).
    if converged_at.is_some() {
        let writes = store.lock().unwrap().oracle.checker.writes_judged;
        tokio::time::sleep(QUIET).await;
        let mut st = store.lock().unwrap();
        if st.oracle.checker.writes_judged != writes {
            let at = st.elapsed();
            let detail = format!("the controller kept writing after convergence: {}", st.describe());
            st.oracle.checker.record_liveness_failure(at, detail);
        }
        if st.controller_ready.as_ref().is_some_and(|ready| !ready.is_ready()) {
            let at = st.elapsed();
            st.oracle
                .checker
                .record_liveness_failure(at, "the controller converged the group but never reported ready".into());
        }
    }
    converged_at
}

/// The run's verdict: liveness, refused requests and every violation the checker recorded, traced and returned.
pub(crate) fn judge(
    store: &SharedStore,
    sc: &Scenario,
    seed: u64,
    start: Instant,
    converged_at: Option<Duration>,
    slow_observations: u64,
    prometheus: Option<&crate::environment::prometheus::SimPrometheus>,
) -> Outcome {
    let mut st = store.lock().unwrap();
    let pass_reports = crate::harness::pass_log::take_heard(|at| st.since_start(at));
    match converged_at {
        Some(at) => st.trace("sim", format!("converged at {:.1}s", at.as_secs_f64())),
        None => match (held_by_a_partitions_last_pod(&st), held_by_the_health_check(&st, &pass_reports)) {
            (Some(why), _) => {
                st.oracle.checker.drains.held_by_last_pod += 1;
                let line = format!("not converged, held by a partition budget as designed: {why}; {}", st.describe());
                st.trace("checker", line);
            }
            (None, Some(why)) => {
                let line = format!("not converged, held by the health check as designed: {why}; {}", st.describe());
                st.trace("checker", line);
            }
            (None, None) => {
                let at = st.elapsed();
                let detail = format!(
                    "not converged {}s after the faults stopped: {}",
                    sc.settle_deadline.as_secs(),
                    st.describe()
                );
                st.oracle.checker.record_liveness_failure(at, detail);
            }
        },
    }
    for request in st.oracle.forbidden.clone() {
        let at = st.elapsed();
        st.oracle.checker.record_forbidden(at, format!("refused with 403: {request}"));
    }
    judge_undos(&mut st);
    let violations = st.oracle.checker.violations.clone();
    for v in &violations {
        let line = format!("VIOLATION {} at {:.3}s: {}", v.invariant, v.at.as_secs_f64(), v.detail);
        st.trace("checker", line);
    }
    let verdict = if violations.is_empty() {
        "all invariants held".to_string()
    } else {
        format!("{} violations", violations.len())
    };
    let judged = st.oracle.checker.writes_judged;
    let downscales = st.oracle.checker.downscales.len() as u64;
    let min_downscale_gap = st.oracle.checker.min_commit_gap;
    if sc.scaling.is_some() {
        let gap = min_downscale_gap.map_or("none".to_string(), |g| format!("{:.3}s", g.as_secs_f64()));
        st.trace("checker", format!("{downscales} downscales committed; closest two zones' commits {gap} apart"));
    }
    st.trace("checker", format!("{verdict}; {judged} controller writes judged"));
    let events = st.events.stats(judged + st.oracle.controller_replica_changes);
    if sc.events {
        st.trace("checker", events.describe());
    }
    Outcome {
        seed,
        violations,
        converged_at,
        sim_time: start.elapsed(),
        writes_judged: st.oracle.checker.writes_judged,
        trace: st.trace.clone(),
        downscales,
        min_downscale_gap,
        near_min_time: st.oracle.checker.near_min_time,
        rolled_while_scaling: st.oracle.checker.rolled_while_scaling,
        scaled_while_rolling: st.oracle.checker.scaled_while_rolling,
        downscaled_while_rolling: st.oracle.checker.downscaled_while_rolling,
        slow_observations,
        reactions: st.oracle.reactions.clone(),
        events,
        no_downscale_admissions: st.oracle.checker.no_downscale_admissions,
        prepare_foreign_admissions: st.oracle.checker.prepare_foreign_admissions,
        prepared_pods: st.oracle.checker.prepared_pods,
        delayed_downscale_lateness: st.oracle.checker.delayed_downscale_lateness.clone(),
        undos_judged: st.oracle.checker.undos_judged,
        scale_requests: st.oracle.scale_requests,
        drains: st.oracle.checker.drains,
        budget_edits: st.oracle.checker.budget_edits.clone(),
        budget_watch_cuts: st.oracle.checker.budget_watch_outages.len(),
        ha: st.oracle.ha.stats.clone(),
        faults: st.oracle.reactions.faults.clone(),
        heal_to_write: st.oracle.reactions.heal_to_write.clone(),
        pass_reports,
        failed_needs: crate::harness::pass_log::take_failed_needs(),
        certificates: st.oracle.certificates.clone(),
        activity: std::mem::take(&mut st.oracle.activity),
        revisions: st
            .statefulsets
            .iter()
            .map(|(name, sts)| (name.clone(), crate::environment::objects::template_revision(sts)))
            .collect(),
        health: prometheus
            .map(|p| HealthOutcome { zones_on_bad_release: st.oracle.checker.bad_release_zones(), queries: p.stats() }),
    }
}

/// [`crate::oracle::checker::PREPARE_UNDONE`], at the end of the run: each pod a denied downscale had prepared was sent a
/// DELETE after its POST (the undo runs on a task of its own, so it may end after the answer; a denial in the last
/// minute is not judged).
pub(crate) fn judge_undos(st: &mut Store) {
    let now = Instant::now();
    let mut missing = Vec::new();
    let mut judged = 0;
    for owed in &st.oracle.undos_owed {
        if owed.denied_at + Duration::from_secs(60) > now {
            continue;
        }
        judged += 1;
        for (pod, prepared_at) in &owed.pods {
            if !st.world.pod_calls.iter().any(|c| !c.post && c.pod == *pod && c.at >= *prepared_at) {
                missing.push(format!("{}: {pod} was prepared and never cancelled", owed.what));
            }
        }
    }
    st.oracle.checker.undos_judged += judged;
    let at = st.elapsed();
    for detail in missing {
        st.oracle.checker.violate(at, crate::oracle::checker::PREPARE_UNDONE, detail);
    }
}

/// Under a partition budget, a pod still to be replaced whose partition has no slot in any other zone of its group
/// (each other StatefulSet's replicas, spec and status, at most its ordinal): replacing it would leave the
/// partition with no pod at all, which the controller never does (`rollout_core::zpdb::decision::AbsentPeer`), so
/// the rollout waits for a person or for the zones to be scaled alike (the per-zone HPAs of `--webhook` leave them
/// different). Such a run is reported, not failed; any other way of not converging still fails.
/// Whether a bad release stopped where it must: the controller rolled it in one zone of the group at most (a zone
/// whose crashed pod it replaced counts), and its last word on the group is that the health check holds it back.
/// Such a run is the bad-release world's expected end, not a liveness failure.
pub(crate) fn held_by_the_health_check(st: &Store, reports: &[crate::harness::pass_log::PassReport]) -> Option<String> {
    if !st.world.bad_release || st.oracle.checker.bad_release_zones() > 1 {
        return None;
    }
    let last = reports.iter().rev().find(|r| r.group == crate::scenario::GROUP)?;
    (last.waits() && last.wait == "held-by-health-check").then(|| last.reason.clone())
}

pub(crate) fn held_by_a_partitions_last_pod(st: &Store) -> Option<String> {
    let replicas = |s: &k8s_openapi::api::apps::v1::StatefulSet| {
        let spec = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32;
        let status = s.status.as_ref().map_or(0, |s| s.replicas.max(0) as u32);
        spec.max(status)
    };
    let group_of = |s: &k8s_openapi::api::apps::v1::StatefulSet| {
        s.metadata.labels.as_ref().and_then(|l| l.get(rollout_core::keys::ROLLOUT_GROUP).cloned()).unwrap_or_default()
    };
    for rule in st.oracle.checker.budgets.iter().filter(|b| b.partitions && b.until.is_none()) {
        let zones: Vec<(&String, &k8s_openapi::api::apps::v1::StatefulSet)> =
            st.statefulsets.iter().filter(|(_, s)| group_of(s) == rule.group).collect();
        for (name, sts) in &zones {
            let want = sts.status.as_ref().and_then(|s| s.update_revision.clone()).unwrap_or_default();
            for ordinal in 0..sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32 {
                let pod = format!("{name}-{ordinal}");
                let stale = st.pods.get(&pod).is_some_and(|p| crate::environment::objects::pod_revision(p) != want);
                let alone = zones.iter().filter(|(other, _)| other != name).all(|(_, s)| replicas(s) <= ordinal);
                if stale && alone {
                    return Some(format!(
                        "{pod} is the only pod of partition {ordinal} (every other zone of group {} has at most \
                         {ordinal} replicas), so it is never replaced",
                        rule.group
                    ));
                }
            }
        }
    }
    None
}

/// Every StatefulSet on its template's revision (the user's last word), status current, every pod there, Ready and
/// not terminating; followers and mirrors at their replicas, and a StatefulSet whose force replicas is ignored at
/// the replicas it had.
pub fn converged(st: &Store) -> bool {
    st.statefulsets.iter().all(|(name, sts)| {
        let want = crate::environment::objects::template_revision(sts);
        let status = sts.status.clone().unwrap_or_default();
        let replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32;
        status.update_revision.as_deref() == Some(want.as_str())
            && status.current_revision.as_deref() == Some(want.as_str())
            && status.observed_generation == sts.metadata.generation
            && (0..replicas).all(|i| {
                st.pods.get(&format!("{name}-{i}")).is_some_and(|p| {
                    crate::environment::objects::is_ready(p)
                        && p.metadata.deletion_timestamp.is_none()
                        && crate::environment::objects::pod_revision(p) == want
                })
            })
            && (st.oracle.replica_changes_refused
                || (followers_match_leader(st, sts) && mirrors_match_reference(st, sts)))
            && st
                .world
                .force_ignored
                .get(name)
                .is_none_or(|had| sts.spec.as_ref().and_then(|s| s.replicas) == Some(*had))
            && !st.pods.values().any(|p| {
                crate::environment::objects::owner_of(p) == *name
                    && p.metadata
                        .name
                        .as_deref()
                        .and_then(|n| n.strip_prefix(&format!("{name}-")))
                        .and_then(|o| o.parse::<u32>().ok())
                        .is_some_and(|o| o >= replicas)
            })
    })
}

/// A mirror StatefulSet has its reference's `spec.replicas`, written back into the reference's `status.replicas`
/// unless its write-back annotation says not to (then the reference's status is never written: it has none).
pub(crate) fn mirrors_match_reference(st: &Store, sts: &k8s_openapi::api::apps::v1::StatefulSet) -> bool {
    let annotations = sts.metadata.annotations.as_ref();
    let mirrors = annotations.is_some_and(|a| a.contains_key(rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME));
    if !mirrors {
        return true;
    }
    // Go's strconv.ParseBool, written out here (the checker does not use the code it judges); anything else is no
    // write-back, as in the reference.
    let write_back = annotations
        .and_then(|a| a.get(rollout_core::keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK))
        .is_none_or(|v| ["1", "t", "T", "TRUE", "true", "True"].contains(&v.as_str()));
    let replicas = sts.spec.as_ref().and_then(|s| s.replicas).map(i64::from);
    let expected_status = if write_back { replicas } else { None };
    // A delay longer than a day never elapses within a run: such a mirror ends at its reference or above it (a
    // downscale still waiting), and writes back its own replicas, which other zones' write-backs overwrite.
    let name = sts.metadata.name.as_deref().unwrap_or_default();
    let never_elapses =
        st.world.delayed_downscale_delays.get(name).is_some_and(|d| *d > Duration::from_secs(24 * 3600));
    if never_elapses {
        return reference_replicas(st)
            .is_some_and(|(spec, status)| spec <= replicas && status.is_some() == expected_status.is_some());
    }
    reference_replicas(st).is_some_and(|(spec, status)| spec == replicas && status == expected_status)
}

/// A follower (`grafana.com/rollout-downscale-leader`) has its leader's replicas, or, while it carries
/// `grafana.com/rollout-force-replicas`, that many (read here as the user wrote it: a plain integer). Not a
/// follower: nothing to match (a force replicas there is ignored).
pub(crate) fn followers_match_leader(st: &Store, sts: &k8s_openapi::api::apps::v1::StatefulSet) -> bool {
    let replicas = |s: &k8s_openapi::api::apps::v1::StatefulSet| s.spec.as_ref().and_then(|s| s.replicas);
    let annotations = sts.metadata.annotations.as_ref();
    let leader = annotations.and_then(|a| a.get(rollout_core::keys::ROLLOUT_DOWNSCALE_LEADER));
    if let (Some(_), Some(force)) =
        (leader, annotations.and_then(|a| a.get(rollout_core::keys::ROLLOUT_FORCE_REPLICAS)))
    {
        return force.parse::<i32>().ok() == replicas(sts);
    }
    // A follower without a min time follows its leader up only, once another zone's downscale is recorded: it ends
    // at its leader's replicas or above.
    let no_min_time =
        !annotations.is_some_and(|a| a.contains_key(rollout_core::keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE));
    // Where the record's writes are refused, its followers' downscales (claimed there) cannot happen: they end at
    // their leader's replicas or above too.
    leader.is_none_or(|l| {
        st.statefulsets.get(l).is_some_and(|l| match no_min_time || st.oracle.follower_downscales_refused {
            true => replicas(l) <= replicas(sts),
            false => replicas(l) == replicas(sts),
        })
    })
}
