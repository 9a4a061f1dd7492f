//! The rest of the cluster, co-located with the API server's storage: the StatefulSet controller (OnDelete: a
//! missing pod is recreated at the update revision after a delay; status follows template pushes and pod changes
//! with a lag) and the kubelet (pods become Ready after random delays, some slowly, some not for a long while;
//! terminating pods keep reporting Ready until they are gone; creation can be refused for a while, like a quota).

use crate::environment::objects::{pod_revision, revision_name};
use crate::environment::store::{SharedStore, Store};
use crate::rng::SimRng;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug)]
pub struct KubeState {
    pub rng: SimRng,
    /// Per pod uid: when its containers become ready.
    ready_at: BTreeMap<String, Instant>,
    /// Per pod name: when the StatefulSet controller (re)creates it.
    create_at: BTreeMap<String, Instant>,
    /// Per pod uid: when a terminating pod is gone.
    gone_at: BTreeMap<String, Instant>,
    observe_at: BTreeMap<String, Instant>,
    status_at: BTreeMap<String, Instant>,
    /// Per pod uid: when the StatefulSet controller releases a pod relabelled out of its selector, or adopts one
    /// that matches it again.
    claim_at: BTreeMap<String, Instant>,
    /// Per StatefulSet: pod creation is refused until then.
    pub quota_until: BTreeMap<String, Instant>,
    /// Chance that a new pod does not become ready for minutes (only while faults are on).
    pub never_ready_chance: f64,
    /// The StatefulSet controller acts on a StatefulSet's spec only once it has observed its generation (as the real
    /// one does: observing and acting are one sync): until then it creates and deletes no pod of it and leaves its
    /// status alone. Off: the pods follow `spec.replicas` at once and only `observedGeneration` and
    /// `updateRevision` lag (0.2-3 s), as in the worlds before this setting (their seeds replay unchanged).
    pub observe_lag: bool,
    /// With `observe_lag`: chance that observing a new generation takes 5-60 s instead of 0.2-3 s (a busy
    /// kube-controller-manager, a leader failover); zero once the faults stop.
    pub slow_observe_chance: f64,
    /// With `observe_lag`, per StatefulSet: the `spec.replicas` of the generation last observed.
    observed_replicas: BTreeMap<String, u32>,
    /// Observations that took 5-60 s.
    pub slow_observations: u64,
    /// Pods are created with a sidecar container (`Scenario::sidecars`).
    pub sidecars: bool,
}

pub type SharedKube = Arc<Mutex<KubeState>>;

impl KubeState {
    pub fn new(rng: SimRng) -> Self {
        KubeState {
            rng,
            ready_at: BTreeMap::new(),
            create_at: BTreeMap::new(),
            gone_at: BTreeMap::new(),
            observe_at: BTreeMap::new(),
            status_at: BTreeMap::new(),
            claim_at: BTreeMap::new(),
            quota_until: BTreeMap::new(),
            never_ready_chance: 0.0,
            observe_lag: false,
            slow_observe_chance: 0.0,
            observed_replicas: BTreeMap::new(),
            slow_observations: 0,
            sidecars: false,
        }
    }

    fn new_pod_ready_delay(&mut self) -> Duration {
        if self.rng.chance(self.never_ready_chance) {
            self.rng.secs(120, 400)
        } else if self.rng.chance(0.15) {
            self.rng.secs(30, 90)
        } else {
            self.rng.millis(2_000, 15_000)
        }
    }

    /// A running pod crashes: not Ready until `until`.
    pub fn crash(&mut self, store: &mut Store, pod: &str, until: Instant) {
        let Some(mut p) = store.pods.get(pod).cloned() else { return };
        if p.metadata.deletion_timestamp.is_some() {
            return;
        }
        let uid = p.metadata.uid.clone().unwrap_or_default();
        self.ready_at.insert(uid, until);
        if crate::environment::objects::is_ready(&p) {
            crate::environment::objects::set_ready(&mut p, false, Timestamp::now());
            store.put_pod(p);
        }
        store.trace("kubelet", format!("pod {pod} crash-looping for {:.0}s", (until - Instant::now()).as_secs_f64()));
    }

    /// Faults are over: every pod that is not ready becomes ready soon.
    pub fn heal(&mut self) {
        let now = Instant::now();
        let uids: Vec<String> = self.ready_at.keys().cloned().collect();
        for uid in uids {
            let soon = now + self.rng.millis(0, 30_000);
            if let Some(at) = self.ready_at.get_mut(&uid) {
                *at = (*at).min(soon);
            }
        }
        self.quota_until.clear();
        self.never_ready_chance = 0.0;
        if self.observe_lag {
            self.slow_observe_chance = 0.0;
            let soon = now + Duration::from_secs(3);
            for at in self.observe_at.values_mut() {
                *at = (*at).min(soon);
            }
        }
    }

