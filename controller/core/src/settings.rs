//! Typed settings of a StatefulSet, parsed once from its labels and annotations when the view is built: rollout
//! (max unavailable, pause), downscale coordination (min time between zones, last downscale) and scaling (leader,
//! mirror, delayed downscale, force replicas). Nothing downstream parses an annotation again.
//!
//! Invalid values never stop a rollout silently and never make it less safe: each falls back to the reference's
//! conservative default and the error is kept, naming the object, the key and the value, so the planner can report it.

use crate::duration::parse_go_duration;
use crate::keys;
use crate::prom_duration::parse_prom_duration;
use jiff::Timestamp;
use std::collections::BTreeMap;
use std::time::Duration;
use thiserror::Error;

/// An annotation (or label) value that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("StatefulSet {object}: invalid {key} value {value:?}: {reason}")]
pub struct AnnotationError {
    pub object: String,
    pub key: &'static str,
    pub value: String,
    pub reason: String,
}

/// `rollout-max-unavailable`: an absolute count or a percentage of `spec.replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxUnavailable {
    Count(u32),
    Percent(u32),
}

impl MaxUnavailable {
    /// Pods that may be unavailable at once. A percentage is `floor(replicas * pct / 100)`, at least 1.
    pub fn resolve(self, spec_replicas: u32) -> u32 {
        match self {
            MaxUnavailable::Count(n) => n,
            MaxUnavailable::Percent(p) => ((u64::from(spec_replicas) * u64::from(p) / 100) as u32).max(1),
        }
    }
}

impl Default for MaxUnavailable {
    fn default() -> Self {
        MaxUnavailable::Count(1)
    }
}

/// Everything the rollout planner reads from a StatefulSet's annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RolloutSettings {
    pub max_unavailable: MaxUnavailable,
    pub paused: bool,
    /// Values that were present but unusable; the defaults above were used instead.
    pub errors: Vec<AnnotationError>,
}

impl RolloutSettings {
    pub fn from_annotations(object: &str, annotations: &BTreeMap<String, String>) -> Self {
        let mut settings = RolloutSettings::default();
        if let Some(raw) = annotations.get(keys::ROLLOUT_MAX_UNAVAILABLE) {
            match parse_max_unavailable(raw) {
                Ok(v) => settings.max_unavailable = v,
                Err(reason) => settings.errors.push(AnnotationError {
                    object: object.to_string(),
                    key: keys::ROLLOUT_MAX_UNAVAILABLE,
                    value: raw.clone(),
                    reason: format!("{reason}; using 1"),
                }),
            }
        }
        // Only the exact string "true" pauses, as in the reference ("True" does not).
        settings.paused = annotations.get(keys::ROLLOUT_PAUSED).is_some_and(|v| v == "true");
        settings
    }
}

