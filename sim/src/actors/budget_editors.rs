//! Users editing the ZoneAwarePodDisruptionBudget through its validating webhook, valid and invalid edits alike.

use crate::environment::eviction::{admission_verdict, call_webhook};
use crate::environment::store::SharedStore;
use crate::harness::eviction_replicas::replica_address;
use crate::rng::SimRng;
use crate::scenario::drains::{BUDGET, BudgetMode, Drains, budget_object};
use rollout_operator::admission::evictions::ZPDB_VALIDATION_PATH;
use std::time::Duration;
use tokio::time::Instant;

/// One edit of the budget by the user (`--budget-edits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BudgetEdit {
    /// `maxUnavailable` 1 <-> 2 (the generation goes up).
    Resize,
    /// A label added (a metadata-only update: the generation stays).
    Relabel,
    /// Deleted, and created again 0-3 s later (a new uid, generation 1) with `maxUnavailable` 1 or 2.
    Recreate,
    /// Deleted for 40-70 s (longer than the checker's grace), then created again (unless that falls after the fault
    /// phase: the budget then stays deleted).
    DeleteForAWhile,
    /// An invalid update, which the validation webhook must refuse.
    Invalid,
}

/// What one admission sent by the editor was: the report's typed record of the edits, beside the trace's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    Resize,
    Relabel,
    /// A budget deleted and created again.
    CreateAgain,
    /// An invalid update: a negative `crossZoneEvictionDelay`.
    NegativeDelay,
    /// An invalid update: a percentage in partition mode.
    PercentageInPartitions,
    /// Another invalid update (a negative `maxUnavailable`, both a count and a percentage, no selector, a partition
    /// regex without a group, a delay without a regex).
    OtherInvalid,
    /// A dry run with `crossZoneEvictionDelay` at Go's longest duration (valid).
    LongestDelay,
    /// A dry run with `crossZoneEvictionDelay` one nanosecond beyond Go's range (invalid).
    BeyondRangeDelay,
}

impl EditKind {
    /// Whether the validation webhook must admit it.
    pub fn valid(self) -> bool {
        matches!(self, EditKind::Resize | EditKind::Relabel | EditKind::CreateAgain | EditKind::LongestDelay)
    }
}

/// How the editor's admission ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditResult {
    /// A dry run admitted (nothing stored).
    Admitted,
    /// Admitted and stored, with the generation the API server gave it.
    Stored { generation: u64 },
    /// Refused by the webhook, with the answer's code and message.
    Refused { code: u16, message: String },
}

