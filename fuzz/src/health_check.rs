//! A RolloutHealthCheck built from fuzzer-chosen fields: queries assembled from literal text and placeholders (known,
//! unknown and broken ones), ranges and timeouts from the durations the parsers treat specially, policies by name
//! or any string, so that the fuzzer reaches validation's every refusal and the evaluation behind a valid check.

use crate::text::{Text, map};
use crate::world::{Field, NAMESPACE, custom_resource};
use arbitrary::Arbitrary;
use rollout_core::health_check::config::{BASELINE, CURRENT, RANGE, TARGET_MATCHERS};
use serde_json::{Map, Value, json};

/// Placeholders and near misses a query may contain.
pub const PLACEHOLDERS: &[&str] =
    &[TARGET_MATCHERS, RANGE, CURRENT, BASELINE, "${other}", "${", "$", "}", "${targetmatchers}", "${ range}"];

/// One piece of a query template.
#[derive(Arbitrary, Debug, Clone)]
pub enum Piece {
    Literal(Text),
    Placeholder(u8),
}

/// A query as pieces.
#[derive(Arbitrary, Debug, Clone)]
pub struct Template(pub Vec<Piece>);

impl Template {
    pub fn get(&self) -> String {
        self.0
            .iter()
            .map(|piece| match piece {
                Piece::Literal(text) => text.get(),
                Piece::Placeholder(i) => PLACEHOLDERS[usize::from(*i) % PLACEHOLDERS.len()].to_string(),
            })
            .collect()
    }
}

/// A policy as the CRD spells it, or anything else.
#[derive(Arbitrary, Debug, Clone)]
pub enum PolicyInput {
    Pause,
    Warn,
    Disabled,
    Other(Field),
}

impl PolicyInput {
    fn value(&self) -> Value {
        match self {
            PolicyInput::Pause => json!("Pause"),
            PolicyInput::Warn => json!("Warn"),
            PolicyInput::Disabled => json!("Disabled"),
            PolicyInput::Other(field) => field.value(),
        }
    }
}

/// One entry of `spec.checks`; `None` leaves a field out (its default, or a refusal for the required ones).
#[derive(Arbitrary, Debug, Clone)]
pub struct CheckInput {
    pub name: Option<Text>,
    pub query: Option<Template>,
    pub success_query: Option<Template>,
    pub current_range: Option<Text>,
    pub baseline_range: Option<Text>,
    pub query_timeout: Option<Text>,
    pub query_retries: Option<Field>,
    pub on_failure: Option<PolicyInput>,
    pub on_no_data: Option<PolicyInput>,
    pub disabled: Option<Field>,
    /// A field the CRD does not have.
    pub extra: Option<(Text, Field)>,
}

impl CheckInput {
    fn value(&self) -> Value {
        let mut check = Map::new();
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                check.insert(key.to_string(), v);
            }
        };
        put("name", self.name.as_ref().map(|t| json!(t.get())));
        put("query", self.query.as_ref().map(|t| json!(t.get())));
        put("successQuery", self.success_query.as_ref().map(|t| json!(t.get())));
        put("currentRange", self.current_range.as_ref().map(|t| json!(t.get())));
        put("baselineRange", self.baseline_range.as_ref().map(|t| json!(t.get())));
        put("queryTimeout", self.query_timeout.as_ref().map(|t| json!(t.get())));
        put("queryRetries", self.query_retries.as_ref().map(Field::value));
        put("onFailure", self.on_failure.as_ref().map(PolicyInput::value));
        put("onNoData", self.on_no_data.as_ref().map(PolicyInput::value));
        put("disabled", self.disabled.as_ref().map(Field::value));
        if let Some((key, field)) = &self.extra {
            check.insert(key.get(), field.value());
        }
        Value::Object(check)
    }
}

/// The whole object.
#[derive(Arbitrary, Debug, Clone)]
pub struct HealthCheckInput {
    pub name: Option<Text>,
    pub wrong_kind: Option<Text>,
    pub generation: Option<i64>,
    /// `None`: `matchLabels: {rollout-group: ingester}`.
    pub match_labels: Option<Vec<(crate::text::Key, Text)>>,
    pub prometheus_url: Option<Text>,
    pub checks: Vec<CheckInput>,
    /// Replaces the whole spec (a string, a list, null, ...).
    pub spec: Option<Field>,
}

impl HealthCheckInput {
    pub fn object(&self) -> Value {
        let mut spec = Map::new();
        let labels = self.match_labels.as_ref().map_or_else(|| json!({"rollout-group": "ingester"}), |l| json!(map(l)));
        spec.insert("selector".into(), json!({"matchLabels": labels}));
        let url = self.prometheus_url.as_ref().map_or_else(|| "http://prometheus:9090".to_string(), Text::get);
        spec.insert("prometheusURL".into(), json!(url));
        spec.insert("checks".into(), Value::Array(self.checks.iter().map(CheckInput::value).collect()));
        let name = self.name.as_ref().map_or_else(|| "ingester-errors".to_string(), Text::get);
        let metadata = json!({"name": name, "namespace": NAMESPACE});
        let kind = self.wrong_kind.as_ref().map_or_else(|| "RolloutHealthCheck".to_string(), Text::get);
        custom_resource(&kind, metadata, self.generation, spec, self.spec.as_ref())
    }
}
