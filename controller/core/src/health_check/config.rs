//! A RolloutHealthCheck: the resource as written (serde types with the CRD's defaults and enums) and as the operator
//! uses it once validated ([`HealthCheckConfig`]). Validation is what the validating webhook refuses: the first
//! problem found, with a message that names the field.
//!
//! Must not: read the cluster or a clock. The shell feeds objects from its watch (or a dump) into [`parse`].

use crate::duration::parse_go_duration;
use crate::prom_duration::parse_prom_duration;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use thiserror::Error;

/// `kind` of the object.
pub const KIND: &str = "RolloutHealthCheck";
/// API group, version, plural and short name of the CRD.
pub const GROUP: &str = "rollout-operator.grafana.com";
pub const VERSION: &str = "v1";
pub const PLURAL: &str = "rollouthealthchecks";
pub const SHORT_NAME: &str = "rhc";

/// Placeholders the queries may contain.
pub const TARGET_MATCHERS: &str = "${targetMatchers}";
pub const RANGE: &str = "${range}";
pub const CURRENT: &str = "${current}";
pub const BASELINE: &str = "${baseline}";
const QUERY_PLACEHOLDERS: [&str; 2] = [TARGET_MATCHERS, RANGE];
const SUCCESS_PLACEHOLDERS: [&str; 2] = [CURRENT, BASELINE];

/// What a check's failure (or error) or missing data does to the rollout.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Policy {
    /// The next zone does not start.
    #[default]
    Pause,
    /// A Warning Event, and the next zone starts.
    Warn,
    /// Ignored.
    Disabled,
}

impl Policy {
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Pause => "Pause",
            Policy::Warn => "Warn",
            Policy::Disabled => "Disabled",
        }
    }
}

/// `spec.selector`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorSpec {
    #[serde(default)]
    pub match_labels: Option<BTreeMap<String, String>>,
}

/// One entry of `spec.checks`, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckSpec {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub query: String,
    #[serde(default)]
    pub success_query: String,
    #[serde(default = "default_current_range")]
    pub current_range: String,
    #[serde(default = "default_baseline_range")]
    pub baseline_range: String,
    #[serde(default = "default_query_timeout")]
    pub query_timeout: String,
    #[serde(default = "default_query_retries")]
    pub query_retries: i64,
    #[serde(default)]
    pub on_failure: Policy,
    #[serde(default)]
    pub on_no_data: Policy,
    #[serde(default)]
    pub disabled: bool,
}

fn default_current_range() -> String {
    "5m".to_string()
}
fn default_baseline_range() -> String {
    "10m".to_string()
}
fn default_query_timeout() -> String {
    "10s".to_string()
}
fn default_query_retries() -> i64 {
    3
}

/// `spec`, as written.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheckSpec {
    #[serde(default)]
    pub selector: Option<SelectorSpec>,
    #[serde(default, rename = "prometheusURL")]
    pub prometheus_url: String,
    #[serde(default)]
    pub checks: Vec<CheckSpec>,
}