/// Parses `"3"` or `"25%"` (surrounding whitespace ignored) as the reference does, with Go's `strconv.Atoi`: an
/// optional sign (`"+3"` is 3), decimal digits, within 64 bits. Zero, negatives, non-integers and percentages
/// above 100 are rejected. A count beyond `u32` (which the reference takes as is) allows every pod at once either
/// way, so it is kept at `u32::MAX`.
pub fn parse_max_unavailable(raw: &str) -> Result<MaxUnavailable, &'static str> {
    const EXPECTED: &str = "expected positive integer or percentage as integer%";
    let s = raw.trim();
    let (number, percent) = match s.strip_suffix('%') {
        Some(d) => (d, true),
        None => (s, false),
    };
    // Rust's integer parse takes the same forms as Atoi: one optional sign, then at least one ASCII digit.
    let n: i64 = number.parse().map_err(|_| EXPECTED)?;
    match (percent, n) {
        (_, ..=0) => Err(EXPECTED),
        (true, 101..) => Err("percentage must be at most 100%"),
        (true, p) => Ok(MaxUnavailable::Percent(p as u32)),
        (false, n) => Ok(MaxUnavailable::Count(u32::try_from(n).unwrap_or(u32::MAX))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn max_unavailable_values() {
        assert_eq!(parse_max_unavailable("3"), Ok(MaxUnavailable::Count(3)));
        assert_eq!(parse_max_unavailable(" 25% "), Ok(MaxUnavailable::Percent(25)));
        assert_eq!(parse_max_unavailable("100%"), Ok(MaxUnavailable::Percent(100)));
        for bad in ["0", "-1", "xxx", "1.5", "0%", "101%", "%", "", "2.5%", "+0"] {
            assert!(parse_max_unavailable(bad).is_err(), "{bad:?} should be rejected");
        }
    }

    #[test]
    fn percentage_resolves_with_floor_and_minimum_one() {
        assert_eq!(MaxUnavailable::Percent(25).resolve(10), 2);
        assert_eq!(MaxUnavailable::Percent(25).resolve(3), 1);
        assert_eq!(MaxUnavailable::Percent(50).resolve(0), 1);
        assert_eq!(MaxUnavailable::Percent(100).resolve(7), 7);
        assert_eq!(MaxUnavailable::Count(4).resolve(2), 4);
    }

    #[test]
    fn invalid_value_falls_back_to_one_and_names_object_key_and_value() {
        let s =
            RolloutSettings::from_annotations("ingester-zone-a", &annotations(&[("rollout-max-unavailable", "xxx")]));
        assert_eq!(s.max_unavailable, MaxUnavailable::Count(1));
        let msg = s.errors[0].to_string();
        assert!(
            msg.contains("ingester-zone-a") && msg.contains("rollout-max-unavailable") && msg.contains("\"xxx\""),
            "{msg}"
        );
    }

    #[test]
    fn paused_only_when_exactly_true() {
        assert!(RolloutSettings::from_annotations("s", &annotations(&[(keys::ROLLOUT_PAUSED, "true")])).paused);
        assert!(!RolloutSettings::from_annotations("s", &annotations(&[(keys::ROLLOUT_PAUSED, "True")])).paused);
        assert!(!RolloutSettings::from_annotations("s", &annotations(&[])).paused);
    }
}

/// Downscale settings of one StatefulSet, parsed when its view is built. Unusable values are kept as errors: a
/// downscale that depends on them is refused with that error rather than allowed on a guess.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownscaleSettings {
    /// `grafana.com/min-time-between-zones-downscale`: annotation if present, else label.
    pub min_time_between_zones: Option<Result<Duration, AnnotationError>>,
    /// `grafana.com/last-downscale` annotation.
    pub last_downscale: Option<Result<Timestamp, AnnotationError>>,
}

impl DownscaleSettings {
    pub fn from_metadata(
        object: &str,
        labels: &BTreeMap<String, String>,
        annotations: &BTreeMap<String, String>,
    ) -> Self {
        let invalid = |key: &'static str, value: &str, reason: String| AnnotationError {
            object: object.to_string(),
            key,
            value: value.to_string(),
            reason,
        };
        let min_time_raw = annotations
            .get(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE)
            .or_else(|| labels.get(keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE));
        let min_time_between_zones = min_time_raw.map(|raw| {
            parse_go_duration(raw.trim()).map_err(|e| {
                invalid(
                    keys::MIN_TIME_BETWEEN_ZONES_DOWNSCALE,
                    raw,
                    format!("{}; expected a Go duration such as 12h", e.reason),
                )
            })
        });
        let last_downscale = annotations
            .get(keys::LAST_DOWNSCALE)
            .map(|raw| parse_timestamp(raw).map_err(|e| invalid(keys::LAST_DOWNSCALE, raw, e.to_string())));
        DownscaleSettings { min_time_between_zones, last_downscale }
    }
}

/// A time that is not RFC 3339 with an offset.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("expected an RFC 3339 time such as 2024-05-01T12:00:00Z: {reason}")]
pub struct TimestampError {
    /// The value as given.
    pub raw: String,
    /// What the time parser found wrong with it.
    pub reason: String,
}

/// Parses an RFC 3339 timestamp as Go's `time.RFC3339` does (offset required).
pub fn parse_timestamp(raw: &str) -> Result<Timestamp, TimestampError> {
    raw.trim().parse::<Timestamp>().map_err(|e| TimestampError { raw: raw.to_string(), reason: e.to_string() })
}

/// Where a mirror StatefulSet reads its desired replicas from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorSettings {
    pub name: String,
    pub kind: String,
    /// API group of the reference (`""` = core); every version of the group is tried.
    pub api_group: String,
    /// Write the StatefulSet's replicas back into the reference's `status.replicas`.
    pub write_back: bool,
}

