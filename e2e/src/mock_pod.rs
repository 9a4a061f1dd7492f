//! The mock pod the e2e suite runs in its test StatefulSets: what an ingester-like pod shows the operator.
//!
//! It owns the pod's pretend state (ready, alive, prepared for downscale, delayed-downscale timestamp) and the HTTP
//! API over it; it must not know anything about the operator's decisions. Tests drive it through the API server's
//! pod proxy. Endpoints (all paths configurable where the operator's annotations name them):
//!
//! | path | GET | POST | DELETE |
//! |---|---|---|---|
//! | `/ready`, `/alive` | 200 if set, else 503 (probes) | set | clear |
//! | `/version` | the `VERSION` env value | | |
//! | prepare-downscale path | state JSON | prepare (answers `prepare_status`) | cancel |
//! | delayed-downscale path | state JSON | `{"timestamp": <unix s>}`, the first POST since the last DELETE | cancel |
//! | `/control/prepare-status?code=N` | | make later prepare POSTs answer N | |
//!
//! The state JSON counts calls, so a test can tell "the webhook asked this pod to prepare, then undid it" from
//! "nobody called".

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex, MutexGuard};

/// How a mock pod starts, read from its environment (see [`MockPodConfig::from_env`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockPodConfig {
    pub port: u16,
    pub version: String,
    pub ready: bool,
    /// Exit with status 1 at start: a crash-looping pod.
    pub crash: bool,
    pub prepare_downscale_path: String,
    pub delayed_downscale_path: String,
    /// HTTP status answered to prepare-downscale POSTs.
    pub prepare_status: u16,
}

/// A bad environment variable: which one, its value, and what was expected.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("environment variable {name}={value:?} is invalid: expected {expected}")]
pub struct ConfigError {
    pub name: &'static str,
    pub value: String,
    pub expected: &'static str,
}

impl MockPodConfig {
    /// Reads `PORT` (8080), `VERSION` (""), `READY` (false), `CRASH` (false), `PREPARE_DOWNSCALE_PATH`
    /// (`/prepare-downscale`), `DELAYED_DOWNSCALE_PATH` (`/prepare-delayed-downscale`), `PREPARE_STATUS` (200).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let flag = |name: &'static str| -> Result<bool, ConfigError> {
            match get(name).as_deref() {
                None | Some("") | Some("false") => Ok(false),
                Some("true") => Ok(true),
                Some(other) => Err(ConfigError { name, value: other.to_string(), expected: "true or false" }),
            }
        };
        let number = |name: &'static str, default: u16, expected: &'static str| -> Result<u16, ConfigError> {
            match get(name) {
                None => Ok(default),
                Some(v) => v.parse().map_err(|_| ConfigError { name, value: v, expected }),
            }
        };
        let path = |name: &'static str, default: &str| -> Result<String, ConfigError> {
            let p = get(name).unwrap_or_else(|| default.to_string());
            if p.starts_with('/') && p.len() > 1 {
                Ok(p)
            } else {
                Err(ConfigError { name, value: p, expected: "a path starting with / (not / alone)" })
            }
        };
        let prepare_status = number("PREPARE_STATUS", 200, "an HTTP status code (100-599)")?;
        if !(100..=599).contains(&prepare_status) {
            return Err(ConfigError {
                name: "PREPARE_STATUS",
                value: prepare_status.to_string(),
                expected: "an HTTP status code (100-599)",
            });
        }
        Ok(MockPodConfig {
            port: number("PORT", 8080, "a TCP port")?,
            version: get("VERSION").unwrap_or_default(),
            ready: flag("READY")?,
            crash: flag("CRASH")?,
            prepare_downscale_path: path("PREPARE_DOWNSCALE_PATH", "/prepare-downscale")?,
            delayed_downscale_path: path("DELAYED_DOWNSCALE_PATH", "/prepare-delayed-downscale")?,
            prepare_status,
        })
    }
}

/// What a test reads back from the prepare-downscale path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrepareState {
    pub prepared: bool,
    pub posts: u64,
    pub deletes: u64,
}

