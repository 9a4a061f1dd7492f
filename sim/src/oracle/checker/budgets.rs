//! The budget guarantees: every allowed eviction and every controller deletion keeps the ZoneAwarePodDisruptionBudgets,
//! denials are for a reason, intents and ready-time writes stay in scope.

use crate::environment::objects::PodSum;
use crate::oracle::checker::{
    BUDGET_CHANGE_GRACE, BUDGET_CHANGE_GRACE_CONTROLLER, Checker, EVICTION_INTENT_PREFIX, Known, STALE_INTENT_GRACE,
    ZPDB_CONTROLLER, ZPDB_CROSS_ZONE_DELAY, ZPDB_EVICTIONS, ZPDB_INTENT_STORE, ZPDB_OUT_OF_SCOPE,
    ZPDB_READY_TIME_SCOPE, ZPDB_TERMINATING, ZPDB_VALIDATION, ZPDB_ZERO_BUDGET, is_intent_key, ordinal,
    unavailable_slot,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// A ZoneAwarePodDisruptionBudget as the checker reads it (its own reading of the documented rules, not the
/// core's): which group's pods it covers, its `maxUnavailable`, and whether it counts per partition (the pod's
/// ordinal) across zones or per zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRule {
    pub name: String,
    pub group: String,
    pub limit: BudgetLimit,
    pub partitions: bool,
    /// Partition mode's `crossZoneEvictionDelay` (zero: none).
    pub cross_zone_delay: Duration,
    /// Committed at this resourceVersion and time; `None`: in force from the start of the run.
    pub since: Option<(u64, Duration)>,
    /// Replaced or deleted at this resourceVersion and time; `None`: still in force.
    pub until: Option<(u64, Duration)>,
}

/// `spec.crossZoneEvictionDelay` as the worlds write it (absent, or whole seconds such as `10s`); `None` for any
/// other form, so the budget is not read at all rather than judged without its delay.
pub(crate) fn cross_zone_delay(spec: &serde_json::Value) -> Option<Duration> {
    let Some(delay) = spec.get("crossZoneEvictionDelay") else { return Some(Duration::ZERO) };
    delay.as_str()?.strip_suffix('s')?.parse::<u64>().ok().map(Duration::from_secs)
}

/// A budget's `maxUnavailable` (a count) or `maxUnavailablePercentage` (of the evicted pod's StatefulSet's
/// replicas).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetLimit {
    Count(u32),
    Percent(u32),
}

impl BudgetLimit {
    /// The most a decision may count against, for a StatefulSet whose `spec.replicas` was at most `replicas`: the
    /// documented rule takes the percentage of `min(spec, status)` replicas, rounded down and at least 1.
    pub fn at_most(self, replicas: u32) -> u32 {
        match self {
            BudgetLimit::Count(n) => n,
            BudgetLimit::Percent(p) => (replicas * p / 100).max(1),
        }
    }

    /// The least a decision may count against, for a StatefulSet whose `spec.replicas` and `status.replicas` were
    /// never below `replicas` (a percentage of none is none).
    pub fn at_least(self, replicas: u32) -> u32 {
        match self {
            BudgetLimit::Count(n) => n,
            BudgetLimit::Percent(_) if replicas == 0 => 0,
            BudgetLimit::Percent(p) => (replicas * p / 100).max(u32::from(p > 0)),
        }
    }
}