    /// How long the StatefulSet controller takes to observe a new generation.
    fn observe_delay(&mut self) -> Duration {
        if self.observe_lag && self.rng.chance(self.slow_observe_chance) {
            self.slow_observations += 1;
            self.rng.secs(5, 60)
        } else {
            self.rng.millis(200, 3_000)
        }
    }
}

fn min_due(next: &mut Option<Instant>, at: Instant) {
    *next = Some(next.map_or(at, |n| n.min(at)));
}

/// One pass of the StatefulSet controller and the kubelet; returns when something is due next.
pub fn step(store: &mut Store, kube: &mut KubeState, now: Instant) -> Option<Instant> {
    let mut next = None;
    let names: Vec<String> = store.statefulsets.keys().cloned().collect();
    for name in names {
        let sts = store.statefulsets[&name].clone();
        let generation = sts.metadata.generation.unwrap_or(1);
        let status = sts.status.clone().unwrap_or_default();
        let spec_replicas = sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0).max(0) as u32;
        let mut stalled = false;
        if status.observed_generation.unwrap_or(0) < generation {
            let at = match kube.observe_at.get(&name) {
                Some(at) => *at,
                None => {
                    let at = now + kube.observe_delay();
                    kube.observe_at.insert(name.clone(), at);
                    at
                }
            };
            if now >= at {
                kube.observe_at.remove(&name);
                let mut new = sts.clone();
                let revision = crate::environment::objects::template_revision(&sts);
                let st = new.status.get_or_insert_with(Default::default);
                st.observed_generation = Some(generation);
                st.update_revision = Some(revision.clone());
                store.put_statefulset(new);
                if kube.observe_lag {
                    kube.observed_replicas.insert(name.clone(), spec_replicas);
                }
                store.trace("sts-ctrl", format!("{name}: observed generation {generation}, updateRevision {revision}"));
                let observed =
                    crate::oracle::activity::WorldEvent::GenerationObserved { statefulset: name.clone(), generation };
                store.oracle.activity.happened(observed);
            } else {
                min_due(&mut next, at);
                stalled = kube.observe_lag;
            }
        }
        let sts = store.statefulsets[&name].clone();
        let status = sts.status.clone().unwrap_or_default();
        let update = status.update_revision.clone().unwrap_or_default();
        // Under `observe_lag`, the replicas of the generation the StatefulSet controller has observed.
        let replicas = match kube.observe_lag {
            true => *kube.observed_replicas.entry(name.clone()).or_insert(spec_replicas),
            false => spec_replicas,
        };
        for i in 0..replicas {
            let pod_name = format!("{name}-{i}");
            claim_or_release(store, kube, &name, &pod_name, now, &mut next);
            match store.pods.get(&pod_name).cloned() {
                // A StatefulSet controller that has not synced the StatefulSet since its spec changed creates nothing.
                None if stalled => {}
                None => {
                    let at =
                        *kube.create_at.entry(pod_name.clone()).or_insert_with(|| now + kube.rng.millis(500, 3_000));
                    if now < at {
                        min_due(&mut next, at);
                        continue;
                    }
                    if let Some(until) = kube.quota_until.get(&name).copied().filter(|u| now < *u) {
                        store.trace("sts-ctrl", format!("create pod {pod_name} failed: exceeded quota"));
                        let retry = (now + kube.rng.millis(5_000, 15_000)).min(until);
                        kube.create_at.insert(pod_name, retry);
                        min_due(&mut next, retry);
                        continue;
                    }
                    kube.create_at.remove(&pod_name);
                    let uid = store.new_uid(&pod_name);
                    let delay = kube.new_pod_ready_delay();
                    kube.ready_at.insert(uid.clone(), now + delay);
                    min_due(&mut next, now + delay);
                    let mut pod = crate::environment::objects::pod(&name, i, &update, uid, false, Timestamp::now());
                    // The template's labels (set only by worlds whose budgets select pods by a label of their own).
                    let template = sts.spec.as_ref().and_then(|s| s.template.metadata.as_ref());
                    if let Some(labels) = template.and_then(|m| m.labels.clone()) {
                        pod.metadata.labels.get_or_insert_default().extend(labels);
                    }
                    if kube.sidecars {
                        crate::environment::objects::add_sidecar(&mut pod);
                    }
                    store.put_pod(pod);
                    store.trace("sts-ctrl", format!("created pod {pod_name} at {update}"));
                }
                Some(p) if p.metadata.deletion_timestamp.is_some() => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    let at = *kube.gone_at.entry(uid.clone()).or_insert_with(|| now + kube.rng.millis(1_000, 15_000));
                    if now >= at {
                        kube.gone_at.remove(&uid);
                        kube.ready_at.remove(&uid);
                        store.remove_pod(&pod_name);
                        store.trace("kubelet", format!("pod {pod_name} terminated"));
                        let again = now + kube.rng.millis(500, 3_000);
                        kube.create_at.insert(pod_name, again);
                        min_due(&mut next, again);
                    } else {
                        min_due(&mut next, at);
                    }
                }
                Some(mut p) => {
                    let uid = p.metadata.uid.clone().unwrap_or_default();
                    let at = *kube.ready_at.entry(uid).or_insert(now);
                    if !crate::environment::objects::is_ready(&p) {
                        if now >= at {
                            crate::environment::objects::set_ready(&mut p, true, Timestamp::now());
                            store.put_pod(p);
                            store.trace("kubelet", format!("pod {pod_name} Ready"));
                            let snapshot = store.describe();
                            store.trace("cluster", snapshot);
                        } else {
                            min_due(&mut next, at);
                        }
                    }
                }
            }
        }
        scale_down(store, kube, &name, replicas, now, &mut next, stalled);
        if stalled {
            continue;
        }
        // Status counts follow the pods with a lag.
        let pods: Vec<_> = store.pods.values().filter(|p| crate::environment::objects::owner_of(p) == name).collect();
        let current = status.current_revision.clone().unwrap_or_default();
        let counts = (
            pods.len() as i32,
            pods.iter().filter(|p| crate::environment::objects::is_ready(p)).count() as i32,
            pods.iter().filter(|p| pod_revision(p) == current).count() as i32,
            pods.iter().filter(|p| pod_revision(p) == update).count() as i32,
        );
        let shown = (
            status.replicas,
            status.ready_replicas.unwrap_or(0),
            status.current_replicas.unwrap_or(0),
            status.updated_replicas.unwrap_or(0),
        );
        if counts != shown {
            let at = *kube.status_at.entry(name.clone()).or_insert_with(|| now + kube.rng.millis(100, 2_000));
            if now >= at {
                kube.status_at.remove(&name);
                let mut new = sts.clone();
                let st = new.status.get_or_insert_with(Default::default);
                (st.replicas, st.ready_replicas, st.current_replicas, st.updated_replicas) =
                    (counts.0, Some(counts.1), Some(counts.2), Some(counts.3));
                store.put_statefulset(new);
            } else {
                min_due(&mut next, at);
            }
        } else {
            kube.status_at.remove(&name);
        }
    }
    next
}

