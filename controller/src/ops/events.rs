//! The Event recorder: Kubernetes Events (`events.k8s.io/v1`) about rollouts and admissions, for people running
//! `kubectl describe statefulset` or `kubectl get events`.
//!
//! Owns getting Events out without ever slowing or failing the rollout: callers hand an [`EventRecord`] to an
//! [`EventRecorder`] (a non-blocking `try_send` on a bounded channel; a full queue drops the Event and counts it),
//! and one background task, the sink ([`run_sink`]), writes them through the cluster port's [`EventsApi`]. The sink
//! folds repeats of an Event (same object, reason, action, type and note within [`EventSettings::series_window`])
//! into the first one's `series` (count and last time, patched at most every [`EventSettings::flush_interval`]),
//! and limits each object to a token bucket ([`EventSettings::burst`], one token per
//! [`EventSettings::refill`]), so a flapping group cannot flood the API server. Events are optional: a 403 turns them off through
//! their feature gate ([`Gate::Events`]: one log line, `rollout_operator_feature_disabled{feature="events"}`), and
//! they are tried again after a while, on again once granted.
//!
//! Must not decide what happened or whether to say so (the controller's reports and the webhooks do), and must not
//! touch anything but Events.

use crate::cluster::{ApiError, EventsApi};
use crate::ops::feature_gate::Gate;
use crate::ops::metrics::Metrics;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// `reportingController` of every Event.
pub const REPORTING_CONTROLLER: &str = "grafana.com/rollout-operator";

/// The API server refuses a note longer than this many bytes.
const NOTE_LIMIT: usize = 1024;

/// `Normal` or `Warning`, as Kubernetes spells them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventType {
    Normal,
    Warning,
}

impl EventType {
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// The object an Event is about (`regarding`) or mentions (`related`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: &'static str,
    pub kind: &'static str,
    pub name: String,
    pub uid: Option<String>,
}

impl ObjectRef {
    pub fn statefulset(name: &str, uid: Option<&str>) -> Self {
        ObjectRef {
            api_version: "apps/v1",
            kind: "StatefulSet",
            name: name.to_string(),
            uid: uid.filter(|u| !u.is_empty()).map(str::to_string),
        }
    }

    pub fn pod(name: &str, uid: Option<&str>) -> Self {
        ObjectRef {
            api_version: "v1",
            kind: "Pod",
            name: name.to_string(),
            uid: uid.filter(|u| !u.is_empty()).map(str::to_string),
        }
    }

    fn to_k8s(&self, namespace: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.to_string()),
            kind: Some(self.kind.to_string()),
            name: Some(self.name.clone()),
            namespace: Some(namespace.to_string()),
            uid: self.uid.clone(),
            ..ObjectReference::default()
        }
    }
}

/// One thing worth telling people, as the controller or a webhook found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    pub regarding: ObjectRef,
    pub related: Option<ObjectRef>,
    pub type_: EventType,
    /// Why, in CamelCase (`RolloutWaiting`, `DownscaleDenied`, ...).
    pub reason: &'static str,
    /// What was done or not done, in CamelCase (`DeletePods`, `Wait`, ...).
    pub action: &'static str,
    /// For people: what happened and why.
    pub note: String,
}

/// Tuning of the sink. [`EventSettings::new`] has the production values.
#[derive(Debug, Clone)]
pub struct EventSettings {
    pub namespace: String,
    /// `reportingInstance`: this process (the pod's name).
    pub reporting_instance: String,
    /// Capacity of the queue between callers and the sink.
    pub queue: usize,
    /// An Event repeated within this long of its last occurrence joins its series instead of making a new one.
    pub series_window: Duration,
    /// How often grown series are written.
    pub flush_interval: Duration,
    /// Per object: Events (and series updates) allowed at once, and the time to earn one more.
    pub burst: u32,
    pub refill: Duration,
}

impl EventSettings {
    pub fn new(namespace: &str, reporting_instance: &str) -> Self {
        EventSettings {
            namespace: namespace.to_string(),
            reporting_instance: reporting_instance.to_string(),
            queue: 256,
            // client-go's recorder uses the same window before folding repeats into a series.
            series_window: Duration::from_secs(6 * 60),
            flush_interval: Duration::from_secs(30),
            burst: 20,
            refill: Duration::from_secs(30),
        }
    }
}

/// Where callers send Events. Cheap to clone; a disabled recorder drops everything silently.
#[derive(Clone, Default)]
pub struct EventRecorder {
    tx: Option<mpsc::Sender<EventRecord>>,
    metrics: Option<Arc<Metrics>>,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").field("enabled", &self.is_enabled()).finish()
    }
}

