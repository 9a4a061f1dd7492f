//! What a gate evaluation is about, from a group's snapshot: which StatefulSet the gate sits before, the candidate
//! and stable pod sets, the matchers and substitutions of the queries, the baseline time the
//! `grafana.com/rollout-health-check-started-at` annotations give, and when the candidate side started serving.

use super::config::{BASELINE, CURRENT, RANGE, TARGET_MATCHERS};
use crate::downscale::format_timestamp;
use crate::group::{GroupSnapshot, MemberSnapshot};
use crate::keys;
use crate::readiness::Readiness;
use jiff::Timestamp;
use std::collections::BTreeSet;

/// The side of a group a query is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Pods already on their StatefulSet's update revision.
    Candidate,
    /// Pods not on it yet.
    Stable,
}

/// The pods of each side of a group, by name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Targets {
    pub namespace: String,
    pub candidate: Vec<String>,
    pub stable: Vec<String>,
}

impl Targets {
    /// The sides of `group`: a pod is a candidate when it is on its own StatefulSet's update revision. A
    /// StatefulSet that has not reported an update revision has no candidates.
    pub fn of(group: &GroupSnapshot, namespace: &str) -> Targets {
        let mut candidate = Vec::new();
        let mut stable = Vec::new();
        for member in &group.members {
            let update = update_revision(member);
            for pod in &member.pods {
                if update.is_some() && pod.revision() == update {
                    candidate.push(pod.name.clone());
                } else {
                    stable.push(pod.name.clone());
                }
            }
        }
        Targets { namespace: namespace.to_string(), candidate, stable }
    }

    pub fn pods(&self, side: Side) -> &[String] {
        match side {
            Side::Candidate => &self.candidate,
            Side::Stable => &self.stable,
        }
    }

    /// What `${targetMatchers}` becomes for one side: `namespace="<ns>",pod=~"<pod1>|<pod2>"`; a side without pods
    /// matches nothing (`pod=~"^$"`). Pod names are regex-escaped, then everything is escaped for a PromQL string.
    pub fn matchers(&self, side: Side) -> String {
        let pods = self.pods(side);
        let regex = if pods.is_empty() {
            "^$".to_string()
        } else {
            pods.iter().map(|p| regex_escape(p)).collect::<Vec<_>>().join("|")
        };
        format!("namespace=\"{}\",pod=~\"{}\"", promql_string(&self.namespace), promql_string(&regex))
    }
}

fn update_revision(member: &MemberSnapshot) -> Option<&str> {
    member.sts.status.as_ref().map(|s| s.update_revision.as_str()).filter(|r| !r.is_empty())
}

/// Escapes the regex metacharacters of RE2 (Prometheus' regex engine).
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The inside of a double-quoted PromQL string.
fn promql_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// `query` with `${targetMatchers}` and `${range}` substituted.
pub fn substitute_query(query: &str, matchers: &str, range: &str) -> String {
    substitute(query, &[(TARGET_MATCHERS, matchers), (RANGE, range)])
}

/// `success_query` with `${current}` and `${baseline}` substituted by the two scalars.
pub fn substitute_success(success_query: &str, current: f64, baseline: f64) -> String {
    substitute(success_query, &[(CURRENT, &promql_number(current)), (BASELINE, &promql_number(baseline))])
}

/// `template` with each placeholder replaced by its value, in one pass over the template: an inserted value is
/// never read for placeholders again (chained `replace` calls would substitute inside the first one's values).
fn substitute(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'scan: while !rest.is_empty() {
        for (placeholder, value) in values {
            if let Some(after) = rest.strip_prefix(placeholder) {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// A PromQL literal for `value`: negative numbers in parentheses (so `2 * ${baseline}` stays valid), and PromQL's
/// spelling of infinities.
pub fn promql_number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value == f64::INFINITY {
        "+Inf".to_string()
    } else if value == f64::NEG_INFINITY {
        "(-Inf)".to_string()
    } else if value < 0.0 {
        format!("({value})")
    } else {
        format!("{value}")
    }
}

/// A StatefulSet of the group whose deletions the gate sits before, and the RolloutHealthCheck it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateTarget {
    pub statefulset: String,
    /// The value of `grafana.com/rollout-health-check`.
    pub health_check: String,
    /// Some of its pods are replaced already (by someone else, or before this process cleared it): the gate holds
    /// its further deletions rather than its start.
    pub started: bool,
}

impl GateTarget {
    /// What the gate holds back, for people: the zone's start, or its further replacements.
    pub fn held(&self) -> &'static str {
        held_phrase(self.started)
    }
}