/// The StatefulSet controller's claim of pod `pod_name` (its `ClaimPods`): a pod it owns whose labels no longer match
/// its selector is released (its controller reference removed), and a pod of its name with no owner whose labels
/// match is adopted, each 0.3-3 s after it changed. A released pod keeps its name, so the StatefulSet cannot
/// recreate that ordinal until the pod is relabelled back (the real controller's create fails: the name is taken).
fn claim_or_release(
    store: &mut Store,
    kube: &mut KubeState,
    name: &str,
    pod_name: &str,
    now: Instant,
    next: &mut Option<Instant>,
) {
    let Some(pod) = store.pods.get(pod_name).filter(|p| p.metadata.deletion_timestamp.is_none()) else { return };
    let owned = crate::environment::objects::owner_of(pod) == name;
    if owned == crate::environment::objects::in_selector(pod)
        || (!owned && !crate::environment::objects::owner_of(pod).is_empty())
    {
        return;
    }
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let at = *kube.claim_at.entry(uid.clone()).or_insert_with(|| now + kube.rng.millis(300, 3_000));
    if now < at {
        min_due(next, at);
        return;
    }
    kube.claim_at.remove(&uid);
    let mut pod = pod.clone();
    if owned {
        pod.metadata.owner_references = None;
        store.put_pod(pod);
        store.trace("sts-ctrl", format!("{name}: released pod {pod_name} (its labels no longer match)"));
        store
            .oracle
            .activity
            .world
            .push(crate::oracle::activity::WorldEvent::PodReleased { pod: pod_name.to_string() });
    } else {
        pod.metadata.owner_references = Some(vec![crate::environment::objects::statefulset_owner(name)]);
        store.put_pod(pod);
        store.trace("sts-ctrl", format!("{name}: adopted pod {pod_name}"));
        store.oracle.activity.happened(crate::oracle::activity::WorldEvent::PodAdopted { pod: pod_name.to_string() });
    }
}