/// A pod URL split where the host is replaced: `<scheme>://[<userinfo>@]<host>[:<port>]<rest>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUrl {
    pub scheme: String,
    pub userinfo: Option<String>,
    pub port: Option<u16>,
    /// Path, query and fragment, as written.
    pub rest: String,
}

/// Why a delayed-downscale URL cannot be used to call pods.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PodUrlError {
    #[error("expected an absolute URL such as http://pod:8080/path")]
    NotAbsolute,
    #[error("invalid scheme {0:?}")]
    Scheme(String),
    #[error("URL has no host")]
    NoHost,
    #[error("URL contains whitespace")]
    Whitespace,
    #[error("invalid port {0:?}")]
    Port(String),
}

impl PodUrl {
    pub fn parse(raw: &str) -> Result<Self, PodUrlError> {
        let raw = raw.trim();
        let (scheme, after) = raw.split_once("://").ok_or(PodUrlError::NotAbsolute)?;
        if scheme.is_empty() || !scheme.bytes().all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(&c)) {
            return Err(PodUrlError::Scheme(scheme.to_string()));
        }
        let end = after.find(['/', '?', '#']).unwrap_or(after.len());
        let (authority, rest) = after.split_at(end);
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u.to_string()), h),
            None => (None, authority),
        };
        // An IPv6 literal keeps its colons inside brackets.
        let port_sep = match hostport.rfind(']') {
            Some(close) => hostport[close..].find(':').map(|i| close + i),
            None => hostport.rfind(':'),
        };
        let (host, port) = match port_sep {
            Some(i) => (&hostport[..i], Some(&hostport[i + 1..])),
            None => (hostport, None),
        };
        if host.is_empty() {
            return Err(PodUrlError::NoHost);
        }
        if host.bytes().any(|c| c.is_ascii_whitespace()) || rest.bytes().any(|c| c.is_ascii_whitespace()) {
            return Err(PodUrlError::Whitespace);
        }
        let port = match port {
            None | Some("") => None,
            Some(p) => Some(p.parse::<u16>().map_err(|_| PodUrlError::Port(p.to_string()))?),
        };
        Ok(PodUrl { scheme: scheme.to_string(), userinfo, port, rest: rest.to_string() })
    }

    /// The URL with its host replaced by `host`, keeping scheme, user info, an explicit port and the rest.
    pub fn with_host(&self, host: &str) -> String {
        let mut url = format!("{}://", self.scheme);
        if let Some(u) = &self.userinfo {
            url.push_str(u);
            url.push('@');
        }
        url.push_str(host);
        if let Some(p) = self.port {
            url.push_str(&format!(":{p}"));
        }
        url.push_str(&self.rest);
        url
    }
}

/// Delayed downscale: pods are asked to prepare and removed only once they have been preparing for `delay`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelayedDownscaleSettings {
    pub delay: Duration,
    pub url: PodUrl,
}