/// The sink's end of the queue.
pub struct EventQueue(mpsc::Receiver<EventRecord>);

impl EventQueue {
    /// The next queued Event, if any, without waiting (for tests that look at what was recorded).
    pub fn try_recv(&mut self) -> Option<EventRecord> {
        self.0.try_recv().ok()
    }
}

impl EventRecorder {
    /// A recorder that records nothing (`-events.enabled=false`, tests, the offline commands).
    pub fn disabled() -> Self {
        EventRecorder::default()
    }

    /// A recorder and the queue its sink reads; run the sink with [`run_sink`].
    pub fn new(capacity: usize, metrics: Arc<Metrics>) -> (Self, EventQueue) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (EventRecorder { tx: Some(tx), metrics: Some(metrics) }, EventQueue(rx))
    }

    pub fn is_enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues `event` for the sink without waiting: when the queue is full the Event is dropped (and counted),
    /// never waited for.
    pub fn record(&self, event: EventRecord) {
        let Some(tx) = &self.tx else { return };
        if let Err(err) = tx.try_send(event) {
            let cause = match err {
                mpsc::error::TrySendError::Full(_) => "queue_full",
                mpsc::error::TrySendError::Closed(_) => "disabled",
            };
            if let Some(metrics) = &self.metrics {
                metrics.event_dropped(cause);
            }
        }
    }
}

/// Events of one object, one reason, action, type and note: one Kubernetes Event and its series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct SeriesKey {
    regarding: ObjectRef,
    reason: &'static str,
    action: &'static str,
    type_: EventType,
    note: String,
}

#[derive(Debug)]
struct Series {
    /// The Event's name.
    name: String,
    count: i32,
    /// The count the API has.
    written: i32,
    last_seen: Instant,
    last_seen_at: Timestamp,
}

/// A token bucket per object.
#[derive(Debug)]
struct Bucket {
    tokens: u32,
    refilled: Instant,
}

/// The sink's state: open series, buckets, and whether Events are off.
struct Sink<E> {
    api: E,
    settings: EventSettings,
    metrics: Arc<Metrics>,
    series: BTreeMap<SeriesKey, Series>,
    buckets: BTreeMap<(&'static str, String), Bucket>,
    /// Makes names unique when two Events of one object share a clock reading.
    sequence: u64,
}

/// Writes queued Events until every recorder is dropped. Spawn it once per process.
pub async fn run_sink<E: EventsApi>(api: E, queue: EventQueue, settings: EventSettings, metrics: Arc<Metrics>) {
    let EventQueue(mut rx) = queue;
    let mut flush = tokio::time::interval(settings.flush_interval);
    flush.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut sink = Sink { api, settings, metrics, series: BTreeMap::new(), buckets: BTreeMap::new(), sequence: 0 };
    loop {
        tokio::select! {
            // In order, not at random: the simulation must replay a seed exactly.
            biased;
            event = rx.recv() => match event {
                Some(event) => sink.handle(event).await,
                None => {
                    sink.flush().await;
                    return;
                }
            },
            _ = flush.tick() => sink.flush().await,
        }
    }
}

impl<E: EventsApi> Sink<E> {
    async fn handle(&mut self, event: EventRecord) {
        if !self.metrics.gates().may_try(Gate::Events) {
            self.metrics.event_dropped("disabled");
            return;
        }
        let now = Instant::now();
        let key = SeriesKey {
            regarding: event.regarding.clone(),
            reason: event.reason,
            action: event.action,
            type_: event.type_,
            note: truncate(&event.note, NOTE_LIMIT),
        };
        if let Some(series) = self.series.get_mut(&key)
            && now.duration_since(series.last_seen) <= self.settings.series_window
        {
            series.count = series.count.saturating_add(1);
            series.last_seen = now;
            series.last_seen_at = Timestamp::now();
            self.metrics.event_recorded(event.reason, event.type_.as_str());
            return;
        }
        if !self.take_token(&key.regarding, now) {
            self.metrics.event_dropped("rate_limited");
            return;
        }
        self.sequence += 1;
        let at = Timestamp::now();
        let name = event_name(&key.regarding.name, at, self.sequence);
        let object = Event {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(self.settings.namespace.clone()),
                ..ObjectMeta::default()
            },
            event_time: Some(MicroTime(at)),
            reporting_controller: Some(REPORTING_CONTROLLER.to_string()),
            reporting_instance: Some(self.settings.reporting_instance.clone()),
            action: Some(key.action.to_string()),
            reason: Some(key.reason.to_string()),
            note: Some(key.note.clone()),
            type_: Some(key.type_.as_str().to_string()),
            regarding: Some(key.regarding.to_k8s(&self.settings.namespace)),
            related: event.related.as_ref().map(|r| r.to_k8s(&self.settings.namespace)),
            ..Event::default()
        };
        match self.api.create_event(&object).await {
            Ok(()) => {
                self.metrics.gates().granted(Gate::Events);
                self.metrics.event_recorded(event.reason, event.type_.as_str());
                let series = Series { name, count: 1, written: 1, last_seen: now, last_seen_at: at };
                self.series.insert(key, series);
            }
            Err(err) => self.failed(&err),
        }
    }

