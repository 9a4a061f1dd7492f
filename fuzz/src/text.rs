//! Values and keys for structure-aware inputs: either one the code treats specially (so the fuzzer reaches the
//! branch behind a valid duration, timestamp or label without having to spell it byte by byte) or any string.

use arbitrary::Arbitrary;
use rollout_core::keys;

/// An annotation, label or field value.
#[derive(Arbitrary, Debug, Clone)]
pub enum Text {
    Pick(u8),
    Raw(String),
}

/// Values some parser or decision accepts, and their near misses.
pub const VALUES: &[&str] = &[
    "",
    "true",
    "false",
    "True",
    "1",
    "0",
    "-1",
    "2",
    "3",
    "+3",
    "25%",
    "100%",
    "101%",
    "12h",
    "1h30m",
    "5m",
    "30s",
    "0s",
    "1.5h",
    "1d",
    "4h",
    "1y2w",
    "2026-01-01T00:00:00Z",
    "2026-01-01T11:59:00Z",
    "2026-01-01T12:00:05Z",
    "2025-12-31T23:00:00+01:00",
    "2026-01-01T12:00:00.5Z",
    "http://pod:8080/prepare-delayed-downscale",
    "https://user@[::1]:8443/x?y#z",
    "ingester",
    "ingester-zone-a",
    "ingester-zone-b",
    "ingester-zone-c",
    "ingester-zone-a-0",
    "ingester-zone-b-1",
    "StatefulSet",
    "Deployment",
    "ReplicaSet",
    "apps/v1",
    "v1",
    "apps/",
    "a/b/c",
    "autoscaling/v1",
    "8080",
    "ingester/prepare-shutdown",
    "/prepare",
    "99999999999",
    "2147483647",
    "ns",
    "r1",
    "r2",
    "Running",
    "Pending",
    "OnDelete",
    "RollingUpdate",
    "ingester-(zone-[a-c])-.*",
    "ingester-zone-[a-c]-([0-9]+)",
    "(a)(b)",
    "([",
    "{\"lastDownscaled\":\"2026-01-01T00:00:00Z\"}",
    "{\"LASTDOWNSCALED\":\"2026-01-01T11:00:00Z\"}",
    "{\"ingester-zone-a\":{\"group\":\"ingester\",\"until\":\"2026-01-01T12:05:00Z\"}}",
    "{\"ingester\":{\"until\":\"2026-01-01T12:05:00Z\"}}",
    "2026-01-01T12:00:10Z ingester-zone-a-0 uid-ingester-zone-a-0",
    "http://prometheus.monitoring:9090",
    "https://prometheus/prefix/",
    "prometheus:9090",
    "Pause",
    "Warn",
    "Disabled",
    "10m",
    "1ms",
    "-5m",
    "sum(rate(errors_total{",
    "}[",
    "])) / sum(rate(requests_total{",
    "bool ",
    " < 2 * ",
    "${range}",
    "${targetMatchers}",
];

impl Text {
    pub fn get(&self) -> String {
        match self {
            Text::Pick(i) => VALUES[usize::from(*i) % VALUES.len()].to_string(),
            Text::Raw(s) => s.clone(),
        }
    }
}

/// An annotation or label key.
#[derive(Arbitrary, Debug, Clone)]
pub enum Key {
    Known(u8),
    Raw(String),
}

/// Every key the operator reads from StatefulSets, pods and their parents.
pub const KEYS: &[&str] = &[
    keys::ROLLOUT_GROUP,
    keys::CONTROLLER_REVISION_HASH,
    keys::ROLLOUT_MAX_UNAVAILABLE,
    keys::ROLLOUT_PAUSED,
    keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
    keys::LAST_DOWNSCALE,
    keys::ROLLOUT_DOWNSCALE_LEADER,
    keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY,
    keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME,
    keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND,
    keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION,
    keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK,
    keys::ROLLOUT_DELAYED_DOWNSCALE,
    keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL,
    keys::ROLLOUT_FORCE_REPLICAS,
    keys::NO_DOWNSCALE,
    keys::PREPARE_DOWNSCALE,
    keys::PREPARE_DOWNSCALE_HTTP_PATH,
    keys::PREPARE_DOWNSCALE_HTTP_PORT,
    keys::DOWNSCALES_IN_PROGRESS,
    keys::ROLLOUT_STEPS_IN_PROGRESS,
    keys::READY_TIME,
    keys::EVICTION_INTENT,
    "grafana.com/eviction-intent.uid-1",
    "grafana.com/eviction-intent.rollout-operator",
    "name",
];

impl Key {
    pub fn get(&self) -> String {
        match self {
            Key::Known(i) => KEYS[usize::from(*i) % KEYS.len()].to_string(),
            Key::Raw(s) => s.clone(),
        }
    }
}

/// A small map of keys to values.
pub fn map(pairs: &[(Key, Text)]) -> std::collections::BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.get(), v.get())).collect()
}
