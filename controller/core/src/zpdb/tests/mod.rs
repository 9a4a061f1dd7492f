//! Tests of the budgets, by topic: validation and the known budgets ([`budgets`]), the judgement of both eviction
//! modes with the reference's examples ([`judgement`]), the step machine's serialisation ([`serialisation`]) and early
//! answers ([`answers`]), decisions racing for one budget ([`races`]), and the controller's own deletions
//! ([`deletions`]).
//!
//! Owns the harness they share: budget objects, a zone-aware [`World`] of StatefulSets and pods, and an in-memory
//! [`Cluster`] that answers the step machine's needs linearizably.

mod answers;
mod budgets;
mod deletions;
mod judgement;
mod races;
mod serialisation;

use super::config::{PartitionRule, RegexProblem};
use super::decision::{AbsentPeer, Judged, describe, judge, max_unavailable};
use super::*;
use crate::admission::{AdmissionRequest, ReviewVersion};
use crate::downscale::format_timestamp;
use crate::failure::Failure;
use crate::fixture;
use crate::keys;
use crate::view::{OwnerRef, StatefulSetView};
use jiff::Timestamp;
use proptest::prelude::*;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const GROUP: &str = "ingester";

fn now() -> Timestamp {
    "2026-03-01T12:00:00Z".parse().unwrap()
}

fn object(spec: Value) -> Value {
    json!({
        "apiVersion": "rollout-operator.grafana.com/v1", "kind": "ZoneAwarePodDisruptionBudget",
        "metadata": {"name": "ingester-rollout", "uid": "uid-zpdb", "generation": 1},
        "spec": spec,
    })
}

fn with_selector(mut spec: Value) -> Value {
    spec["selector"] = json!({"matchLabels": {"rollout-group": GROUP}});
    spec
}

fn parse(spec: Value) -> Result<ZpdbConfig, ConfigError> {
    ZpdbConfig::parse(&object(spec))
}

fn error(spec: Value) -> String {
    parse(spec).expect_err("invalid").to_string()
}

fn review_request(operation: &str, sub_resource: &str, name: &str, object: Value) -> AdmissionRequest {
    AdmissionRequest {
        version: ReviewVersion::V1,
        uid: "req-1".into(),
        kind: "Eviction".into(),
        resource: "pods".into(),
        sub_resource: sub_resource.into(),
        name: name.into(),
        namespace: "ns".into(),
        operation: operation.into(),
        username: "kubectl".into(),
        object,
        old_object: Value::Null,
        dry_run: false,
    }
}

// ---- the judgement's world -----------------------------------------------------------------------------------

/// A zone-aware group: `zones` StatefulSets of `pods` pods each, all selected by the budget, every pod ready.
struct World {
    /// The StatefulSets the budget selects.
    statefulsets: Vec<StatefulSetView>,
    /// Every StatefulSet, selected or not.
    owners: Vec<StatefulSetView>,
    pods: Vec<BudgetPod>,
    /// How a zone without a pod of the partition counts (evictions: the reference's rule).
    absent_peer: AbsentPeer,
}

fn zone(z: char) -> String {
    format!("ingester-zone-{z}")
}

impl World {
    fn new(zones: usize, pods: u32) -> Self {
        let statefulsets: Vec<StatefulSetView> =
            (0..zones).map(|i| fixture::statefulset(GROUP, &zone((b'a' + i as u8) as char), pods, "r1")).collect();
        let pods = statefulsets
            .iter()
            .flat_map(|s| (0..pods).map(move |o| (s.clone(), o)))
            .map(|(s, o)| {
                let mut pod = fixture::pod(&s, o, "r1");
                pod.labels.insert(keys::ROLLOUT_GROUP.into(), GROUP.into());
                BudgetPod::plain(pod)
            })
            .collect();
        World { owners: statefulsets.clone(), statefulsets, pods, absent_peer: AbsentPeer::Unknown }
    }

    fn pod(&self, name: &str) -> &BudgetPod {
        self.pods.iter().find(|p| p.name() == name).unwrap_or_else(|| panic!("no pod {name}"))
    }

    fn change(&mut self, name: &str, f: impl FnOnce(&mut BudgetPod)) {
        f(self.pods.iter_mut().find(|p| p.name() == name).unwrap_or_else(|| panic!("no pod {name}")));
    }

    fn not_ready(&mut self, name: &str) {
        self.change(name, |p| p.pod = fixture::not_ready(p.pod.clone()));
    }

    fn remove(&mut self, name: &str) {
        self.pods.retain(|p| p.name() != name);
    }

