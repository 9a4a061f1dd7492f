//! `status --prometheus-url` on a live cluster lists the namespace's RolloutHealthChecks once, through the same port
//! the controller watches them with: the first listing, a missing CRD as no resource, any other error as the
//! view's error.

use futures::StreamExt;
use futures::stream::BoxStream;
use rollout_operator::cluster::{ApiError, WatchEvent};
use rollout_operator::health_check::feed::{HealthCheckSource, list_once};
use serde_json::{Value, json};

/// A watch that yields `events`, then nothing more.
#[derive(Clone)]
struct Scripted(Vec<Result<WatchEvent<Value>, ApiError>>);

impl HealthCheckSource for Scripted {
    fn watch_health_checks(&self) -> BoxStream<'static, Result<WatchEvent<Value>, ApiError>> {
        futures::stream::iter(self.0.clone()).boxed()
    }
}

fn resource(name: &str, prometheus_url: &str) -> Value {
    json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": "RolloutHealthCheck",
           "metadata": {"name": name, "namespace": "ns", "generation": 1},
           "spec": {"selector": {"matchLabels": {"rollout-group": "ingester"}},
                    "prometheusURL": prometheus_url,
                    "checks": [{"name": "errors", "query": "sum(rate(e{${targetMatchers}}[${range}]))",
                                "successQuery": "${current} <= bool 2 * ${baseline}"}]}})
}

#[tokio::test]
async fn the_first_listing_is_the_list_and_later_events_are_not_waited_for() {
    let source = Scripted(vec![
        Ok(WatchEvent::Init),
        Ok(WatchEvent::InitApply(resource("ingester-health", "http://prometheus:9090"))),
        Ok(WatchEvent::InitApply(resource("broken", "not a url"))),
        Ok(WatchEvent::InitDone),
        Ok(WatchEvent::Apply(resource("later", "http://prometheus:9090"))),
    ]);
    let checks = list_once(&source).await.expect("listed");
    assert_eq!(checks.keys().collect::<Vec<_>>(), ["broken", "ingester-health"]);
    assert!(checks["ingester-health"].is_ok());
    assert!(checks["broken"].is_err(), "an invalid resource is kept with its error");
}

#[tokio::test]
async fn a_missing_crd_is_no_resource_and_a_refusal_is_an_error() {
    let missing = Scripted(vec![Err(ApiError::NotFound("the server could not find the resource".into()))]);
    assert!(list_once(&missing).await.expect("no CRD: nothing to list").is_empty());
    let refused = Scripted(vec![Err(ApiError::Forbidden("cannot list rollouthealthchecks".into()))]);
    assert!(matches!(list_once(&refused).await, Err(ApiError::Forbidden(_))));
}
