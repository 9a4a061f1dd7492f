//! The simulated API server's write of a replica change that passes through admission (the webhook users' `kubectl
//! scale`, `kubectl patch` and HPA requests), done as the real API server does it: the storage layer's
//! guaranteed-update loop with admission inside it.
//!
//! Each try reads the stored StatefulSet, builds the new object (a PATCH re-applied to what was just read; a PUT is
//! the client's object), runs admission on it (the real prepare-downscale webhook router, through [`Admission`]), and
//! then swaps it into storage only if the stored object is still the one read. When the swap fails (someone wrote
//! the object during admission, the webhook itself included) a PATCH goes round again: read, re-apply, re-admit, at
//! most [`MAX_PATCH_CONFLICT_RETRIES`] times, then 409 to the client. A PUT carrying a resourceVersion that is not
//! the stored one's is refused with 409 after admission ran, nothing committed (its client may retry); a PUT without
//! one goes round like a PATCH. The AdmissionReview of a PATCH carries the resourceVersion stored at that try; a
//! PUT's, the client's. A change that leaves the object as stored writes nothing (no new resourceVersion; the webhook
//! is not asked about a change of nothing).

use crate::environment::store::{SharedStore, Store};
use k8s_openapi::api::apps::v1::StatefulSet;
use std::collections::BTreeMap;

/// How many times a request goes round again after its object changed during admission before its client gets 409
/// (the real patch handler's bound on a PATCH's conflict retries; a PUT carrying a resourceVersion is refused on the
/// try after its first conflict anyway).
pub const MAX_PATCH_CONFLICT_RETRIES: u32 = 5;

/// How the client sends its change of `spec.replicas`.
#[derive(Debug, Clone)]
pub enum Write {
    /// A PATCH (`kubectl scale`, `kubectl patch`): re-applied to the object read at each try.
    Patch,
    /// A PUT (an HPA's update of the Scale): the replicas the client asks for, on the object as the client read it
    /// (`Some`: its resourceVersion is a precondition) or unconditionally (`None`).
    Put { read: Option<Box<StatefulSet>> },
}

/// A client's change of one StatefulSet's replicas.
#[derive(Debug, Clone)]
pub struct Request {
    pub statefulset: String,
    pub replicas: u32,
    /// Sent to the `/scale` subresource (a Scale under admission: a mutating webhook's patch of it reaches the
    /// StatefulSet only through `spec.replicas`), or to the StatefulSet itself.
    pub scale: bool,
    pub write: Write,
}

/// One try of the loop, as admission gets it.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// 0: the request's first admission; n: its n-th after a conflict.
    pub retry: u32,
    /// The object as read at this try, and the replicas it has (`from`) and is changed to (`to`).
    pub stored: StatefulSet,
    pub from: u32,
    pub to: u32,
    /// The store's history position at the read (where the checker judges the admission from).
    pub read_rv: u64,
    /// The resourceVersion the object under admission carries.
    pub object_version: Option<String>,
    /// A `/scale` request (the object under admission is a Scale).
    pub scale: bool,
}

/// What admission answered on one try.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Allowed, with the mutating webhook's JSONPatch, if any.
    Allowed { patch: Option<serde_json::Value> },
    /// Refused by a webhook, or the webhook could not be asked: the request fails with this message.
    Denied(String),
}

/// Admission as the loop runs it on each try, and the judgements made at the commit.
pub trait Admission {
    /// Runs admission on this try's object: the webhook's review, its answer, the rest of the admission chain.
    fn admit(&mut self, attempt: &Attempt) -> impl Future<Output = Answer> + Send;
    /// The admitted change is about to commit (called under the store's lock, before the write).
    fn committing(&mut self, st: &mut Store, attempt: &Attempt);
    /// The admitted change committed at resourceVersion `st.rv` (under the same lock).
    fn committed(&mut self, st: &mut Store, attempt: &Attempt);
}

/// How a request ended, as its client sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Committed after `retries` conflicts (0: on the first try).
    Committed { retries: u32 },
    /// The StatefulSet already has those replicas: nothing written.
    Unchanged,
    /// Refused by admission on try `retry` (0-based).
    Denied { retry: u32, message: String },
    /// 409 Conflict after `retries` conflicts. `own_write_only`: every change that caused one was a write of the
    /// prepare-downscale webhook's `grafana.com/last-downscale` annotation and nothing else.
    Conflict { retries: u32, own_write_only: bool },
    /// The StatefulSet is gone.
    NotFound,
    /// The API server was down, or crashed while the request was in admission: the client's connection failed and
    /// nothing was stored.
    Unavailable,
}