    fn owner(&self, pod: &str) -> &StatefulSetView {
        let owner = self.pod(pod).pod.owner.as_ref().unwrap().name.clone();
        self.owners.iter().find(|s| s.name == owner).unwrap()
    }

    /// Judges the eviction of `pod` under `config`, with `pending` pods (by name) counted as being evicted.
    fn judge(&self, config: &ZpdbConfig, pod: &str, pending: &[&str]) -> Result<String, String> {
        let evicted = self.pod(pod);
        let owner = self.owner(pod);
        let partition = config.partition.as_ref().and_then(|r| r.partition_of(pod));
        let pending: BTreeSet<&str> = pending.iter().map(|n| self.pod(n).uid()).collect();
        let pending = |pod: &BudgetPod| pending.contains(pod.uid());
        let input = Judged {
            config,
            owner,
            statefulsets: &self.statefulsets,
            pods: &self.pods,
            evicted,
            partition: partition.as_deref(),
            max_unavailable: max_unavailable(config, owner, None),
            pending: &pending,
            absent_peer: self.absent_peer,
            now: now(),
        };
        judge(&input).map_err(|b| b.verdict().message().to_string())
    }
}

fn zone_mode(max: i64) -> ZpdbConfig {
    parse(with_selector(json!({"maxUnavailable": max}))).unwrap()
}

fn partition_mode(max: i64, delay: &str) -> ZpdbConfig {
    parse(with_selector(json!({
        "maxUnavailable": max,
        "podNamePartitionRegex": "[a-z\\-]+-zone-[a-z]-([0-9]+)",
        "crossZoneEvictionDelay": delay,
    })))
    .unwrap()
}

// ---- the step machine's cluster -------------------------------------------------------------------------------

fn settings(serialisation: Serialisation) -> EvictionSettings {
    EvictionSettings { namespace: "ns".into(), serialisation, intent_lifetime: Duration::from_secs(30) }
}

fn eviction(name: &str) -> AdmissionRequest {
    review_request(
        "CREATE",
        "eviction",
        name,
        json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}),
    )
}

/// An in-memory cluster for the flow: answers each need from the world, linearizably, and applies the writes.
struct Cluster {
    world: World,
    budgets: KnownBudgets,
    remembered: BTreeMap<String, Timestamp>,
    writes: Vec<String>,
    /// Every intent annotation, by pod name and key; a pod's `intent_until` is the latest of its own.
    intents: BTreeMap<(String, String), Timestamp>,
    /// Refusals (403) of pod patches and of StatefulSet patches (an older chart's RBAC).
    refuse_pod_patches: bool,
    refuse_statefulset_patches: bool,
    /// The list of StatefulSets after an intent fails.
    fail_statefulsets_again: bool,
    /// The pods (by uid) of decisions under way in the same process, as a claim is answered.
    under_way: Vec<String>,
}

impl Cluster {
    fn new(world: World, config: ZpdbConfig) -> Self {
        Cluster {
            world,
            budgets: KnownBudgets::Known(vec![config]),
            remembered: BTreeMap::new(),
            writes: Vec::new(),
            intents: BTreeMap::new(),
            refuse_pod_patches: false,
            refuse_statefulset_patches: false,
            fail_statefulsets_again: false,
            under_way: Vec::new(),
        }
    }

    /// Sets (`Some`) or removes annotations of a StatefulSet, as the list and the owner reads show it.
    fn annotate_statefulset(&mut self, name: &str, changes: &[(String, Option<String>)]) {
        for sts in self.world.statefulsets.iter_mut().chain(self.world.owners.iter_mut()).filter(|s| s.name == name) {
            for (key, value) in changes {
                match value {
                    Some(value) => sts.annotations.insert(key.clone(), value.clone()),
                    None => sts.annotations.remove(key),
                };
            }
        }
    }

