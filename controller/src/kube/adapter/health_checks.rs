//! The RolloutHealthChecks of the namespace, watched as generic objects (the core parses them).

use super::{KubeCluster, map_event, watch};
use crate::cluster::{ApiError, WatchEvent};
use crate::health_check::feed::HealthCheckSource;
use futures::StreamExt;
use futures::stream::BoxStream;
use kube::Api;
use kube::runtime::watcher;

fn resource() -> kube::core::ApiResource {
    use rollout_core::health_check::config::{GROUP, KIND, PLURAL, VERSION};
    kube::core::ApiResource {
        group: GROUP.to_string(),
        version: VERSION.to_string(),
        api_version: format!("{GROUP}/{VERSION}"),
        kind: KIND.to_string(),
        plural: PLURAL.to_string(),
    }
}

impl HealthCheckSource for KubeCluster {
    fn watch_health_checks(&self) -> BoxStream<'static, Result<WatchEvent<serde_json::Value>, ApiError>> {
        let what = format!("watch rollouthealthchecks in namespace {}", self.namespace);
        let api: Api<kube::core::DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.namespace, &resource());
        let types = kube::core::TypeMeta { api_version: resource().api_version, kind: resource().kind };
        watch(api, watcher::Config::default(), what)
            .map(move |item| {
                item.map(|event| {
                    map_event(event, |mut object: kube::core::DynamicObject| {
                        object.types.get_or_insert_with(|| types.clone());
                        serde_json::to_value(&object).unwrap_or_default()
                    })
                })
            })
            .boxed()
    }
}