/// How the webhook users' downscale requests of a run ended, by client (reported by `batch`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ScaleRequestStats {
    /// `kubectl scale` (a PATCH of `/scale`): committed with no conflict, committed after re-admissions.
    pub scale_patch_first_try: u64,
    pub scale_patch_readmitted: u64,
    /// A PATCH of the StatefulSet itself: the same.
    pub sts_patch_first_try: u64,
    pub sts_patch_readmitted: u64,
    /// Re-admissions of PATCHes after a conflict (every try after the first), and PATCHes answered 409.
    pub patch_readmissions: u64,
    pub patch_conflicts: u64,
    /// An HPA's PUT of `/scale`: committed on the HPA's first request, on the request after one refused with 409,
    /// on a later one.
    pub put_first_try: u64,
    pub put_after_conflict: u64,
    pub put_later: u64,
    /// PUTs answered 409, of those refused for the webhook's own write right after a request refused for it (the
    /// date the first one wrote no longer far enough ahead when the HPA sent it again), and changes an HPA gave up
    /// after its last request.
    pub put_conflicts: u64,
    pub put_own_write_again: u64,
    pub put_given_up: u64,
    /// Requests refused by admission, and of those, refused on a re-admission (a try after a conflict).
    pub denied: u64,
    pub denied_readmitted: u64,
    /// Requests lost to an API server down or crashing during their admission.
    pub lost: u64,
}

impl ScaleRequestStats {
    pub fn add(&mut self, o: &ScaleRequestStats) {
        self.scale_patch_first_try += o.scale_patch_first_try;
        self.scale_patch_readmitted += o.scale_patch_readmitted;
        self.sts_patch_first_try += o.sts_patch_first_try;
        self.sts_patch_readmitted += o.sts_patch_readmitted;
        self.patch_readmissions += o.patch_readmissions;
        self.patch_conflicts += o.patch_conflicts;
        self.put_first_try += o.put_first_try;
        self.put_after_conflict += o.put_after_conflict;
        self.put_later += o.put_later;
        self.put_conflicts += o.put_conflicts;
        self.put_own_write_again += o.put_own_write_again;
        self.put_given_up += o.put_given_up;
        self.denied += o.denied;
        self.lost += o.lost;
        self.denied_readmitted += o.denied_readmitted;
    }

    pub fn describe(&self) -> String {
        format!(
            "downscale requests committed: kubectl-scale PATCH {} with no conflict, {} after re-admission; \
             StatefulSet PATCH {} with no conflict, {} after re-admission ({} re-admissions, {} PATCHes answered \
             409); HPA PUT {} on its first request, {} on the request after a 409, {} later ({} PUTs answered 409, \
             {} of them again for the webhook's own write, {} changes given up); {} requests denied, {} of them on a re-admission; {} lost to an API server crash",
            self.scale_patch_first_try,
            self.scale_patch_readmitted,
            self.sts_patch_first_try,
            self.sts_patch_readmitted,
            self.patch_readmissions,
            self.patch_conflicts,
            self.put_first_try,
            self.put_after_conflict,
            self.put_later,
            self.put_conflicts,
            self.put_own_write_again,
            self.put_given_up,
            self.denied,
            self.denied_readmitted,
            self.lost
        )
    }
}

fn replicas_of(sts: &StatefulSet) -> u32 {
    sts.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32
}

/// Whether `now` differs from `read` in nothing but the `grafana.com/last-downscale` annotation (and the
/// resourceVersion): the prepare-downscale webhook's own write of a `/scale` downscale's record.
fn only_last_downscale_changed(read: &StatefulSet, now: &StatefulSet) -> bool {
    let strip = |s: &StatefulSet| {
        let mut s = s.clone();
        s.metadata.resource_version = None;
        if let Some(a) = s.metadata.annotations.as_mut() {
            a.remove(rollout_core::keys::LAST_DOWNSCALE);
        }
        s
    };
    strip(read) == strip(now)
}