/// Pods of `name` at or beyond `replicas` go away one at a time, highest ordinal first (the StatefulSet controller's
/// ordered scale-down: the next is deleted once the previous one is gone, and none while a kept pod is missing or not
/// Ready); they are not recreated.
fn scale_down(
    store: &mut Store,
    kube: &mut KubeState,
    name: &str,
    replicas: u32,
    now: Instant,
    next: &mut Option<Instant>,
    stalled: bool,
) {
    let prefix = format!("{name}-");
    let mut excess: Vec<(u32, String)> = store
        .pods
        .values()
        .filter(|p| crate::environment::objects::owner_of(p) == name)
        .filter_map(|p| {
            let pod_name = p.metadata.name.clone().unwrap_or_default();
            let ordinal = pod_name.strip_prefix(&prefix)?.parse::<u32>().ok()?;
            (ordinal >= replicas).then_some((ordinal, pod_name))
        })
        .collect();
    excess.sort_unstable();
    let mut terminating = false;
    for (_, pod_name) in &excess {
        let Some(p) = store.pods.get(pod_name) else { continue };
        if p.metadata.deletion_timestamp.is_none() {
            continue;
        }
        terminating = true;
        let uid = p.metadata.uid.clone().unwrap_or_default();
        let at = *kube.gone_at.entry(uid.clone()).or_insert_with(|| now + kube.rng.millis(1_000, 15_000));
        if now >= at {
            kube.gone_at.remove(&uid);
            kube.ready_at.remove(&uid);
            kube.create_at.remove(pod_name);
            store.remove_pod(pod_name);
            store.trace("kubelet", format!("pod {pod_name} terminated (scaled down)"));
        } else {
            min_due(next, at);
        }
    }
    // OrderedReady (the default pod management policy): a condemned pod is deleted only while every pod the
    // StatefulSet keeps exists and is Running and Ready.
    let kept_healthy = (0..replicas).all(|i| {
        store
            .pods
            .get(&format!("{name}-{i}"))
            .is_some_and(|p| crate::environment::objects::is_ready(p) && p.metadata.deletion_timestamp.is_none())
    });
    if !terminating
        && !stalled
        && kept_healthy
        && let Some((_, pod_name)) = excess.last()
    {
        let mut p = store.pods[pod_name].clone();
        p.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()));
        store.put_pod(p);
        store.trace("sts-ctrl", format!("scale down {name} to {replicas}: deleting pod {pod_name}"));
        let deletes = crate::oracle::activity::WorldEvent::ScaleDownDeletes {
            statefulset: name.to_string(),
            pod: pod_name.to_string(),
        };
        store.oracle.activity.happened(deletes);
    }
}

/// Sets a StatefulSet's `spec.replicas` (a user's or HPA's change, already admitted): bumps the generation.
pub fn set_replicas(store: &mut Store, sts: &str, replicas: u32, who: &str) {
    let Some(mut s) = store.statefulsets.get(sts).cloned() else { return };
    let from = s.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    if let Some(spec) = s.spec.as_mut() {
        spec.replicas = Some(replicas as i32);
    }
    s.metadata.generation = Some(s.metadata.generation.unwrap_or(1) + 1);
    store.writing_as(|w| w.name = who.to_string(), |st| st.put_statefulset(s));
    store.trace(who, format!("{sts}: replicas {from} -> {replicas}"));
}

/// The StatefulSet controller and kubelet process: reacts to every change of the store and to its own timers.
pub async fn run(store: SharedStore, kube: SharedKube) {
    let changes = store.lock().unwrap().subscribe();
    loop {
        let seen = changes.version();
        let next = {
            let mut store = store.lock().unwrap();
            let mut kube = kube.lock().unwrap();
            step(&mut store, &mut kube, Instant::now())
        };
        let wake = next.unwrap_or_else(|| Instant::now() + Duration::from_secs(3600));
        tokio::select! {
            biased;
            _ = changes.changed_since(seen) => {}
            _ = tokio::time::sleep_until(wake) => {}
        }
    }
}

/// Pushes template revision `n` to a StatefulSet (a user's deploy): bumps the generation.
pub fn push_revision(store: &mut Store, sts: &str, n: u32) {
    let Some(mut s) = store.statefulsets.get(sts).cloned() else { return };
    let rev = revision_name(sts, n);
    if let Some(spec) = s.spec.as_mut() {
        spec.template.metadata.get_or_insert_with(Default::default).annotations =
            Some(BTreeMap::from([(crate::environment::objects::TEMPLATE_REVISION.to_string(), rev.clone())]));
    }
    s.metadata.generation = Some(s.metadata.generation.unwrap_or(1) + 1);
    store.put_statefulset(s);
    store.trace("user", format!("pushed template {rev}"));
}

/// Sets or clears the pause annotation of a StatefulSet.
pub fn set_paused(store: &mut Store, sts: &str, paused: bool) {
    let Some(mut s) = store.statefulsets.get(sts).cloned() else { return };
    let ann = s.metadata.annotations.get_or_insert_with(Default::default);
    if paused {
        ann.insert(rollout_core::keys::ROLLOUT_PAUSED.to_string(), "true".to_string());
    } else {
        ann.remove(rollout_core::keys::ROLLOUT_PAUSED);
    }
    store.put_statefulset(s);
    store.trace("user", format!("{} {sts}", if paused { "paused" } else { "unpaused" }));
}
