//! The webhook worlds' users: a person or an HPA changing one StatefulSet's replicas through the API server, which
//! sends each change to the prepare-downscale webhook of one of the operator replicas (picked at random) inside its
//! guaranteed-update loop ([`crate::guaranteed_update`]).
//!
//! The clients, as the real ones send their changes: a person's change of the StatefulSet (`kubectl patch`) and a
//! `kubectl scale` of its `/scale` subresource are PATCHes, tried once (the API server re-applies a PATCH after a
//! conflict itself); an HPA's is a PUT of the Scale carrying the resourceVersion it read, which, refused with a
//! conflict (or denied with a "retry"), it sends again at its next sync, 15 s later, after reading the Scale again.

use crate::actors::leader_scaling::{Probes, draw_changes, with_recent_downscale};
use crate::actors::pods::SimPods;
use crate::environment::apiserver;
use crate::environment::client::SimCluster;
use crate::environment::guaranteed_update::{Admission, Answer, Attempt, Outcome, Request, Write};
use crate::environment::store::{SharedStore, Store};
use crate::harness::webhook_servers::ServedCertificates;
use crate::harness::{Actors, Stage};
use crate::rng::SimRng;
use crate::scenario::SECOND_GROUP;
use crate::scenario::SECOND_GROUP_USERS_STREAM;
use crate::scenario::group_zone_name;
use crate::scenario::planner::PlannerKind;
use crate::scenario::scaling::ScalingScenario;
use crate::scenario::zone_name;
use rollout_core::Defences;
use rollout_operator::admission::prepare_downscale::PREPARE_DOWNSCALE_PATH;
use rollout_operator::admission::router::{Clock, WebhookSettings, Webhooks, router, system_clock};
use rollout_operator::ops::metrics::Metrics;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;
use tower::ServiceExt;

/// How long an HPA waits before sending a refused change again (its sync period).
pub const HPA_SYNC: Duration = Duration::from_secs(15);
/// How many times an HPA sends one change before the user's next change takes over.
const HPA_TRIES: u32 = 3;

/// A user (or HPA) of one StatefulSet.
pub(crate) struct User {
    pub store: SharedStore,
    pub operators: Arc<Vec<madsim::runtime::NodeHandle>>,
    /// The certificate world: what each replica serves (the API server calls only those serving, over TLS it checks).
    pub served: Option<ServedCertificates>,
    pub pods: SimPods,
    pub next: Arc<AtomicU64>,
    pub pick: SimRng,
    /// The operators' `-zone-tracker.config-map-name`, when they run with the zone tracker.
    pub record: Option<String>,
    /// See `Scenario::scale_requests`.
    pub scale_requests: bool,
    pub defences: Defences,
    /// See `Scenario::slow_admissions`.
    pub slow: bool,
    /// `-events.enabled`: the webhook tells denied and prepared downscales as Events.
    pub events: bool,
    /// The webhook's clock (a known bug's, a second ahead, with `min-time-second-early`).
    pub clock: Clock,
    /// The leader's user probes the min time's boundary too.
    pub probes: Option<Probes>,
}

/// How one change is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    /// A PATCH of the StatefulSet (`kubectl patch`).
    Patch,
    /// A PATCH of `/scale` (`kubectl scale`).
    KubectlScale,
    /// A PUT of `/scale` with the resourceVersion read (an HPA).
    Hpa,
}