/// Everything scaling reads from a StatefulSet's annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScalingSettings {
    /// `grafana.com/rollout-downscale-leader`: the StatefulSet this one follows.
    pub leader: Option<String>,
    pub upscale_only_when_leader_ready: bool,
    /// Mirror mode: set iff both the name and the kind annotations are non-empty. `Err` when the API version is
    /// unusable (the StatefulSet is then not scaled).
    pub mirror: Option<Result<MirrorSettings, AnnotationError>>,
    /// Set iff both delayed-downscale annotations are non-empty and the delay is not `0`. `Err` when unusable
    /// (a mirror StatefulSet is then not scaled).
    pub delayed_downscale: Option<Result<DelayedDownscaleSettings, AnnotationError>>,
    /// `grafana.com/rollout-force-replicas`, when a valid int32 >= 0 (anything else is ignored, as in the reference).
    pub force_replicas: Option<u32>,
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(raw: &str) -> Option<bool> {
    match raw {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// An `apiVersion` with more than one `/`, which apimachinery refuses.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unexpected GroupVersion string: {api_version}")]
pub struct ApiVersionError {
    pub api_version: String,
}

/// API group of an `apiVersion`, as apimachinery's `schema.ParseGroupVersion` (which the reference calls) reads it:
/// without a `/` it is a version of the core group (`""`); with one, the group is what comes before it, whatever
/// follows (`group/`, with no version, is accepted: only the group is used); more than one is an error.
pub fn api_group_of(api_version: &str) -> Result<String, ApiVersionError> {
    match api_version.split_once('/') {
        Some((_, version)) if version.contains('/') => Err(ApiVersionError { api_version: api_version.to_string() }),
        Some((group, _)) => Ok(group.to_string()),
        None => Ok(String::new()),
    }
}

impl ScalingSettings {
    pub fn from_annotations(object: &str, annotations: &BTreeMap<String, String>) -> Self {
        let get = |key: &str| annotations.get(key).map(|v| v.trim()).filter(|v| !v.is_empty());
        let invalid = |key: &'static str, value: &str, reason: String| AnnotationError {
            object: object.to_string(),
            key,
            value: value.to_string(),
            reason,
        };
        let mirror =
            match (get(keys::MIRROR_REPLICAS_FROM_RESOURCE_NAME), get(keys::MIRROR_REPLICAS_FROM_RESOURCE_KIND)) {
                (Some(name), Some(kind)) => {
                    let api_version = get(keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION).unwrap_or("");
                    Some(
                        api_group_of(api_version)
                            .map_err(|e| {
                                invalid(
                                    keys::MIRROR_REPLICAS_FROM_RESOURCE_API_VERSION,
                                    api_version,
                                    format!("invalid API version: {e}"),
                                )
                            })
                            .map(|api_group| MirrorSettings {
                                name: name.to_string(),
                                kind: kind.to_string(),
                                api_group,
                                // Absent: write back. Unparsable: don't (as in the reference).
                                write_back: annotations
                                    .get(keys::MIRROR_REPLICAS_FROM_RESOURCE_WRITE_BACK)
                                    .is_none_or(|v| parse_go_bool(v).unwrap_or(false)),
                            }),
                    )
                }
                _ => None,
            };
        let delayed_downscale =
            match (get(keys::ROLLOUT_DELAYED_DOWNSCALE), get(keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL)) {
                (Some(delay), Some(url)) => match parse_prom_duration(delay) {
                    Err(e) => Some(Err(invalid(
                        keys::ROLLOUT_DELAYED_DOWNSCALE,
                        delay,
                        format!("failed to parse as duration: {e}; expected a Prometheus duration such as 4h or 1d"),
                    ))),
                    Ok(d) if d.is_zero() => None,
                    Ok(delay) => {
                        Some(PodUrl::parse(url).map(|url| DelayedDownscaleSettings { delay, url }).map_err(|e| {
                            invalid(
                                keys::ROLLOUT_PREPARE_DELAYED_DOWNSCALE_URL,
                                url,
                                format!("failed to parse as URL: {e}"),
                            )
                        }))
                    }
                },
                _ => None,
            };
        let force_replicas =
            get(keys::ROLLOUT_FORCE_REPLICAS).and_then(|v| v.parse::<i32>().ok()).and_then(|n| u32::try_from(n).ok());
        ScalingSettings {
            leader: get(keys::ROLLOUT_DOWNSCALE_LEADER).map(str::to_string),
            upscale_only_when_leader_ready: annotations
                .get(keys::ROLLOUT_UPSCALE_ONLY_WHEN_LEADER_READY)
                .is_some_and(|v| v == "true"),
            mirror,
            delayed_downscale,
            force_replicas,
        }
    }
}

/// The forms Go's `strconv.Atoi` adds (kept apart from the tests above so the lines of the code they test stay put
/// for the mutation run's names).
#[cfg(test)]
mod atoi_forms {
    use super::*;

    #[test]
    fn max_unavailable_is_read_as_go_reads_it() {
        assert_eq!(parse_max_unavailable("+3"), Ok(MaxUnavailable::Count(3)));
        assert_eq!(parse_max_unavailable(" +40% "), Ok(MaxUnavailable::Percent(40)));
        assert_eq!(parse_max_unavailable("99999999999"), Ok(MaxUnavailable::Count(u32::MAX)));
        for bad in ["-0", "-5%", "150%", "+", "++1", "+-1", "1 0", "99999999999999999999", "0x10"] {
            assert!(parse_max_unavailable(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
