//! A namespace built from fuzzer-chosen fields: up to three zones of a rollout group (replicas, readiness,
//! revisions, any labels and annotations), their pods (readiness, phase, deletion, eviction intents, ready times),
//! the zone tracker's ConfigMap, a ZoneAwarePodDisruptionBudget and parents of `/scale` requests. The objects are
//! what a dump would hold, so the webhooks (through the dump's in-memory cluster) and the planner read them the
//! way they read a real cluster's.

use crate::text::{Key, Text, map};
use arbitrary::Arbitrary;
use rollout_operator::commands::plan::Objects;
use serde_json::{Map, Value, json};

pub const NAMESPACE: &str = "ns";
/// The zone tracker's ConfigMap (`-zone-tracker.config-map-name`'s default).
pub const RECORD: &str = "rollout-operator-zone-tracker";
pub const NOW: &str = "2026-01-01T12:00:00Z";
pub const ZONES: [&str; 3] = ["ingester-zone-a", "ingester-zone-b", "ingester-zone-c"];
/// Pods per zone at most: enough for every max-unavailable and downscale case, small enough to stay fast.
const MAX_PODS: usize = 8;

pub fn now() -> jiff::Timestamp {
    NOW.parse().expect("a valid time")
}

#[derive(Arbitrary, Debug, Clone)]
pub struct WorldSpec {
    pub zone_count: u8,
    pub zones: [ZoneSpec; 3],
    /// The `rollout-group` value; `None` is `ingester`.
    pub group: Option<Text>,
    pub record: Option<RecordSpec>,
    pub budget: Option<BudgetSpec>,
    pub parents: Vec<ParentSpec>,
}

/// A replica count: mostly small, but the API takes any int32 and so must every loop and allocation sized by one.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Count {
    Small(i8),
    Any(i32),
}