/// The budget editor (`--budget-edits`): 3-6 edits of the budget at random times of the fault phase, one after the
/// other, each create and update admitted by `/admission/zpdb-validation` on a replica picked at random (failure
/// policy Fail: an edit whose admission fails is retried until the phase ends), committed by the API server, and
/// seen by the operator replicas' budget watches. The checker judges every admission answer (the editor knows which
/// edits are valid) and, from each committed version on (after a grace), the decisions against that version.
pub async fn edit_budgets(store: SharedStore, mut r: SimRng, drains: Drains, start: Instant, phase: Duration) {
    let until = start + phase;
    let count = r.range(3..7);
    let mut plan: Vec<(Duration, BudgetEdit)> = (0..count)
        .map(|_| {
            let at = r.millis(5_000, phase.as_millis() as u64 * 4 / 5);
            let edit = match r.range(0..5) {
                0 => BudgetEdit::Resize,
                1 => BudgetEdit::Relabel,
                2 => BudgetEdit::Recreate,
                3 => BudgetEdit::DeleteForAWhile,
                _ => BudgetEdit::Invalid,
            };
            (at, edit)
        })
        .collect();
    plan.sort_unstable_by_key(|(at, _)| *at);
    for (n, (at, edit)) in plan.into_iter().enumerate() {
        tokio::time::sleep_until((start + at).max(Instant::now())).await;
        let current =
            store.lock().unwrap().budgets.iter().find(|b| b.pointer("/metadata/name") == Some(&BUDGET.into())).cloned();
        let Some(current) = current else { continue };
        let max_unavailable = current.pointer("/spec/maxUnavailable").and_then(serde_json::Value::as_u64).unwrap_or(1);
        let fresh = |max_unavailable: u64| {
            let mut budget = budget_object(
                crate::scenario::GROUP,
                &Drains { max_unavailable: max_unavailable as u32, ..drains.clone() },
            );
            budget["metadata"] =
                serde_json::json!({"name": BUDGET, "namespace": crate::environment::objects::NAMESPACE});
            budget
        };
        let edited = |change: &dyn Fn(&mut serde_json::Value)| {
            let mut budget = current.clone();
            change(&mut budget);
            budget
        };
        let seed = r.next_u64();
        let admit_as = |object: serde_json::Value, operation: &'static str, kind: EditKind, what: String, dry: bool| {
            let (store, old) = (store.clone(), (operation == "UPDATE").then(|| current.clone()));
            // A dry run numbered apart, so that its calls and uids are its own.
            let number = if dry { n + (1 << 20) + usize::from(kind.valid()) * (1 << 21) } else { n };
            let what = if dry { format!("{what}, dry run") } else { what };
            let edit = BudgetAdmission { edit: number, object, old, operation, kind, what, dry_run: dry };
            admit_budget(store, SimRng::new(seed), drains.replicas, edit, until)
        };
        let admit = |object: serde_json::Value, operation: &'static str, kind: EditKind, what: String| {
            admit_as(object, operation, kind, what, false)
        };
        match edit {
            BudgetEdit::Resize => {
                let to = if max_unavailable == 1 { 2 } else { 1 };
                let object = edited(&|b| {
                    b["spec"]["maxUnavailable"] = serde_json::json!(to);
                    // As a template renders an unset value: an empty regex is no regex (zone mode), and valid.
                    if drains.mode == BudgetMode::Zones {
                        b["spec"]["podNamePartitionRegex"] = serde_json::json!("");
                    }
                });
                admit(object, "UPDATE", EditKind::Resize, format!("maxUnavailable {max_unavailable} -> {to}")).await;
            }
            BudgetEdit::Relabel => {
                let object = edited(&|b| b["metadata"]["labels"] = serde_json::json!({"edited": n.to_string()}));
                admit(object, "UPDATE", EditKind::Relabel, format!("label edited={n}")).await;
            }
            BudgetEdit::Recreate | BudgetEdit::DeleteForAWhile => {
                let pause = if edit == BudgetEdit::Recreate { r.millis(0, 3_000) } else { r.millis(40_000, 70_000) };
                let to = r.range(1..3);
                // Half the deletions happen while the operator cannot watch (a network cut, the events of which
                // are compacted): it never sees the deletion, and learns what followed only by relisting. A quick
                // re-creation is over before the watches come back (the relist finds the new object, a new uid
                // with generation 1); a long deletion is still on (the relist does not find the budget at all).
                let outage = r.chance(0.5).then(|| match edit {
                    BudgetEdit::Recreate => pause + r.millis(500, 2_000),
                    _ => r.millis(2_000, 10_000),
                });
                {
                    let mut st = store.lock().unwrap();
                    if let Some(outage) = outage {
                        let at = st.elapsed();
                        st.budget_watches_down = true;
                        st.oracle.checker.budget_watch_outages.push((at, None));
                        st.trace("fault", format!("the budget watches are cut for {:.1}s", outage.as_secs_f64()));
                    }
                    st.delete_budget(BUDGET);
                    st.trace(
                        "user",
                        format!(
                            "DELETE zoneawarepoddisruptionbudget {BUDGET}; created again in {:.1}s",
                            pause.as_secs_f64()
                        ),
                    );
                }
                let restore = outage.map(|outage| {
                    let store = store.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(outage).await;
                        let mut st = store.lock().unwrap();
                        let at = st.elapsed();
                        st.budget_watches_down = false;
                        st.budget_resume_floor = st.rv;
                        if let Some(outage) = st.oracle.checker.budget_watch_outages.last_mut() {
                            outage.1 = Some(at);
                        }
                        st.trace("fault", "the budget watches can connect again; resuming from before now is too old");
                    })
                });
                tokio::time::sleep(pause).await;
                admit(fresh(to), "CREATE", EditKind::CreateAgain, format!("created again, maxUnavailable {to}")).await;
                if let Some(restore) = restore {
                    let _ = restore.await;
                }
            }
            BudgetEdit::Invalid => {
                let (object, what) = match r.range(0..4) {
                    0 => (edited(&|b| b["spec"]["maxUnavailable"] = serde_json::json!(-1)), "maxUnavailable -1"),
                    1 => (
                        edited(&|b| b["spec"]["maxUnavailablePercentage"] = serde_json::json!(50)),
                        "both maxUnavailable and a percentage",
                    ),
                    2 => (
                        edited(&|b| {
                            b["spec"].as_object_mut().map(|s| s.remove("selector"));
                        }),
                        "no selector",
                    ),
                    _ if drains.mode == BudgetMode::Partitions && r.chance(0.5) => (
                        edited(&|b| b["spec"]["podNamePartitionRegex"] = serde_json::json!("[a-z\\-]+")),
                        "a partition regex without a group",
                    ),
                    // Go parses a negative duration; the reference refuses it with a message of its own. Which of
                    // this and the next by the edit's place in the plan, not by a draw: the world's draws stay as
                    // they were before the next was added.
                    _ if drains.mode == BudgetMode::Partitions && n % 2 == 0 => (
                        edited(&|b| b["spec"]["crossZoneEvictionDelay"] = serde_json::json!("-10s")),
                        "a negative crossZoneEvictionDelay",
                    ),
                    // A percentage counts the pods of a zone; partition mode counts one pod per zone, so the
                    // reference refuses the two together.
                    _ if drains.mode == BudgetMode::Partitions => (
                        edited(&|b| {
                            b["spec"].as_object_mut().map(|s| s.remove("maxUnavailable"));
                            b["spec"]["maxUnavailablePercentage"] = serde_json::json!(50);
                        }),
                        "a percentage in partition mode",
                    ),
                    _ => (
                        edited(&|b| b["spec"]["crossZoneEvictionDelay"] = serde_json::json!("10s")),
                        "crossZoneEvictionDelay without a partition regex",
                    ),
                };
                let kind = match what {
                    "a negative crossZoneEvictionDelay" => EditKind::NegativeDelay,
                    "a percentage in partition mode" => EditKind::PercentageInPartitions,
                    _ => EditKind::OtherInvalid,
                };
                admit(object, "UPDATE", kind, what.to_string()).await;
                // In partition mode the user also tries the longest delays as server-side dry runs (a budget that
                // long would hold every eviction): Go's largest duration, 2^63-1 ns, which Go accepts, and one
                // nanosecond more, which it refuses. Sent after the edit, with no draw: the world's draws stay.
                if drains.mode == BudgetMode::Partitions {
                    for (delay, kind, what) in [
                        (LONGEST_GO_DURATION, EditKind::LongestDelay, "crossZoneEvictionDelay at Go's longest"),
                        (BEYOND_GO_DURATION, EditKind::BeyondRangeDelay, "crossZoneEvictionDelay beyond Go's range"),
                    ] {
                        let object = edited(&|b| b["spec"]["crossZoneEvictionDelay"] = serde_json::json!(delay));
                        admit_as(object, "UPDATE", kind, what.to_string(), true).await;
                    }
                }
            }
        }
    }
}

