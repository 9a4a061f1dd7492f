//! What the world did, as typed records tests count: every request the API server served (who sent it, what it
//! asked, about which object, how it ended), every admission decision the world's users received and every
//! downscale committed. The trace tells
//! the same for people; tests assert on this instead, so rewording a trace line never changes a verdict.
//!
//! Must not judge: a count here shows a world exercised something, the guarantees are the checker's.

/// Who sent a request, as the API server tells its clients apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sender {
    /// A controller process: the reconcile loop's requests.
    Operator,
    /// An operator replica's webhook side (prepare-downscale admissions, eviction decisions, the certificate
    /// manager), or the user's actor standing in for the prepare-downscale webhook.
    Webhook,
    /// A node drain.
    Drain,
}

/// What a request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    DeletePod,
    /// `PUT statefulsets/{name}/status`.
    UpdateStatus,
    GetConfigMap,
    CreateConfigMap,
    ReplaceConfigMap,
    /// `PATCH statefulsets/{name}` of `spec.replicas` (with annotations in the same write, when any).
    PatchReplicas,
    /// `PATCH statefulsets/{name}` of annotations only, with or without a precondition.
    PatchStatefulSetAnnotations,
    PatchPodAnnotations,
    /// `PATCH {plural}/{name}/status` (the mirror's write-back).
    PatchResourceStatus,
    /// `CREATE pods/{name}/eviction`.
    Evict,
    /// The same as a dry run (of the request or of its delete options): nothing is deleted.
    DryRunEvict,
    CreateEvent,
    /// Event updates, Secrets, Leases, webhook configurations.
    OtherWrite,
    Read,
}

/// One request served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub sender: Sender,
    pub request: Request,
    /// The object's name (a plural for lists and discovery).
    pub object: String,
    /// The error's kind (`ApiError::kind`) when it failed.
    pub failure: Option<&'static str>,
}

impl Served {
    pub fn ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// A decision about a replica change the world's users asked for (`UPDATE` or `/scale`), as the user received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub statefulset: String,
    pub from: u32,
    pub to: u32,
    pub admitted: bool,
    /// The webhook's message when it denied (what the user reads).
    pub message: String,
}

/// Which webhook answered an admission of the no-downscale world.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Webhook {
    NoDownscale,
    PrepareDownscale,
}

/// A replica change of the no-downscale world's objects (a Deployment, a ReplicaSet or a StatefulSet, here or in
/// another team's namespace), as one of the two webhooks answered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectAdmission {
    pub webhook: Webhook,
    /// `<Kind> <name>`, the name prefixed with `<namespace>/` when it is another team's.
    pub object: String,
    pub from: u32,
    pub to: u32,
    /// Asked through the `/scale` subresource (otherwise an `UPDATE` of the object).
    pub via_scale: bool,
    /// Sent as an `admission.k8s.io/v1beta1` review.
    pub v1beta1: bool,
    pub admitted: bool,
    /// The answer's message (a denial's reason).
    pub message: String,
    /// The answer's warnings.
    pub warnings: Vec<String>,
}

impl ObjectAdmission {
    /// Whether one of its warnings says `what`.
    pub fn warns(&self, what: &str) -> bool {
        self.warnings.iter().any(|w| w.contains(what))
    }
}

/// One entry of the ledger's timeline, in the order things happened.
#[derive(Debug, Clone, Copy)]
pub enum Entry<'a> {
    Served(&'a Served),
    World(&'a WorldEvent),
}

/// An eviction the pod-eviction webhook denied, as the drain received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvictionDenial {
    pub pod: String,
    pub code: u16,
    pub message: String,
}

#[derive(Debug, Clone, Default)]
pub struct Activity {
    pub served: Vec<Served>,
    pub admissions: Vec<Admission>,
    /// The no-downscale world's admissions, by both webhooks.
    pub object_admissions: Vec<ObjectAdmission>,
    /// The evictions the webhook denied.
    pub eviction_denials: Vec<EvictionDenial>,
    /// Every committed decrease of a StatefulSet's replicas, with who wrote it and what the record said then.
    pub downscales: Vec<crate::oracle::checker::scaling::Downscale>,
    /// What the world's actors did to the cluster, in order.
    pub world: Vec<WorldEvent>,
    /// Record writes by an admission that held live downscale markers of more than one group.
    pub record_writes_shared_by_groups: usize,
    /// `served` and `world` interleaved as they happened: whether each next entry is a request served.
    order: Vec<bool>,
}