/// What a gate holding a StatefulSet back holds: its start, or (`started`) its further replacements.
pub fn held_phrase(started: bool) -> &'static str {
    if started { "is not rolled further" } else { "does not start rolling" }
}

/// Whether the gate sits before `member`'s deletions: it names a RolloutHealthCheck, is not paused, has pods not on
/// its update revision, it is not the first zone (another StatefulSet of the group has pods on its update revision:
/// the side the checks judge), and the gate has not cleared it for the current revisions (`cleared`: the shell's
/// memory of the StatefulSets a passing evaluation let roll).
///
/// A StatefulSet with none of its pods replaced yet is the reference's case: the gate sits before its start. One
/// with some replaced that was not cleared was started by someone else (an eviction, a drain, a crashed pod
/// recreated on the update revision) or cleared by a process that has since restarted: the controller does not
/// finish it on a revision the gate has not passed, else a bad release would reach a second zone through it.
pub fn gate_of(group: &GroupSnapshot, member: &MemberSnapshot, cleared: &BTreeSet<String>) -> Option<GateTarget> {
    let health_check = member.sts.annotations.get(keys::ROLLOUT_HEALTH_CHECK)?.trim();
    if health_check.is_empty() || member.sts.settings.paused || cleared.contains(&member.sts.name) {
        return None;
    }
    let update = update_revision(member)?;
    if !member.pods.iter().any(|p| p.revision() != Some(update)) {
        return None;
    }
    let rolled_elsewhere = group.members.iter().filter(|m| m.sts.name != member.sts.name).any(|m| {
        let update = update_revision(m);
        update.is_some() && m.pods.iter().any(|p| p.revision() == update)
    });
    rolled_elsewhere.then(|| GateTarget {
        statefulset: member.sts.name.clone(),
        health_check: health_check.to_string(),
        started: !untouched(member, update),
    })
}

/// None of `member`'s pods replaced yet: none on the update revision, none terminating, none missing (a missing pod
/// may be one already replaced, being recreated).
fn untouched(member: &MemberSnapshot, update: &str) -> bool {
    let expected = member.sts.replicas.max(member.sts.status.as_ref().map_or(0, |s| s.replicas));
    !member.pods.is_empty()
        && member.pods.len() as u64 >= u64::from(expected)
        && member.pods.iter().all(|p| p.revision() != Some(update) && !p.is_terminating())
}

/// The gate the controller's next deletions would meet, if any: of the StatefulSets gated ([`gate_of`]), the one
/// the planner turns to first (the one not-ready StatefulSet, else name order). Between zones or not: the planner
/// may start a zone while another is part-way (a crashed pod replaced ahead of its zone, a zone turned to while
/// another is paused), and the pass holds any gated deletion without an evaluation, so the shell evaluates this
/// target whenever there is one. While a zone is still rolling, its candidates keep changing: the evaluation mostly
/// soaks, and queries once the candidate side has served long enough.
pub fn gate_target(group: &GroupSnapshot, now: Timestamp, cleared: &BTreeSet<String>) -> Option<GateTarget> {
    let gated: Vec<(GateTarget, bool)> = group
        .members
        .iter()
        .filter_map(|m| gate_of(group, m, cleared).map(|g| (g, Readiness::of(m, now).is_ready())))
        .collect();
    let first_not_ready = gated.iter().position(|(_, ready)| !ready);
    gated.into_iter().nth(first_not_ready.unwrap_or(0)).map(|(g, _)| g)
}