impl std::fmt::Display for BudgetLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BudgetLimit::Count(n) => write!(f, "{n}"),
            BudgetLimit::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl BudgetRule {
    /// The checker's own reading of a budget object: the group its selector names by `rollout-group`, an integer
    /// `maxUnavailable` or `maxUnavailablePercentage` (exactly one of them), and partition mode if it has a
    /// partition regex. `None` for a budget outside what the worlds write (no such group label, both limits or
    /// neither).
    pub fn read(budget: &serde_json::Value) -> Option<BudgetRule> {
        let spec = budget.get("spec")?;
        let count = spec.get("maxUnavailable").map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()));
        let percent = spec.get("maxUnavailablePercentage").map(|n| n.as_u64().and_then(|n| u32::try_from(n).ok()));
        let limit = match (count, percent) {
            (Some(n), None) => BudgetLimit::Count(n?),
            (None, Some(p)) => BudgetLimit::Percent(p?),
            _ => return None,
        };
        Some(BudgetRule {
            name: budget.pointer("/metadata/name")?.as_str()?.to_string(),
            group: spec.pointer("/selector/matchLabels")?.get(rollout_core::keys::ROLLOUT_GROUP)?.as_str()?.to_string(),
            limit,
            // An empty regex is none (zone mode).
            partitions: spec.get("podNamePartitionRegex").and_then(|r| r.as_str()).is_some_and(|r| !r.is_empty()),
            cross_zone_delay: cross_zone_delay(spec)?,
            since: None,
            until: None,
        })
    }

    /// Whether this version of the budget judges a decision whose window runs from `basis_rv` to `before_rv`,
    /// committed at `at`: it was in force throughout the window, and (if committed during the run) long enough
    /// before for the operator to know it.
    pub(crate) fn judges(&self, basis_rv: u64, before_rv: u64, at: Duration, grace: Duration) -> bool {
        self.since.is_none_or(|(rv, since)| rv <= basis_rv && since + grace <= at)
            && self.until.is_none_or(|(rv, _)| rv > before_rv)
    }
}

/// What the drains world's evictions came to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DrainStats {
    /// Evictions the API server received for an existing pod (each asks the webhook).
    pub asked: u64,
    /// Denied by the webhook (429 mostly).
    pub denied: u64,
    /// The webhook could not be reached or did not answer in time (failure policy Fail).
    pub failed: u64,
    /// Dry runs the webhook allowed.
    pub dry_runs_allowed: u64,
    /// Evictions allowed and committed (the pod deleted).
    pub committed: u64,
    /// Committed evictions and controller deletions of an available pod, judged against the budgets.
    pub judged: u64,
    /// Runs that did not converge only because a pod to replace is the last of its partition (every other zone is
    /// scaled below it): the controller never leaves a partition without a pod, so the rollout waits for a person.
    pub held_by_last_pod: u64,
    /// Evictions of a pod already terminating when they arrived.
    pub of_terminating: u64,
    /// Partition peers of allowed evictions ready for less than twice `crossZoneEvictionDelay` when judged against it.
    pub peers_delay_judged: u64,
    /// Budget denials (429) of decisions whose eviction intent had been committed (on the pod or its StatefulSet).
    pub denied_after_intent: u64,
    /// Of those, the denials answered while the decision's intent was still there: each holds every other decision
    /// about its zone or partition until it expires, for nothing. Only a removal lost to a fault leaves one.
    pub denied_intent_left: u64,
    /// Evictions by drains, judged and within the budget, that made a second pod of their scope (the zone, or the
    /// partition) unavailable: only a budget allowing two lets them through.
    pub second_in_scope: u64,
    /// Intent writes on StatefulSets judged ([`ZPDB_INTENT_STORE`]), and the stale intents they removed.
    pub statefulset_intent_writes: u64,
    pub stale_intents_removed: u64,
    /// StatefulSets a user re-applied from their manifests while they carried eviction intents (`intent_wipes`).
    pub intents_wiped: u64,
    /// Evictions sent chasing the controller (`Drains::chase`), and of those, the ones allowed.
    pub chased: u64,
    pub chased_allowed: u64,
}

impl DrainStats {
    pub fn add(&mut self, other: &DrainStats) {
        self.asked += other.asked;
        self.denied += other.denied;
        self.failed += other.failed;
        self.dry_runs_allowed += other.dry_runs_allowed;
        self.committed += other.committed;
        self.judged += other.judged;
        self.held_by_last_pod += other.held_by_last_pod;
        self.of_terminating += other.of_terminating;
        self.peers_delay_judged += other.peers_delay_judged;
        self.second_in_scope += other.second_in_scope;
        self.denied_after_intent += other.denied_after_intent;
        self.denied_intent_left += other.denied_intent_left;
        self.statefulset_intent_writes += other.statefulset_intent_writes;
        self.stale_intents_removed += other.stale_intents_removed;
        self.intents_wiped += other.intents_wiped;
        self.chased += other.chased;
        self.chased_allowed += other.chased_allowed;
    }
}