impl Count {
    pub fn get(self) -> i32 {
        match self {
            Count::Small(n) => i32::from(n),
            Count::Any(n) => n,
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub struct ZoneSpec {
    pub replicas: Option<Count>,
    pub status_replicas: Count,
    pub ready_replicas: Option<Count>,
    /// The update revision differs from the current one: a rollout is under way.
    pub rollout: bool,
    pub rolling_update: bool,
    pub no_service_name: bool,
    /// Labelled and annotated for the prepare-downscale webhook.
    pub prepare_downscale: bool,
    pub labels: Vec<(Key, Text)>,
    pub annotations: Vec<(Key, Text)>,
    pub pods: Vec<PodSpec>,
}

#[derive(Arbitrary, Debug, Clone)]
pub struct PodSpec {
    pub ordinal: u8,
    pub ready: bool,
    pub not_running: bool,
    pub terminating: bool,
    pub new_revision: bool,
    pub orphan: bool,
    /// Seconds before now the pod became ready (or not).
    pub since: u16,
    pub labels: Vec<(Key, Text)>,
    pub annotations: Vec<(Key, Text)>,
}

/// The zone tracker's ConfigMap: its entries and in-progress annotations.
#[derive(Arbitrary, Debug, Clone)]
pub struct RecordSpec {
    pub entries: Vec<(Text, Text)>,
    pub markers: Option<Text>,
    pub steps: Option<Text>,
    pub resource_version: Option<Text>,
}

/// A JSON value of a budget's field: the right type, or not.
#[derive(Arbitrary, Debug, Clone)]
pub enum Field {
    Str(Text),
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
    List(Vec<Text>),
}

impl Field {
    pub fn value(&self) -> Value {
        match self {
            Field::Str(t) => Value::String(t.get()),
            Field::Int(i) => json!(i),
            Field::Float(f) => json!(f),
            Field::Bool(b) => json!(b),
            Field::Null => Value::Null,
            Field::List(items) => Value::Array(items.iter().map(|t| Value::String(t.get())).collect()),
        }
    }
}

#[derive(Arbitrary, Debug, Clone)]
pub enum SelectorSpec {
    /// `matchLabels: {rollout-group: <group>}`.
    Group,
    Absent,
    Labels(Vec<(Key, Text)>),
    MatchLabels(Field),
    Selector(Field),
}

/// A ZoneAwarePodDisruptionBudget, valid or not.
#[derive(Arbitrary, Debug, Clone)]
pub struct BudgetSpec {
    pub name: Option<Text>,
    pub wrong_kind: Option<Text>,
    pub spec: Option<Field>,
    pub generation: Option<i64>,
    pub max_unavailable: Option<Field>,
    pub max_unavailable_percentage: Option<Field>,
    pub regex: Option<Field>,
    pub group: Option<Field>,
    pub delay: Option<Field>,
    pub selector: SelectorSpec,
}

impl BudgetSpec {
    pub fn object(&self, group: &str) -> Value {
        let mut spec = Map::new();
        let mut put = |key: &str, field: &Option<Field>| {
            if let Some(f) = field {
                spec.insert(key.to_string(), f.value());
            }
        };
        put("maxUnavailable", &self.max_unavailable);
        put("maxUnavailablePercentage", &self.max_unavailable_percentage);
        put("podNamePartitionRegex", &self.regex);
        put("podNameRegexGroup", &self.group);
        put("crossZoneEvictionDelay", &self.delay);
        match &self.selector {
            SelectorSpec::Group => {
                spec.insert("selector".into(), json!({"matchLabels": {"rollout-group": group}}));
            }
            SelectorSpec::Absent => {}
            SelectorSpec::Labels(labels) => {
                spec.insert("selector".into(), json!({"matchLabels": map(labels)}));
            }
            SelectorSpec::MatchLabels(f) => {
                spec.insert("selector".into(), json!({"matchLabels": f.value()}));
            }
            SelectorSpec::Selector(f) => {
                spec.insert("selector".into(), f.value());
            }
        }
        let name = self.name.as_ref().map_or_else(|| "ingester-rollout".to_string(), Text::get);
        let metadata = json!({"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}")});
        let kind = self.wrong_kind.as_ref().map_or_else(|| "ZoneAwarePodDisruptionBudget".to_string(), Text::get);
        custom_resource(&kind, metadata, self.generation, spec, self.spec.as_ref())
    }
}

/// A `rollout-operator.grafana.com/v1` object of `kind` with `metadata` (and `generation`, when given) and `spec`,
/// or `replaced` in place of the spec (a string, a list, null, ...).
pub fn custom_resource(
    kind: &str,
    mut metadata: Value,
    generation: Option<i64>,
    spec: Map<String, Value>,
    replaced: Option<&Field>,
) -> Value {
    if let Some(generation) = generation {
        metadata["generation"] = json!(generation);
    }
    let spec = replaced.map_or(Value::Object(spec), Field::value);
    json!({"apiVersion": "rollout-operator.grafana.com/v1", "kind": kind, "metadata": metadata, "spec": spec})
}

/// A Deployment or ReplicaSet a `/scale` request may name.
#[derive(Arbitrary, Debug, Clone)]
pub struct ParentSpec {
    pub replica_set: bool,
    pub name: Text,
    pub labels: Vec<(Key, Text)>,
}

impl WorldSpec {
    pub fn group(&self) -> String {
        self.group.as_ref().map_or_else(|| "ingester".to_string(), Text::get)
    }

    pub fn zones(&self) -> impl Iterator<Item = (&'static str, &ZoneSpec)> {
        let count = usize::from(self.zone_count % 3) + 1;
        ZONES.iter().copied().zip(self.zones.iter()).take(count)
    }

    /// The StatefulSet of zone `name`, as the API would return it (and as an admission request carries it).
    pub fn statefulset(&self, name: &str, zone: &ZoneSpec) -> Value {
        let group = self.group();
        let mut labels = Map::new();
        labels.insert("rollout-group".into(), json!(group));
        labels.insert("name".into(), json!(name));
        let mut annotations = Map::new();
        if zone.prepare_downscale {
            labels.insert(rollout_core::keys::PREPARE_DOWNSCALE.into(), json!("true"));
            annotations.insert(rollout_core::keys::PREPARE_DOWNSCALE_HTTP_PORT.into(), json!("8080"));
            annotations
                .insert(rollout_core::keys::PREPARE_DOWNSCALE_HTTP_PATH.into(), json!("ingester/prepare-shutdown"));
        }
        labels.extend(map(&zone.labels).into_iter().map(|(k, v)| (k, Value::String(v))));
        annotations.extend(map(&zone.annotations).into_iter().map(|(k, v)| (k, Value::String(v))));
        let strategy = if zone.rolling_update { "RollingUpdate" } else { "OnDelete" };
        let mut spec = json!({
            "selector": {"matchLabels": {"name": name}},
            "updateStrategy": {"type": strategy},
            "template": {"metadata": {"labels": {"name": name}}},
        });
        if let Some(replicas) = zone.replicas {
            spec["replicas"] = json!(replicas.get());
        }
        if !zone.no_service_name {
            spec["serviceName"] = json!(name);
        }
        let mut status = json!({
            "replicas": zone.status_replicas.get(),
            "currentRevision": "r1",
            "updateRevision": if zone.rollout { "r2" } else { "r1" },
            "observedGeneration": 1,
        });
        if let Some(ready) = zone.ready_replicas {
            status["readyReplicas"] = json!(ready.get());
        }
        json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"), "resourceVersion": "5",
                         "generation": 1, "labels": labels, "annotations": annotations},
            "spec": spec, "status": status,
        })
    }

    fn pod(&self, sts: &str, zone: &ZoneSpec, pod: &PodSpec) -> Value {
        let name = format!("{sts}-{}", usize::from(pod.ordinal) % MAX_PODS);
        let revision = if pod.new_revision && zone.rollout { "r2" } else { "r1" };
        let mut labels = Map::new();
        labels.insert("name".into(), json!(sts));
        labels.insert("rollout-group".into(), json!(self.group()));
        labels.insert("controller-revision-hash".into(), json!(revision));
        labels.extend(map(&pod.labels).into_iter().map(|(k, v)| (k, Value::String(v))));
        let since = now()
            .checked_sub(jiff::SignedDuration::from_secs(i64::from(pod.since)))
            .unwrap_or_else(|_| now())
            .to_string();
        let mut metadata = json!({"name": name, "namespace": NAMESPACE, "uid": format!("uid-{name}"),
            "resourceVersion": "3", "labels": labels, "annotations": map(&pod.annotations)});
        if !pod.orphan {
            metadata["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts,
                "uid": format!("uid-{sts}"), "controller": true}]);
        }
        if pod.terminating {
            metadata["deletionTimestamp"] = json!(since);
        }
        let running = if pod.not_running { json!({"waiting": {}}) } else { json!({"running": {"startedAt": since}}) };
        json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "status": {
                "phase": if pod.not_running { "Pending" } else { "Running" },
                "conditions": [{"type": "Ready", "status": if pod.ready { "True" } else { "False" },
                                "lastTransitionTime": since}],
                "containerStatuses": [{"name": "main", "ready": pod.ready, "restartCount": 0, "image": "i",
                                       "imageID": "", "state": running}],
            },
        })
    }

    /// The namespace's objects, as `plan`, `status` and `review` would load them from a dump.
    pub fn objects(&self) -> Objects {
        let mut objects = Objects::default();
        for (name, zone) in self.zones() {
            let sts = self.statefulset(name, zone);
            objects.statefulsets.push(serde_json::from_value(sts).expect("a StatefulSet"));
            let mut seen = std::collections::BTreeSet::new();
            for pod in zone.pods.iter().take(MAX_PODS) {
                if seen.insert(usize::from(pod.ordinal) % MAX_PODS) {
                    objects.pods.push(serde_json::from_value(self.pod(name, zone, pod)).expect("a Pod"));
                }
            }
        }
        if let Some(record) = &self.record {
            let data: Map<String, Value> =
                record.entries.iter().map(|(k, v)| (k.get(), Value::String(v.get()))).collect();
            let mut annotations = Map::new();
            if let Some(m) = &record.markers {
                annotations.insert(rollout_core::keys::DOWNSCALES_IN_PROGRESS.into(), json!(m.get()));
            }
            if let Some(s) = &record.steps {
                annotations.insert(rollout_core::keys::ROLLOUT_STEPS_IN_PROGRESS.into(), json!(s.get()));
            }
            let mut metadata = json!({"name": RECORD, "namespace": NAMESPACE, "annotations": annotations});
            if let Some(rv) = &record.resource_version {
                metadata["resourceVersion"] = json!(rv.get());
            }
            objects.others.push(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data}));
        }
        if let Some(budget) = &self.budget {
            objects.others.push(budget.object(&self.group()));
        }
        for parent in self.parents.iter().take(4) {
            let (kind, spec) = if parent.replica_set {
                ("ReplicaSet", json!({"selector": {}}))
            } else {
                ("Deployment", json!({"selector": {}, "template": {}}))
            };
            objects.others.push(json!({"apiVersion": "apps/v1", "kind": kind, "spec": spec,
                "metadata": {"name": parent.name.get(), "namespace": NAMESPACE, "labels": map(&parent.labels)}}));
        }
        objects
    }
}

