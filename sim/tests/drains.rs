//! Node drains under a ZoneAwarePodDisruptionBudget: the node-drain actor evicts pods through the simulated API server,
//! which asks the real pod-eviction webhook of one of two operator replicas (restarted now and then) and deletes the
//! pod when allowed, concurrently with rollouts and the usual faults. The checker judges every committed eviction and
//! every controller deletion against the budget on the committed history, and every dry run's writes. Each test also
//! checks that the world exercises what it claims (evictions committed, denied with 429, dry runs), and the known-bug
//! evictors are caught at pinned seeds. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use rollout_sim::actors::budget_editors::{EditKind, EditResult};
use rollout_sim::harness::outcome::Outcome;
use rollout_sim::oracle::activity::{Entry, Request, Sender, Served, WorldEvent};
use rollout_sim::scenario::Scenario;
use rollout_sim::scenario::deployment::ReferenceDeployment;
use rollout_sim::scenario::drains::BudgetMode;
use rollout_sim::scenario::drains::Drains;
use rollout_sim::scenario::drains::Evictor;

fn drains(mode: BudgetMode, evictor: Evictor) -> Scenario {
    Scenario { drains: Some(Drains { mode, evictor, ..Drains::default() }), ..Scenario::default() }
}

fn run_all(sc: &Scenario, seeds: impl IntoIterator<Item = u64>) -> Vec<Outcome> {
    let outcomes: Vec<Outcome> = seeds.into_iter().map(|s| rollout_sim::harness::run(s, sc, false)).collect();
    if let Some(o) = outcomes.iter().find(|o| !o.passed()) {
        panic!("seed {} failed: {:#?}", o.seed, o.violations);
    }
    outcomes
}

fn totals(outcomes: &[Outcome]) -> rollout_sim::oracle::checker::budgets::DrainStats {
    let mut total = rollout_sim::oracle::checker::budgets::DrainStats::default();
    for o in outcomes {
        total.add(&o.drains);
    }
    total
}

/// The seed breaks the budget by evictions alone (no controller deletion among the disruptions counted).
fn assert_evictions_break_the_budget(sc: &Scenario, seed: u64) {
    let o = rollout_sim::harness::run(seed, sc, false);
    assert!(
        o.violations
            .iter()
            .any(|v| v.invariant == rollout_sim::oracle::checker::ZPDB_EVICTIONS && !v.detail.contains("controller#")),
        "seed {seed}: expected evictions alone to break the budget, got {:#?}",
        o.violations
    );
}

/// Drains alone (no template push: the controller has nothing to delete), under every fault and replica restarts.
#[test]
fn drains_alone_keep_a_zone_budget_under_faults_and_replica_restarts() {
    let sc = Scenario { revisions: 0, ..drains(BudgetMode::Zones, Evictor::Real) };
    let outcomes = run_all(&sc, 0..16);
    let total = totals(&outcomes);
    assert!(total.committed >= 32, "too few evictions committed: {total:?}");
    assert!(total.denied >= 32, "too few evictions denied: {total:?}");
    assert!(total.dry_runs_allowed >= 1, "no dry run allowed: {total:?}");
    let crashed: usize =
        outcomes.iter().map(|o| o.activity.count(|e| matches!(e, WorldEvent::ReplicaCrashed { .. }))).sum();
    assert!(crashed > 0, "no replica restarted");
}

#[test]
fn drains_under_a_zone_budget_keep_it_with_rollouts_and_faults() {
    let outcomes = run_all(&drains(BudgetMode::Zones, Evictor::Real), 0..12);
    let total = totals(&outcomes);
    // The world must exercise the path: evictions committed and judged, denials (429 for the budget), dry runs.
    assert!(total.committed >= 24, "too few evictions committed: {total:?}");
    assert!(total.denied >= 24, "too few evictions denied: {total:?}");
    assert!(total.dry_runs_allowed >= 1, "no dry run allowed: {total:?}");
    assert!(total.judged >= total.committed, "every committed eviction of an available pod is judged: {total:?}");
}