impl Checker {
    /// A budget committed (`Some`: created or updated, as the checker reads it) or deleted at `rv`, at `at`: the
    /// version in force until now ends there.
    pub fn record_budget(&mut self, rv: u64, at: Duration, name: &str, budget: Option<BudgetRule>) {
        // The same rule again (a metadata-only update): the version in force goes on, with no blind window.
        let same = |open: &BudgetRule, new: &BudgetRule| {
            (&open.group, open.limit, open.partitions, open.cross_zone_delay)
                == (&new.group, new.limit, new.partitions, new.cross_zone_delay)
        };
        if let Some(new) = &budget
            && self.budgets.iter().any(|b| b.name == name && b.until.is_none() && same(b, new))
        {
            return;
        }
        for open in self.budgets.iter_mut().filter(|b| b.name == name && b.until.is_none()) {
            open.until = Some((rv, at));
        }
        if let Some(budget) = budget {
            self.budgets.push(BudgetRule { since: Some((rv, at)), until: None, ..budget });
        }
    }

    /// Whether some budget covered `group`'s pods at some time within [`BUDGET_CHANGE_GRACE`] before `at`, or the
    /// operator could not watch the budgets then (it may not know yet that the budget is gone).
    pub fn covered_recently(&self, group: &str, at: Duration) -> bool {
        let recent = |until: Option<Duration>| until.is_none_or(|until| until + BUDGET_CHANGE_GRACE > at);
        self.budgets.iter().any(|b| b.group == group && recent(b.until.map(|(_, until)| until)))
            || self.budget_watch_outages.iter().any(|(_, until)| recent(*until))
    }

    /// A denied eviction (`code`, `message`) of a pod of `group`, at `at`: with no budget over the group for the
    /// grace, only a refusal that is not a budget's (budgets not loaded yet, the webhook failing) is right.
    pub fn judge_eviction_denial(&mut self, at: Duration, group: &str, pod: &str, code: u16, message: &str) {
        if code == 429 && !message.contains("not loaded") && !self.covered_recently(group, at) {
            let detail = format!("eviction of {pod} denied ({code}: {message}), but no budget covers group {group}");
            self.violate(at, ZPDB_OUT_OF_SCOPE, detail);
        }
    }

    /// A write of `grafana.com/ready-time` on `pod` (of `group`): only pods a budget selects are tracked, so the
    /// write is wrong once no budget has covered the pod's group for the grace (the watches not cut).
    pub fn judge_ready_time_write(&mut self, at: Duration, pod: &str, group: Option<&str>) {
        if !group.is_some_and(|g| self.covered_recently(g, at)) {
            let detail = match group {
                Some(group) => {
                    format!("ready-time written on {pod}, though no budget has covered group {group} for 30 s")
                }
                None => format!("ready-time written on {pod}, which is in no rollout group a budget covers"),
            };
            self.violate(at, ZPDB_READY_TIME_SCOPE, detail);
        }
    }

    /// A denial of an eviction of `pod` (arrived at `arrival_rv`, denied at `denial_rv`) because the budget allows
    /// no unavailable pod (`max unavailable = 0`): wrong when every budget version in force over the window (and
    /// known for the grace) allows at least one for the pod's StatefulSet, as read at any time until the denial
    /// (a percentage of its fewest replicas so far).
    pub fn judge_zero_budget_denial(
        &mut self,
        at: Duration,
        arrival_rv: u64,
        denial_rv: u64,
        pod: &str,
        message: &str,
    ) {
        let arrival = self.state_at(arrival_rv);
        let Some(sts) = arrival.pods.get(pod).and_then(|p| arrival.sts.get(&p.sts)).cloned() else { return };
        let rules: Vec<&BudgetRule> = self
            .budgets
            .iter()
            .filter(|b| b.group == sts.group && b.judges(arrival_rv, denial_rv, at, BUDGET_CHANGE_GRACE))
            .collect();
        let replicas = self.replicas_least(&sts.name, denial_rv);
        if !rules.is_empty() && rules.iter().all(|r| r.limit.at_least(replicas) > 0) {
            let limits: Vec<String> = rules.iter().map(|r| format!("{} ({})", r.name, r.limit)).collect();
            let detail = format!(
                "eviction of {pod} denied ({message}), though {} allow(s) at least one unavailable pod of {} (never \
                 fewer than {replicas} replicas)",
                limits.join(", "),
                sts.name
            );
            self.violate(at, ZPDB_ZERO_BUDGET, detail);
        }
    }