    /// Writes grown series (within each object's budget) and forgets series and buckets nobody needs any more.
    async fn flush(&mut self) {
        let now = Instant::now();
        let grown: Vec<SeriesKey> =
            self.series.iter().filter(|(_, s)| s.count > s.written).map(|(k, _)| k.clone()).collect();
        for key in grown {
            if !self.metrics.gates().may_try(Gate::Events) || !self.take_token(&key.regarding, now) {
                continue;
            }
            let Some(series) = self.series.get(&key) else { continue };
            let (name, count) = (series.name.clone(), series.count);
            let patch = serde_json::json!({
                "series": serde_json::to_value(EventSeries {
                    count,
                    last_observed_time: MicroTime(series.last_seen_at),
                })
                .unwrap_or_default()
            });
            match self.api.patch_event(&name, &patch).await {
                Ok(()) => {
                    if let Some(series) = self.series.get_mut(&key) {
                        series.written = count;
                    }
                }
                // Expired (Events live an hour): the next occurrence starts a new one.
                Err(ApiError::NotFound(_)) => {
                    self.series.remove(&key);
                }
                Err(err) => self.failed(&err),
            }
        }
        let window = self.settings.series_window;
        self.series.retain(|_, s| s.count > s.written || now.duration_since(s.last_seen) <= window);
        let full_after = self.settings.refill.saturating_mul(self.settings.burst);
        self.buckets.retain(|_, b| now.duration_since(b.refilled) < full_after);
    }

    fn take_token(&mut self, object: &ObjectRef, now: Instant) -> bool {
        let (burst, refill) = (self.settings.burst, self.settings.refill);
        let bucket =
            self.buckets.entry((object.kind, object.name.clone())).or_insert(Bucket { tokens: burst, refilled: now });
        if !refill.is_zero() {
            let earned = (now.duration_since(bucket.refilled).as_nanos() / refill.as_nanos()) as u64;
            if earned > 0 {
                bucket.tokens = (u64::from(bucket.tokens) + earned).min(u64::from(burst)) as u32;
                bucket.refilled = if bucket.tokens == burst { now } else { bucket.refilled + refill * earned as u32 };
            }
        }
        if bucket.tokens == 0 {
            return false;
        }
        bucket.tokens -= 1;
        true
    }

    fn failed(&mut self, err: &ApiError) {
        match err {
            ApiError::Forbidden(message) => {
                self.metrics.gates().refused(Gate::Events, message);
                self.series.clear();
                self.metrics.event_dropped("disabled");
            }
            other => {
                tracing::debug!(error = %other, "could not write an Event; dropped");
                self.metrics.event_dropped("failed");
            }
        }
    }
}

/// `<object>.<time in hex><sequence>`, as client-go names Events (a DNS subdomain of at most 253 characters).
fn event_name(object: &str, at: Timestamp, sequence: u64) -> String {
    let suffix = format!(".{:x}{:04x}", at.as_nanosecond().max(0), sequence & 0xffff);
    let keep = 253usize.saturating_sub(suffix.len());
    let mut base: String = object.chars().take(keep).collect();
    base.push_str(&suffix);
    base
}

/// `note` cut to at most `limit` bytes, on a character boundary, marked with an ellipsis when cut.
fn truncate(note: &str, limit: usize) -> String {
    if note.len() <= limit {
        return note.to_string();
    }
    let mut end = limit.saturating_sub('…'.len_utf8());
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &note[..end])
}

// Paused tokio time drives the sink here; the simulator has its own clock (sim/tests/events.rs).
#[cfg(all(test, not(madsim)))]
mod tests {
    use super::*;
    use crate::ops::feature_gate::RETRY_REFUSED_AFTER;
    use std::sync::Mutex;