/// What a test reads back from the delayed-downscale path.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayedState {
    /// Unix seconds of the first POST since the last DELETE; `None` when not preparing.
    pub timestamp: Option<i64>,
    pub posts: u64,
    pub deletes: u64,
}

#[derive(Debug)]
struct PodState {
    ready: bool,
    alive: bool,
    prepare: PrepareState,
    prepare_status: StatusCode,
    delayed: DelayedState,
}

/// The clock of the delayed-downscale timestamps (unix seconds); injected so tests need no real time.
pub type Clock = Arc<dyn Fn() -> i64 + Send + Sync>;

#[derive(Clone)]
struct Shared {
    state: Arc<Mutex<PodState>>,
    version: Arc<str>,
    clock: Clock,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, PodState> {
        // A panic while holding the lock cannot leave the plain-data state inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The mock pod's HTTP API over fresh state from `config`.
pub fn router(config: &MockPodConfig, clock: Clock) -> Router {
    let shared = Shared {
        state: Arc::new(Mutex::new(PodState {
            ready: config.ready,
            alive: true,
            prepare: PrepareState::default(),
            prepare_status: StatusCode::from_u16(config.prepare_status).unwrap_or(StatusCode::OK),
            delayed: DelayedState::default(),
        })),
        version: config.version.as_str().into(),
        clock,
    };
    Router::new()
        .route("/ready", any(ready))
        .route("/alive", any(alive))
        .route("/version", any(version))
        .route(&config.prepare_downscale_path, any(prepare))
        .route(&config.delayed_downscale_path, any(delayed))
        .route("/control/prepare-status", post(set_prepare_status))
        .with_state(shared)
}

fn toggle(method: &Method, flag: &mut bool) -> Response {
    match *method {
        Method::GET => {
            if *flag {
                StatusCode::OK.into_response()
            } else {
                StatusCode::SERVICE_UNAVAILABLE.into_response()
            }
        }
        Method::POST => {
            *flag = true;
            StatusCode::OK.into_response()
        }
        Method::DELETE => {
            *flag = false;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

async fn ready(State(s): State<Shared>, method: Method) -> Response {
    toggle(&method, &mut s.lock().ready)
}

async fn alive(State(s): State<Shared>, method: Method) -> Response {
    toggle(&method, &mut s.lock().alive)
}

async fn version(State(s): State<Shared>) -> Response {
    s.version.to_string().into_response()
}

async fn prepare(State(s): State<Shared>, method: Method) -> Response {
    let mut st = s.lock();
    match method {
        Method::GET => axum::Json(st.prepare.clone()).into_response(),
        Method::POST => {
            st.prepare.posts += 1;
            let status = st.prepare_status;
            if status.is_success() {
                st.prepare.prepared = true;
            }
            status.into_response()
        }
        Method::DELETE => {
            st.prepare.deletes += 1;
            st.prepare.prepared = false;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

async fn delayed(State(s): State<Shared>, method: Method) -> Response {
    let now = (s.clock)();
    let mut st = s.lock();
    match method {
        Method::GET => axum::Json(st.delayed.clone()).into_response(),
        Method::POST => {
            st.delayed.posts += 1;
            // The same timestamp on every POST until a DELETE cancels the preparation, as real pods answer.
            let ts = *st.delayed.timestamp.get_or_insert(now);
            axum::Json(serde_json::json!({ "timestamp": ts })).into_response()
        }
        Method::DELETE => {
            st.delayed.deletes += 1;
            st.delayed.timestamp = None;
            StatusCode::OK.into_response()
        }
        _ => StatusCode::METHOD_NOT_ALLOWED.into_response(),
    }
}

#[derive(Deserialize)]
struct CodeQuery {
    code: u16,
}

async fn set_prepare_status(State(s): State<Shared>, Query(q): Query<CodeQuery>) -> Response {
    match StatusCode::from_u16(q.code) {
        Ok(code) if (100..=599).contains(&q.code) => {
            s.lock().prepare_status = code;
            StatusCode::OK.into_response()
        }
        _ => (StatusCode::BAD_REQUEST, format!("invalid status code {}", q.code)).into_response(),
    }
}

/// The real clock, in unix seconds.
pub fn system_clock() -> Clock {
    Arc::new(|| jiff::Timestamp::now().as_second())
}