/// Something an actor of the world did (the user, the kubelet, the StatefulSet controller, a pod's endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorldEvent {
    /// A mirror's pod began preparing for a delayed downscale (its endpoint called for the first time).
    PodPrepares {
        pod: String,
    },
    /// A preparing pod cancelled its delayed downscale.
    PodCancels {
        pod: String,
    },
    /// A pod found preparing when the run starts, for `delay` (as annotated).
    PreparingBeforeTheRun {
        pod: String,
        delay: String,
    },
    /// The user corrected a StatefulSet's malformed delayed-downscale annotations.
    DelayAnnotationsCorrected {
        statefulset: String,
    },
    /// The user took a template push back.
    PushReverted,
    RecordCorrupted,
    RecordRepaired,
    /// A Ready pod's sidecar went down: crashed, or running with its readiness probe failing.
    SidecarDown {
        pod: String,
        running: bool,
    },
    /// The StatefulSet controller released a pod whose labels no longer match, or adopted it again.
    PodReleased {
        pod: String,
    },
    PodAdopted {
        pod: String,
    },
    /// The prepare-downscale webhook's in-progress marker of a downscale committed: its preparation began.
    DownscalePrepared {
        statefulset: String,
    },
    /// The user annotated a StatefulSet with `grafana.com/rollout-force-replicas`.
    ForceReplicasSet {
        statefulset: String,
        replicas: i32,
    },
    /// The user re-applied a StatefulSet from its manifest, dropping its `grafana.com/last-downscale`.
    LastDownscaleDropped {
        statefulset: String,
    },
    /// The mirror worlds' user (or HPA) set the reference resource's `spec.replicas`.
    ReferenceScaled {
        replicas: u32,
    },
    /// An admission gave its downscale up: its own record write removed the in-progress marker (its undo).
    DownscaleGivenUp {
        statefulset: String,
    },
    /// The leader's user asked for a downscale at the min time's boundary.
    MinTimeProbed {
        statefulset: String,
    },
    /// A process of eviction replica `replica` started (the kubelet starting it again after a crash); in the
    /// `no-patch` drains world replica 0 is the controller's process (`runs_controller`).
    ReplicaStarted {
        replica: usize,
        runs_controller: bool,
    },
    /// Eviction replica `replica` crashed (restarted after a while).
    ReplicaCrashed {
        replica: usize,
    },
    /// The StatefulSet controller observed a StatefulSet's new generation (its status caught up with its spec).
    GenerationObserved {
        statefulset: String,
        generation: i64,
    },
    /// The StatefulSet controller deleted a pod above a lowered `spec.replicas`.
    ScaleDownDeletes {
        statefulset: String,
        pod: String,
    },
}

impl Activity {
    /// A request the API server served.
    pub fn serve(&mut self, served: Served) {
        self.served.push(served);
        self.order.push(true);
    }

    /// Something the world's actors did.
    pub fn happened(&mut self, event: WorldEvent) {
        self.world.push(event);
        self.order.push(false);
    }

    /// The requests served and the world's events, interleaved in the order they happened.
    pub fn timeline(&self) -> impl Iterator<Item = Entry<'_>> {
        let (mut served, mut world) = (self.served.iter(), self.world.iter());
        self.order.iter().filter_map(move |is_served| match is_served {
            true => served.next().map(Entry::Served),
            false => world.next().map(Entry::World),
        })
    }

    /// Requests of `request` by `sender` about an object whose name starts with `prefix` that succeeded.
    pub fn succeeded(&self, sender: Sender, request: Request, prefix: &str) -> usize {
        self.served
            .iter()
            .filter(|s| s.sender == sender && s.request == request && s.ok() && s.object.starts_with(prefix))
            .count()
    }

    /// Requests of `request` by `sender` about an object whose name starts with `prefix`, however they ended.
    pub fn sent_by(&self, sender: Sender, request: Request, prefix: &str) -> usize {
        self.served
            .iter()
            .filter(|s| s.sender == sender && s.request == request && s.object.starts_with(prefix))
            .count()
    }

    /// Requests of `request` about an object whose name starts with `prefix`, whoever sent them, however they ended.
    pub fn sent(&self, request: Request, prefix: &str) -> usize {
        self.served.iter().filter(|s| s.request == request && s.object.starts_with(prefix)).count()
    }

    /// Requests of `request` about an object whose name starts with `prefix` refused by RBAC (403), whoever sent
    /// them.
    pub fn forbidden(&self, request: Request, prefix: &str) -> usize {
        let refused = |s: &&Served| s.request == request && s.failure == Some("forbidden");
        self.served.iter().filter(refused).filter(|s| s.object.starts_with(prefix)).count()
    }

    /// The world's events that `matches`.
    pub fn count(&self, matches: impl Fn(&WorldEvent) -> bool) -> usize {
        self.world.iter().filter(|e| matches(e)).count()
    }

    /// Downscales committed of a StatefulSet named `prefix...`, by the controller (or by anyone else).
    pub fn downscales(&self, prefix: &str, by_controller: bool) -> usize {
        let by = |d: &&crate::oracle::checker::scaling::Downscale| d.by.starts_with("controller") == by_controller;
        self.downscales.iter().filter(|d| d.sts.starts_with(prefix)).filter(by).count()
    }

    /// Denied admissions whose message says `why`.
    pub fn denied_for(&self, why: &str) -> usize {
        self.admissions.iter().filter(|a| !a.admitted && a.message.contains(why)).count()
    }

    /// Admission decisions about a StatefulSet whose name starts with `prefix`, admitted or denied.
    pub fn admissions(&self, prefix: &str, admitted: bool) -> usize {
        self.admissions.iter().filter(|a| a.admitted == admitted && a.statefulset.starts_with(prefix)).count()
    }
}