#[test]
fn drains_under_a_partition_budget_keep_it_with_rollouts_and_faults() {
    let outcomes = run_all(&drains(BudgetMode::Partitions, Evictor::Real), 0..12);
    let total = totals(&outcomes);
    assert!(total.committed >= 24, "too few evictions committed: {total:?}");
    assert!(total.denied >= 12, "too few evictions denied: {total:?}");
    // `crossZoneEvictionDelay` is judged too: the ready-time tracker stamping pods that are not yet ready
    // (`BudgetPod::is_running_and_ready` true) fails seeds 3 and 4.
    assert!(total.peers_delay_judged >= 24, "too few peers judged against the delay: {total:?}");
}

/// An evictor whose re-read after its intent is answered from its first read never sees the intents of concurrent
/// decisions: the two pods of one node, evicted at once, are both allowed in the same zone.
#[test]
fn an_evictor_without_the_second_read_is_caught() {
    let sc = drains(BudgetMode::Zones, Evictor::NoSecondRead);
    for seed in NO_SECOND_READ {
        assert_evictions_break_the_budget(&sc, seed);
    }
}

/// An evictor that knows no budget allows every eviction.
#[test]
fn an_evictor_that_ignores_the_budget_is_caught() {
    let sc = drains(BudgetMode::Zones, Evictor::IgnoresBudget);
    for seed in IGNORES_BUDGET {
        assert_evictions_break_the_budget(&sc, seed);
    }
}

/// The zone-mode drains world with evictions chasing the controller: within 20 ms of a pod first showing Ready (the
/// controller's next deletion there follows it) and of each controller deletion, two evictions of that zone's other
/// pods and one of the next zone's, each to a replica picked at random, so the replicas' decisions (reads, shared
/// lists, intents, re-reads) and the controller's deletions overlap within milliseconds on one zone.
fn chasing(evictor: Evictor) -> Scenario {
    let sc = drains(BudgetMode::Zones, evictor);
    Scenario { drains: sc.drains.map(|d| Drains { chase: true, ..d }), ..sc }
}

#[test]
fn evictions_chasing_the_controller_within_milliseconds_keep_the_budget_over_20_seeds() {
    let outcomes = run_all(&chasing(Evictor::Real), 0..20);
    let total = totals(&outcomes);
    assert!(total.chased >= 20 * 30, "too few chasing evictions: {total:?}");
    // Most are denied (the zone has its unavailable pod), some let through: both sides of the decision are taken.
    assert!(total.chased_allowed >= 20 && total.chased_allowed * 2 < total.chased, "{total:?}");
}

/// Chasing is the adversary the re-read after the intent exists for: the evictor without it breaks the budget in
/// most seeds (92 of 100; 12 of 100 with the node drains alone).
#[test]
fn chasing_evictions_catch_the_evictor_without_the_second_read_in_most_seeds() {
    let sc = chasing(Evictor::NoSecondRead);
    let budget = [rollout_sim::oracle::checker::ZPDB_EVICTIONS, rollout_sim::oracle::checker::ZPDB_CONTROLLER];
    let caught = (0..10)
        .map(|seed| rollout_sim::harness::run(seed, &sc, false))
        .filter(|o| o.violations.iter().any(|v| budget.contains(&v.invariant)))
        .count();
    assert!(caught >= 7, "the budget was broken in only {caught} of 10 seeds");
}

/// A rollout the budget holds back is told as such: with `rollout-max-unavailable` 2 under a budget of 1, the
/// controller's `RolloutWaiting` Events name the `held-by-budget` wait, and the budget still holds.
#[test]
fn a_rollout_held_by_the_budget_is_told_as_waiting_on_it() {
    let sc = Scenario { events: true, max_unavailable: 2, ..drains(BudgetMode::Zones, Evictor::Real) };
    let outcomes = run_all(&sc, 0..12);
    let mut told = rollout_sim::oracle::events::EventStats::default();
    for o in &outcomes {
        told.add(&o.events);
    }
    assert!(told.waits.get("held-by-budget").copied().unwrap_or(0) >= 1, "no held-by-budget wait told: {told:?}");
}

