//! An AdmissionReview built from fuzzer-chosen fields (operation, kind, subresource, old and new replicas, labels,
//! dry run, namespace), so that the fuzzer reaches the no-downscale, prepare-downscale, eviction, budget and
//! health-check decisions rather than stopping at the JSON parser.

use crate::health_check::HealthCheckInput;
use crate::text::{Key, Text, map};
use crate::world::{BudgetSpec, NAMESPACE, WorldSpec, ZONES};
use arbitrary::Arbitrary;
use rollout_operator::admission::evictions::{POD_EVICTION_PATH, ZPDB_VALIDATION_PATH};
use rollout_operator::admission::health_checks::HEALTH_CHECK_VALIDATION_PATH;
use rollout_operator::admission::no_downscale::NO_DOWNSCALE_PATH;
use rollout_operator::admission::prepare_downscale::PREPARE_DOWNSCALE_PATH;
use serde_json::{Value, json};

pub const PATHS: [&str; 5] =
    [NO_DOWNSCALE_PATH, PREPARE_DOWNSCALE_PATH, POD_EVICTION_PATH, ZPDB_VALIDATION_PATH, HEALTH_CHECK_VALIDATION_PATH];

#[derive(Arbitrary, Debug, Clone)]
pub enum Operation {
    Create,
    Update,
    Delete,
    Connect,
    Other(Text),
}

#[derive(Arbitrary, Debug, Clone)]
pub enum ParentKind {
    StatefulSets,
    Deployments,
    ReplicaSets,
}

#[derive(Arbitrary, Debug, Clone)]
pub enum Target {
    /// An UPDATE of zone `zone`'s StatefulSet (the object as stored, with the chosen replicas).
    StatefulSet {
        zone: u8,
    },
    /// A `/scale` request of a parent.
    Scale {
        parent: ParentKind,
        zone: u8,
        name: Option<Text>,
    },
    Deployment {
        name: Text,
    },
    ReplicaSet {
        name: Text,
    },
    /// A `pods/eviction` request of pod `ordinal` of zone `zone`.
    Eviction {
        zone: u8,
        ordinal: u8,
        options_dry_run: Option<Vec<Text>>,
    },
    Budget(BudgetSpec),
    HealthCheck(HealthCheckInput),
    Other {
        api_version: Text,
        kind: Text,
        resource: Text,
        sub_resource: Text,
        name: Text,
    },
}

#[derive(Arbitrary, Debug, Clone)]
pub struct ReviewSpec {
    pub path: u8,
    pub v1beta1: bool,
    pub operation: Operation,
    pub target: Target,
    pub old_replicas: Option<i32>,
    pub new_replicas: Option<i32>,
    pub object_labels: Vec<(Key, Text)>,
    pub dry_run: Option<bool>,
    /// `None`: the managed namespace.
    pub namespace: Option<Text>,
    pub uid: Text,
    pub username: Text,
    pub drop_old_object: bool,
    pub drop_object: bool,
}