    /// Records every call; answers from a script (default: success).
    #[derive(Clone, Default)]
    struct FakeEvents {
        calls: Arc<Mutex<Vec<(String, serde_json::Value)>>>,
        answers: Arc<Mutex<Vec<Result<(), ApiError>>>>,
    }

    impl FakeEvents {
        fn answer(&self) -> Result<(), ApiError> {
            let mut answers = self.answers.lock().unwrap();
            if answers.is_empty() { Ok(()) } else { answers.remove(0) }
        }

        fn calls(&self) -> Vec<(String, serde_json::Value)> {
            self.calls.lock().unwrap().clone()
        }
    }

    impl EventsApi for FakeEvents {
        async fn create_event(&self, event: &Event) -> Result<(), ApiError> {
            self.calls.lock().unwrap().push(("create".into(), serde_json::to_value(event).unwrap()));
            self.answer()
        }

        async fn patch_event(&self, name: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
            self.calls.lock().unwrap().push((format!("patch {name}"), patch.clone()));
            self.answer()
        }
    }

    fn waiting(sts: &str, note: &str) -> EventRecord {
        EventRecord {
            regarding: ObjectRef::statefulset(sts, Some("uid-1")),
            related: None,
            type_: EventType::Normal,
            reason: "RolloutWaiting",
            action: "Wait",
            note: note.to_string(),
        }
    }