impl User {
    /// `changes` of `sts`, each at its time, and with probes, a downscale by one at each probe's time.
    pub(crate) async fn scale_through_webhook(mut self, sts: String, changes: Vec<(Duration, u32)>, start: Instant) {
        let mut changes: std::collections::VecDeque<(Instant, u32)> =
            changes.into_iter().map(|(at, to)| (start + at, to)).collect();
        let mut probes = self.probes.take();
        loop {
            let next_probe = probes.as_mut().and_then(|p| p.next(&self.store, start));
            let next_change = changes.front().map(|(at, _)| *at);
            let now = Instant::now();
            let watching = probes.as_ref().is_some_and(|p| p.watching(now));
            match [next_change, next_probe].into_iter().flatten().min() {
                None if !watching => return,
                // Followers' downscales are noticed within a second (a probe series starts 1.5 s short of the min time after one).
                None => tokio::time::sleep(Duration::from_secs(1)).await,
                Some(at) if at > now && probes.is_some() => {
                    tokio::time::sleep_until(at.min(now + Duration::from_secs(1))).await
                }
                Some(at) if next_probe == Some(at) => {
                    if let Some(p) = probes.as_mut() {
                        p.sent();
                    }
                    let from = self.replicas_of(&sts);
                    if from > 1 {
                        {
                            let mut st = self.store.lock().unwrap();
                            st.trace("user", format!("probes the min time: {sts} {from} -> {}", from - 1));
                            let probed =
                                crate::oracle::activity::WorldEvent::MinTimeProbed { statefulset: sts.clone() };
                            st.oracle.activity.happened(probed);
                        }
                        let client = self.pick_client();
                        self.change(&sts, from - 1, client).await;
                        if let Some(p) = probes.as_mut().filter(|_| self.replicas_of(&sts) < from) {
                            p.admitted(Instant::now());
                        }
                    }
                }
                Some(at) => {
                    tokio::time::sleep_until(at.max(now)).await;
                    let Some((_, to)) = changes.pop_front() else { continue };
                    let client = self.pick_client();
                    self.change(&sts, to, client).await;
                }
            }
        }
    }

    fn replicas_of(&self, sts: &str) -> u32 {
        let st = self.store.lock().unwrap();
        st.statefulsets.get(sts).and_then(|s| s.spec.as_ref()?.replicas).unwrap_or(1).max(0) as u32
    }

    /// How the next change is sent: with `scale_requests`, half of them through `/scale`, half of those by an HPA.
    fn pick_client(&mut self) -> Client {
        let via_scale = self.scale_requests && self.pick.chance(0.5);
        let with_version = via_scale && self.pick.chance(0.5);
        match (via_scale, with_version) {
            (false, _) => Client::Patch,
            (true, false) => Client::KubectlScale,
            (true, true) => Client::Hpa,
        }
    }

    /// One change of `sts` to `to` replicas, as `client` sends it (an HPA again after a refusal).
    async fn change(&mut self, sts: &str, to: u32, client: Client) {
        let tries = if client == Client::Hpa { HPA_TRIES } else { 1 };
        // How the HPA's previous request for this change ended.
        let mut previous = None;
        for tried in 0..tries {
            // The client reads the object (an HPA, the Scale whose resourceVersion it sends back).
            let Some(read) = self.store.lock().unwrap().statefulsets.get(sts).cloned() else { return };
            let from = read.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0) as u32;
            if from == to {
                return;
            }
            let write = if client == Client::Hpa { Write::Put { read: Some(Box::new(read)) } } else { Write::Patch };
            let request = Request { statefulset: sts.to_string(), replicas: to, scale: client != Client::Patch, write };
            let store = self.store.clone();
            let mut admission = WebhookAdmission { user: self, pending: None };
            let outcome =
                crate::environment::guaranteed_update::guaranteed_update(&store, &request, &mut admission).await;
            let retry = {
                let mut st = self.store.lock().unwrap();
                tally(&mut st, sts, (from, to), client, (tried, previous.as_ref()), &outcome)
            };
            if !retry {
                return;
            }
            if tried + 1 == tries {
                self.store.lock().unwrap().oracle.scale_requests.put_given_up += u64::from(to < from);
                return;
            }
            previous = Some(outcome);
            tokio::time::sleep(HPA_SYNC).await;
        }
    }

    /// [`crate::oracle::checker::PREPARED_FOR_SHUTDOWN`]: a downscale of a StatefulSet labelled `grafana.com/prepare-downscale`
    /// admitted from `from` to `to` replicas: every pod it removes that is the one (same uid) that existed, not
    /// terminating, when the review was sent (at `sent_at`) answered the webhook's POST with success during this
    /// admission. A pod created later may be one the webhook's list did not see yet, which it skips by design (a
    /// StatefulSet still scaling up, a pod being replaced).
    fn judge_prepared(
        st: &mut Store,
        sts: &str,
        (from, to): (u32, u32),
        existing: &BTreeMap<String, String>,
        sent_at: Instant,
    ) {
        let labelled = st
            .statefulsets
            .get(sts)
            .and_then(|s| s.metadata.labels.as_ref())
            .is_some_and(|l| l.get(rollout_core::keys::PREPARE_DOWNSCALE).map(String::as_str) == Some("true"));
        if !labelled {
            return;
        }
        let listed: Vec<String> = (to..from)
            .map(|o| format!("{sts}-{o}"))
            .filter(|pod| {
                let now_uid = st.pods.get(pod).and_then(|p| p.metadata.uid.as_ref());
                now_uid.is_some() && now_uid == existing.get(pod)
            })
            .collect();
        st.oracle.checker.prepared_pods += listed.len() as u64;
        let unprepared: Vec<String> = listed.into_iter().filter(|pod| !st.world.prepared_since(pod, sent_at)).collect();
        if !unprepared.is_empty() {
            let at = st.elapsed();
            let detail = format!(
                "admitted {sts} {from} -> {to}, but {} never answered a prepare-shutdown POST with success",
                unprepared.join(", ")
            );
            st.oracle.checker.violate(at, crate::oracle::checker::PREPARED_FOR_SHUTDOWN, detail);
        }
    }
}