/// Why an object is not a usable RolloutHealthCheck.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("unexpected object kind {0:?}: expecting RolloutHealthCheck")]
    WrongKind(String),
    #[error("spec is missing")]
    NoSpec,
    /// A field of the wrong type or an unknown enum value (`path` names it, `.` for the spec itself).
    #[error("spec{path}: {message}")]
    Malformed { path: String, message: String },
    #[error("spec.selector.matchLabels is required and must name at least one label")]
    NoSelector,
    #[error("spec.prometheusURL is required")]
    NoPrometheusUrl,
    #[error("spec.prometheusURL {0:?} is not an absolute http or https URL with a host")]
    BadPrometheusUrl(String),
    #[error("spec.checks must have at least one check")]
    NoChecks,
    #[error("spec.checks[{index}].name is required")]
    NoName { index: usize },
    #[error("spec.checks[{index}].name {name:?} is used by an earlier check")]
    DuplicateName { index: usize, name: String },
    #[error("spec.checks[{index}] ({name}): {field} is required")]
    EmptyQuery { index: usize, name: String, field: &'static str },
    #[error("spec.checks[{index}] ({name}): query must contain {placeholder}")]
    MissingPlaceholder { index: usize, name: String, placeholder: &'static str },
    #[error("spec.checks[{index}] ({name}): {field} has the unknown placeholder {placeholder} (allowed: {allowed})")]
    UnknownPlaceholder { index: usize, name: String, field: &'static str, placeholder: String, allowed: String },
    #[error("spec.checks[{index}] ({name}): {field} {value:?} is not a positive duration: {reason}")]
    BadDuration { index: usize, name: String, field: &'static str, value: String, reason: String },
    #[error("spec.checks[{index}] ({name}): queryRetries must be >= 0, got {value}")]
    NegativeRetries { index: usize, name: String, value: i64 },
}

/// One check, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub name: String,
    pub query: String,
    pub success_query: String,
    /// `${range}` of the current side, as written (a valid Prometheus duration), and its length.
    pub current_range: String,
    pub current_range_length: Duration,
    pub baseline_range: String,
    pub baseline_range_length: Duration,
    pub query_timeout: Duration,
    /// Attempts after the first one, per query.
    pub query_retries: u32,
    pub on_failure: Policy,
    pub on_no_data: Policy,
    pub disabled: bool,
}

impl Check {
    /// Whether evaluating the check can change anything: disabled checks, and checks whose every outcome is
    /// ignored, are not queried.
    pub fn is_active(&self) -> bool {
        !self.disabled && (self.on_failure != Policy::Disabled || self.on_no_data != Policy::Disabled)
    }

    /// Whether the check can hold a rollout back (one of its policies is `Pause`).
    pub fn can_pause(&self) -> bool {
        !self.disabled && (self.on_failure == Policy::Pause || self.on_no_data == Policy::Pause)
    }
}

/// A RolloutHealthCheck, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthCheckConfig {
    /// `metadata.name`: what `grafana.com/rollout-health-check` names.
    pub name: String,
    /// `metadata.generation` (0 if absent): a new one invalidates evaluations made with the old.
    pub generation: i64,
    pub match_labels: BTreeMap<String, String>,
    pub prometheus_url: String,
    pub checks: Vec<Check>,
}

impl HealthCheckConfig {
    /// Whether the resource may gate a StatefulSet with these labels.
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.match_labels.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// How long the candidate side must have served before the gate judges it: the longest `currentRange` of the
    /// checks that can pause (a shorter wait would judge a window reaching back before the zone finished). Zero when
    /// no check can pause: the gate then only warns and holds nothing back.
    pub fn soak(&self) -> Duration {
        self.checks.iter().filter(|c| c.can_pause()).map(|c| c.current_range_length).max().unwrap_or_default()
    }

    /// Whether the gate can hold a rollout back at all.
    pub fn can_pause(&self) -> bool {
        self.checks.iter().any(Check::can_pause)
    }
}

/// Parses and validates an object (the first problem wins).
pub fn parse(object: &Value) -> Result<HealthCheckConfig, ConfigError> {
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or_default();
    if kind != KIND {
        return Err(ConfigError::WrongKind(kind.to_string()));
    }
    let metadata = object.get("metadata");
    let name = metadata.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default().to_string();
    let generation = metadata.and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
    let spec = match object.get("spec") {
        None | Some(Value::Null) => return Err(ConfigError::NoSpec),
        Some(spec) => spec,
    };
    let spec: HealthCheckSpec = serde_path_to_error::deserialize(spec).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { format!(".{path}") };
        ConfigError::Malformed { path, message: e.inner().to_string() }
    })?;
    validate(name, generation, &spec)
}

/// Validates a spec already read.
pub fn validate(name: String, generation: i64, spec: &HealthCheckSpec) -> Result<HealthCheckConfig, ConfigError> {
    let match_labels = spec.selector.as_ref().and_then(|s| s.match_labels.clone()).unwrap_or_default();
    if match_labels.is_empty() {
        return Err(ConfigError::NoSelector);
    }
    let url = spec.prometheus_url.trim();
    if url.is_empty() {
        return Err(ConfigError::NoPrometheusUrl);
    }
    if !is_http_url(url) {
        return Err(ConfigError::BadPrometheusUrl(url.to_string()));
    }
    if spec.checks.is_empty() {
        return Err(ConfigError::NoChecks);
    }
    let mut names = BTreeSet::new();
    let mut checks = Vec::with_capacity(spec.checks.len());
    for (index, c) in spec.checks.iter().enumerate() {
        checks.push(validate_check(index, c, &mut names)?);
    }
    Ok(HealthCheckConfig { name, generation, match_labels, prometheus_url: url.to_string(), checks })
}