    /// Starts a sink over `api`; returns the recorder and the metrics.
    fn start(api: FakeEvents, settings: EventSettings) -> (EventRecorder, Arc<Metrics>, tokio::task::JoinHandle<()>) {
        let metrics = Arc::new(Metrics::new());
        let (recorder, queue) = EventRecorder::new(settings.queue, metrics.clone());
        let sink = tokio::spawn(run_sink(api, queue, settings, metrics.clone()));
        (recorder, metrics, sink)
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_is_created_with_its_object_and_reporter() {
        let api = FakeEvents::default();
        let (recorder, metrics, _sink) = start(api.clone(), EventSettings::new("mimir", "rollout-operator-0"));
        recorder.record(EventRecord {
            related: Some(ObjectRef::pod("ingester-zone-a-0", None)),
            ..waiting("ingester-zone-a", "waiting for pods")
        });
        settle().await;
        let calls = api.calls();
        assert_eq!(calls.len(), 1, "{calls:?}");
        let (verb, event) = &calls[0];
        assert_eq!(verb, "create");
        assert_eq!(event["regarding"]["kind"], "StatefulSet");
        assert_eq!(event["regarding"]["name"], "ingester-zone-a");
        assert_eq!(event["regarding"]["namespace"], "mimir");
        assert_eq!(event["regarding"]["uid"], "uid-1");
        assert_eq!(event["related"]["name"], "ingester-zone-a-0");
        assert_eq!(event["reportingController"], REPORTING_CONTROLLER);
        assert_eq!(event["reportingInstance"], "rollout-operator-0");
        assert_eq!(
            (&event["reason"], &event["action"], &event["type"]),
            (&"RolloutWaiting".into(), &"Wait".into(), &"Normal".into())
        );
        assert!(event["metadata"]["name"].as_str().unwrap().starts_with("ingester-zone-a."), "{event}");
        assert!(event["eventTime"].is_string(), "{event}");
        assert!(
            metrics.encode().contains("rollout_operator_events_total{reason=\"RolloutWaiting\",type=\"Normal\"} 1")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn repeats_join_a_series_written_at_the_next_flush() {
        let api = FakeEvents::default();
        let (recorder, _, _sink) = start(api.clone(), EventSettings::new("ns", "me"));
        for _ in 0..5 {
            recorder.record(waiting("a", "same"));
            settle().await;
            tokio::time::advance(Duration::from_secs(10)).await;
        }
        // The next flush writes the whole series.
        tokio::time::advance(Duration::from_secs(30)).await;
        settle().await;
        let calls = api.calls();
        let creates = calls.iter().filter(|(v, _)| v == "create").count();
        assert_eq!(creates, 1, "{calls:?}");
        let patches: Vec<_> = calls.iter().filter(|(v, _)| v.starts_with("patch a.")).collect();
        assert!(!patches.is_empty(), "{calls:?}");
        let last = patches.last().unwrap();
        assert_eq!(last.1["series"]["count"], 5, "{calls:?}");
        assert!(last.1["series"]["lastObservedTime"].is_string());
        // Another note, or the same one after the window, is a new Event.
        recorder.record(waiting("a", "different"));
        settle().await;
        tokio::time::advance(Duration::from_secs(7 * 60)).await;
        recorder.record(waiting("a", "same"));
        settle().await;
        assert_eq!(api.calls().iter().filter(|(v, _)| v == "create").count(), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn each_object_has_its_own_budget_and_earns_it_back() {
        let api = FakeEvents::default();
        let settings = EventSettings { burst: 3, refill: Duration::from_secs(60), ..EventSettings::new("ns", "me") };
        let (recorder, metrics, _sink) = start(api.clone(), settings);
        for i in 0..10 {
            recorder.record(waiting("a", &format!("a {i}")));
            settle().await;
        }
        recorder.record(waiting("b", "b"));
        settle().await;
        let created: Vec<String> = api
            .calls()
            .iter()
            .filter(|(v, _)| v == "create")
            .map(|(_, e)| e["regarding"]["name"].as_str().unwrap_or_default().to_string())
            .collect();
        assert_eq!(created, ["a", "a", "a", "b"]);
        assert!(metrics.encode().contains("rollout_operator_events_dropped_total{cause=\"rate_limited\"} 7"));
        tokio::time::advance(Duration::from_secs(61)).await;
        recorder.record(waiting("a", "a later"));
        settle().await;
        assert_eq!(api.calls().iter().filter(|(v, _)| v == "create").count(), 5, "one token earned back");
    }

    #[tokio::test(start_paused = true)]
    async fn a_403_turns_events_off_with_the_metric_until_a_retry_after_a_while_succeeds() {
        let api = FakeEvents::default();
        api.answers.lock().unwrap().push(Err(ApiError::Forbidden("events.events.k8s.io is forbidden".into())));
        let (recorder, metrics, _sink) = start(api.clone(), EventSettings::new("ns", "me"));
        for i in 0..5 {
            recorder.record(waiting("a", &format!("{i}")));
            settle().await;
        }
        let series = "rollout_operator_feature_disabled{feature=\"events\",missing_permission=\"events.k8s.io events create/patch\"}";
        tokio::time::advance(RETRY_REFUSED_AFTER - Duration::from_secs(1)).await;
        recorder.record(waiting("b", "still off"));
        settle().await;
        assert_eq!(api.calls().len(), 1, "only the refused request was sent: {:?}", api.calls());
        let text = metrics.encode();
        assert!(text.contains(&format!("{series} 1")), "{text}");
        assert!(text.contains("rollout_operator_events_dropped_total{cause=\"disabled\"} 6"), "{text}");
        // Granted meanwhile: the first Event after the wait is written and Events are on again.
        tokio::time::advance(Duration::from_secs(1)).await;
        recorder.record(waiting("c", "granted"));
        settle().await;
        assert_eq!(api.calls().len(), 2, "{:?}", api.calls());
        assert!(metrics.encode().contains(&format!("{series} 0")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_drops_instead_of_waiting_and_other_failures_are_counted() {
        let api = FakeEvents::default();
        api.answers.lock().unwrap().push(Err(ApiError::Unavailable("timeout".into())));
        let metrics = Arc::new(Metrics::new());
        let (recorder, queue) = EventRecorder::new(2, metrics.clone());
        // The sink is not running: the queue fills up and record() still returns at once.
        for i in 0..5 {
            recorder.record(waiting("a", &format!("{i}")));
        }
        assert!(metrics.encode().contains("rollout_operator_events_dropped_total{cause=\"queue_full\"} 3"));
        let _sink = tokio::spawn(run_sink(api.clone(), queue, EventSettings::new("ns", "me"), metrics.clone()));
        settle().await;
        assert_eq!(api.calls().len(), 2);
        assert!(metrics.encode().contains("rollout_operator_events_dropped_total{cause=\"failed\"} 1"));
        // A disabled recorder is a no-op.
        EventRecorder::disabled().record(waiting("a", "x"));
    }

    #[test]
    fn names_and_notes_respect_the_api_limits() {
        let name = event_name(&"x".repeat(300), Timestamp::from_second(1_800_000_000).unwrap(), 7);
        assert!(name.len() <= 253 && name.ends_with("0007"), "{name}");
        let note = truncate(&"é".repeat(600), NOTE_LIMIT);
        assert!(note.len() <= NOTE_LIMIT && note.ends_with('…'), "{}", note.len());
        assert_eq!(truncate("short", NOTE_LIMIT), "short");
    }
}