/// Counts and judges how a request of `client` ended (its `tried`-th for this change, after `previous`); whether
/// its client sends it again.
fn tally(
    st: &mut Store,
    sts: &str,
    (from, to): (u32, u32),
    client: Client,
    (tried, previous): (u32, Option<&Outcome>),
    outcome: &Outcome,
) -> bool {
    let downscale = to < from;
    let stats = &mut st.oracle.scale_requests;
    match outcome {
        Outcome::Committed { retries } if downscale => {
            let readmitted = *retries > 0;
            stats.patch_readmissions += u64::from(*retries);
            match client {
                Client::Hpa if tried == 0 => stats.put_first_try += 1,
                Client::Hpa if matches!(previous, Some(Outcome::Conflict { .. })) => stats.put_after_conflict += 1,
                Client::Hpa => stats.put_later += 1,
                Client::KubectlScale if readmitted => stats.scale_patch_readmitted += 1,
                Client::KubectlScale => stats.scale_patch_first_try += 1,
                Client::Patch if readmitted => stats.sts_patch_readmitted += 1,
                Client::Patch => stats.sts_patch_first_try += 1,
            }
            false
        }
        Outcome::Conflict { retries, own_write_only } => {
            if client == Client::Hpa {
                stats.put_conflicts += u64::from(downscale);
                let again = matches!(previous, Some(Outcome::Conflict { own_write_only: true, .. }));
                stats.put_own_write_again += u64::from(downscale && again && *own_write_only);
            } else {
                stats.patch_conflicts += u64::from(downscale);
                stats.patch_readmissions += u64::from(*retries);
            }
            st.trace("user", format!("{sts} {from} -> {to}: conflict (the object has been modified)"));
            // A PATCH is re-applied by the API server itself: the webhook's own write alone must not exhaust that. (An
            // HPA's PUT is refused for it by design, and sends its change again: counted, not judged.)
            if *own_write_only && client != Client::Hpa {
                let at = st.elapsed();
                let detail = format!(
                    "{sts} {from} -> {to} ({client:?}, request {}): refused with 409 after {retries} retries, every \
                     conflict the webhook's own write of {}",
                    tried + 1,
                    rollout_core::keys::LAST_DOWNSCALE
                );
                st.oracle.checker.violate(at, crate::oracle::checker::OWN_WRITE_CONFLICT, detail);
            }
            client == Client::Hpa
        }
        Outcome::Denied { message, retry } => {
            stats.denied += 1;
            stats.denied_readmitted += u64::from(*retry > 0);
            client == Client::Hpa && message.ends_with("retry")
        }
        Outcome::Unavailable => {
            stats.lost += 1;
            false
        }
        Outcome::Unchanged | Outcome::NotFound | Outcome::Committed { .. } => false,
    }
}

/// Admission of a user's request by the prepare-downscale webhook of one of the operator replicas, on each try of
/// the API server's loop.
struct WebhookAdmission<'a> {
    user: &'a mut User,
    /// The pods of the StatefulSet that existed, not terminating, when the admitted try's review was sent (by uid),
    /// and when it was sent: what [`User::judge_prepared`] judges at the commit.
    pending: Option<(BTreeMap<String, String>, Instant)>,
}