fn validate_check(index: usize, c: &CheckSpec, names: &mut BTreeSet<String>) -> Result<Check, ConfigError> {
    if c.name.trim().is_empty() {
        return Err(ConfigError::NoName { index });
    }
    if !names.insert(c.name.clone()) {
        return Err(ConfigError::DuplicateName { index, name: c.name.clone() });
    }
    let name = || c.name.clone();
    for (field, text) in [("query", &c.query), ("successQuery", &c.success_query)] {
        if text.trim().is_empty() {
            return Err(ConfigError::EmptyQuery { index, name: name(), field });
        }
    }
    for placeholder in QUERY_PLACEHOLDERS {
        if !c.query.contains(placeholder) {
            return Err(ConfigError::MissingPlaceholder { index, name: name(), placeholder });
        }
    }
    for (field, text, allowed) in
        [("query", &c.query, &QUERY_PLACEHOLDERS), ("successQuery", &c.success_query, &SUCCESS_PLACEHOLDERS)]
    {
        if let Some(placeholder) = placeholders(text).into_iter().find(|p| !allowed.contains(&p.as_str())) {
            let allowed = allowed.join(", ");
            return Err(ConfigError::UnknownPlaceholder { index, name: name(), field, placeholder, allowed });
        }
    }
    let range = |field: &'static str, value: &str| {
        let bad =
            |reason: String| ConfigError::BadDuration { index, name: name(), field, value: value.to_string(), reason };
        match parse_prom_duration(value) {
            Ok(d) if d.is_zero() => Err(bad("must be more than 0".to_string())),
            Ok(d) => Ok(d),
            Err(e) => Err(bad(e.to_string())),
        }
    };
    let current_range_length = range("currentRange", &c.current_range)?;
    let baseline_range_length = range("baselineRange", &c.baseline_range)?;
    let query_timeout = match parse_go_duration(&c.query_timeout) {
        Ok(d) if !d.is_zero() => d,
        other => {
            let reason = match other {
                Err(e) => e.to_string(),
                Ok(_) => "must be more than 0".to_string(),
            };
            let value = c.query_timeout.clone();
            return Err(ConfigError::BadDuration { index, name: name(), field: "queryTimeout", value, reason });
        }
    };
    let query_retries = u32::try_from(c.query_retries.max(0)).unwrap_or(u32::MAX);
    if c.query_retries < 0 {
        return Err(ConfigError::NegativeRetries { index, name: name(), value: c.query_retries });
    }
    Ok(Check {
        name: c.name.clone(),
        query: c.query.clone(),
        success_query: c.success_query.clone(),
        current_range: c.current_range.clone(),
        current_range_length,
        baseline_range: c.baseline_range.clone(),
        baseline_range_length,
        query_timeout,
        query_retries,
        on_failure: c.on_failure,
        on_no_data: c.on_no_data,
        disabled: c.disabled,
    })
}

/// The `${...}` placeholders of a query, in order.
fn placeholders(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let after = &rest[start..];
        match after.find('}') {
            Some(end) => {
                found.push(after[..=end].to_string());
                rest = &after[end + 1..];
            }
            None => {
                found.push(after.to_string());
                break;
            }
        }
    }
    found
}

/// `http://host[:port][/path]` or `https://...`, with a non-empty host, a numeric port if any, no whitespace.
fn is_http_url(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://")) else {
        return false;
    };
    if url.chars().any(char::is_whitespace) {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let (host, port) = match host_port.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((host, "")) => (host, None),
            Some((host, after)) => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return false,
            },
            None => return false,
        },
        None => match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        },
    };
    !host.is_empty() && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}
