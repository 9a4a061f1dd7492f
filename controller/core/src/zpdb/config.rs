//! A ZoneAwarePodDisruptionBudget's configuration: parsed from the object as generic JSON with the reference's
//! checks, in its order and with its messages (reference 5.2); the set of budgets the operator knows, kept by the
//! generation rules of the reference's cache (5.3); and which budget covers a pod.
//!
//! Must not: read the cluster or a clock. The shell feeds objects from its watch (or from a dump) into [`Budgets`];
//! the eviction flow reads a snapshot of them.

use crate::duration::{DurationError, parse_go_duration};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use thiserror::Error;

/// `kind` of the object.
pub const KIND: &str = "ZoneAwarePodDisruptionBudget";
/// API group, version and plural of the CRD.
pub const GROUP: &str = "rollout-operator.grafana.com";
pub const VERSION: &str = "v1";
pub const PLURAL: &str = "zoneawarepoddisruptionbudgets";

/// Why an object is not a valid budget. The messages are the reference's, verbatim (users and alerts match them),
/// except [`ConfigError::GroupNotPositive`], which the reference does not check.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    #[error("no spec found in unstructured object")]
    NoSpec,
    /// `spec` is there but is not an object.
    #[error(".spec accessor error: {value} is of the type {go_type}, expected map[string]interface{{}}")]
    SpecNotObject { value: String, go_type: &'static str },
    #[error("unexpected object kind - expecting ZoneAwarePodDisruptionBudget")]
    WrongKind,
    #[error("invalid value: only one of maxUnavailable or maxUnavailablePercentage may be set")]
    BothMaxUnavailable,
    /// A field that must be an integer (or a string, for `crossZoneEvictionDelay`) is not one.
    #[error("failed to extract value from config field {field}")]
    NotExtractable { field: &'static str },
    #[error("invalid value: max unavailable must be 0 <= val, got {0}")]
    NegativeMaxUnavailable(i64),
    #[error("invalid value: max unavailable percentage must be 0 <= val <= 100, got {0}")]
    PercentageOutOfRange(i64),
    #[error("failed to extract regex value from config field podNamePartitionRegex")]
    RegexNotString,
    #[error("failed to extract group value from config field podNameRegexGroup")]
    GroupNotInteger,
    #[error("invalid value: regex is not valid, got {0}")]
    InvalidRegex(RegexProblem),
    /// Group 0 would be the whole pod name and a negative group does not exist (the CRD's `minimum: 1`; the
    /// reference crashes on a negative one).
    #[error("invalid value: podNameRegexGroup must be >= 1, got {0}")]
    GroupNotPositive(i64),
    #[error("invalid value: selector is not valid, got {0}")]
    InvalidSelector(String),
    #[error("invalid value: selector is not found")]
    NoSelector,
    #[error("invalid value: crossZoneEvictionDelay is not a valid duration, got {0}")]
    InvalidDelay(String),
    #[error("invalid value: crossZoneEvictionDelay must be >= 0, got {0}")]
    NegativeDelay(String),
    #[error("invalid value: crossZoneEvictionDelay requires podNamePartitionRegex to be set")]
    DelayWithoutRegex,
    #[error("invalid value: max unavailable percentage can not be used with partition awareness")]
    PercentageWithPartition,
}

/// Why a partition regex is not usable (inside [`ConfigError::InvalidRegex`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RegexProblem {
    #[error("error parsing regexp: {0}")]
    Syntax(String),
    #[error("regular expression requires at least one subexpression")]
    NoSubexpression,
    #[error("regular expression has multiple subexpressions and requires podNameRegexGroup to be set")]
    MultipleWithoutGroup,
    #[error("regular expression subexpression index out of range")]
    GroupOutOfRange,
}

/// Partition mode: which capture group of the (anchored) regex names a pod's partition.
#[derive(Debug, Clone)]
pub struct PartitionRule {
    /// The regex as written in `podNamePartitionRegex`.
    pub pattern: String,
    /// 1-based capture group.
    pub group: usize,
    /// `^(?:<pattern>)$`: the whole pod name must match.
    anchored: Regex,
}

impl PartialEq for PartitionRule {
    fn eq(&self, other: &Self) -> bool {
        self.pattern == other.pattern && self.group == other.group
    }
}