impl Admission for WebhookAdmission<'_> {
    async fn admit(&mut self, attempt: &Attempt) -> Answer {
        let user = &mut *self.user;
        let sts = attempt.stored.metadata.name.clone().unwrap_or_default();
        let (from, to) = (attempt.from, attempt.to);
        let incarnation = user.next.fetch_add(1, Ordering::Relaxed);
        // The Service's endpoints: every replica, or in the certificate world those serving a certificate, each
        // call checked against the configuration's CA bundle before it is sent.
        let (operator, refused) = match &user.served {
            None => (user.pick.range(0..user.operators.len() as u64) as usize, None),
            Some(served) => served.route(&user.store, |n| user.pick.range(0..n)),
        };
        let delay = if user.slow { user.pick.millis(1_000, 2_500) } else { Duration::ZERO };
        // `-server-tls.request-timeout`: the most the API server allows a webhook (30 s) where requests are slow.
        let request_timeout = Duration::from_secs(if user.slow { 30 } else { 10 });
        let review = review(&sts, attempt, incarnation - crate::environment::apiserver::ADMISSION_INCARNATION_BASE);
        let pods = user.pods.clone();
        // The pods that exist, not terminating, as the review is sent (by uid): the webhook lists pods after this,
        // so each one still there at the commit was listed, and must have been called.
        let sent_at = Instant::now();
        let existing: BTreeMap<String, String> = {
            let st = user.store.lock().unwrap();
            st.pods
                .values()
                .filter(|p| crate::environment::objects::owner_of(p) == sts && p.metadata.deletion_timestamp.is_none())
                .filter_map(|p| Some((p.metadata.name.clone()?, p.metadata.uid.clone()?)))
                .collect()
        };
        let (record, defences, events, clock) = (user.record.clone(), user.defences, user.events, user.clock.clone());
        // The replica's current process (a handle taken before a restart spawns onto the killed one).
        let node = madsim::runtime::Handle::current().get_node(user.operators[operator].id());
        let node = node.unwrap_or_else(|| user.operators[operator].clone());
        let answer = node
            .spawn(async move {
                if let Some(refused) = refused {
                    return Err(refused);
                }
                let api = SimCluster::connect_slow(incarnation, delay).await.map_err(|e| e.to_string())?;
                // As `main` wires it: the webhook's Events go to a recorder whose sink writes them through the
                // API server (it flushes and ends once the admission drops the recorder).
                let settings = WebhookSettings {
                    defences,
                    ..WebhookSettings::new(
                        crate::environment::objects::NAMESPACE,
                        "cluster.local.",
                        record.as_deref(),
                        request_timeout,
                    )
                };
                let setup = crate::harness::operator::OperatorSetup { record: None, events };
                let settings = settings.with_events(setup.recorder(&api, Arc::new(Metrics::new())));
                let app = router(Webhooks { api, pods, settings, clock });
                let request = http::Request::post(PREPARE_DOWNSCALE_PATH)
                    .header("content-type", "application/json")
                    .body(axum::body::Body::from(serde_json::to_vec(&review).map_err(|e| e.to_string())?))
                    .map_err(|e| e.to_string())?;
                let response = app.oneshot(request).await.map_err(|e| e.to_string())?;
                let body = axum::body::to_bytes(response.into_body(), 1 << 20).await.map_err(|e| e.to_string())?;
                let response = crate::environment::objects::admission_response(&review, &body)?;
                let allowed = crate::environment::objects::admitted(&response);
                let message = response.pointer("/status/message").and_then(|m| m.as_str()).unwrap_or("").to_string();
                let patch = match response.get("patch") {
                    Some(encoded) => {
                        let bytes: k8s_openapi::ByteString =
                            serde_json::from_value(encoded.clone()).map_err(|e| e.to_string())?;
                        Some(serde_json::from_slice::<serde_json::Value>(&bytes.0).map_err(|e| e.to_string())?)
                    }
                    None => None,
                };
                Ok::<_, String>((allowed, message, patch))
            })
            .await
            // The replica's process ended (crashed) with the call in flight: the API server sees the connection
            // reset. Said without the task's id, which counts every task the process ever ran.
            .map_err(|_| "the operator replica's process ended before answering (connection reset)".to_string());
        // The API server commits an admitted downscale after the rest of its admission chain (other webhooks,
        // validation): up to 2 s after the answer here. The downscale is "being prepared" until it commits.
        if matches!(answer, Ok(Ok((true, _, _)))) && to < from {
            let chain = user.pick.millis(0, 2_000);
            tokio::time::sleep(chain).await;
        }
        let mut st = user.store.lock().unwrap();
        st.oracle.end_preparing(&sts, incarnation);
        let who = format!("operator-{operator}");
        let again = if attempt.retry > 0 { format!(" (admitted again, {})", attempt.retry) } else { String::new() };
        let (admitted, message) = match &answer {
            Ok(Ok((allowed, message, _))) => (*allowed, message.clone()),
            Ok(Err(e)) => (false, e.to_string()),
            Err(e) => (false, e.to_string()),
        };
        let admission = crate::oracle::activity::Admission { statefulset: sts.clone(), from, to, admitted, message };
        st.oracle.activity.admissions.push(admission);
        match answer {
            Ok(Ok((true, _, patch))) => {
                st.trace(&who, format!("admitted {sts} {from} -> {to}{again}"));
                self.pending = Some((existing, sent_at));
                Answer::Allowed { patch }
            }
            Ok(Ok((false, message, _))) => {
                st.trace(&who, format!("denied {sts} {from} -> {to}{again}: {message}"));
                // Unless the webhook did not see its write succeed (an answer lost to its deadline): it denies then,
                // as its policy says, not knowing the record is there.
                let write_failed =
                    message.contains(&format!("{} annotation failed", rollout_core::keys::LAST_DOWNSCALE));
                if st.oracle.recorded_by_admission.contains(&incarnation) && !write_failed {
                    let at = st.elapsed();
                    let detail = format!("{sts} {from} -> {to} recorded on the StatefulSet, then denied: {message}");
                    st.oracle.checker.violate(at, crate::oracle::checker::PREPARE_RECORDED_ALLOWED, detail);
                }
                // Pods this admission prepared are owed a cancel (the reference's undo), judged at the end.
                let prepared = st.world.prepared_pods_of(&sts, sent_at);
                if !prepared.is_empty() {
                    let what = format!("the denied downscale of {sts} {from} -> {to}");
                    st.oracle.undos_owed.push(crate::oracle::UndoOwed {
                        what,
                        pods: prepared,
                        denied_at: Instant::now(),
                    });
                }
                let what = format!("the downscale of {sts}");
                crate::actors::no_downscale::judge_denial_scope(
                    &mut st,
                    &sts,
                    &message,
                    crate::oracle::checker::PREPARE_SCOPE,
                    &what,
                );
                Answer::Denied(message)
            }
            Ok(Err(e)) => {
                st.trace(&who, format!("denied {sts} {from} -> {to}: {e}"));
                Answer::Denied(e)
            }
            Err(e) => {
                st.trace(&who, format!("denied {sts} {from} -> {to}: {e}"));
                Answer::Denied(e.to_string())
            }
        }
    }

    fn committing(&mut self, st: &mut Store, attempt: &Attempt) {
        let sts = attempt.stored.metadata.name.clone().unwrap_or_default();
        if attempt.to < attempt.from
            && let Some((existing, sent_at)) = self.pending.take()
        {
            User::judge_prepared(st, &sts, (attempt.from, attempt.to), &existing, sent_at);
        }
    }

    fn committed(&mut self, st: &mut Store, attempt: &Attempt) {
        if attempt.to < attempt.from {
            let sts = attempt.stored.metadata.name.clone().unwrap_or_default();
            let (at, commit_rv) = (st.elapsed(), st.rv);
            let group = st.group_of_statefulset(&sts).unwrap_or_default();
            st.oracle.checker.judge_admitted(at, attempt.read_rv, commit_rv, &sts, &group);
        }
    }
}

