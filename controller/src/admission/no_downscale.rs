//! The no-downscale webhook, `/admission/no-downscale` (reference 4.2): a downscale of a StatefulSet, or of a
//! Deployment or ReplicaSet through `/scale`, is denied when the object (or its parent) opts out of downscales.
//!
//! Owns the handler and the live read of a `/scale` request's parent, within the handler's deadline, with the
//! refused parent kinds kept in their feature gates ([`ParentLookups`]). Must not decide: the verdict is
//! `rollout_core::admission::no_downscale`'s; it writes nothing.

use super::router::{AdmissionApi, Late, Webhooks, before, respond, tell_verdict};
use crate::cluster::{ApiError, LiveReads};
use crate::ops::feature_gate::{FeatureGates, Gate};
use crate::ops::metrics::Metrics;
use crate::pods::client::PodHttpClient;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use rollout_core::Failure;
use rollout_core::admission::no_downscale::{self, ParentResource, Step};
use rollout_core::admission::{self, AdmissionRequest, Verdict};
use std::sync::Arc;
use tokio::time::Instant;

pub const NO_DOWNSCALE_PATH: &str = "/admission/no-downscale";

/// The parent kinds of `/scale` requests this process was refused (403) on its last read of them, kept in their
/// feature gates. None of the reference's deployments grants `get` on Deployments or ReplicaSets, though they send
/// those kinds' `/scale` requests to the no-downscale webhook, so each such request is refused and let through with
/// the reference's warning. Every request still reads its parent (a grant, or a Role restricted by name, takes
/// effect at once, and a refused kind is never taken for one that can be read); only the saying is once, by the
/// kind's gate ([`Gate::DeploymentLookups`], [`Gate::ReplicaSetLookups`]): an error naming the grant and
/// `rollout_operator_feature_disabled` until a read succeeds.
#[derive(Clone, Debug, Default)]
pub struct ParentLookups {
    gates: FeatureGates,
}

impl ParentLookups {
    /// Lookups reporting through the process's feature gates (in `metrics`).
    pub fn reporting_to(metrics: Arc<Metrics>) -> Self {
        ParentLookups { gates: metrics.gates().clone() }
    }

    /// The optional lookups' gates; StatefulSets are read under a required permission.
    fn gate(resource: ParentResource) -> Option<Gate> {
        match resource {
            ParentResource::Deployments => Some(Gate::DeploymentLookups),
            ParentResource::ReplicaSets => Some(Gate::ReplicaSetLookups),
            ParentResource::StatefulSets => None,
        }
    }

    fn refused(&self, resource: ParentResource, message: &str) {
        match Self::gate(resource) {
            Some(gate) => {
                self.gates.refused(gate, &message);
            }
            None => tracing::error!(%message, "the no-downscale webhook may not read apps statefulsets: /scale \
                downscales of StatefulSets are allowed with a warning; grant get on statefulsets (a required permission)"),
        }
    }

    fn answered(&self, resource: ParentResource) {
        if let Some(gate) = Self::gate(resource) {
            self.gates.granted(gate);
        }
    }
}

pub(super) async fn handler<C: AdmissionApi, P: PodHttpClient>(
    State(webhooks): State<Arc<Webhooks<C, P>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    respond(&headers, &body, |request| async move {
        let deadline = Instant::now() + webhooks.settings.handler_deadline;
        decide_no_downscale(&webhooks, &request, deadline).await
    })
    .await
}

pub async fn decide_no_downscale<C: AdmissionApi, P: PodHttpClient>(
    webhooks: &Webhooks<C, P>,
    request: &AdmissionRequest,
    deadline: Instant,
) -> Verdict {
    if let Some(verdict) = admission::foreign_namespace(request, &webhooks.settings.namespace) {
        return verdict;
    }
    let verdict = match no_downscale::evaluate(request) {
        Step::Decided(verdict) => verdict,
        Step::LookupParent { resource, name, old, new } => {
            let labels =
                parent_labels(&webhooks.api, &webhooks.settings.parent_lookups, resource, &name, deadline).await;
            no_downscale::decide_with_parent(request, old, new, labels.as_ref())
        }
    };
    tell_verdict(&webhooks.settings.events, request, &verdict, &[]);
    verdict
}

/// The labels of the parent `resource`/`name`, or why they could not be read; a refusal (403) or a read answered
/// goes to `lookups`.
async fn parent_labels<C: LiveReads>(
    api: &C,
    lookups: &ParentLookups,
    resource: ParentResource,
    name: &str,
    deadline: Instant,
) -> Result<std::collections::BTreeMap<String, String>, Failure> {
    let what = format!("get {}/{name}", resource.as_str());
    let metadata = match resource {
        ParentResource::StatefulSets => {
            before(deadline, &what, api.get_statefulset(name)).await.map(|o| o.map(|o| o.metadata))
        }
        ParentResource::Deployments => {
            before(deadline, &what, api.get_deployment(name)).await.map(|o| o.map(|o| o.metadata))
        }
        ParentResource::ReplicaSets => {
            before(deadline, &what, api.get_replicaset(name)).await.map(|o| o.map(|o| o.metadata))
        }
    };
    if let Err(Late::Failed(ApiError::Forbidden(message))) = &metadata {
        lookups.refused(resource, message);
    } else if metadata.is_ok() {
        lookups.answered(resource);
    }
    match metadata {
        Ok(Some(meta)) => Ok(meta.labels.unwrap_or_default()),
        Ok(None) => Err(Failure::NotFound(format!("{}.apps \"{name}\" not found", resource.as_str()))),
        Err(err) => Err(err.failure()),
    }
}