    /// A committed write of annotation `changes` on StatefulSet `sts` (its annotations `before` and `after`), at wall
    /// time `now`: see [`ZPDB_INTENT_STORE`]. Only writes that set an intent are judged (a decider removing its own
    /// intent writes nothing else).
    pub fn judge_statefulset_intent_write(
        &mut self,
        at: Duration,
        sts: &str,
        before: &BTreeMap<String, String>,
        changes: &BTreeMap<String, Option<String>>,
        after: &BTreeMap<String, String>,
        now: jiff::Timestamp,
    ) {
        if !changes.iter().any(|(k, v)| v.is_some() && is_intent_key(k)) {
            return;
        }
        self.drains.statefulset_intent_writes += 1;
        // `<expiry> <pod> <uid>`, as documented; the expiry in RFC 3339.
        let expiry = |value: &str| value.split_whitespace().next().and_then(|t| t.parse::<jiff::Timestamp>().ok());
        for (key, _) in changes.iter().filter(|(_, v)| v.is_none()) {
            let Some(value) = before.get(key) else { continue };
            self.drains.stale_intents_removed += u64::from(is_intent_key(key));
            if !is_intent_key(key) {
                let detail = format!("an intent write on {sts} removed annotation {key} (\"{value}\"), not an intent");
                self.violate(at, ZPDB_INTENT_STORE, detail);
            } else if let Some(until) = expiry(value).filter(|until| *until > now) {
                let detail = format!("an intent write on {sts} removed {key}, live until {until} (now {now})");
                self.violate(at, ZPDB_INTENT_STORE, detail);
            }
        }
        let grace = jiff::SignedDuration::try_from(STALE_INTENT_GRACE).unwrap_or_default();
        for (key, value) in after.iter().filter(|(k, _)| is_intent_key(k)) {
            let stale = match expiry(value) {
                Some(until) => until + grace < now,
                None => true,
            };
            if stale {
                let detail = format!("an intent write on {sts} left {key} (\"{value}\") behind, stale (now {now})");
                self.violate(at, ZPDB_INTENT_STORE, detail);
            }
        }
    }

    /// Eviction intents set by a committed annotation write (their keys name the decision).
    pub fn record_intents_written(&mut self, changes: &BTreeMap<String, Option<String>>) {
        let set = changes.iter().filter(|(k, v)| v.is_some() && k.starts_with(EVICTION_INTENT_PREFIX));
        self.intents_written.extend(set.map(|(k, _)| k.clone()));
    }

    /// An eviction decision (`decision`, its AdmissionReview's uid) was denied with `code`: for a budget's denial
    /// (429: its reads succeeded, so its removal is expected to), whether it had committed an intent, and whether
    /// `present` (its intent still on the pod or a StatefulSet as the answer arrives).
    pub fn record_denied_decision(&mut self, decision: &str, code: u16, present: bool) {
        if code == 429 && self.intents_written.contains(&format!("{EVICTION_INTENT_PREFIX}{decision}")) {
            self.drains.denied_after_intent += 1;
            self.drains.denied_intent_left += u64::from(present);
        }
    }

    /// A 429 denial of an eviction of `pod`, which was terminating (the same uid) from its arrival to the denial.
    pub fn judge_terminating_denial(&mut self, at: Duration, pod: &str, message: &str) {
        let detail = format!("eviction of {pod} denied (429: {message}), though the pod was terminating throughout");
        self.violate(at, ZPDB_TERMINATING, detail);
    }

