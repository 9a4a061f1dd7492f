//! The webhooks' real router over the in-memory cluster of a dump, driven on one current-thread runtime whose clock
//! is paused (so the flows' waits and deadlines pass at once instead of costing wall time), with pods that answer
//! as the input says; and the properties every answer must have.

use crate::text::Text;
use crate::world::{NAMESPACE, RECORD, now};
use arbitrary::Arbitrary;
use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use rollout_operator::admission::router::{WebhookSettings, Webhooks, router_with_zpdb};
use rollout_operator::cluster::{LiveReads, ZoneTrackerStore};
use rollout_operator::commands::plan::Objects;
use rollout_operator::commands::review::DumpCluster;
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodRequest, PodResponse};
use rollout_operator::zpdb::Zpdb;
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

/// The one runtime of the process: building one per input would dominate the cost of an execution.
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a current-thread runtime")
    })
}

/// How a pod answers one prepare-downscale call.
#[derive(Arbitrary, Debug, Clone)]
pub enum PodAnswer {
    Status(u16, Text),
    Timeout,
    Refused,
    /// Never answers: the handler's deadline must cut it off.
    Hang,
}

/// Pods answering the calls in order as scripted (then 200), remembering every call.
#[derive(Clone, Default)]
pub struct ScriptedPods {
    answers: Arc<Vec<PodAnswer>>,
    next: Arc<AtomicUsize>,
    pub calls: Arc<Mutex<Vec<PodRequest>>>,
}

impl ScriptedPods {
    pub fn new(answers: Vec<PodAnswer>) -> Self {
        ScriptedPods { answers: Arc::new(answers), ..ScriptedPods::default() }
    }

    pub fn call_count(&self) -> usize {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

impl PodHttpClient for ScriptedPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        let method = request.method.as_str();
        let url = request.url.clone();
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).push(request);
        match self.answers.get(index) {
            None => Ok(PodResponse { status: 200, body: Vec::new() }),
            Some(PodAnswer::Status(status, body)) => Ok(PodResponse { status: *status, body: body.get().into_bytes() }),
            Some(PodAnswer::Timeout) => Err(PodCallError::Timeout { method, url, after: Duration::from_secs(5) }),
            Some(PodAnswer::Refused) => {
                Err(PodCallError::Connect { method, url, message: "connection refused".to_string() })
            }
            Some(PodAnswer::Hang) => std::future::pending().await,
        }
    }
}

/// The router as `review` builds it over a dump: budgets from the dump, the clock fixed at [`now`].
pub struct Harness {
    pub app: axum::Router,
    pub api: DumpCluster,
    pub pods: ScriptedPods,
}

impl Harness {
    pub fn new(objects: &Objects, zone_tracker: bool, pods: ScriptedPods) -> Self {
        let api = DumpCluster::from_objects(objects, NAMESPACE);
        let (budgets, _invalid) = api.budgets();
        let at = now();
        let app = router_with_zpdb(
            Webhooks {
                api: api.clone(),
                pods: pods.clone(),
                settings: WebhookSettings::new(
                    NAMESPACE,
                    "cluster.local.",
                    zone_tracker.then_some(RECORD),
                    Duration::from_secs(10),
                ),
                clock: Arc::new(move || at),
            },
            Zpdb::with_budgets(budgets),
        );
        Harness { app, api, pods }
    }

    /// POSTs `body` to `path`; the status and body of the answer.
    pub fn post(&self, path: &str, content_type: Option<&str>, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
        runtime().block_on(async {
            let mut request = Request::post(path);
            if let Some(ct) = content_type {
                request = request.header(http::header::CONTENT_TYPE, ct);
            }
            let request = request.body(Body::from(body)).expect("a request");
            let response = self.app.clone().oneshot(request).await.unwrap_or_else(|never| match never {});
            let status = response.status();
            let bytes = response.into_body().collect().await.expect("an in-memory body").to_bytes().to_vec();
            (status, bytes)
        })
    }

    /// Everything a webhook may write: the StatefulSets, the pods and the zone tracker's ConfigMap.
    pub fn state(&self) -> Value {
        runtime().block_on(async {
            let statefulsets = self.api.list_statefulsets("").await.expect("in memory");
            let pods = self.api.list_pods("").await.expect("in memory");
            let record = self.api.get_config_map(RECORD).await.expect("in memory");
            serde_json::json!({"statefulsets": statefulsets, "pods": pods, "record": record})
        })
    }
}

/// What every answer must be: 400 with a reason for a body that is not an AdmissionReview we can answer, 413 for
/// one over the size limit, else 200 with an AdmissionReview response of the request's version and uid. Returns
/// the response on 200.
pub fn check_answer(status: StatusCode, body: &[u8]) -> Option<Value> {
    match status {
        StatusCode::OK => {}
        StatusCode::BAD_REQUEST => {
            assert!(!body.is_empty(), "400 without a reason");
            return None;
        }
        StatusCode::PAYLOAD_TOO_LARGE => return None,
        other => panic!("unexpected status {other}: {}", String::from_utf8_lossy(body)),
    }
    let review: Value = serde_json::from_slice(body).expect("a 200 answer is JSON");
    assert_eq!(review["kind"], "AdmissionReview", "{review}");
    assert!(review["response"]["allowed"].is_boolean(), "{review}");
    assert!(review["response"]["uid"].is_string(), "{review}");
    Some(review)
}
