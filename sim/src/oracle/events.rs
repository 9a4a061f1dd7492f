use k8s_openapi::api::events::v1::Event;
use rollout_operator::cluster::ApiError;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// The window over which the busiest object's Events are counted (the storm measure).
pub const STORM_WINDOW: Duration = Duration::from_secs(600);

/// One Event created, for the counts.
#[derive(Debug, Clone)]
struct Created {
    at: Duration,
    object: String,
    reason: String,
    /// A wait told (`RolloutWaiting`, `RolloutBlocked`): the class its note names.
    wait: Option<String>,
    note: String,
}

/// The wait class a `RolloutWaiting` or `RolloutBlocked` Event's note names (`<state> (<class>): <reason>`).
fn told_wait(reason: &str, note: &str) -> Option<String> {
    if !matches!(reason, "RolloutWaiting" | "RolloutBlocked") {
        return None;
    }
    let (_, rest) = note.split_once(" (")?;
    Some(rest.split_once("):")?.0.to_string())
}

/// The API server's Events: the objects, and every creation and series update in order.
#[derive(Debug, Default)]
pub struct EventLog {
    events: BTreeMap<String, Event>,
    created: Vec<Created>,
    series_updates: u64,
}

impl EventLog {
    /// `POST events`: refused (422) without the fields the API server requires of a new `events.k8s.io/v1` Event,
    /// a conflict when the name is taken.
    pub fn create(&mut self, at: Duration, event: &Event) -> Result<(), ApiError> {
        let name = event.metadata.name.clone().unwrap_or_default();
        let missing = [
            ("metadata.name", name.is_empty()),
            ("eventTime", event.event_time.is_none()),
            ("reportingController", event.reporting_controller.as_deref().is_none_or(str::is_empty)),
            ("reportingInstance", event.reporting_instance.as_deref().is_none_or(str::is_empty)),
            ("action", event.action.as_deref().is_none_or(str::is_empty)),
            ("reason", event.reason.as_deref().is_none_or(str::is_empty)),
            ("regarding", event.regarding.is_none()),
        ];
        if let Some((field, _)) = missing.iter().find(|(_, absent)| *absent) {
            return Err(ApiError::Rejected {
                code: 422,
                message: format!("Event \"{name}\" is invalid: {field}: Required value"),
            });
        }
        if event.note.as_deref().is_some_and(|n| n.len() > 1024) {
            return Err(ApiError::Rejected {
                code: 422,
                message: format!("Event \"{name}\" is invalid: note: Too long"),
            });
        }
        if self.events.contains_key(&name) {
            return Err(ApiError::Conflict(format!("events.events.k8s.io \"{name}\" already exists")));
        }
        let object = event.regarding.as_ref().and_then(|r| r.name.clone()).unwrap_or_default();
        let reason = event.reason.clone().unwrap_or_default();
        let note = event.note.clone().unwrap_or_default();
        let wait = told_wait(&reason, &note);
        self.created.push(Created { at, object, reason, wait, note });
        self.events.insert(name, event.clone());
        Ok(())
    }

    /// `PATCH events/{name}` (JSON merge patch).
    pub fn patch(&mut self, name: &str, patch: &serde_json::Value) -> Result<(), ApiError> {
        let Some(event) = self.events.get_mut(name) else {
            return Err(ApiError::NotFound(format!("events.events.k8s.io \"{name}\" not found")));
        };
        let mut value = serde_json::to_value(&*event).map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
        rollout_operator::cluster::memory::json_merge_patch(&mut value, patch);
        *event = serde_json::from_value(value).map_err(|e| ApiError::Rejected { code: 422, message: e.to_string() })?;
        self.series_updates += 1;
        Ok(())
    }