impl PartitionRule {
    /// Compiles `pattern` with the reference's checks; `group` is `podNameRegexGroup` if given.
    pub fn new(pattern: &str, group: Option<i64>) -> Result<Self, ConfigError> {
        // Go anchors by concatenation (`^` + regex + `$`); a group keeps alternations inside the anchors.
        let anchored = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| ConfigError::InvalidRegex(RegexProblem::Syntax(syntax_error(&e, pattern))))?;
        let subexpressions = anchored.captures_len() - 1;
        if subexpressions == 0 {
            return Err(ConfigError::InvalidRegex(RegexProblem::NoSubexpression));
        }
        let group = match group {
            None if subexpressions > 1 => return Err(ConfigError::InvalidRegex(RegexProblem::MultipleWithoutGroup)),
            None => 1,
            Some(g) if g > subexpressions as i64 => {
                return Err(ConfigError::InvalidRegex(RegexProblem::GroupOutOfRange));
            }
            Some(g) if g < 1 => return Err(ConfigError::GroupNotPositive(g)),
            Some(g) => g as usize,
        };
        Ok(PartitionRule { pattern: pattern.to_string(), group, anchored })
    }

    /// The partition a pod name belongs to: the group's text when the whole name matches and the group is not
    /// empty.
    pub fn partition_of(&self, pod_name: &str) -> Option<String> {
        let captures = self.anchored.captures(pod_name)?;
        captures.get(self.group).map(|m| m.as_str()).filter(|p| !p.is_empty()).map(str::to_string)
    }
}

/// The `regex` crate's error in one line, in the shape of Go's (`error parsing regexp: <what>: `<pattern>``).
fn syntax_error(err: &regex::Error, pattern: &str) -> String {
    let text = err.to_string();
    // The crate's message is a diagram; its last line says what is wrong.
    let what = text.lines().rev().find_map(|l| l.trim().strip_prefix("error: ")).unwrap_or(text.trim());
    format!("{what}: `{pattern}`")
}

/// One budget, valid.
#[derive(Debug, Clone, PartialEq)]
pub struct ZpdbConfig {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty if the object has none): tells a re-created budget from an older one of the same name.
    pub uid: String,
    /// `metadata.generation` (0 if absent).
    pub generation: i64,
    /// Pods that may be unavailable in a zone (zone mode) or in a partition across zones (partition mode); 0 when
    /// the percentage is used.
    pub max_unavailable: i64,
    /// Percentage of the evicted pod's StatefulSet's replicas (zone mode only); 0 when not set.
    pub max_unavailable_percentage: i64,
    /// `spec.selector.matchLabels`: selects the pods and the StatefulSets covered (empty selects everything).
    pub selector: BTreeMap<String, String>,
    /// Partition mode, when `podNamePartitionRegex` is set.
    pub partition: Option<PartitionRule>,
    /// Partition mode: how long a pod must have been ready (by `grafana.com/ready-time`) before it counts as
    /// ready for an eviction in another zone.
    pub cross_zone_eviction_delay: Duration,
}