    fn observe(&mut self, need: &Need) -> Observed {
        match need {
            Need::Pod { name } => Observed::Pod(match self.world.pods.iter().find(|p| p.name() == name) {
                Some(p) => Lookup::Found(Box::new(p.clone())),
                None => Lookup::NotFound,
            }),
            Need::Budgets => Observed::Budgets(self.budgets.clone()),
            Need::StatefulSet { name } => {
                Observed::StatefulSet(match self.world.statefulsets.iter().find(|s| &s.name == name) {
                    Some(s) => Lookup::Found(Box::new(s.clone())),
                    None => Lookup::NotFound,
                })
            }
            Need::Lock { .. } => {
                Observed::Locked { remembered: self.remembered.iter().map(|(u, t)| (u.clone(), *t)).collect() }
            }
            Need::StatefulSets { .. } => Observed::StatefulSets(Ok(self.world.statefulsets.clone())),
            Need::Pods { .. } | Need::PodsAgain { .. } => Observed::Pods(Ok(self.world.pods.as_slice().into())),
            Need::StatefulSetsAgain { .. } if self.fail_statefulsets_again => {
                Observed::StatefulSets(Err(Failure::Unavailable("API unavailable".into())))
            }
            Need::StatefulSetsAgain { .. } => Observed::StatefulSets(Ok(self.world.statefulsets.clone())),
            Need::WriteStatefulSetIntent { statefulset, key, value, stale } => {
                self.writes.push(format!("intent on {statefulset}"));
                if self.refuse_statefulset_patches {
                    return Observed::IntentWritten(Err(Failure::Forbidden("statefulsets is forbidden".into())));
                }
                let mut changes: Vec<(String, Option<String>)> = stale.iter().map(|k| (k.clone(), None)).collect();
                changes.push((key.clone(), Some(value.clone())));
                self.annotate_statefulset(statefulset, &changes);
                Observed::IntentWritten(Ok(()))
            }
            Need::RemoveStatefulSetIntent { statefulset, key } => {
                self.writes.push(format!("remove from {statefulset}"));
                self.annotate_statefulset(statefulset, &[(key.clone(), None)]);
                Observed::IntentRemoved
            }
            Need::WriteIntent { .. } if self.refuse_pod_patches => {
                self.writes.push("refused".into());
                Observed::IntentWritten(Err(Failure::Forbidden("pods is forbidden".into())))
            }
            Need::WriteIntent { pod, uid, key, until } => {
                self.writes.push(format!("intent {pod}"));
                if !self.world.pods.iter().any(|p| p.name() == pod && p.uid() == uid) {
                    return Observed::IntentWritten(Err(Failure::Conflict(format!("pods \"{pod}\" changed"))));
                }
                self.intents.insert((pod.clone(), key.clone()), *until);
                self.show_intents(pod);
                Observed::IntentWritten(Ok(()))
            }
            Need::RemoveIntent { pod, uid, key } => {
                self.writes.push(format!("remove {pod}"));
                if self.world.pods.iter().any(|p| p.name() == pod && p.uid() == uid) {
                    self.intents.remove(&(pod.clone(), key.clone()));
                    self.show_intents(pod);
                }
                Observed::IntentRemoved
            }
            Need::Claim { .. } => Observed::Claimed { others: self.under_way.clone() },
            Need::Remember { uid, until } => {
                self.writes.push(format!("remember {uid}"));
                self.remembered.insert(uid.clone(), *until);
                Observed::Remembered
            }
            Need::Answer(_) => unreachable!("answers are not carried out"),
        }
    }

    /// What a read of `pod` shows of its intents: the latest.
    fn show_intents(&mut self, pod: &str) {
        let latest = self.intents.iter().filter(|((p, _), _)| p == pod).map(|(_, until)| *until).max();
        self.world.change(pod, |p| p.intent_until = latest);
    }

    /// Runs a flow to its answer; returns the answer and the needs it made.
    fn run(&mut self, flow: EvictPod) -> (EvictionVerdict, Vec<String>) {
        self.run_with(flow, |_, _| {})
    }

    /// [`Cluster::run`], letting `meanwhile` change the cluster before each need is carried out (another decider's
    /// writes landing between this one's steps).
    fn run_with(
        &mut self,
        mut flow: EvictPod,
        mut meanwhile: impl FnMut(&mut Cluster, &Need),
    ) -> (EvictionVerdict, Vec<String>) {
        let mut observed = Observed::Start;
        let mut needs = Vec::new();
        loop {
            match flow.step(observed, now()) {
                Need::Answer(verdict) => return (verdict, needs),
                need => {
                    needs.push(need.kind().to_string());
                    meanwhile(self, &need);
                    observed = self.observe(&need);
                }
            }
        }
    }
}

/// A decision's reads before its first judgement.
const FIRST_READS: [&str; 4] = ["pod", "budgets", "statefulsets", "pods"];

fn decide(
    cluster: &mut Cluster,
    request: &AdmissionRequest,
    serialisation: Serialisation,
) -> (EvictionVerdict, Vec<String>) {
    cluster.run(EvictPod::from_admission(request, settings(serialisation)))
}

/// One of two deciders in a race, stepped one need at a time.
struct Racer {
    flow: EvictPod,
    next: Need,
}
