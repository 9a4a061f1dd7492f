//! The scenario line: every scenario, however built, prints as a line that parses back to the same scenario, so a
//! failing seed's replay line reproduces its world exactly. Built only with `RUSTFLAGS="--cfg madsim"`.

#![cfg(madsim)]

use proptest::prelude::*;
use rollout_sim::scenario::Scenario;
use serde_json::Value;

/// The presets the command line and the tests start from.
fn presets() -> Vec<Scenario> {
    vec![
        Scenario::default(),
        Scenario::scaling(),
        Scenario::scaling_during_rollout(),
        Scenario::min_ready(),
        Scenario::observe_lag(),
        Scenario::min_time_boundary(),
        Scenario::follower_rollouts_while_scaling(),
        Scenario::percentages(),
        Scenario::rollout_with_admitted_downscales(),
        Scenario::large(),
        Scenario::recent_downscale(),
    ]
}

#[test]
fn every_preset_round_trips_and_the_default_is_the_empty_line() {
    assert_eq!(Scenario::default().to_line(), "");
    for sc in presets() {
        let line = sc.to_line();
        assert_eq!(Scenario::from_line(&line).unwrap(), sc, "{line}");
    }
}

#[test]
fn a_line_names_what_differs_by_dotted_path() {
    let line = Scenario::min_time_boundary().to_line();
    assert!(line.contains("scaling.min_time=15s"), "{line}");
    assert!(line.contains("scaling.boundary_probes=true"), "{line}");
    assert!(!line.contains("zones="), "{line}");
}

#[test]
fn a_bad_line_says_what_is_wrong() {
    let unknown = Scenario::from_line("zonez=3").unwrap_err().to_string();
    assert!(unknown.contains("zonez: no such setting"), "{unknown}");
    let nested = Scenario::from_line("faults.typo=true").unwrap_err().to_string();
    assert!(nested.contains("faults.typo: no such setting"), "{nested}");
    let not_a_setting = Scenario::from_line("zones").unwrap_err().to_string();
    assert!(not_a_setting.contains("not key=value"), "{not_a_setting}");
    let bad_value = Scenario::from_line("zones=three").unwrap_err().to_string();
    assert!(bad_value.contains("do not make a scenario"), "{bad_value}");
    assert!(Scenario::from_line("planner=no-such-planner").is_err());
    assert!(Scenario::from_line("fault_phase=5 minutes").is_err());
}

/// A generated scenario: a preset's settings, each leaf changed with some chance to another value of its kind (an
/// optional setting the preset leaves out is first given the default of a scenario that has it). Only what
/// deserialises is a scenario; the rest are skipped.
fn mutated(base: &Scenario, mut draws: impl FnMut() -> u64) -> Option<Scenario> {
    let mut value = serde_json::to_value(base).unwrap();
    let with_options = serde_json::to_value(Scenario {
        scaling: Some(Default::default()),
        drains: Some(Default::default()),
        ha: Some(Default::default()),
        health: Some(Default::default()),
        certificates: Some(Default::default()),
        deployment: Some(rollout_sim::scenario::deployment::ReferenceDeployment::HelmChart),
        zone_tracker: Some(true),
        max_unavailable_annotation: Some("40%".into()),
        mirror_write_back: Some("false".into()),
        ..Scenario::default()
    })
    .unwrap();
    if let (Value::Object(fields), Value::Object(full)) = (&mut value, &with_options) {
        for (key, v) in fields.iter_mut() {
            if v.is_null() && draws().is_multiple_of(2) {
                *v = full[key].clone();
            }
        }
    }
    mutate(&mut value, &mut draws);
    serde_json::from_value(value).ok()
}

fn mutate(value: &mut Value, draws: &mut impl FnMut() -> u64) {
    match value {
        Value::Object(fields) => fields.values_mut().for_each(|v| mutate(v, draws)),
        Value::Array(items) => items.iter_mut().for_each(|v| mutate(v, draws)),
        leaf if draws().is_multiple_of(3) => {
            let changed = match &*leaf {
                Value::Bool(b) => Value::Bool(!b),
                Value::Number(_) => Value::from(draws() % 200),
                Value::String(s) if s.ends_with('s') && s[..s.len() - 1].parse::<u64>().is_ok() => {
                    Value::String(format!("{}ms", draws() % 100_000))
                }
                Value::String(_) => Value::String(
                    ["true", "false", "40%", "with space", "-expectations", "real", "helm", "1", "a\"quote", "x=y"]
                        [(draws() % 10) as usize]
                        .to_string(),
                ),
                other => other.clone(),
            };
            *leaf = changed;
        }
        _ => {}
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn every_generated_scenario_round_trips(preset in 0usize..11, seed in any::<u64>()) {
        let mut state = seed | 1;
        let draws = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        if let Some(sc) = mutated(&presets()[preset], draws) {
            let line = sc.to_line();
            let back = Scenario::from_line(&line);
            prop_assert!(back.is_ok(), "{line}: {:?}", back.err());
            prop_assert_eq!(back.unwrap(), sc, "{}", line);
        }
    }
}