impl ZpdbConfig {
    /// Parses and validates an object (reference 5.2: the first failing check wins).
    pub fn parse(object: &Value) -> Result<Self, ConfigError> {
        // 1. spec
        let spec = match object.get("spec") {
            None => return Err(ConfigError::NoSpec),
            Some(Value::Object(spec)) => spec,
            Some(other) => {
                return Err(ConfigError::SpecNotObject { value: go_value(other), go_type: go_type(other) });
            }
        };
        // 2. kind
        if object.get("kind").and_then(Value::as_str) != Some(KIND) {
            return Err(ConfigError::WrongKind);
        }
        // 3. defaults
        let metadata = object.get("metadata");
        let name = metadata.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default().to_string();
        let uid = metadata.and_then(|m| m.get("uid")).and_then(Value::as_str).unwrap_or_default().to_string();
        let generation = metadata.and_then(|m| m.get("generation")).and_then(Value::as_i64).unwrap_or(0);
        let mut max_unavailable = 1;
        let mut max_unavailable_percentage = 0;
        // 4, 5. max unavailable, as a count or a percentage
        match (spec.get("maxUnavailable"), spec.get("maxUnavailablePercentage")) {
            (Some(_), Some(_)) => return Err(ConfigError::BothMaxUnavailable),
            (Some(value), None) => {
                max_unavailable = integer(value, "maxUnavailable")?;
                if max_unavailable < 0 {
                    return Err(ConfigError::NegativeMaxUnavailable(max_unavailable));
                }
            }
            (None, Some(value)) => {
                max_unavailable_percentage = integer(value, "maxUnavailablePercentage")?;
                max_unavailable = 0;
                if !(0..=100).contains(&max_unavailable_percentage) {
                    return Err(ConfigError::PercentageOutOfRange(max_unavailable_percentage));
                }
            }
            (None, None) => {}
        }
        // 6. partition regex and group
        let partition = match spec.get("podNamePartitionRegex") {
            None => None,
            Some(Value::String(pattern)) if pattern.is_empty() => None,
            Some(Value::String(pattern)) => {
                let group = match spec.get("podNameRegexGroup") {
                    None => None,
                    Some(value) => Some(value.as_i64().ok_or(ConfigError::GroupNotInteger)?),
                };
                Some(PartitionRule::new(pattern, group)?)
            }
            Some(_) => return Err(ConfigError::RegexNotString),
        };
        // 7. selector
        let selector = selector(spec)?;
        // 8. cross-zone eviction delay
        let cross_zone_eviction_delay = match spec.get("crossZoneEvictionDelay") {
            None => Duration::ZERO,
            Some(Value::String(text)) => delay(text)?,
            Some(_) => return Err(ConfigError::NotExtractable { field: "crossZoneEvictionDelay" }),
        };
        // 9, 10. what needs partition mode, and what cannot have it
        if !cross_zone_eviction_delay.is_zero() && partition.is_none() {
            return Err(ConfigError::DelayWithoutRegex);
        }
        if max_unavailable_percentage > 0 && partition.is_some() {
            return Err(ConfigError::PercentageWithPartition);
        }
        Ok(ZpdbConfig {
            name,
            uid,
            generation,
            max_unavailable,
            max_unavailable_percentage,
            selector,
            partition,
            cross_zone_eviction_delay,
        })
    }

    /// Whether the budget covers an object with these labels (its pods and StatefulSets).
    pub fn selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.selector.iter().all(|(k, v)| labels.get(k) == Some(v))
    }

    /// The selector as an API label selector (`a=b,c=d`; empty selects everything).
    pub fn label_selector(&self) -> String {
        self.selector.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")
    }
}

/// An integral JSON number (Go's `NestedInt64`: `1.0` and numbers beyond int64 are not).
fn integer(value: &Value, field: &'static str) -> Result<i64, ConfigError> {
    value.as_i64().ok_or(ConfigError::NotExtractable { field })
}

fn selector(spec: &Map<String, Value>) -> Result<BTreeMap<String, String>, ConfigError> {
    let path = ".spec.selector.matchLabels";
    let not_a_map = |other: &Value| {
        ConfigError::InvalidSelector(format!(
            "{path} accessor error: {} is of the type {}, expected map[string]interface{{}}",
            go_value(other),
            go_type(other)
        ))
    };
    // As Go's accessors: a null on the way means "not found", a null or non-map at the end is an error.
    let labels = match spec.get("selector") {
        None | Some(Value::Null) => return Err(ConfigError::NoSelector),
        Some(Value::Object(selector)) => match selector.get("matchLabels") {
            None => return Err(ConfigError::NoSelector),
            Some(Value::Object(labels)) => labels,
            Some(other) => return Err(not_a_map(other)),
        },
        Some(other) => return Err(not_a_map(other)),
    };
    labels
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(ConfigError::InvalidSelector(format!(
                "{path} accessor error: contains non-string value in the map under key {k:?}: {} is of the type {}, \
                 expected string",
                go_value(other),
                go_type(other)
            ))),
        })
        .collect()
}

/// `crossZoneEvictionDelay`: Go duration syntax only (`1d` is rejected, as the reference rejects it); `""` is 0.
fn delay(text: &str) -> Result<Duration, ConfigError> {
    if text.is_empty() {
        return Ok(Duration::ZERO);
    }
    // Go parses negative durations; the reference then rejects them with their own message.
    let (negative, magnitude) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    match parse_go_duration(magnitude) {
        Ok(d) if negative && !d.is_zero() => Err(ConfigError::NegativeDelay(text.to_string())),
        Ok(d) => Ok(d),
        Err(err) => {
            let err = DurationError { input: text.to_string(), ..err };
            Err(ConfigError::InvalidDelay(err.go_message()))
        }
    }
}

/// Go's name for a decoded JSON value's type, for the reference's accessor messages.
fn go_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Which budget covers a pod: none, or the one whose selector matches its labels.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("multiple zoned pod disruption budgets found for pod")]
pub struct MultipleBudgets;