impl ReviewSpec {
    pub fn path(&self) -> &'static str {
        PATHS[usize::from(self.path) % PATHS.len()]
    }

    pub fn namespace(&self) -> String {
        self.namespace.as_ref().map_or_else(|| NAMESPACE.to_string(), Text::get)
    }

    /// Whether the request asks for no side effect: its `dryRun`, or an Eviction's `deleteOptions.dryRun`.
    pub fn is_dry_run(&self) -> bool {
        let options = matches!(&self.target, Target::Eviction { options_dry_run: Some(v), .. } if !v.is_empty());
        self.dry_run == Some(true) || (options && self.path() == POD_EVICTION_PATH)
    }

    fn with_replicas(&self, mut object: Value, replicas: Option<i32>) -> Value {
        if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
            let labels = meta.entry("labels").or_insert_with(|| json!({}));
            if let Some(labels) = labels.as_object_mut() {
                labels.extend(map(&self.object_labels).into_iter().map(|(k, v)| (k, Value::String(v))));
            }
        }
        match replicas {
            Some(r) => object["spec"]["replicas"] = json!(r),
            None => {
                if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
                    spec.remove("replicas");
                }
            }
        }
        object
    }

    /// The request body.
    pub fn body(&self, world: &WorldSpec) -> Value {
        let zone_name = |zone: u8| ZONES[usize::from(zone) % ZONES.len()];
        let stored = |zone: u8| {
            let name = zone_name(zone);
            let spec = &world.zones[usize::from(zone) % ZONES.len()];
            world.statefulset(name, spec)
        };
        let apps = |kind: &str| json!({"group": "apps", "version": "v1", "kind": kind});
        let resource = |group: &str, plural: &str| json!({"group": group, "version": "v1", "resource": plural});
        let workload = |kind: &str, name: String| {
            json!({"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": NAMESPACE},
                   "spec": {"replicas": 1}})
        };
        let (kind, resource, sub_resource, name, old, new) = match &self.target {
            Target::StatefulSet { zone } => {
                let object = stored(*zone);
                (
                    apps("StatefulSet"),
                    resource("apps", "statefulsets"),
                    String::new(),
                    zone_name(*zone).to_string(),
                    self.with_replicas(object.clone(), self.old_replicas),
                    self.with_replicas(object, self.new_replicas),
                )
            }
            Target::Scale { parent, zone, name } => {
                let plural = match parent {
                    ParentKind::StatefulSets => "statefulsets",
                    ParentKind::Deployments => "deployments",
                    ParentKind::ReplicaSets => "replicasets",
                };
                let name = name.as_ref().map_or_else(|| zone_name(*zone).to_string(), Text::get);
                let scale = |replicas: Option<i32>| {
                    let mut s = json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
                                       "metadata": {"name": name, "namespace": NAMESPACE}, "spec": {}});
                    if let Some(r) = replicas {
                        s["spec"]["replicas"] = json!(r);
                    }
                    s
                };
                (
                    json!({"group": "autoscaling", "version": "v1", "kind": "Scale"}),
                    resource("apps", plural),
                    "scale".to_string(),
                    name.clone(),
                    scale(self.old_replicas),
                    scale(self.new_replicas),
                )
            }
            Target::Deployment { name } | Target::ReplicaSet { name } => {
                let (kind, plural) = match &self.target {
                    Target::Deployment { .. } => ("Deployment", "deployments"),
                    _ => ("ReplicaSet", "replicasets"),
                };
                let object = workload(kind, name.get());
                (
                    apps(kind),
                    resource("apps", plural),
                    String::new(),
                    name.get(),
                    self.with_replicas(object.clone(), self.old_replicas),
                    self.with_replicas(object, self.new_replicas),
                )
            }
            Target::Eviction { zone, ordinal, options_dry_run } => {
                let pod = format!("{}-{}", zone_name(*zone), ordinal % 8);
                let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction",
                                          "metadata": {"name": pod, "namespace": NAMESPACE}});
                if let Some(values) = options_dry_run {
                    let values: Vec<String> = values.iter().map(Text::get).collect();
                    eviction["deleteOptions"] = json!({"dryRun": values});
                }
                (
                    json!({"group": "policy", "version": "v1", "kind": "Eviction"}),
                    resource("", "pods"),
                    "eviction".to_string(),
                    pod,
                    Value::Null,
                    eviction,
                )
            }
            Target::Budget(budget) => (
                json!({"group": "rollout-operator.grafana.com", "version": "v1", "kind": "ZoneAwarePodDisruptionBudget"}),
                resource("rollout-operator.grafana.com", "zoneawarepoddisruptionbudgets"),
                String::new(),
                "ingester-rollout".to_string(),
                Value::Null,
                budget.object(&world.group()),
            ),
            Target::HealthCheck(check) => (
                json!({"group": "rollout-operator.grafana.com", "version": "v1", "kind": "RolloutHealthCheck"}),
                resource("rollout-operator.grafana.com", "rollouthealthchecks"),
                String::new(),
                "ingester-errors".to_string(),
                Value::Null,
                check.object(),
            ),
            Target::Other { api_version, kind, resource: plural, sub_resource, name } => {
                let object = json!({"apiVersion": api_version.get(), "kind": kind.get(), "metadata": {"name": name.get()},
                                    "spec": {}});
                (
                    json!({"group": "", "version": "v1", "kind": kind.get()}),
                    resource("", &plural.get()),
                    sub_resource.get(),
                    name.get(),
                    self.with_replicas(object.clone(), self.old_replicas),
                    self.with_replicas(object, self.new_replicas),
                )
            }
        };
        let operation = match &self.operation {
            Operation::Create => "CREATE".to_string(),
            Operation::Update => "UPDATE".to_string(),
            Operation::Delete => "DELETE".to_string(),
            Operation::Connect => "CONNECT".to_string(),
            Operation::Other(t) => t.get(),
        };
        let mut request = json!({
            "uid": self.uid.get(), "kind": kind, "resource": resource, "subResource": sub_resource, "name": name,
            "namespace": self.namespace(), "operation": operation, "userInfo": {"username": self.username.get()},
        });
        if !self.drop_object {
            request["object"] = new;
        }
        if !self.drop_old_object && !old.is_null() {
            request["oldObject"] = old;
        }
        if let Some(dry_run) = self.dry_run {
            request["dryRun"] = json!(dry_run);
        }
        let api_version = if self.v1beta1 { "admission.k8s.io/v1beta1" } else { "admission.k8s.io/v1" };
        json!({"apiVersion": api_version, "kind": "AdmissionReview", "request": request})
    }
}