    /// The validation webhook's answer on a budget edit the editor knows to be `valid` or not.
    pub fn judge_budget_admission(&mut self, at: Duration, what: &str, valid: bool, allowed: bool, message: &str) {
        if valid != allowed {
            let verdict = if allowed { "admitted".to_string() } else { format!("refused ({message})") };
            let expected = if valid { "a valid" } else { "an invalid" };
            self.violate(at, ZPDB_VALIDATION, format!("{expected} budget edit ({what}) was {verdict}"));
        }
    }

    /// otherwise, counting the target as unavailable, every pod slot (ordinal below `spec.replicas`) of the group's
    /// StatefulSets that is unavailable now counts when the decision could have known it: unavailable throughout
    /// its window (from `basis_rv`, the eviction's arrival or the controller's watch position, to the commit), or
    /// made so within the window by a voluntary disruption that spent the budget (which serialisation must have
    /// shown it). Zone mode: unavailable pods in one zone only, at most `maxUnavailable` there; partition mode: at
    /// most `maxUnavailable` unavailable pods of the target's partition across the zones. Unavailability that began
    /// in the window by itself (a crash, a pod not yet Ready again) is not held against the decision.
    pub fn judge_disruption(&mut self, at: Duration, basis_rv: u64, before_rv: u64, target: &PodSum, by: &str) {
        let before = self.state_at(before_rv);
        let Some(sts) = before.sts.get(&target.sts).cloned() else { return };
        let basis_rv = basis_rv.min(before_rv);
        let grace = if by.starts_with("controller") { BUDGET_CHANGE_GRACE_CONTROLLER } else { BUDGET_CHANGE_GRACE };
        let rules: Vec<BudgetRule> = self
            .budgets
            .iter()
            .filter(|b| b.group == sts.group && b.judges(basis_rv, before_rv, at, grace))
            .cloned()
            .collect();
        if rules.is_empty() || !self.available_throughout(target, basis_rv, before_rv) {
            return;
        }
        self.drains.judged += 1;
        let invariant = if by.starts_with("controller") { ZPDB_CONTROLLER } else { ZPDB_EVICTIONS };
        // Every counted unavailable slot, by StatefulSet and ordinal, with why.
        let mut counted: Vec<(String, u32, String)> = Vec::new();
        for zone in before.sts.values().filter(|s| s.group == sts.group) {
            for ordinal in 0..zone.replicas {
                let slot = format!("{}-{ordinal}", zone.name);
                if slot == target.name {
                    counted.push((zone.name.clone(), ordinal, format!("{slot} (this disruption)")));
                    continue;
                }
                let Some(why) = unavailable_slot(&before, &zone.name, ordinal) else { continue };
                let spent = self.spent.iter().find(|(rv, pod, _)| *pod == slot && *rv > basis_rv && *rv <= before_rv);
                if spent.is_some() || self.unavailable_throughout(&zone.name, ordinal, basis_rv, before_rv) {
                    let how = match spent {
                        Some((rv, _, by)) => format!("{by} at rv {rv}, in the window"),
                        None => "throughout the window".to_string(),
                    };
                    counted.push((zone.name.clone(), ordinal, format!("{why} ({how})")));
                }
            }
        }
        let target_ordinal = ordinal(&target.sts, &target.name);
        // A percentage is of the target's StatefulSet's replicas as the decision read them: at most the most it
        // ever had.
        let replicas = self.spec_replicas_most(&target.sts, before_rv);
        for rule in rules {
            let max = rule.limit.at_most(replicas);
            let young = match rule.partitions && !rule.cross_zone_delay.is_zero() && !by.starts_with("controller") {
                true => self.peers_under_delay(&before, basis_rv, target, &rule),
                false => Vec::new(),
            };
            let in_scope = match rule.partitions {
                true => counted.iter().filter(|(_, o, _)| Some(*o) == target_ordinal).count(),
                false => counted.iter().filter(|(z, _, _)| *z == target.sts).count(),
            };
            let breach = if rule.partitions {
                let same: Vec<&(String, u32, String)> =
                    counted.iter().filter(|(_, o, _)| Some(*o) == target_ordinal).collect();
                (same.len() as u32 > max).then(|| {
                    let what: Vec<&str> = same.iter().map(|(_, _, w)| w.as_str()).collect();
                    format!(
                        "partition {} has {} unavailable: {}",
                        target_ordinal.unwrap_or(0),
                        same.len(),
                        what.join(", ")
                    )
                })
            } else {
                let zones: std::collections::BTreeSet<&str> = counted.iter().map(|(z, _, _)| z.as_str()).collect();
                let own = counted.iter().filter(|(z, _, _)| *z == target.sts).count() as u32;
                (zones.len() > 1 || own > max).then(|| {
                    let what: Vec<&str> = counted.iter().map(|(_, _, w)| w.as_str()).collect();
                    format!("{} zones with unavailable pods, {own} in {}: {}", zones.len(), target.sts, what.join(", "))
                })
            };
            if let Some(breach) = breach {
                let detail = format!(
                    "{by} of {} (uid {}) breaks {} (max unavailable {max}, of {}): {breach} (window rv {basis_rv}..{before_rv})",
                    target.name, target.uid, rule.name, rule.limit
                );
                self.violate(at, invariant, detail);
                continue;
            }
            if in_scope >= 2 && !by.starts_with("controller") {
                self.drains.second_in_scope += 1;
            }
            if !young.is_empty() {
                // Peers ready for less than the delay count as not ready: only they can push it over.
                let same = counted.iter().filter(|(_, o, _)| Some(*o) == target_ordinal).count();
                if (same + young.len()) as u32 > max {
                    let detail = format!(
                        "eviction of {} allowed with {same} unavailable in its partition and {} (max unavailable {max} in {})",
                        target.name,
                        young.join(", "),
                        rule.name
                    );
                    self.violate(at, ZPDB_CROSS_ZONE_DELAY, detail);
                }
            }
        }
        self.spent.push((before_rv + 1, target.name.clone(), by.to_string()));
    }