/// A `grafana.com/rollout-health-check-started-at` value: `<updateRevision>=<RFC 3339 time>`.
pub fn started_at_value(revision: &str, at: Timestamp) -> String {
    format!("{revision}={}", format_timestamp(at))
}

/// The time of a member's `grafana.com/rollout-health-check-started-at`, if it names its update revision (one for
/// another revision is ignored).
pub fn started_at(member: &MemberSnapshot) -> Option<Timestamp> {
    let value = member.sts.annotations.get(keys::ROLLOUT_HEALTH_CHECK_STARTED_AT)?;
    let (revision, at) = value.split_once('=')?;
    (Some(revision.trim()) == update_revision(member)).then_some(())?;
    at.trim().parse().ok()
}

/// The baseline time: the earliest `started-at` of the group for the current update revisions.
pub fn baseline_time(group: &GroupSnapshot) -> Option<Timestamp> {
    group.members.iter().filter_map(started_at).min()
}

/// The `started-at` annotations to write: for each StatefulSet with pods not on its update revision whose
/// annotation does not name that revision, the value for `now`.
pub fn started_at_writes(group: &GroupSnapshot, now: Timestamp) -> Vec<(String, String)> {
    group
        .members
        .iter()
        .filter_map(|m| {
            let update = update_revision(m)?;
            let outdated = m.pods.iter().any(|p| p.revision() != Some(update));
            (outdated && started_at(m).is_none()).then(|| (m.sts.name.clone(), started_at_value(update, now)))
        })
        .collect()
}

/// When the candidate side was last completed: the latest Ready transition of a candidate pod; `now` while a
/// candidate is not Ready (or terminating): it serves nothing yet, and a pod's series are found by its name, which
/// its previous incarnation on the old revision served under until it was replaced. Ready candidates whose
/// transition time is unknown do not count; `None` when no candidate's is known.
pub fn candidates_serving_since(group: &GroupSnapshot, now: Timestamp) -> Option<Timestamp> {
    let mut since = None;
    for member in &group.members {
        let update = update_revision(member);
        for pod in member.pods.iter().filter(|p| update.is_some() && p.revision() == update) {
            match pod.ready_condition.filter(|c| c.ready && !pod.is_terminating()) {
                None => return Some(now),
                Some(ready) => since = since.max(ready.since),
            }
        }
    }
    since
}

/// What a clearance is for: the group's StatefulSets with their update revisions. A StatefulSet the gate cleared
/// stays cleared while this stays the same (a new push, or a StatefulSet added, gates it again).
pub fn clearance_key(group: &GroupSnapshot) -> String {
    let revisions: Vec<String> =
        group.members.iter().map(|m| format!("{}={}", m.sts.name, update_revision(m).unwrap_or("?"))).collect();
    revisions.join(",")
}

/// Identifies what an evaluation was made for: the RolloutHealthCheck's name and generation, the group's update
/// revisions ([`clearance_key`]), the candidate pods and whether each serves (a candidate recreated under the same
/// name is another pod to soak) (a zone finishing changes
/// what is judged) and the baseline time (written once the rollout is seen to start). An evaluation is reused only
/// for the same key.
pub fn revision_key(group: &GroupSnapshot, health_check: &str, generation: i64) -> String {
    let serving = |p: &crate::view::PodView| p.ready_condition.is_some_and(|c| c.ready) && !p.is_terminating();
    let candidates: Vec<String> = group
        .members
        .iter()
        .flat_map(|m| {
            let update = update_revision(m);
            m.pods.iter().filter(move |p| update.is_some() && p.revision() == update)
        })
        .map(|p| if serving(p) { p.name.clone() } else { format!("{}~", p.name) })
        .collect();
    let candidates = candidates.join(",");
    let baseline = baseline_time(group).map(format_timestamp).unwrap_or_default();
    format!("{health_check}/{generation}:{};{candidates};{baseline}", clearance_key(group))
}
