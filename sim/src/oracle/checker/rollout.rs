//! The rollout guarantees: one zone at a time, max unavailable, no zero-pod ready, only seen and member pods
//! deleted.

use crate::environment::objects::PodSum;
use crate::oracle::checker::Checker;
use crate::oracle::checker::Knowledge;
use crate::oracle::checker::MAX_UNAVAILABLE;
use crate::oracle::checker::NO_ZERO_POD_READY;
use crate::oracle::checker::ONE_ZONE;
use crate::oracle::checker::ONLY_MEMBER_PODS;
use crate::oracle::checker::ONLY_SEEN_PODS;
use crate::oracle::checker::OwnWrite;
use crate::oracle::checker::PAUSED;
use std::time::Duration;

impl Checker {
    /// Judges a controller deletion of `target` (as committed) that is about to commit at `rv`.
    pub fn judge_delete(&mut self, at: Duration, k: Knowledge, rv: u64, target: &PodSum) {
        self.writes_judged += 1;
        let known = self.known(k);
        // The pod as the controller knew it, if it knew this very pod (same uid); else as committed: a deletion of
        // a pod the controller never saw is judged on that pod, not on an earlier one of the same name.
        let seen = known.pods.get(&target.name).filter(|p| p.uid == target.uid).cloned();
        let basis = format!("(known: sts rv {}, pod rv {}, process #{})", k.sts_rv, k.pod_rv, k.incarnation);
        if seen.is_none() {
            let knew = match known.pods.get(&target.name) {
                Some(p) => format!("it knew {} as uid {}", p.name, p.uid),
                None => format!("it knew no pod {}", target.name),
            };
            let detail = format!("deleted {} (uid {}), a pod it had not seen: {knew} {basis}", target.name, target.uid);
            self.violate(at, ONLY_SEEN_PODS, detail);
        }
        let pod = seen.unwrap_or_else(|| target.clone());
        if pod.sts.is_empty() || !pod.in_selector {
            let why = if pod.sts.is_empty() { "no StatefulSet's" } else { "relabelled out of its selector" };
            self.violate(at, ONLY_MEMBER_PODS, format!("deleted {} (uid {}), {why} {basis}", pod.name, pod.uid));
        }
        if let Some(sts) = known.sts.get(&pod.sts).cloned() {
            for other in known.sts.values().filter(|o| o.group == sts.group && o.name != sts.name) {
                if let Some(why) = known.describe_unready(other) {
                    self.violate(at, ONE_ZONE, format!("deleted {} while {}: {why} {basis}", pod.name, other.name));
                }
            }
            if sts.paused {
                self.violate(at, PAUSED, format!("deleted {} of paused {} {basis}", pod.name, sts.name));
            }
            if known.available(&pod) {
                let members = known.members(&sts);
                let available = members.iter().filter(|(_, p)| p.is_some_and(|p| known.available(p))).count() as u32;
                let unavailable = sts.replicas.saturating_sub(available);
                if unavailable + 1 > sts.max_unavailable {
                    self.violate(
                        at,
                        MAX_UNAVAILABLE,
                        format!(
                            "deleted available {} while {unavailable} of {} unavailable (max {}) {basis}",
                            pod.name, sts.name, sts.max_unavailable
                        ),
                    );
                }
            }
        }
        self.own.push(OwnWrite::Deleted {
            incarnation: k.incarnation,
            rv,
            pod: target.name.clone(),
            uid: target.uid.clone(),
        });
    }

    /// Judges a controller write of `status.currentRevision` of `sts` to `revision`, about to commit at `rv`.
    pub fn judge_revision(&mut self, at: Duration, k: Knowledge, rv: u64, sts: &str, revision: &str) {
        self.writes_judged += 1;
        let known = self.known(k);
        if let Some(s) = known.sts.get(sts) {
            let bad: Vec<String> = known
                .members(s)
                .into_iter()
                .filter_map(|(i, p)| match p {
                    None => Some(format!("{sts}-{i} missing")),
                    Some(p) if !known.available(p) => Some(format!("{} not available", p.name)),
                    Some(p) if p.revision != revision => Some(format!("{} on {}", p.name, p.revision)),
                    Some(_) => None,
                })
                .collect();
            if !bad.is_empty() {
                let detail = format!(
                    "set currentRevision of {sts} to {revision} while {} (known: sts rv {}, pod rv {}, process #{})",
                    bad.join(", "),
                    k.sts_rv,
                    k.pod_rv,
                    k.incarnation
                );
                self.violate(at, NO_ZERO_POD_READY, detail);
            }
        }
        self.own.push(OwnWrite::Revision {
            incarnation: k.incarnation,
            rv,
            sts: sts.to_string(),
            revision: revision.to_string(),
        });
    }
}