    /// Partition mode's `crossZoneEvictionDelay`, for an eviction of `target` allowed on the committed state
    /// `before` (its window opening at `basis_rv`): the peers (the same partition in other zones) available at the commit that count as not ready,
    /// since they cannot have been ready for the delay: the same uid throughout the window, and first ready less
    /// than the delay before the commit (their ready-time stamp is no earlier; a second is allowed for the stamp's
    /// RFC 3339 seconds).
    fn peers_under_delay(&mut self, before: &Known, basis_rv: u64, target: &PodSum, rule: &BudgetRule) -> Vec<String> {
        let Some(partition) = ordinal(&target.sts, &target.name) else { return Vec::new() };
        let basis = self.state_at(basis_rv);
        let Some(group) = before.sts.get(&target.sts).map(|s| s.group.clone()) else { return Vec::new() };
        let margin = jiff::SignedDuration::try_from(rule.cross_zone_delay).unwrap_or_default()
            - jiff::SignedDuration::from_secs(1);
        let mut young = Vec::new();
        for zone in before.sts.values().filter(|s| s.group == group && s.name != target.sts && partition < s.replicas) {
            let peer = format!("{}-{partition}", zone.name);
            let Some(p) = before.pods.get(&peer).filter(|p| before.available(p)) else { continue };
            if basis.pods.get(&peer).is_none_or(|b| b.uid != p.uid) {
                continue;
            }
            let versions = self.pods.get(&peer).into_iter().flatten().filter_map(|(_, v)| v.as_ref());
            let Some(first_ready) = versions.filter(|v| v.uid == p.uid).find_map(|v| v.ready_since) else { continue };
            let ready_for = before.now.duration_since(first_ready);
            // Judged where it could matter: peers ready for less than twice the delay.
            if ready_for < margin * 2 {
                self.drains.peers_delay_judged += 1;
            }
            if ready_for < margin {
                young
                    .push(format!("{peer} (ready only {:.1}s, under crossZoneEvictionDelay)", ready_for.as_secs_f64()));
            }
        }
        young
    }
}
