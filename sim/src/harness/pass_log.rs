//! What the controller said about each pass, in its own words: a tracing layer on the run's thread keeps the
//! reconcile loop's "rollout group" log lines (`rollout_operator::rollout::report` logs one whenever a group's state
//! or reason changes: the state, the class of the wait the pass stopped on, and the pass's reason), stamped with
//! simulated time, and, for `replay --logs`, prints the controller's log as well.
//!
//! Owns the run's tracing subscriber. Reads what the real pass reported; restates no decision. It is built on the
//! run's thread before the simulation starts, so neither it nor its filters may hold a `RandomState` hash map: that
//! would seed the thread's hash keys outside the simulation and move the controller's own maps' iteration order.

use std::cell::RefCell;
use std::time::Duration;
use tokio::time::Instant;
use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// Where the reconcile loop's per-group log lines come from.
const REPORT_TARGET: &str = "rollout_operator::rollout::report";
/// Where the step machines' drivers tell a need that failed (`rollout_operator::ops::needs`).
const NEEDS_TARGET: &str = "rollout_operator::needs";

/// The needs seen failing in a run: (machine, need, kind of failure) and how often.
pub type FailedNeeds = std::collections::BTreeMap<(String, String, String), u64>;

/// One "rollout group" line of the controller's log: a change of the group's state or of the pass's reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PassReport {
    /// Simulated time since the start of the run.
    pub at: Duration,
    pub group: String,
    /// `progressing`, `waiting`, `done` or `blocked`.
    pub state: String,
    /// The class of the wait the pass stopped on (`pods-not-ready`, `paused`, ...), `none` if it did not stop.
    pub wait: String,
    /// The pass's reason.
    pub reason: String,
}

impl PassReport {
    /// Whether the pass stopped on a wait (a waiting or blocked group).
    pub fn waits(&self) -> bool {
        self.wait != "none" && matches!(self.state.as_str(), "waiting" | "blocked")
    }
}

thread_local! {
    /// The lines heard on this thread (each run has a thread of its own), with the simulated instant.
    static HEARD: RefCell<Vec<(Instant, PassReport)>> = const { RefCell::new(Vec::new()) };
    /// The failed needs heard on this thread.
    static FAILED: RefCell<FailedNeeds> = const { RefCell::new(std::collections::BTreeMap::new()) };
}

/// Takes the failed needs heard so far on this thread.
pub(crate) fn take_failed_needs() -> FailedNeeds {
    FAILED.with(|f| std::mem::take(&mut *f.borrow_mut()))
}

/// Takes the lines heard so far on this thread, as times since `start`.
pub(crate) fn take_heard(since_start: impl Fn(Instant) -> Duration) -> Vec<PassReport> {
    HEARD
        .with(|h| std::mem::take(&mut *h.borrow_mut()))
        .into_iter()
        .map(|(at, report)| PassReport { at: since_start(at), ..report })
        .collect()
}

/// The fields of one "rollout group" line, or of one "need failed" line.
#[derive(Default)]
struct Fields {
    message: String,
    group: String,
    state: String,
    wait: String,
    reason: String,
    machine: String,
    need: String,
    failure: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.record(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record(field, format!("{value:?}"));
    }
}

impl Fields {
    fn record(&mut self, field: &Field, value: String) {
        match field.name() {
            "message" => self.message = value,
            "rollout_group" => self.group = value,
            "state" => self.state = value,
            "wait" => self.wait = value,
            "reason" => self.reason = value,
            "machine" => self.machine = value,
            "need" => self.need = value,
            "failure" => self.failure = value,
            _ => {}
        }
    }
}

/// Keeps the "rollout group" lines.
struct PassListener;

impl<S: tracing::Subscriber> Layer<S> for PassListener {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        if fields.message != "rollout group" || fields.state.is_empty() {
            return;
        }
        let report = PassReport {
            at: Duration::ZERO,
            group: fields.group,
            state: fields.state,
            wait: fields.wait,
            reason: fields.reason,
        };
        HEARD.with(|h| h.borrow_mut().push((Instant::now(), report)));
    }
}

/// Counts the "need failed" lines.
struct NeedListener;

impl<S: tracing::Subscriber> Layer<S> for NeedListener {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let key = (fields.machine, fields.need, fields.failure);
        FAILED.with(|f| *f.borrow_mut().entry(key).or_default() += 1);
    }
}

/// The run's subscriber: the listeners, and with `logs` the controller's log at info printed as `replay --logs` shows
/// it (its timestamps are simulated time: madsim answers the clock).
pub(crate) fn subscriber(logs: bool) -> impl tracing::Subscriber + Send + Sync {
    let listener = PassListener.with_filter(Targets::new().with_target(REPORT_TARGET, tracing::Level::INFO));
    let printer = logs.then(|| {
        tracing_subscriber::fmt::layer()
            .with_target(false)
            .with_ansi(false)
            .with_filter(Targets::new().with_default(tracing::Level::INFO))
    });
    let needs = NeedListener.with_filter(Targets::new().with_target(NEEDS_TARGET, tracing::Level::DEBUG));
    tracing_subscriber::registry().with(listener).with(needs).with(printer)
}