    /// What the run's Events amount to, against the `rollout_steps` it made (controller deletions, revision advances
    /// and replica changes).
    pub fn stats(&self, rollout_steps: u64) -> EventStats {
        let (mut by_reason, mut waits) = (BTreeMap::new(), BTreeMap::new());
        let stuck_notes = self.created.iter().filter(|c| c.reason == "RolloutStuck").map(|c| c.note.clone()).collect();
        for c in &self.created {
            *by_reason.entry(c.reason.clone()).or_insert(0) += 1;
            if let Some(class) = &c.wait {
                *waits.entry(class.clone()).or_insert(0) += 1;
            }
        }
        let occurrences = self.events.values().map(|e| e.series.as_ref().map_or(1, |s| s.count.max(1) as u64)).sum();
        // The most Events created for one object within any STORM_WINDOW.
        let mut busiest = (0u64, String::new());
        let mut per_object: BTreeMap<&str, VecDeque<Duration>> = BTreeMap::new();
        for c in &self.created {
            let times = per_object.entry(&c.object).or_default();
            times.push_back(c.at);
            while times.front().is_some_and(|first| c.at.saturating_sub(*first) >= STORM_WINDOW) {
                times.pop_front();
            }
            if times.len() as u64 > busiest.0 {
                busiest = (times.len() as u64, c.object.clone());
            }
        }
        EventStats {
            created: self.created.len() as u64,
            series_updates: self.series_updates,
            occurrences,
            rollout_steps,
            by_reason,
            waits,
            busiest_window: busiest.0,
            busiest_object: busiest.1,
            stuck_notes,
        }
    }
}

/// A run's Events.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventStats {
    /// Event objects created.
    pub created: u64,
    /// Series updates (patches of an existing Event).
    pub series_updates: u64,
    /// Occurrences told: each Event's series count (1 without a series).
    pub occurrences: u64,
    /// Controller pod deletions, revision advances and replica changes that committed.
    pub rollout_steps: u64,
    /// Events created, by reason.
    pub by_reason: BTreeMap<String, u64>,
    /// Waits told (`RolloutWaiting`, `RolloutBlocked`), by the wait class they name (`held-by-budget`, ...).
    pub waits: BTreeMap<String, u64>,
    /// The most Events created for one object within any [`STORM_WINDOW`], and that object.
    pub busiest_window: u64,
    pub busiest_object: String,
    /// The notes of the `RolloutStuck` Events, in order.
    pub stuck_notes: Vec<String>,
}

impl EventStats {
    /// Adds another run's counts (the busiest window is the larger one).
    pub fn add(&mut self, other: &EventStats) {
        self.created += other.created;
        self.series_updates += other.series_updates;
        self.occurrences += other.occurrences;
        self.rollout_steps += other.rollout_steps;
        for (reason, n) in &other.by_reason {
            *self.by_reason.entry(reason.clone()).or_insert(0) += n;
        }
        for (class, n) in &other.waits {
            *self.waits.entry(class.clone()).or_insert(0) += n;
        }
        self.stuck_notes.extend(other.stuck_notes.iter().cloned());
        if other.busiest_window > self.busiest_window {
            self.busiest_window = other.busiest_window;
            self.busiest_object = other.busiest_object.clone();
        }
    }

    /// API writes (creations and series updates) per rollout step.
    pub fn writes_per_step(&self) -> f64 {
        (self.created + self.series_updates) as f64 / self.rollout_steps.max(1) as f64
    }

    /// One line for the trace and the batch summary.
    pub fn describe(&self) -> String {
        let reasons: Vec<String> = self.by_reason.iter().map(|(r, n)| format!("{r} {n}")).collect();
        format!(
            "{} Events created, {} series updates ({} occurrences) over {} rollout steps: {:.2} Event writes per step; \
             busiest object {} Events in {} min{}; by reason: {}",
            self.created,
            self.series_updates,
            self.occurrences,
            self.rollout_steps,
            self.writes_per_step(),
            self.busiest_window,
            STORM_WINDOW.as_secs() / 60,
            if self.busiest_object.is_empty() { String::new() } else { format!(" ({})", self.busiest_object) },
            if reasons.is_empty() { "none".to_string() } else { reasons.join(", ") }
        )
    }
}