/// The budget among `budgets` that selects `labels` (reference 5.3: two or more is an error, none is "not in
/// scope").
pub fn budget_for<'a>(
    budgets: &'a [ZpdbConfig],
    labels: &BTreeMap<String, String>,
) -> Result<Option<&'a ZpdbConfig>, MultipleBudgets> {
    let mut matching = budgets.iter().filter(|b| b.selects(labels));
    let first = matching.next();
    if matching.next().is_some() {
        return Err(MultipleBudgets);
    }
    Ok(first)
}

/// What applying an object did to the known budgets; [`Observation::result`] is the
/// `rollout_operator_zpdb_configurations_observed_total` label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    Updated,
    /// The object is not a valid budget; the budgets are unchanged (a valid earlier version of it stays in force,
    /// as in the reference: the validating webhook normally stops invalid updates, and a last valid budget protects
    /// more than none).
    Invalid(ConfigError),
    /// Not newer than what is known (same object, generation not higher): the resync of an unchanged object.
    Ignored,
    Deleted,
    /// A delete of something not known, or of an older object than the one known.
    DeleteIgnored,
}

impl Observation {
    pub fn result(&self) -> &'static str {
        match self {
            Observation::Updated => "updated",
            Observation::Invalid(_) => "invalid",
            Observation::Ignored => "ignored",
            Observation::Deleted => "deleted",
            Observation::DeleteIgnored => "delete-ignored",
        }
    }
}

/// The budgets the operator knows, by name, kept as the reference's cache keeps them (reference 5.3), with one
/// difference: objects are told apart by uid, so a budget deleted and re-created (generation back to 1) replaces
/// the old one instead of being ignored.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    by_name: BTreeMap<String, ZpdbConfig>,
}

fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object.get("metadata").and_then(|m| m.get(field)).and_then(Value::as_str).unwrap_or_default()
}

fn same_object(a: &str, b: &str) -> bool {
    a.is_empty() || b.is_empty() || a == b
}

impl Budgets {
    /// Budgets from objects (e.g. a dump); invalid ones are left out, with their errors.
    pub fn from_objects<'a>(objects: impl IntoIterator<Item = &'a Value>) -> (Self, Vec<(String, ConfigError)>) {
        let mut budgets = Budgets::default();
        let mut invalid = Vec::new();
        for object in objects {
            if let Observation::Invalid(err) = budgets.apply(object) {
                invalid.push((meta_str(object, "name").to_string(), err));
            }
        }
        (budgets, invalid)
    }

    /// An added or updated object.
    pub fn apply(&mut self, object: &Value) -> Observation {
        let config = match ZpdbConfig::parse(object) {
            Ok(config) => config,
            Err(err) => return Observation::Invalid(err),
        };
        if let Some(known) = self.by_name.get(&config.name)
            && same_object(&known.uid, &config.uid)
            && known.generation >= config.generation
        {
            return Observation::Ignored;
        }
        self.by_name.insert(config.name.clone(), config);
        Observation::Updated
    }

    /// A deleted object.
    pub fn delete(&mut self, object: &Value) -> Observation {
        let name = meta_str(object, "name");
        let generation = object.get("metadata").and_then(|m| m.get("generation")).and_then(Value::as_i64);
        let Some(known) = self.by_name.get(name) else { return Observation::DeleteIgnored };
        let newer = !same_object(&known.uid, meta_str(object, "uid"))
            || generation.is_some_and(|deleted| known.generation > deleted);
        if newer {
            return Observation::DeleteIgnored;
        }
        self.by_name.remove(name);
        Observation::Deleted
    }

    /// After a relist: budgets whose objects were not listed are gone. Returns their names.
    pub fn retain_listed(&mut self, listed: &BTreeSet<String>) -> Vec<String> {
        let gone: Vec<String> = self.by_name.keys().filter(|n| !listed.contains(*n)).cloned().collect();
        for name in &gone {
            self.by_name.remove(name);
        }
        gone
    }

    /// Every known budget, by name.
    pub fn all(&self) -> Vec<ZpdbConfig> {
        self.by_name.values().cloned().collect()
    }

    /// Whether some budget covers an object with these labels.
    pub fn any_selects(&self, labels: &BTreeMap<String, String>) -> bool {
        self.by_name.values().any(|b| b.selects(labels))
    }

    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}