/// Three ready zones of three pods each, labelled for prepare-downscale, with a 12 h min time between zone
/// downscales, a recorded downscale, a budget of one unavailable pod per zone and a labelled Deployment: the world
/// every raw request body is judged against.
pub fn standard_world() -> WorldSpec {
    let zone = |prepared: bool| ZoneSpec {
        replicas: Some(Count::Small(3)),
        status_replicas: Count::Small(3),
        ready_replicas: Some(Count::Small(3)),
        rollout: false,
        rolling_update: false,
        no_service_name: false,
        prepare_downscale: prepared,
        labels: Vec::new(),
        annotations: vec![(
            Key::Raw(rollout_core::keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE.into()),
            Text::Raw("12h".into()),
        )],
        pods: (0..3)
            .map(|ordinal| PodSpec {
                ordinal,
                ready: true,
                not_running: false,
                terminating: false,
                new_revision: false,
                orphan: false,
                since: 3600,
                labels: Vec::new(),
                annotations: Vec::new(),
            })
            .collect(),
    };
    WorldSpec {
        zone_count: 2,
        zones: [zone(true), zone(true), zone(false)],
        group: None,
        record: Some(RecordSpec {
            entries: vec![(
                Text::Raw("ingester-zone-c".into()),
                Text::Raw("{\"lastDownscaled\":\"2026-01-01T00:00:00Z\"}".into()),
            )],
            markers: None,
            steps: None,
            resource_version: Some(Text::Raw("7".into())),
        }),
        budget: Some(BudgetSpec {
            name: None,
            wrong_kind: None,
            spec: None,
            generation: Some(1),
            max_unavailable: Some(Field::Int(1)),
            max_unavailable_percentage: None,
            regex: None,
            group: None,
            delay: None,
            selector: SelectorSpec::Group,
        }),
        parents: vec![ParentSpec {
            replica_set: false,
            name: Text::Raw("querier".into()),
            labels: vec![(Key::Raw(rollout_core::keys::NO_DOWNSCALE.into()), Text::Raw("true".into()))],
        }],
    }
}