/// Carries out `request` as the API server does (see the module's documentation), calling `admission` on each try.
pub async fn guaranteed_update(store: &SharedStore, request: &Request, admission: &mut impl Admission) -> Outcome {
    let name = request.statefulset.as_str();
    let target = if request.scale { format!("{name}/scale") } else { name.to_string() };
    let verb = if matches!(request.write, Write::Patch) { "PATCH" } else { "PUT" };
    let mut retries = 0;
    let mut own_write_only = true;
    loop {
        let (stored, read_rv, crashes) = {
            let st = store.lock().unwrap();
            if st.apiserver_down {
                return Outcome::Unavailable;
            }
            let Some(stored) = st.statefulsets.get(name).cloned() else { return Outcome::NotFound };
            (stored, st.rv, st.apiserver_crashes)
        };
        let (from, to) = (replicas_of(&stored), request.replicas);
        let precondition = match &request.write {
            Write::Put { read: Some(read) } => Some(read.metadata.resource_version.clone().unwrap_or_default()),
            _ => None,
        };
        // Left as stored: not written, and nothing to admit. (A PUT with a stale resourceVersion is still refused.)
        if from == to && precondition.as_ref().is_none_or(|rv| Some(rv) == stored.metadata.resource_version.as_ref()) {
            return Outcome::Unchanged;
        }
        let object_version = precondition.clone().or_else(|| stored.metadata.resource_version.clone());
        let attempt = Attempt { retry: retries, stored, from, to, read_rv, object_version, scale: request.scale };
        let patch = match admission.admit(&attempt).await {
            Answer::Allowed { patch } => patch,
            Answer::Denied(message) => return Outcome::Denied { retry: retries, message },
        };
        let mut st = store.lock().unwrap();
        // The admission ran inside the API server: a crash meanwhile ended the request with it.
        if st.apiserver_down || st.apiserver_crashes != crashes {
            st.trace(
                "apiserver",
                format!("{verb} {target} replicas={to}: lost, the API server crashed during admission"),
            );
            return Outcome::Unavailable;
        }
        // A PUT's resourceVersion is checked against the object this try read, after admission: 409, nothing stored.
        if let (Some(rv), Write::Put { read: Some(read) }) = (&precondition, &request.write)
            && Some(rv) != attempt.stored.metadata.resource_version.as_ref()
        {
            let own = only_last_downscale_changed(read, &attempt.stored);
            st.trace("apiserver", format!("{verb} {target} replicas={to} -> conflict (the object has been modified)"));
            return Outcome::Conflict { retries, own_write_only: own_write_only && own };
        }
        let Some(current) = st.statefulsets.get(name).cloned() else { return Outcome::NotFound };
        // Compare-and-swap at the resourceVersion read. When it fails the loop goes round (a PATCH re-applied and
        // re-admitted; a PUT with a resourceVersion then refused by the check above, after admission ran again).
        if current.metadata.resource_version != attempt.stored.metadata.resource_version {
            own_write_only &= only_last_downscale_changed(&attempt.stored, &current);
            if retries < MAX_PATCH_CONFLICT_RETRIES {
                retries += 1;
                let line = format!(
                    "{verb} {target} replicas={to}: the object changed during admission; tried again ({retries})"
                );
                st.trace("apiserver", line);
                continue;
            }
            st.trace("apiserver", format!("{verb} {target} replicas={to} -> conflict after {retries} retries"));
            return Outcome::Conflict { retries, own_write_only };
        }
        // The mutating webhook's JSONPatch applies to the object under admission. For a `/scale` request that is the
        // Scale, of which only `spec.replicas` reaches the StatefulSet: the annotations such a patch adds are dropped.
        if request.scale && patch.is_some() {
            st.trace("apiserver", format!("{name}: the webhook's patch of the Scale changes only replicas"));
        } else if let Some(patch) = patch
            && let Err(e) = apply_annotation_patch(&mut st, name, &patch)
        {
            let at = st.elapsed();
            st.oracle.checker.record_liveness_failure(at, format!("the webhook's JSONPatch cannot be applied: {e}"));
        }
        admission.committing(&mut st, &attempt);
        st.writing_as(
            |w| w.basis = Some(attempt.read_rv),
            |st| crate::environment::kube::set_replicas(st, name, to, "webhook"),
        );
        admission.committed(&mut st, &attempt);
        return Outcome::Committed { retries };
    }
}

/// Applies the prepare-downscale webhook's JSONPatch (the `add` operations on `metadata.annotations` it sends) to
/// `sts` in the store, without committing (the replica change that follows commits both, as the API server does).
pub(crate) fn apply_annotation_patch(st: &mut Store, sts: &str, patch: &serde_json::Value) -> Result<(), String> {
    let Some(object) = st.statefulsets.get_mut(sts) else { return Err(format!("{sts} is gone")) };
    let annotations: &mut BTreeMap<String, String> = object.metadata.annotations.get_or_insert_with(Default::default);
    for op in patch.as_array().ok_or("not a JSONPatch array")? {
        let path = op.get("path").and_then(|p| p.as_str()).ok_or("an operation without a path")?;
        if op.get("op").and_then(|o| o.as_str()) != Some("add") {
            return Err(format!("unexpected operation {op}"));
        }
        if path == "/metadata/annotations" {
            let map = op.get("value").and_then(|v| v.as_object()).ok_or("annotations that are not a map")?;
            for (k, v) in map {
                annotations.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
            }
        } else if let Some(key) = path.strip_prefix("/metadata/annotations/") {
            let key = key.replace("~1", "/").replace("~0", "~");
            annotations.insert(key, op.get("value").and_then(|v| v.as_str()).unwrap_or_default().to_string());
        } else {
            return Err(format!("unexpected path {path}"));
        }
    }
    Ok(())
}