/// Go's largest duration, 2^63-1 ns (`time.ParseDuration` accepts it), and one nanosecond more (refused).
pub(crate) const LONGEST_GO_DURATION: &str = "2562047h47m16.854775807s";

pub(crate) const BEYOND_GO_DURATION: &str = "2562047h47m16.854775808s";

/// One budget create or update sent to the validation webhook: edit number `edit` of the run, `valid` or not.
pub(crate) struct BudgetAdmission {
    edit: usize,
    object: serde_json::Value,
    old: Option<serde_json::Value>,
    operation: &'static str,
    kind: EditKind,
    what: String,
    /// A server-side dry run (`kubectl apply --dry-run=server`): admitted, nothing is stored.
    dry_run: bool,
}

/// One budget create or update through the validation webhook, retried (on another replica, after 1-2 s) while its
/// admission fails, until `until`; committed if admitted and not a dry run. The checker judges the answer against
/// `valid`.
pub(crate) async fn admit_budget(
    store: SharedStore,
    mut r: SimRng,
    replicas: usize,
    edit: BudgetAdmission,
    until: Instant,
) {
    let BudgetAdmission { edit, object, old, operation, kind, what, dry_run } = edit;
    let valid = kind.valid();
    const CALLS: u64 = 1 << 32;
    let mut attempt = 0;
    while Instant::now() < until {
        attempt += 1;
        let replica = r.range(0..replicas as u64) as usize;
        let mut request = serde_json::json!({
            "uid": format!("budget-edit-{edit}-{attempt}"),
            "kind": {"group": "rollout-operator.grafana.com", "version": "v1", "kind": "ZoneAwarePodDisruptionBudget"},
            "resource": {"group": "rollout-operator.grafana.com", "version": "v1", "resource": "zoneawarepoddisruptionbudgets"},
            "name": BUDGET, "namespace": crate::environment::objects::NAMESPACE, "operation": operation,
            "userInfo": {"username": "someone@example.com"},
            "object": object,
        });
        if let Some(old) = &old {
            request["oldObject"] = old.clone();
        }
        if dry_run {
            request["dryRun"] = serde_json::json!(true);
        }
        let review =
            serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request});
        let body = serde_json::to_vec(&review).unwrap_or_default();
        let answer =
            call_webhook(replica_address(replica), CALLS + ((edit as u64) << 16) + attempt, ZPDB_VALIDATION_PATH, body)
                .await;
        {
            let mut st = store.lock().unwrap();
            match admission_verdict(&review, &answer) {
                Err(e) => {
                    st.trace(
                        "user",
                        format!("{operation} budget ({what}) via operator-{replica} -> webhook failed: {e}"),
                    );
                }
                Ok((allowed, code, message)) => {
                    let at = st.elapsed();
                    st.oracle.checker.judge_budget_admission(at, &what, valid, allowed, &message);
                    if allowed && dry_run {
                        st.oracle.checker.budget_edits.push((kind, EditResult::Admitted));
                        st.trace("user", format!("{operation} budget ({what}) via operator-{replica} -> admitted"));
                    } else if allowed {
                        let stored = st.put_budget(object);
                        let generation = stored.pointer("/metadata/generation").cloned().unwrap_or_default();
                        let stored = EditResult::Stored { generation: generation.as_u64().unwrap_or_default() };
                        st.oracle.checker.budget_edits.push((kind, stored));
                        st.trace(
                            "user",
                            format!(
                                "{operation} budget ({what}) via operator-{replica} -> stored, generation {generation}"
                            ),
                        );
                    } else {
                        let refused = EditResult::Refused { code, message: message.clone() };
                        st.oracle.checker.budget_edits.push((kind, refused));
                        st.trace(
                            "user",
                            format!(
                                "{operation} budget ({what}) via operator-{replica} -> refused ({code}): {message}"
                            ),
                        );
                    }
                    return;
                }
            }
        }
        tokio::time::sleep(r.millis(1_000, 2_000)).await;
    }
}