/// The AdmissionReview the API server sends for `attempt`: of the Scale for a `/scale` request (both objects
/// carrying the resourceVersion the API server gives them), else of the StatefulSet.
fn review(sts: &str, attempt: &Attempt, uid: u64) -> serde_json::Value {
    let (from, to) = (attempt.from, attempt.to);
    let stored_version = attempt.stored.metadata.resource_version.clone();
    if attempt.scale {
        let scale = |replicas: u32, version: &Option<String>| {
            let mut meta = serde_json::json!({"name": sts, "namespace": crate::environment::objects::NAMESPACE});
            if let Some(v) = version {
                meta["resourceVersion"] = serde_json::json!(v);
            }
            serde_json::json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": meta,
                "spec": {"replicas": replicas}})
        };
        serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": format!("admission-{uid}"),
            "kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
            "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
            "subResource": "scale",
            "name": sts, "namespace": crate::environment::objects::NAMESPACE, "operation": "UPDATE",
            "oldObject": scale(from, &stored_version), "object": scale(to, &attempt.object_version)}})
    } else {
        let mut new = attempt.stored.clone();
        if let Some(spec) = new.spec.as_mut() {
            spec.replicas = Some(to as i32);
        }
        serde_json::json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
            "uid": format!("admission-{uid}"),
            "kind": {"group": "apps", "version": "v1", "kind": "StatefulSet"},
            "resource": {"group": "apps", "version": "v1", "resource": "statefulsets"},
            "name": sts, "namespace": crate::environment::objects::NAMESPACE, "operation": "UPDATE",
            "oldObject": as_admitted_object(&attempt.stored), "object": as_admitted_object(&new)}})
    }
}

