//! A rollout group's snapshot: its StatefulSets in name order, each with the pods it owns.

use crate::natural::natural_cmp;
use crate::view::{PodView, StatefulSetView};
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSnapshot {
    pub sts: StatefulSetView,
    /// Pods owned by this StatefulSet, in natural name order.
    pub pods: Vec<PodView>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSnapshot {
    pub name: String,
    /// StatefulSets of the group, sorted by name (byte-wise, as the reference).
    pub members: Vec<MemberSnapshot>,
    /// Things noticed while assembling the snapshot (pods claiming a StatefulSet whose selector does not match them).
    pub warnings: Vec<String>,
}

impl GroupSnapshot {
    /// Assembles one group from its StatefulSets and any superset of their pods. Pods belong to a StatefulSet by
    /// controller ownerReference, cross-checked against the selector; other pods are ignored.
    pub fn assemble<'p>(
        name: impl Into<String>,
        mut statefulsets: Vec<StatefulSetView>,
        pods: impl IntoIterator<Item = &'p PodView>,
    ) -> Self {
        statefulsets.sort_by(|a, b| a.name.cmp(&b.name));
        let index: HashMap<&str, usize> = statefulsets.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        let mut owned: Vec<Vec<PodView>> = vec![Vec::new(); statefulsets.len()];
        let mut warnings = Vec::new();
        for pod in pods {
            let Some(owner) = pod.owner.as_ref().filter(|o| o.kind == "StatefulSet") else {
                continue;
            };
            let Some(&i) = index.get(owner.name.as_str()) else {
                continue;
            };
            if statefulsets[i].owns(pod) {
                owned[i].push(pod.clone());
            } else if owner.uid.is_empty() || statefulsets[i].uid.is_empty() || owner.uid == statefulsets[i].uid {
                warnings.push(format!(
                    "pod {} names StatefulSet {} as its controller but does not match its selector; not counted",
                    pod.name, owner.name
                ));
            }
        }
        let members = statefulsets
            .into_iter()
            .zip(owned)
            .map(|(sts, mut pods)| {
                pods.sort_by(|a, b| natural_cmp(&a.name, &b.name));
                MemberSnapshot { sts, pods }
            })
            .collect();
        GroupSnapshot { name: name.into(), members, warnings }
    }

    pub fn member(&self, name: &str) -> Option<&MemberSnapshot> {
        self.members.iter().find(|m| m.sts.name == name)
    }
}

/// Splits managed StatefulSets (those with a `rollout-group` label) into groups, sorted by group name.
/// StatefulSets without the label are ignored.
pub fn build_groups(statefulsets: Vec<StatefulSetView>, pods: &[PodView]) -> Vec<GroupSnapshot> {
    let mut by_group: BTreeMap<String, Vec<StatefulSetView>> = BTreeMap::new();
    for sts in statefulsets {
        if let Some(group) = sts.group.clone() {
            by_group.entry(group).or_default().push(sts);
        }
    }
    // Index pods by owner name once, so assembling every group stays linear in the number of pods.
    let mut pods_by_owner: HashMap<&str, Vec<&PodView>> = HashMap::new();
    for pod in pods {
        if let Some(owner) = &pod.owner {
            pods_by_owner.entry(owner.name.as_str()).or_default().push(pod);
        }
    }
    by_group
        .into_iter()
        .map(|(name, stss)| {
            let candidates: Vec<&PodView> =
                stss.iter().flat_map(|s| pods_by_owner.get(s.name.as_str()).into_iter().flatten().copied()).collect();
            GroupSnapshot::assemble(name, stss, candidates)
        })
        .collect()
}
