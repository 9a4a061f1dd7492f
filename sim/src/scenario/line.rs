//! A scenario as one line of text: `key=value` for every setting that differs from [`Scenario::default`], nested
//! settings by dotted path (`scaling.min_time=15s`). [`Scenario::to_line`] and [`Scenario::from_line`] are the one
//! printer and parser: a failing seed's replay line (`replay --seed N --scenario '<line>'`) reproduces its world
//! exactly, whatever preset or flags built it, and a new setting needs no printing or parsing code of its own.
//!
//! Owns the text form only; what each setting means is the scenario's.

use super::Scenario;
use super::deployment::ReferenceDeployment;
use super::planner::PlannerKind;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// A scenario line that does not describe a scenario.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    #[error("{0:?} is not key=value (a scenario line is space-separated key=value settings)")]
    NotASetting(String),
    #[error("{key}: no such setting (the settings are the scenario's fields, nested by dots: scaling.min_time)")]
    UnknownKey { key: String },
    #[error("the settings do not make a scenario: {0}")]
    Invalid(#[from] serde_json::Error),
}

impl Scenario {
    /// The settings that differ from the default, in field order.
    pub fn to_line(&self) -> String {
        let (this, base) = (as_value(self), as_value(&Scenario::default()));
        let mut out = Vec::new();
        differences("", &this, Some(&base), &mut out);
        out.join(" ")
    }

    /// The scenario a [`Scenario::to_line`] line describes.
    pub fn from_line(line: &str) -> Result<Scenario, LineError> {
        let mut value = as_value(&Scenario::default());
        for setting in tokens(line) {
            let (key, text) = setting.split_once('=').ok_or_else(|| LineError::NotASetting(setting.clone()))?;
            set(&mut value, key, parse_value(text))?;
        }
        Ok(serde_json::from_value(value)?)
    }
}

fn as_value(sc: &Scenario) -> Value {
    serde_json::to_value(sc).expect("a scenario serialises to JSON")
}

/// Appends `path=value` for each leaf of `this` that differs from `base` (every leaf of a subtree `base` lacks).
fn differences(path: &str, this: &Value, base: Option<&Value>, out: &mut Vec<String>) {
    let join = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match (this, base) {
        (Value::Object(fields), Some(Value::Object(base_fields))) => {
            for (key, value) in fields {
                differences(&join(key), value, base_fields.get(key), out);
            }
        }
        (Value::Object(fields), _) => {
            for (key, value) in fields {
                differences(&join(key), value, None, out);
            }
        }
        (leaf, Some(base)) if leaf == base => {}
        (leaf, _) => out.push(format!("{path}={}", show_value(leaf))),
    }
}

/// A leaf as the line writes it: a string bare when it has no space or quote and would not read back as another
/// JSON value, anything else as compact JSON.
fn show_value(value: &Value) -> String {
    match value {
        Value::String(s)
            if !s.is_empty()
                && !s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'')
                && serde_json::from_str::<Value>(s).is_err() =>
        {
            s.clone()
        }
        other => other.to_string(),
    }
}

fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

/// Space-separated settings; a double-quoted JSON string may hold spaces.
fn tokens(line: &str) -> Vec<String> {
    let (mut out, mut current, mut quoted, mut escaped) = (Vec::new(), String::new(), false, false);
    for c in line.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Sets the leaf at dotted `key`. A setting the default leaves out (`scaling` is none by default) is first given
/// the defaults of its fields, so that its keys are known; [`Scenario::to_line`] writes all of them anyway.
fn set(root: &mut Value, key: &str, value: Value) -> Result<(), LineError> {
    let unknown = || LineError::UnknownKey { key: key.to_string() };
    let full = as_value(&Scenario {
        scaling: Some(Default::default()),
        drains: Some(Default::default()),
        ha: Some(Default::default()),
        health: Some(Default::default()),
        certificates: Some(Default::default()),
        ..Scenario::default()
    });
    let (mut node, mut template) = (root, Some(&full));
    let mut parts = key.split('.').peekable();
    while let Some(part) = parts.next() {
        if node.is_null()
            && let Some(t @ Value::Object(_)) = template
        {
            *node = t.clone();
        }
        let Value::Object(fields) = node else { return Err(unknown()) };
        if !fields.contains_key(part) {
            return Err(unknown());
        }
        template = template.and_then(|t| t.get(part));
        if parts.peek().is_none() {
            fields.insert(part.to_string(), value);
            return Ok(());
        }
        node = fields.get_mut(part).ok_or_else(unknown)?;
    }
    Err(unknown())
}

/// Durations as whole milliseconds with a unit (`300s`, `1500ms`).
pub mod duration {
    use super::*;
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        let ms = d.as_millis();
        if ms.is_multiple_of(1000) {
            s.serialize_str(&format!("{}s", ms / 1000))
        } else {
            s.serialize_str(&format!("{ms}ms"))
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        let parsed = match text.strip_suffix("ms") {
            Some(ms) => ms.parse().map(Duration::from_millis),
            None => text.strip_suffix('s').unwrap_or("?").parse().map(Duration::from_secs),
        };
        parsed.map_err(|_| D::Error::custom(format!("{text:?}: a duration is whole seconds (`30s`) or milliseconds")))
    }
}

/// Defences by their `--defences` value (`all`, `-expectations`).
pub mod defences {
    use super::*;
    use rollout_core::Defences;

    pub fn serialize<S: Serializer>(d: &Defences, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&d.flag())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Defences, D::Error> {
        Defences::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

impl Serialize for PlannerKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for PlannerKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        PlannerKind::parse(&name).ok_or_else(|| D::Error::custom(format!("unknown planner {name:?}")))
    }
}

impl Serialize for ReferenceDeployment {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for ReferenceDeployment {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        ReferenceDeployment::parse(&name).ok_or_else(|| D::Error::custom(format!("unknown deployment {name:?}")))
    }
}
