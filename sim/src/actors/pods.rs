//! The pods' HTTP endpoints the operator calls: prepare-shutdown (some slow, some failing) and the delayed-downscale
//! prepare and cancel.

use crate::environment::store::SharedStore;
use crate::harness::populate::DELAY_ENDPOINT;
use crate::oracle::activity::WorldEvent;
use crate::rng::SimRng;
use jiff::Timestamp;
use rollout_operator::pods::client::{PodCallError, PodHttpClient, PodMethod, PodRequest, PodResponse};
use std::sync::{Arc, Mutex};
use tokio::time::Instant;

pub(crate) const DELAYED_PODS_STREAM: u64 = 0x6465_6c61_7965_6421;

/// The pods' delayed-downscale endpoints (the URL's host is `<pod>.<service>...`): POST starts preparing (and
/// answers when it started, in whole seconds, as a pod does), DELETE cancels. Most answer within 50 ms; during the
/// fault phase 3 % answer HTTP 500 and 2 % cannot be reached. What they answered is kept in the store for the checker.
#[derive(Clone)]
pub(crate) struct DelayedDownscalePods {
    pub(crate) store: SharedStore,
    pub(crate) rng: Arc<Mutex<SimRng>>,
    pub(crate) failing_until: Instant,
}

impl PodHttpClient for DelayedDownscalePods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let (delay, roll) = {
            let mut r = self.rng.lock().unwrap();
            (r.millis(1, 50), r.range(0..100))
        };
        tokio::time::sleep(delay).await;
        let method = if request.method == PodMethod::Post { "POST" } else { "DELETE" };
        let host = request.url.split("://").nth(1).unwrap_or_default();
        let pod = host.split(['.', ':', '/']).next().unwrap_or_default().to_string();
        let mut st = self.store.lock().unwrap();
        // Only a StatefulSet whose delayed downscale is on (as the world meant its annotations) is ever called. The
        // StatefulSet addressed is the governing Service in the host (`<pod>.<service>.<namespace>.svc...`; each
        // world's Service is named after its StatefulSet), not the pod's owner: a pod relabelled out of its
        // StatefulSet's selector is released, and is still that StatefulSet's ordinal.
        let service = host.split(['.', ':', '/']).nth(1).unwrap_or_default().to_string();
        let addressed = st.pods.contains_key(&pod).then_some(service);
        if let Some(sts) = addressed.filter(|sts| !st.world.delayed_downscale_delays.contains_key(sts)) {
            let at = st.elapsed();
            let detail = format!("{method} {} to {pod}, whose StatefulSet {sts} has no delayed downscale", request.url);
            st.oracle.checker.record_delayed_violation(at, detail);
        }
        let faulty = Instant::now() < self.failing_until;
        // The pods listen on port 8080 only: another port (or scheme) is refused, another path is not found.
        let (listens, path_found) = match host.split_once(':') {
            Some((_, port_path)) => {
                (request.url.starts_with("http://") && port_path.starts_with("8080/"), host.ends_with(DELAY_ENDPOINT))
            }
            None => (false, false),
        };
        if (faulty && roll < 2) || !st.pods.contains_key(&pod) || !listens {
            return Err(PodCallError::Transport { method, url: request.url, message: "connection refused".into() });
        }
        if !path_found {
            return Ok(PodResponse { status: 404, body: b"404 page not found".to_vec() });
        }
        if faulty && roll < 5 {
            return Ok(PodResponse { status: 500, body: b"not now".to_vec() });
        }
        match request.method {
            PodMethod::Post => {
                let now = Timestamp::from_second(Timestamp::now().as_second()).unwrap_or_else(|_| Timestamp::now());
                let since = *st.world.prepared.entry(pod.clone()).or_insert(now);
                if since == now {
                    st.trace("pods", format!("{pod} prepares for a delayed downscale"));
                    st.oracle.activity.happened(WorldEvent::PodPrepares { pod: pod.clone() });
                }
                let body = serde_json::json!({ "timestamp": since.as_second() }).to_string().into_bytes();
                Ok(PodResponse { status: 200, body })
            }
            _ => {
                if st.world.prepared.remove(&pod).is_some() {
                    st.trace("pods", format!("{pod} cancels its delayed downscale"));
                    st.oracle.activity.happened(WorldEvent::PodCancels { pod: pod.clone() });
                }
                Ok(PodResponse { status: 200, body: Vec::new() })
            }
        }
    }
}

/// The pods' prepare-shutdown endpoints: most answer within 40 ms, some take seconds, a few refuse (HTTP 500) or are
/// unreachable. Deterministic: the delays and failures come from the run's generator.
#[derive(Clone)]
pub(crate) struct SimPods {
    pub(crate) rng: Arc<Mutex<SimRng>>,
    /// Where the answered calls are logged ([`Store::pod_calls`]).
    pub(crate) store: SharedStore,
}

/// The pod a URL built as `<pod>.<service>.<namespace>.svc.<domain>` addresses.
pub(crate) fn pod_of_url(url: &str) -> &str {
    let host = url.split_once("://").map_or(url, |(_, rest)| rest);
    host.split(['.', ':', '/']).next().unwrap_or_default()
}

impl PodHttpClient for SimPods {
    async fn call(&self, request: PodRequest) -> Result<PodResponse, PodCallError> {
        let (delay, roll) = {
            let mut r = self.rng.lock().unwrap();
            let slow = r.chance(0.3);
            (if slow { r.millis(1_000, 6_000) } else { r.millis(1, 40) }, r.range(0..100))
        };
        tokio::time::sleep(delay).await;
        self.store.lock().unwrap().world.pod_calls.push(crate::actors::world_record::PodCall {
            pod: pod_of_url(&request.url).to_string(),
            post: request.method == PodMethod::Post,
            ok: roll >= 5,
            at: Instant::now(),
        });
        match roll {
            0..3 => Ok(PodResponse { status: 500, body: b"not now".to_vec() }),
            3..5 => Err(PodCallError::Transport {
                method: if request.method == PodMethod::Post { "POST" } else { "DELETE" },
                url: request.url.clone(),
                message: "connection refused".into(),
            }),
            _ => Ok(PodResponse { status: 200, body: Vec::new() }),
        }
    }
}