/// A StatefulSet as an AdmissionReview carries it.
fn as_admitted_object(sts: &k8s_openapi::api::apps::v1::StatefulSet) -> serde_json::Value {
    let mut v = serde_json::to_value(sts).unwrap_or_default();
    v["apiVersion"] = serde_json::json!("apps/v1");
    v["kind"] = serde_json::json!("StatefulSet");
    v
}

/// The webhook worlds' users on two simulated operator replicas' routers: one per scaled StatefulSet (the
/// leader's, its changes as drawn, or one per zone, and per zone of the second group).
pub fn start(stage: &Stage, scaling: &ScalingScenario, changes: Vec<(Duration, u32)>, actors: &mut Actors) {
    let (sc, seed, start) = (&stage.sc, stage.seed, stage.start);
    let next = Arc::new(AtomicU64::new(apiserver::ADMISSION_INCARNATION_BASE));
    let servers = crate::harness::webhook_servers::start(&stage.store, sc, seed, &next);
    let pods = SimPods {
        rng: Arc::new(Mutex::new(SimRng::new(stage.rng.lock().unwrap().next_u64()))),
        store: stage.store.clone(),
    };
    let mut per_sts: Vec<(String, Vec<(Duration, u32)>)> = Vec::new();
    if scaling.followers {
        per_sts.push((zone_name(0), changes));
    } else {
        let mut r = stage.rng.lock().unwrap();
        for z in 0..sc.zones {
            let mut zone_changes = draw_changes(sc, scaling, &mut r);
            if z == 0 {
                zone_changes = with_recent_downscale(sc, seed, zone_changes);
            }
            zone_changes.sort_unstable();
            per_sts.push((zone_name(z), zone_changes));
        }
        if sc.second_group {
            // The second group's zones scaled too, from a generator of their own (the first group's draws stay as
            // they were): its downscales are prepared while the first group's are, so the record holds both
            // groups' markers at once.
            let mut r = SimRng::new(seed ^ SECOND_GROUP_USERS_STREAM);
            for z in 0..sc.zones {
                let mut zone_changes = draw_changes(sc, scaling, &mut r);
                zone_changes.sort_unstable();
                per_sts.push((group_zone_name(SECOND_GROUP, z), zone_changes));
            }
        }
    }
    let clock = match sc.planner {
        PlannerKind::MinTimeSecondEarly => {
            Arc::new(|| rollout_known_bugs::min_time_checked_a_second_late(jiff::Timestamp::now())) as Clock
        }
        _ => system_clock(),
    };
    let mut probes = Probes::of(stage, scaling).filter(|_| scaling.followers);
    for (sts, changes) in per_sts {
        let user = User {
            store: stage.store.clone(),
            operators: servers.nodes.clone(),
            served: servers.served.clone(),
            pods: pods.clone(),
            next: next.clone(),
            pick: SimRng::new(stage.rng.lock().unwrap().next_u64()),
            record: sc.zone_tracker_config_map(),
            scale_requests: sc.scale_requests,
            defences: sc.defences,
            slow: sc.slow_admissions,
            events: sc.events,
            clock: clock.clone(),
            probes: probes.take(),
        };
        actors.users.push(tokio::spawn(user.scale_through_webhook(sts, changes, start)));
    }
}
