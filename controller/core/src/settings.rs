//! Typed rollout settings of a StatefulSet, parsed once from its annotations when the view is built.
//!
//! Invalid values never stop a rollout silently and never make it less safe: each falls back to the reference's
//! conservative default and the error is kept, naming the object, the key and the value, so the planner can report it.

use crate::keys;
use std::collections::BTreeMap;
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

/// Parses `"3"` or `"25%"` (surrounding whitespace ignored). Zero, negatives, non-integers and percentages above 100
/// are rejected.
pub fn parse_max_unavailable(raw: &str) -> Result<MaxUnavailable, &'static str> {
    const EXPECTED: &str = "expected positive integer or percentage as integer%";
    let s = raw.trim();
    let (digits, percent) = match s.strip_suffix('%') {
        Some(d) => (d, true),
        None => (s, false),
    };
    if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
        return Err(EXPECTED);
    }
    let n: u32 = digits.parse().map_err(|_| EXPECTED)?;
    match (percent, n) {
        (_, 0) => Err(EXPECTED),
        (true, p) if p > 100 => Err("percentage must be at most 100%"),
        (true, p) => Ok(MaxUnavailable::Percent(p)),
        (false, n) => Ok(MaxUnavailable::Count(n)),
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
        for bad in ["0", "-1", "xxx", "1.5", "0%", "101%", "%", "", "2.5%", "99999999999"] {
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