/// Seed 35 of the first drains batch: the API server's call to the webhook took, on a fresh endpoint that reused
/// the port of an earlier call, that call's late answer ("zpdb met", judged before a pod of zone-c crashed) and
/// evicted a pod of zone-a with zone-c down. A simulator bug (over HTTP a late response dies with its connection);
/// the real webhook had denied this eviction. Once the controller honoured the budgets the world of seed 35 moved;
/// with answers taken by any call, seed 368 then fails instead (a dry run took the answer, and the writes, of a
/// real eviction), so both are kept.
#[test]
fn an_eviction_is_admitted_only_by_the_answer_to_its_own_call_seeds_35_and_368() {
    for seed in [35, 368] {
        let o = rollout_sim::harness::run(seed, &drains(BudgetMode::Zones, Evictor::Real), false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
        assert!(o.drains.committed > 0, "seed {seed} commits evictions");
    }
}

/// Seed 264 of the partition-mode drains world (`crossZoneEvictionDelay: 10s`): a recreated pod became Ready, both
/// replicas' ready-time trackers tried to stamp it during a fault and timed out, and nothing tried again (the pod had
/// no further change to watch), so it never counts as ready for the delay: every eviction of its partition, and
/// the controller's replacement of its peer (now that the controller honours the budgets), are denied forever and
/// the rollout never converges. A bug in `rollout_operator::zpdb::ready_time` (a failed stamp was only logged),
/// fixed: the tracker tries a failed stamp again. (Merging the shared pod lists moved this seed's world so that it
/// passes without the fix too; `the_ready_time_tracker_tries_a_failed_stamp_again` in controller/tests/evictions.rs
/// pins the bug itself.)
#[test]
fn seed_264_a_partition_budget_does_not_hold_a_ready_pod_unstamped_forever() {
    let o = rollout_sim::harness::run(264, &drains(BudgetMode::Partitions, Evictor::Real), false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Seed 18 of `--drains --webhook`: the controller deleted a pod 11 ms after it became Ready, having decided while it
/// was not (replacing an unavailable pod spends no budget); the checker once held that against the budget. It now
/// judges only pods available throughout the decision's window.
#[test]
fn seed_18_a_pod_replaced_while_unavailable_spends_no_budget() {
    let sc = Scenario { drains: Some(Drains::default()), ..Scenario::rollout_with_admitted_downscales() };
    let o = rollout_sim::harness::run(18, &sc, false);
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Seeds 14 and 18 of `--drains partition`, found by the mutation run: a drain retried the eviction of a pod the
/// controller was already replacing. Evicting a terminating pod takes nothing away (the reference's step 3), so it is
/// allowed whatever the budget; with `BudgetPod::is_not_running` always false the webhook denied it with 429 for the
/// partition's other unready pod (6 of seeds 0..60), a node drain held for nothing. The zone mode cannot tell: the
/// pod's own zone is the disrupted one, which its budget allows.
#[test]
fn seeds_14_18_an_eviction_of_a_terminating_pod_is_not_held_by_a_partition_budget() {
    let sc = drains(BudgetMode::Partitions, Evictor::Real);
    let outcomes = run_all(&sc, [14, 18]);
    assert!(totals(&outcomes).of_terminating >= 2, "no eviction of a terminating pod: {:?}", totals(&outcomes));
}

/// A budget of `maxUnavailablePercentage: 40` over five pods a zone (a setting the core reads): two pods of a zone may
/// be evicted together, never three, and never none while the StatefulSet has replicas (the checker's
/// `ZPDB_ZERO_BUDGET`; one while a pod is missing from its status). The count of evictions let through as their zone's
/// second unavailable pod shows the percentage was applied, not read as one. Its many budget denials after an intent
/// also show each decision taking its intent back.
#[test]
fn a_percentage_budget_lets_two_pods_of_five_go_and_never_reads_as_zero() {
    let sc = Scenario {
        replicas: 5,
        drains: Some(Drains { percentage: Some(40), ..Drains::default() }),
        ..Scenario::default()
    };
    let outcomes = run_all(&sc, 0..16);
    let total = totals(&outcomes);
    assert!(total.committed >= 16 && total.second_in_scope >= 4, "{total:?}");
    // A decision the budget denies after its intent takes the intent back before it answers (only a removal lost
    // to a fault leaves one, to expire): else it holds every other decision about the zone for nothing.
    assert!(total.denied_after_intent >= 2 && total.denied_intent_left * 4 <= total.denied_after_intent, "{total:?}");
}

/// Seeds of the zone-mode drains world where [`Evictor::NoSecondRead`] lets two evictions through in one zone
/// (the two pods of one node, evicted together; re-found each time the worlds moved: after the shared pod lists,
/// per-decision intent keys, the pods listed with the StatefulSets and shorter rival waits, after the controller's
/// passes lost their debounce, once every decider lists the StatefulSets again after its intent, and once decisions
/// under way in one process deny each other at their first judgement: since then the two evictions are always
/// admitted by different replicas, 12 of seeds 0..100).
const NO_SECOND_READ: [u64; 3] = [10, 21, 44];
/// Seeds of the zone-mode drains world where [`Evictor::IgnoresBudget`] breaks the budget (every seed of 0..60).
const IGNORES_BUDGET: [u64; 2] = [0, 1];

/// Drains of both rollout groups, one budget over the first: the budget judges evictions on the StatefulSets of the
/// pods it selects (no denial names the other group's, `ZPDB_SCOPE`), and the other group's pods, which it does not
/// select, are never denied for it (`ZPDB_OUT_OF_SCOPE`).
#[test]
fn a_budget_beside_a_second_group_judges_only_its_own_pods_over_8_seeds() {
    let sc = Scenario { second_group: true, ..drains(BudgetMode::Zones, Evictor::Real) };
    let outcomes = run_all(&sc, 0..8);
    let total = totals(&outcomes);
    assert!(total.committed >= 8 && total.denied >= 8, "{total:?}");
    let other: usize =
        outcomes.iter().map(|o| o.activity.succeeded(Sender::Drain, Request::Evict, "store-gateway-zone")).sum();
    assert!(other >= 8, "only {other} pods of the second group evicted");
}

/// Under the chart mimir-distributed pins (no `patch` on pods, `patch` on StatefulSets), eviction intents go on the
/// StatefulSets: two operator replicas and the controller, each its own process, keep the budget (about a third of
/// seeds 0..100 broke it with per-replica serialisation before). (The evictor without second reads cannot be shown
/// here: answered from its first list, the StatefulSets no longer carry its own intent, so it denies every eviction;
/// the ZPDB model catches it with the intents on StatefulSets.)
#[test]
fn without_pod_patch_intents_kept_on_the_statefulsets_serialise_across_replicas() {
    let sc = Scenario { deployment: Some(ReferenceDeployment::HelmOld), ..drains(BudgetMode::Zones, Evictor::Real) };
    let outcomes = run_all(&sc, 0..8);
    let total = totals(&outcomes);
    assert!(total.committed >= 8 && total.denied >= 8, "{total:?}");
    // Each intent write is judged on its own: it removed stale intents and kept the live ones (`ZPDB_INTENT_STORE`).
    assert!(total.statefulset_intent_writes >= 60 && total.stale_intents_removed >= 20, "{total:?}");
}

/// Without `patch` on pods or on StatefulSets (`no-patch`, not a reference deployment: a hand-written Role), the
/// eviction intents have nowhere to go: the one replica serving the webhook serialises its decisions in process and
/// remembers the pods it let go until the pods' list shows them going. That keeps the budget under drains alone
/// (with rollouts too: `one_operator_process_serialises_its_controllers_deletions_with_its_evictions_over_40_seeds`).
#[test]
fn without_any_patch_one_replica_serialises_its_decisions_in_process_and_keeps_the_budget() {
    let sc = Scenario {
        deployment: Some(ReferenceDeployment::NoPatch),
        drains: Some(Drains { replicas: 1, ..Drains::default() }),
        revisions: 0,
        ..Scenario::default()
    };
    let outcomes = run_all(&sc, 0..10);
    let total = totals(&outcomes);
    assert!(total.committed >= 10 && total.denied >= 10, "{total:?}");
    let refused = |s: &Served| {
        s.sender == Sender::Webhook
            && s.request == Request::PatchStatefulSetAnnotations
            && s.failure == Some("forbidden")
    };
    assert!(
        outcomes.iter().flat_map(|o| &o.activity.served).any(refused),
        "no replica tried to keep an intent on a StatefulSet"
    );
    // Drains go on under the in-process lock: evictions committed by decisions that started under it (the replica
    // had fallen back since its last start, and no refusal came since the previous eviction, so this decision did
    // not fall back itself).
    let mut under_lock = 0;
    for o in &outcomes {
        let (mut fell_back, mut refused_since_last) = (false, false);
        for entry in o.activity.timeline() {
            match entry {
                // A new process (operator-0 crashed, or the controller's process it shares) has not fallen back.
                Entry::World(
                    WorldEvent::ReplicaCrashed { replica: 0 } | WorldEvent::ReplicaStarted { replica: 0, .. },
                ) => fell_back = false,
                Entry::Served(s) if refused(s) => (fell_back, refused_since_last) = (true, true),
                Entry::Served(s) if s.sender == Sender::Drain && s.request == Request::Evict && s.ok() => {
                    under_lock += u32::from(fell_back && !refused_since_last);
                    refused_since_last = false;
                }
                _ => {}
            }
        }
    }
    assert!(under_lock >= 10, "only {under_lock} evictions decided under the in-process lock committed");
}

/// The same chart writes no `grafana.com/ready-time` stamps: a partition budget with a `crossZoneEvictionDelay`
/// dates each pod by its Ready condition instead, so drains and the rollout go on (every seed stalled before, every
/// eviction and rollout deletion denied for want of a stamp).
#[test]
fn without_pod_patch_a_partition_budget_with_a_delay_dates_pods_by_their_ready_condition() {
    let sc =
        Scenario { deployment: Some(ReferenceDeployment::HelmOld), ..drains(BudgetMode::Partitions, Evictor::Real) };
    let outcomes = run_all(&sc, 0..6);
    assert!(totals(&outcomes).committed >= 6, "{:?}", totals(&outcomes));
}

/// Seeds of `--drains partition --webhook` (10 of 0..100 stalled): each zone's HPA leaves the zones with different
/// replica counts, and a rollout that starts then holds their downscales (no downscale while another zone has
/// non-updated replicas). A partition that a smaller zone has no slot for counted one unknown there (the reference's
/// rule for evictions, v0.35.0), so the controller's deletion of that partition's pods in the larger zones was denied
/// for good: the rollout waited for the downscale, which waited for the rollout. The controller's own deletions now
/// count a zone's missing peer only where the zone's replicas include the partition; evictions keep the reference's
/// rule (a drain waits for the zones to be scaled alike).
const UNEQUAL_ZONES: [u64; 3] = [39, 61, 96];

#[test]
fn unequal_zones_do_not_stall_a_rollout_under_a_partition_budget() {
    let sc = Scenario {
        drains: Some(Drains { mode: BudgetMode::Partitions, ..Drains::default() }),
        ..Scenario::rollout_with_admitted_downscales()
    };
    for seed in UNEQUAL_ZONES {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
    }
}

/// Seeds 0 and 144 of `--drains partition --webhook`, once the controller's deletions counted absent peers only for
/// a partition's last pod: two zones scaled below a partition the third still has a pod of, not yet replaced. The
/// controller never replaces that pod (the partition would have none left), so the rollout waits for good; the run
/// is reported as held by the budget, not failed, and nothing broke the budget meanwhile.
#[test]
fn a_partitions_last_pod_is_never_replaced_and_the_run_says_it_is_held() {
    let sc = Scenario {
        drains: Some(Drains { mode: BudgetMode::Partitions, ..Drains::default() }),
        ..Scenario::rollout_with_admitted_downscales()
    };
    for seed in [0, 144] {
        let o = rollout_sim::harness::run(seed, &sc, false);
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
        assert_eq!(o.drains.held_by_last_pod, 1, "seed {seed}");
        assert!(
            o.trace.lines.iter().any(|l| l.contains("held by a partition budget as designed")),
            "seed {seed}: the run says why it did not converge"
        );
    }
}

/// The budget changes while drains and rollouts go on. The user resizes it, relabels it, deletes it and creates it
/// again (a new uid, generation 1), deletes it for longer than the checker's grace, and tries invalid updates; half the
/// deletions happen while the operator's budget watches are cut, so it learns of them only by relisting. The operator
/// replicas and the controller watch the budgets through the simulated watch (delays, expiry, "too old", relists).
/// Every decision is judged against the version in force (once the operator could know it), a denial with no budget
/// left is a violation, and the validation webhook must refuse exactly the invalid edits. Each of these core mutants
/// fails some of these seeds (zone mode): re-creations told apart by generation only (`same_object` always true: 35,
/// 43), a newer generation ignored (26, 37, 43), deletions ignored (`delete` with its uid test inverted: 0, 1), a
/// relist keeping budgets it did not list (0, 1), a validation that admits what does not parse (1, 2), and an empty
/// partition regex read as a regex (0); in partition mode, a negative `crossZoneEvictionDelay` read as positive (1),
/// and Go's longest duration refused or one beyond it admitted (6 of the 8).
#[test]
fn budgets_edited_during_the_drains_are_followed_and_validated() {
    for (mode, seeds) in [(BudgetMode::Zones, 0..24), (BudgetMode::Partitions, 0..8)] {
        let outcomes = run_all(&budget_edits(mode), seeds);
        let edits: Vec<(EditKind, EditResult)> = outcomes.iter().flat_map(|o| o.budget_edits.iter().cloned()).collect();
        let count = |ended: &dyn Fn(&(EditKind, EditResult)) -> bool| edits.iter().filter(|e| ended(e)).count();
        let stored = |kind: EditKind| count(&|e| e.0 == kind && matches!(e.1, EditResult::Stored { .. }));
        let refused = |kind: EditKind| count(&|e| e.0 == kind && matches!(e.1, EditResult::Refused { code: 400, .. }));
        assert!(stored(EditKind::Resize) >= 3, "{mode:?}: no resize stored");
        assert!(stored(EditKind::Relabel) >= 1, "{mode:?}: no metadata-only update");
        let new_object = count(&|e| e.0 == EditKind::CreateAgain && e.1 == EditResult::Stored { generation: 1 });
        assert!(new_object >= 3, "{mode:?}: no budget created again");
        let invalid = [EditKind::NegativeDelay, EditKind::PercentageInPartitions, EditKind::OtherInvalid];
        assert!(invalid.iter().map(|k| refused(*k)).sum::<usize>() >= 2, "{mode:?}: no invalid edit refused");
        let cuts: usize = outcomes.iter().map(|o| o.budget_watch_cuts).sum();
        assert!(cuts >= 2, "{mode:?}: no deletion hidden from the watches");
        if mode == BudgetMode::Partitions {
            // Go parses "-10s"; the reference refuses a negative delay with its own message.
            let negative = count(&|e| {
                e.0 == EditKind::NegativeDelay
                    && matches!(&e.1, EditResult::Refused { code: 400, message } if message.contains("must be >= 0"))
            });
            assert!(negative >= 1, "no negative delay refused");
            // Go's longest duration (2^63-1 ns) is valid, one nanosecond more is not (server-side dry runs). Taken the
            // other way at the limit (the range check's `>` made `==` or `>=`), the checker's `ZPDB_VALIDATION` reports
            // it.
            let admitted = count(&|e| *e == (EditKind::LongestDelay, EditResult::Admitted));
            assert!(admitted >= 4, "the longest delay never admitted");
            assert!(refused(EditKind::BeyondRangeDelay) >= 4, "one beyond it never refused");
        }
        let total = totals(&outcomes);
        assert!(total.committed >= 20 && total.denied >= 20 && total.judged >= 20, "{mode:?}: {total:?}");
    }
}

/// A `maxUnavailablePercentage` in partition mode (which counts one pod per zone) is refused, as by the reference: the
/// budget-edits world tries it among its invalid updates (seeds 12 and 22 of partition mode). Admitted instead,
/// the checker's `ZPDB_VALIDATION` reports it.
#[test]
fn a_percentage_in_partition_mode_is_refused_by_the_validation_webhook() {
    for o in run_all(&budget_edits(BudgetMode::Partitions), [12, 22]) {
        let refused = |e: &(EditKind, EditResult)| {
            e.0 == EditKind::PercentageInPartitions && matches!(e.1, EditResult::Refused { code: 400, .. })
        };
        assert!(o.budget_edits.iter().any(refused), "seed {}: no percentage in partition mode refused", o.seed);
    }
}

fn budget_edits(mode: BudgetMode) -> Scenario {
    Scenario { drains: Some(Drains { mode, budget_edits: true, ..Drains::default() }), ..Scenario::default() }
}

/// The seeds of the test above that CI leaves out (among them 26, 35, 37 and 43 of the zone mode).
#[test]
#[ignore = "larger suite (scripts/larger.sh)"]
fn larger_budgets_edited_during_the_drains_are_followed_and_validated_over_more_seeds() {
    run_all(&budget_edits(BudgetMode::Zones), 24..44);
    run_all(&budget_edits(BudgetMode::Partitions), 8..12);
}

/// Drains while the user scales the leader and the controller its followers (and a template push rolls them): a
/// scaled-down zone's pods above its new replicas terminate while the budget counts that zone, so the budget must
/// count only ordinals below the StatefulSet's replicas (an ordinal at `replicas`, still terminating, counted as
/// present hid a missing pod below it: seed 11).
#[test]
fn drains_while_the_zones_are_scaled_keep_the_budget_over_12_seeds() {
    let sc = Scenario { drains: Some(Drains::default()), ..Scenario::scaling_during_rollout() };
    let outcomes = run_all(&sc, 0..12);
    let total = totals(&outcomes);
    assert!(total.committed >= 12 && total.judged >= 60, "{total:?}");
    let scaled_down: usize = outcomes
        .iter()
        .map(|o| o.activity.count(|e| matches!(e, WorldEvent::ScaleDownDeletes { statefulset, .. } if statefulset.starts_with("ingester-zone"))))
        .sum();
    assert!(scaled_down >= 24, "the zones were hardly scaled down: {scaled_down} pods");
}

/// Seed 637 of drains while the zones are scaled, without `patch` on StatefulSets (seed 67 before the controller
/// shared its process with the webhook's replica): an eviction denied because its StatefulSet could not be read was
/// judged, once answered, on the owner of a pod the scale-down had removed meanwhile (none), so its own StatefulSet
/// passed for another group's (`ZPDB_SCOPE`, a checker bug). The owner is now taken at the eviction's arrival
/// (taken at the denial, this seed fails again).
#[test]
fn regression_seed_637_a_denial_for_a_pod_removed_meanwhile_is_judged_on_its_owner_at_arrival() {
    let sc = Scenario {
        drains: Some(Drains { replicas: 1, ..Drains::default() }),
        deployment: Some(ReferenceDeployment::NoPatch),
        ..Scenario::scaling_during_rollout()
    };
    let o = rollout_sim::harness::run(637, &sc, false);
    let why = "unable to find StatefulSet ingester-zone-a by name";
    assert!(o.activity.eviction_denials.iter().any(|d| d.message.contains(why)), "no eviction denied for it");
    assert!(o.passed(), "{:#?}", o.violations);
}

/// Without `patch` on pods or StatefulSets the operator's one process runs the controller and serves the eviction
/// webhook, as `main` runs them, and one in-process serialisation covers both: the controller's rollout deletions and
/// the drains' evictions keep the budget together. Run as two processes (as the simulation did before), seeds 17, 23
/// and 28 of this world with scaling broke it (an eviction allowed while the controller's deletion in another zone was
/// in its window), 3 of 40, and 6 of 60 with two template pushes; kept in one process, 0 of 540. With the controller's
/// deletion intents expiring at once (`intent_lifetime` made zero), seed 37 breaks the budget.
#[test]
fn one_operator_process_serialises_its_controllers_deletions_with_its_evictions_over_40_seeds() {
    let sc = Scenario {
        drains: Some(Drains { replicas: 1, ..Drains::default() }),
        deployment: Some(ReferenceDeployment::NoPatch),
        revisions: 2,
        ..Scenario::default()
    };
    let outcomes = run_all(&sc, 0..40);
    let total = totals(&outcomes);
    assert!(total.committed >= 40 && total.denied >= 40, "{total:?}");
    let deleted: usize =
        outcomes.iter().map(|o| o.activity.succeeded(Sender::Operator, Request::DeletePod, "ingester-zone")).sum();
    assert!(deleted >= 200, "the controller hardly rolled the zones: {deleted} deletions");
    let shared: usize = outcomes
        .iter()
        .map(|o| o.activity.count(|e| matches!(e, WorldEvent::ReplicaStarted { runs_controller: true, .. })))
        .sum();
    assert!(shared >= 40, "the webhook's replica is not the controller's process");
    let scaled =
        Scenario { drains: sc.drains.clone(), deployment: sc.deployment, ..Scenario::scaling_during_rollout() };
    run_all(&scaled, [17, 23, 28]);
}

/// A known limit, pinned (it passes while the limit holds): where pods cannot be patched (`helm-old`) the eviction
/// intents are kept on the StatefulSets, and a user who re-applies a StatefulSet from its manifest (`kubectl
/// replace`, a GitOps sync that replaces) drops them. Seed 49: decision 9 wrote its intent and read it back, the
/// re-apply dropped it, and decision 10 on the other replica, reading after that, saw no rival: both evictions were
/// allowed and the budget broken. No annotation-based scheme survives a third party removing the annotation inside
/// a decision's window; the in-process lock covers one replica only. What a user can do: grant `patch` on pods
/// (intents then go on the pods, which no manifest re-apply touches), keep the StatefulSets' annotations out of the
/// sync (`kubectl apply`, or ignoring them), or run one replica. The re-read of our own intent
/// (`our_intent_kept`) does not narrow this: made always true, the same 1 of 100 seeds fails.
#[test]
fn known_limit_seed_49_statefulset_intents_dropped_by_a_re_apply_can_let_two_evictions_through() {
    let sc = Scenario {
        drains: Some(Drains { intent_wipes: true, ..Drains::default() }),
        deployment: Some(ReferenceDeployment::HelmOld),
        ..Scenario::default()
    };
    let o = rollout_sim::harness::run(49, &sc, false);
    assert!(o.drains.intents_wiped > 0, "no re-apply dropped an intent");
    let broken: Vec<_> =
        o.violations.iter().filter(|v| v.invariant == rollout_sim::oracle::checker::ZPDB_EVICTIONS).collect();
    assert_eq!(broken.len(), 1, "the limit shows as one budget broken: {:#?}", o.violations);
    assert_eq!(o.violations.len(), 1, "nothing else breaks: {:#?}", o.violations);
}

/// Seeds 15 and 22 of drains with relabels (a combination no test ran): a user relabels a running pod out of its
/// StatefulSet's selector, which releases it, while it still carries the group's label the budget selects. The
/// operator tracks its ready-time and judges its evictions under the budget (as the reference does: a budget selects
/// pods by label), and the checker took the pod's group from its owner, so a released pod was "in no group a budget
/// covers" (seed 15: `ZPDB_READY_TIME_SCOPE`; seed 22: `ZPDB_OUT_OF_SCOPE` and `ZPDB_SCOPE`). A checker bug: the
/// budget scope is now read from the pod's labels, as the budget's selector reads it.
#[test]
fn regression_seeds_15_22_a_pod_relabelled_out_of_its_statefulset_is_still_in_its_budget() {
    let sc = Scenario { relabels: true, ..drains(BudgetMode::Zones, Evictor::Real) };
    for seed in [15, 22] {
        let o = rollout_sim::harness::run(seed, &sc, false);
        let released = o.activity.count(|e| matches!(e, WorldEvent::PodReleased { .. }));
        assert!(released > 0, "seed {seed}: no pod released");
        assert!(o.passed(), "seed {seed}: {:#?}", o.violations);
    }
}
