//! The controller's in-memory view of the namespace, fed only by watch events.
//!
//! Owns: the latest typed view of every managed StatefulSet and every pod, the StatefulSets' objects as watched
//! (a status write is an UPDATE of the whole object), the index from StatefulSet to its pods, and sync state. Each
//! event returns the rollout groups it touched, so the reconciler can reconcile just those. It never calls the API
//! and makes no decisions; it is plain data, tested without an API server.

use crate::cluster::WatchEvent;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use rollout_core::zpdb::BudgetPod;
use rollout_core::{GroupSnapshot, PodView, StatefulSetView};
use std::collections::{BTreeSet, HashMap, HashSet};

/// Objects seen since the last `Init` of a relist, to find the ones that vanished when it completes.
#[derive(Debug, Default)]
struct Relist {
    in_progress: Option<HashSet<String>>,
    synced: bool,
}

impl Relist {
    fn begin(&mut self) {
        self.in_progress = Some(HashSet::new());
    }

    fn seen(&mut self, name: &str) {
        if let Some(seen) = &mut self.in_progress {
            seen.insert(name.to_string());
        }
    }

    /// Ends a relist; returns the names that were not re-listed.
    fn finish<'a>(&mut self, known: impl Iterator<Item = &'a String>) -> Vec<String> {
        self.synced = true;
        match self.in_progress.take() {
            Some(seen) => known.filter(|n| !seen.contains(*n)).cloned().collect(),
            None => Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
pub struct ClusterCache {
    statefulsets: HashMap<String, StatefulSetView>,
    /// The objects behind `statefulsets`, as last watched: the status write sends one back conditional on its
    /// resourceVersion instead of reading it again (a few hundred objects at most; pods keep only their views).
    statefulset_objects: HashMap<String, StatefulSet>,
    pods: HashMap<String, PodView>,
    /// The two annotations budgets read on each pod (`grafana.com/ready-time`, the eviction intents), so a pass
    /// judges its deletions by the budgets on what the eviction webhook would read.
    budget_marks: HashMap<String, (Option<String>, Option<jiff::Timestamp>)>,
    /// StatefulSet name (from the pod's controller reference) -> names of pods claiming it.
    pods_by_owner: HashMap<String, BTreeSet<String>>,
    sts_relist: Relist,
    pod_relist: Relist,
}

/// Rollout groups whose snapshot may have changed.
pub type TouchedGroups = BTreeSet<String>;

impl ClusterCache {
    pub fn new() -> Self {
        Self::default()
    }

    /// True once both the StatefulSet and the pod watches have completed their first list.
    pub fn is_synced(&self) -> bool {
        self.sts_relist.synced && self.pod_relist.synced
    }

    pub fn group_names(&self) -> BTreeSet<String> {
        self.statefulsets.values().filter_map(|s| s.group.clone()).collect()
    }

    /// The snapshot of one rollout group, or `None` if no StatefulSet carries that group any more.
    pub fn group_snapshot(&self, group: &str) -> Option<GroupSnapshot> {
        let members: Vec<StatefulSetView> =
            self.statefulsets.values().filter(|s| s.group.as_deref() == Some(group)).cloned().collect();
        if members.is_empty() {
            return None;
        }
        let pods: Vec<&PodView> = members
            .iter()
            .flat_map(|s| self.pods_by_owner.get(&s.name).into_iter().flatten())
            .filter_map(|name| self.pods.get(name))
            .collect();
        Some(GroupSnapshot::assemble(group, members, pods))
    }

    /// Every StatefulSet and every pod of the namespace as budgets read them (for [`rollout_core::zpdb::BudgetScope`]).
    pub fn budget_view(&self) -> (Vec<StatefulSetView>, Vec<BudgetPod>) {
        let statefulsets = self.statefulsets.values().cloned().collect();
        let pods = self
            .pods
            .values()
            .map(|view| {
                let (ready_time, intent_until) = self.budget_marks.get(&view.name).cloned().unwrap_or_default();
                BudgetPod { pod: view.clone(), ready_time, intent_until }
            })
            .collect();
        (statefulsets, pods)
    }

    /// The StatefulSet `name` as last watched, if the cache holds it at `resource_version`.
    pub fn statefulset_at(&self, name: &str, resource_version: &str) -> Option<&StatefulSet> {
        self.statefulset_objects
            .get(name)
            .filter(|sts| sts.metadata.resource_version.as_deref() == Some(resource_version))
    }

    pub fn apply_statefulset_event(&mut self, event: WatchEvent<StatefulSet>) -> TouchedGroups {
        let mut touched = TouchedGroups::new();
        match event {
            WatchEvent::Init => self.sts_relist.begin(),
            WatchEvent::InitApply(sts) | WatchEvent::Apply(sts) => {
                // Only objects without a name fail conversion; the API server never sends those.
                if let Ok(view) = StatefulSetView::from_k8s(&sts) {
                    self.sts_relist.seen(&view.name);
                    touched.extend(view.group.clone());
                    self.statefulset_objects.insert(view.name.clone(), sts);
                    if let Some(old) = self.statefulsets.insert(view.name.clone(), view) {
                        touched.extend(old.group);
                    }
                }
            }
            WatchEvent::Delete(sts) => {
                if let Some(name) = sts.metadata.name {
                    self.statefulset_objects.remove(&name);
                    if let Some(old) = self.statefulsets.remove(&name) {
                        touched.extend(old.group);
                    }
                }
            }
            WatchEvent::InitDone => {
                let gone = self.sts_relist.finish(self.statefulsets.keys());
                for name in gone {
                    self.statefulset_objects.remove(&name);
                    if let Some(old) = self.statefulsets.remove(&name) {
                        touched.extend(old.group);
                    }
                }
                // A relist may have replaced anything: reconcile every group.
                touched.extend(self.group_names());
            }
        }
        touched
    }

    pub fn apply_pod_event(&mut self, event: WatchEvent<Pod>) -> TouchedGroups {
        let mut touched = TouchedGroups::new();
        match event {
            WatchEvent::Init => self.pod_relist.begin(),
            WatchEvent::InitApply(pod) | WatchEvent::Apply(pod) => {
                if let Ok(marked) = BudgetPod::from_k8s(&pod) {
                    let view = marked.pod;
                    self.budget_marks.insert(view.name.clone(), (marked.ready_time, marked.intent_until));
                    self.pod_relist.seen(&view.name);
                    touched.extend(self.group_of_pod(&view));
                    self.insert_pod(view, &mut touched);
                }
            }
            WatchEvent::Delete(pod) => {
                if let Some(name) = pod.metadata.name {
                    self.remove_pod(&name, &mut touched);
                }
            }
            WatchEvent::InitDone => {
                let gone = self.pod_relist.finish(self.pods.keys());
                for name in gone {
                    self.remove_pod(&name, &mut touched);
                }
                touched.extend(self.group_names());
            }
        }
        touched
    }

    fn group_of_pod(&self, pod: &PodView) -> Option<String> {
        let owner = pod.owner.as_ref()?;
        self.statefulsets.get(&owner.name)?.group.clone()
    }

    fn insert_pod(&mut self, view: PodView, touched: &mut TouchedGroups) {
        let name = view.name.clone();
        let owner = view.owner.as_ref().map(|o| o.name.clone());
        if let Some(old) = self.pods.insert(name.clone(), view) {
            let old_owner = old.owner.as_ref().map(|o| o.name.clone());
            if old_owner != owner {
                touched.extend(self.group_of_pod(&old));
                if let Some(o) = old_owner {
                    self.unindex(&o, &name);
                }
            }
        }
        if let Some(o) = owner {
            self.pods_by_owner.entry(o).or_default().insert(name);
        }
    }

    fn remove_pod(&mut self, name: &str, touched: &mut TouchedGroups) {
        self.budget_marks.remove(name);
        if let Some(old) = self.pods.remove(name) {
            touched.extend(self.group_of_pod(&old));
            if let Some(o) = &old.owner {
                self.unindex(&o.name, name);
            }
        }
    }

    fn unindex(&mut self, owner: &str, pod: &str) {
        if let Some(set) = self.pods_by_owner.get_mut(owner) {
            set.remove(pod);
            if set.is_empty() {
                self.pods_by_owner.remove(owner);
            }
        }
    }
}
